//===- Schedule.cpp - generation rules of the pipeline schedules ---------===//
//
// One function per schedule; each builds device d's list directly from the
// per-rank rule (docs/pipeline-simulator.md §2 gives each rule and its source).
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/Schedule.h"
#include "support/EnumNames.h"

#include <algorithm>

namespace autoddl::pipeline {
namespace {

constexpr EnumName<ScheduleKind> kScheduleNames[] = {
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved, "interleaved"},
    {ScheduleKind::Chimera, "chimera"},
    {ScheduleKind::ZeroBubbleH1, "zb-h1"}};

Instruction makeOp(OpKind kind, int microbatch, int stage, int chunk = 0,
                   Direction direction = Direction::Down) {
  Instruction op;
  op.kind = kind;
  op.microbatch = microbatch;
  op.chunk = chunk;
  op.stage = stage;
  op.direction = direction;
  return op;
}

// GPipe (Huang et al. 2019): all forwards, then all backwards, on every stage.
std::vector<Instruction> gpipeDevice(int device, int m) {
  std::vector<Instruction> ops;
  for (int j = 0; j < m; ++j)
    ops.push_back(makeOp(OpKind::Forward, j, device));
  for (int j = 0; j < m; ++j)
    ops.push_back(makeOp(OpKind::FullBackward, j, device));
  return ops;
}

// 1F1B (PipeDream-Flush / DAPPLE; Megatron-LM
// forward_backward_pipelining_without_interleaving): min(p-s-1, m) warm-up
// forwards, then alternate one forward and one backward, then drain.
std::vector<Instruction> oneFOneBDevice(int device, int p, int m) {
  std::vector<Instruction> ops;
  int warmup = std::min(p - device - 1, m);
  int nextF = 0, nextB = 0;
  for (int i = 0; i < warmup; ++i)
    ops.push_back(makeOp(OpKind::Forward, nextF++, device));
  for (int i = 0; i < m - warmup; ++i) {
    ops.push_back(makeOp(OpKind::Forward, nextF++, device));
    ops.push_back(makeOp(OpKind::FullBackward, nextB++, device));
  }
  while (nextB < m)
    ops.push_back(makeOp(OpKind::FullBackward, nextB++, device));
  return ops;
}

// Interleaved 1F1B (Narayanan et al. SC'21; Megatron-LM
// forward_backward_pipelining_with_interleaving, microbatch group = p): device
// d holds chunks c = 0..v-1, i.e. virtual stages c*p + d. The k-th forward runs
// chunk (k/p) % v on micro-batch (k/(p*v))*p + k%p; the k-th backward runs
// chunk v-1-(k/p)%v on the same micro-batch formula. Warm-up is
// 2(p-d-1) + (v-1)p forwards (all of them when m == p). Assumes m % p == 0.
std::vector<Instruction> interleavedDevice(int device, int p, int m, int v) {
  const int total = m * v;
  auto microbatchOf = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forward = [&](int k) {
    int chunk = (k / p) % v;
    return makeOp(OpKind::Forward, microbatchOf(k), chunk * p + device, chunk);
  };
  auto backward = [&](int k) {
    int chunk = v - 1 - (k / p) % v;
    return makeOp(OpKind::FullBackward, microbatchOf(k), chunk * p + device,
                  chunk);
  };
  int warmup =
      m == p ? total : std::min((p - device - 1) * 2 + (v - 1) * p, total);
  std::vector<Instruction> ops;
  for (int k = 0; k < warmup; ++k)
    ops.push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {
    ops.push_back(forward(warmup + k));
    ops.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k)
    ops.push_back(backward(k));
  return ops;
}

// Chimera (Li & Hoefler SC'21), the compact per-worker rule of pipe-fisher
// pipeline.py::_call_chimera_pipeline. Worker s runs stage s of the down
// pipeline and stage p-1-s of the up pipeline. With half = p/2,
// a = half - s (first half) or s - half + 1 (second half), b = half - a, and
// for second-half workers the roles "down"/"up" swapped, each basic unit of p
// micro-batches (p/2 per direction) is
//   a x { B(down) unless first unit ; F(down) }, b x { F(up) ; F(down) },
//   a x { F(up) ; B(up) },                       b x { B(down) ; B(up) }
// followed, after the last unit, by a x B(down). Backwards of one direction
// run in the order of its forwards. Assumes p even and m % p == 0.
std::vector<Instruction> chimeraDevice(int device, int p, int m) {
  const int half = p / 2;
  const bool firstHalf = device < half;
  const int a = firstHalf ? half - device : device - half + 1;
  const int b = half - a;
  const Direction downRole = firstHalf ? Direction::Down : Direction::Up;
  const Direction upRole = firstHalf ? Direction::Up : Direction::Down;
  const int perDirection = m / 2;
  int nextF[2] = {0, 0}, nextB[2] = {0, 0};

  std::vector<Instruction> ops;
  auto stageOf = [&](Direction dir) {
    return dir == Direction::Down ? device : p - 1 - device;
  };
  auto microbatchOf = [&](Direction dir, int k) {
    return dir == Direction::Down ? k : perDirection + k;
  };
  auto emit = [&](OpKind kind, Direction dir) {
    int &counter = kind == OpKind::Forward ? nextF[static_cast<int>(dir)]
                                           : nextB[static_cast<int>(dir)];
    ops.push_back(
        makeOp(kind, microbatchOf(dir, counter++), stageOf(dir), 0, dir));
  };
  const int units = m / p;
  for (int unit = 0; unit < units; ++unit) {
    for (int i = 0; i < a; ++i) {
      if (unit > 0)
        emit(OpKind::FullBackward, downRole);
      emit(OpKind::Forward, downRole);
    }
    for (int i = 0; i < b; ++i) {
      emit(OpKind::Forward, upRole);
      emit(OpKind::Forward, downRole);
    }
    for (int i = 0; i < a; ++i) {
      emit(OpKind::Forward, upRole);
      emit(OpKind::FullBackward, upRole);
    }
    for (int i = 0; i < b; ++i) {
      emit(OpKind::FullBackward, downRole);
      emit(OpKind::FullBackward, upRole);
    }
  }
  for (int i = 0; i < a; ++i)
    emit(OpKind::FullBackward, downRole);
  return ops;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24): 1F1B's
// warm-up and steady state with the backward split into B and W; the W of
// micro-batch j runs right after the B of micro-batch j+s (s = stage), the
// Ws left over at the end drain last. This keeps F-to-W in-flight micro-batches
// at p on every stage (1F1B's peak) and fills the cool-down with W.
std::vector<Instruction> zeroBubbleH1Device(int device, int p, int m) {
  std::vector<Instruction> ops;
  const int warmup = std::min(p - device - 1, m);
  int nextF = 0, nextB = 0, nextW = 0;
  auto backwardThenLaggingW = [&]() {
    int b = nextB++;
    ops.push_back(makeOp(OpKind::Backward, b, device));
    if (b - device >= nextW)
      ops.push_back(makeOp(OpKind::WeightGradient, nextW++, device));
  };
  for (int i = 0; i < warmup; ++i)
    ops.push_back(makeOp(OpKind::Forward, nextF++, device));
  for (int i = 0; i < m - warmup; ++i) {
    ops.push_back(makeOp(OpKind::Forward, nextF++, device));
    backwardThenLaggingW();
  }
  while (nextB < m)
    backwardThenLaggingW();
  while (nextW < m)
    ops.push_back(makeOp(OpKind::WeightGradient, nextW++, device));
  return ops;
}

std::string str(long long value) { return std::to_string(value); }

} // namespace

std::string_view scheduleName(ScheduleKind kind) {
  return nameOf(kScheduleNames, kind);
}

std::optional<ScheduleKind> parseScheduleName(std::string_view name) {
  return parseName(kScheduleNames, name);
}

std::string validScheduleNames() { return joinNames(kScheduleNames); }

std::string_view opKindLetter(OpKind kind) {
  switch (kind) {
  case OpKind::Forward:
    return "F";
  case OpKind::Backward:
  case OpKind::FullBackward:
    return "B";
  case OpKind::WeightGradient:
    return "W";
  }
  return "?";
}

int Schedule::deviceOf(int stage, Direction direction) const {
  if (direction == Direction::Up)
    return config.stages - 1 - stage;
  return stage % config.stages;
}

std::optional<std::string> checkScheduleConfig(const ScheduleConfig &config) {
  const std::string name(scheduleName(config.kind));
  const int p = config.stages, m = config.microbatches, v = config.chunks;
  if (p < 1)
    return "stages must be at least 1, got " + str(p);
  if (m < 1)
    return "micro-batches must be at least 1, got " + str(m);
  if (config.kind == ScheduleKind::Interleaved) {
    if (v < 2)
      return "interleaved needs at least 2 chunks per device, got " + str(v);
    if (m % p != 0)
      return "interleaved needs micro-batches to be a multiple of stages "
             "(Megatron's constraint), got " +
             str(m) + " micro-batches for " + str(p) + " stages";
  } else if (v != 1) {
    return "chunks apply only to the interleaved schedule, got " + str(v) +
           " chunks for " + name;
  }
  if (config.kind == ScheduleKind::Chimera) {
    if (p % 2 != 0)
      return "chimera needs an even number of stages, got " + str(p);
    if (m % p != 0)
      return "chimera needs micro-batches to be a multiple of stages (basic "
             "units of p micro-batches, p/2 per direction), got " +
             str(m) + " micro-batches for " + str(p) + " stages";
  }
  // Instructions per step: p*m*v forwards plus as many backwards (and Ws).
  long long perMicrobatchAndStage =
      config.kind == ScheduleKind::ZeroBubbleH1 ? 3 : 2;
  long long total = perMicrobatchAndStage;
  for (long long factor : {(long long)p, (long long)m, (long long)v}) {
    if (total > kMaxInstructions / factor)
      return "schedule too large: more than " + str(kMaxInstructions) +
             " instructions (stages x micro-batches x chunks too big)";
    total *= factor;
  }
  return std::nullopt;
}

OrError<Schedule> generateSchedule(const ScheduleConfig &config) {
  if (std::optional<std::string> problem = checkScheduleConfig(config))
    return OrError<Schedule>::failure(*problem);
  Schedule schedule;
  schedule.config = config;
  const int p = config.stages, m = config.microbatches;
  for (int d = 0; d < p; ++d) {
    switch (config.kind) {
    case ScheduleKind::GPipe:
      schedule.devices.push_back(gpipeDevice(d, m));
      break;
    case ScheduleKind::OneFOneB:
      schedule.devices.push_back(oneFOneBDevice(d, p, m));
      break;
    case ScheduleKind::Interleaved:
      schedule.devices.push_back(interleavedDevice(d, p, m, config.chunks));
      break;
    case ScheduleKind::Chimera:
      schedule.devices.push_back(chimeraDevice(d, p, m));
      break;
    case ScheduleKind::ZeroBubbleH1:
      schedule.devices.push_back(zeroBubbleH1Device(d, p, m));
      break;
    }
  }
  return schedule;
}

} // namespace autoddl::pipeline
