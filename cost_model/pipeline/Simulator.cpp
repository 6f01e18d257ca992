//===- Simulator.cpp - discrete-event execution of a pipeline schedule ---===//
//
// Event loop over instruction completions. When an instruction ends, its device
// and the devices waiting on it try to start their next instruction; a start
// time is max(device free, latest input arrival). Because every device runs its
// list in order and nothing else competes for it, this yields the earliest
// start times the lists and the dependency rules allow (Simulator.h).
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/Simulator.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace autoddl::pipeline {
namespace {

// Dependencies name instructions by what they compute, not where they sit.
enum class Produces { Forward = 0, InputGradient = 1, WeightGradient = 2 };

Produces producesOf(OpKind kind) {
  switch (kind) {
  case OpKind::Forward:
    return Produces::Forward;
  case OpKind::Backward:
  case OpKind::FullBackward:
    return Produces::InputGradient;
  case OpKind::WeightGradient:
    return Produces::WeightGradient;
  }
  return Produces::Forward;
}

long long keyOf(Produces what, Direction direction, int stage, int microbatch,
                int stages, int microbatches) {
  long long key =
      static_cast<long long>(what) * 2 + (direction == Direction::Up ? 1 : 0);
  return (key * stages + stage) * microbatches + microbatch;
}

struct OpRef {
  int device;
  int index;
};

std::string describe(const Instruction &op) {
  std::string text = std::string(opKindLetter(op.kind)) +
                     std::to_string(op.microbatch) + " of stage " +
                     std::to_string(op.stage);
  if (op.direction == Direction::Up)
    text += " (up pipeline)";
  return text;
}

std::string num(double value) {
  std::string text = std::to_string(value);
  // to_string prints 6 decimals; drop the trailing zeros for messages.
  if (text.find('.') != std::string::npos) {
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.')
      text.pop_back();
  }
  return text;
}

std::optional<std::string> checkTimeList(const std::vector<double> &values,
                                         const char *what, int stages) {
  if (static_cast<int>(values.size()) != stages)
    return std::string(what) + " times: expected one per stage (" +
           std::to_string(stages) + "), got " + std::to_string(values.size());
  for (size_t s = 0; s < values.size(); ++s)
    if (!std::isfinite(values[s]) || values[s] < 0)
      return std::string(what) + " time of stage " + std::to_string(s) +
             " must be a finite number >= 0, got " + num(values[s]);
  return std::nullopt;
}

/// The instructions `op` waits for, as lookup keys (checked to exist later).
std::vector<long long> dependencyKeys(const Schedule &schedule,
                                      const Instruction &op) {
  const int stages = schedule.modelStages();
  const int m = schedule.config.microbatches;
  auto key = [&](Produces what, int stage) {
    return keyOf(what, op.direction, stage, op.microbatch, stages, m);
  };
  std::vector<long long> keys;
  switch (op.kind) {
  case OpKind::Forward:
    if (op.stage > 0)
      keys.push_back(key(Produces::Forward, op.stage - 1));
    break;
  case OpKind::Backward:
  case OpKind::FullBackward:
    keys.push_back(key(Produces::Forward, op.stage));
    if (op.stage + 1 < stages)
      keys.push_back(key(Produces::InputGradient, op.stage + 1));
    break;
  case OpKind::WeightGradient:
    keys.push_back(key(Produces::InputGradient, op.stage));
    break;
  }
  return keys;
}

} // namespace

StageTimes StageTimes::uniform(int stages, double forward, double backward,
                               double weightGradient, double p2p) {
  StageTimes times;
  times.forward.assign(stages, forward);
  times.backward.assign(stages, backward);
  times.weightGradient.assign(stages, weightGradient);
  times.p2p = p2p;
  return times;
}

std::optional<std::string> checkStageTimes(const StageTimes &times,
                                           int stages) {
  if (auto problem = checkTimeList(times.forward, "forward", stages))
    return problem;
  if (auto problem = checkTimeList(times.backward, "backward", stages))
    return problem;
  if (auto problem =
          checkTimeList(times.weightGradient, "weight-gradient", stages))
    return problem;
  if (!std::isfinite(times.p2p) || times.p2p < 0)
    return "p2p time must be a finite number >= 0, got " + num(times.p2p);
  for (int s = 0; s < stages; ++s)
    if (times.weightGradient[s] > times.backward[s])
      return "weight-gradient time of stage " + std::to_string(s) + " (" +
             num(times.weightGradient[s]) +
             ") exceeds the whole backward time (" + num(times.backward[s]) +
             ")";
  return std::nullopt;
}

double instructionDuration(const Schedule &schedule, const StageTimes &times,
                           const Instruction &op) {
  const int index = op.stage % schedule.numDevices();
  const double share = 1.0 / schedule.config.chunks;
  switch (op.kind) {
  case OpKind::Forward:
    return times.forward[index] * share;
  case OpKind::FullBackward:
    return times.backward[index] * share;
  case OpKind::Backward:
    return (times.backward[index] - times.weightGradient[index]) * share;
  case OpKind::WeightGradient:
    return times.weightGradient[index] * share;
  }
  return 0;
}

OrError<PreparedSchedule> prepareSchedule(const Schedule &schedule) {
  using Result = OrError<PreparedSchedule>;
  if (auto problem = checkScheduleConfig(schedule.config))
    return Result::failure(*problem);
  const int p = schedule.numDevices();
  const int stages = schedule.modelStages();
  const int m = schedule.config.microbatches;
  if (static_cast<int>(schedule.devices.size()) != p)
    return Result::failure(
        "schedule has " + std::to_string(schedule.devices.size()) +
        " device lists for " + std::to_string(p) + " stages");

  // Index every instruction by what it produces; reject misplaced ones.
  std::unordered_map<long long, OpRef> producer;
  for (int d = 0; d < p; ++d) {
    const std::vector<Instruction> &ops = schedule.devices[d];
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      const Instruction &op = ops[i];
      auto where = [&] {
        return "device " + std::to_string(d) + " instruction " +
               std::to_string(i);
      };
      if (op.microbatch < 0 || op.microbatch >= m || op.stage < 0 ||
          op.stage >= stages || op.chunk < 0 ||
          op.chunk >= schedule.config.chunks)
        return Result::failure(where() + ": " + describe(op) +
                               " is out of range");
      if (schedule.deviceOf(op.stage, op.direction) != d)
        return Result::failure(
            where() + ": " + describe(op) + " belongs on device " +
            std::to_string(schedule.deviceOf(op.stage, op.direction)));
      bool split =
          op.kind == OpKind::Backward || op.kind == OpKind::WeightGradient;
      if (op.kind != OpKind::Forward && split != schedule.splitsBackward())
        return Result::failure(
            where() + ": " + describe(op) +
            (split ? " is a split backward in a schedule without B/W split"
                   : " is a full backward in a schedule with B/W split"));
      long long key = keyOf(producesOf(op.kind), op.direction, op.stage,
                            op.microbatch, stages, m);
      if (!producer.emplace(key, OpRef{d, i}).second)
        return Result::failure(where() + ": " + describe(op) +
                               " appears twice");
    }
  }

  // Resolve dependencies and who waits on whom, in flat arrays: the waiters
  // of an instruction in the order (device, instruction, input) found.
  PreparedSchedule out;
  out.schedule = &schedule;
  out.start.resize(p);
  out.wstart.resize(p);
  out.deps.resize(p);
  out.waiters.resize(p);
  std::vector<std::vector<int>> waitCount(p);
  for (int d = 0; d < p; ++d)
    waitCount[d].assign(schedule.devices[d].size() + 1, 0);
  for (int d = 0; d < p; ++d) {
    const std::vector<Instruction> &ops = schedule.devices[d];
    out.start[d].reserve(ops.size() + 1);
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      out.start[d].push_back(static_cast<int>(out.deps[d].size()));
      for (long long key : dependencyKeys(schedule, ops[i])) {
        auto found = producer.find(key);
        if (found == producer.end())
          return Result::failure("device " + std::to_string(d) +
                                 " instruction " + std::to_string(i) + ": " +
                                 describe(ops[i]) +
                                 " depends on an instruction no device runs");
        out.deps[d].push_back({found->second.device, found->second.index});
        ++waitCount[found->second.device][found->second.index];
      }
    }
    out.start[d].push_back(static_cast<int>(out.deps[d].size()));
  }
  for (int d = 0; d < p; ++d) {
    int sum = 0;
    out.wstart[d].resize(waitCount[d].size());
    for (size_t i = 0; i < waitCount[d].size(); ++i) {
      out.wstart[d][i] = sum;
      sum += waitCount[d][i];
      waitCount[d][i] = out.wstart[d][i]; // the fill cursor from here on
    }
    out.waiters[d].resize(size_t(sum));
  }
  for (int d = 0; d < p; ++d)
    for (const PreparedSchedule::Ref &dep : out.deps[d])
      out.waiters[dep.device][size_t(waitCount[dep.device][dep.index]++)] = d;
  return out;
}

OrError<SimulationResult> simulate(const Schedule &schedule,
                                   const StageTimes &times) {
  using Result = OrError<SimulationResult>;
  if (auto problem = checkScheduleConfig(schedule.config))
    return Result::failure(*problem);
  const int p = schedule.numDevices();
  if (static_cast<int>(schedule.devices.size()) != p)
    return Result::failure(
        "schedule has " + std::to_string(schedule.devices.size()) +
        " device lists for " + std::to_string(p) + " stages");
  if (auto problem = checkStageTimes(times, p))
    return Result::failure(*problem);
  auto prepared = prepareSchedule(schedule);
  if (!prepared)
    return Result::failure(prepared.error());
  return simulate(*prepared, times);
}

namespace {

/// The deadlock's cycle: follow "waits for an instruction on device e" from
/// the first stuck device until a device repeats.
std::string deadlock(const PreparedSchedule &ps, const std::vector<int> &done,
                     int first) {
  const Schedule &schedule = *ps.schedule;
  auto blockingDep = [&](int d) -> const PreparedSchedule::Ref * {
    const int i = done[d];
    for (int k = ps.start[d][i]; k < ps.start[d][i + 1]; ++k) {
      const PreparedSchedule::Ref &dep = ps.deps[d][k];
      if (done[dep.device] <= dep.index)
        return &dep;
    }
    return nullptr;
  };
  std::vector<int> chain;
  int d = first;
  while (std::find(chain.begin(), chain.end(), d) == chain.end()) {
    chain.push_back(d);
    const PreparedSchedule::Ref *dep = blockingDep(d);
    if (!dep) // cannot happen: an unblocked device has started
      return "simulator stalled on device " + std::to_string(d);
    d = dep->device;
  }
  std::string message = "schedule deadlocks:";
  for (auto it = std::find(chain.begin(), chain.end(), d); it != chain.end();
       ++it) {
    const PreparedSchedule::Ref &dep = *blockingDep(*it);
    message += (message.back() == ':' ? " device " : "; device ") +
               std::to_string(*it) + " waits at instruction " +
               std::to_string(done[*it]) + " (" +
               describe(schedule.devices[*it][done[*it]]) + ") for " +
               describe(schedule.devices[dep.device][dep.index]) +
               " on device " + std::to_string(dep.device) +
               (dep.device == *it ? ", queued behind it" : "");
  }
  return message;
}

} // namespace

OrError<SimulationResult> simulate(const PreparedSchedule &ps,
                                   const StageTimes &times, bool timeline) {
  using Result = OrError<SimulationResult>;
  const Schedule &schedule = *ps.schedule;
  const int p = schedule.numDevices();
  if (auto problem = checkStageTimes(times, p))
    return Result::failure(*problem);

  SimulationResult result;
  result.devices.resize(p);
  std::vector<std::vector<Interval>> spans(p);
  size_t total = 0;
  for (int d = 0; d < p; ++d) {
    spans[d].reserve(schedule.devices[d].size());
    total += schedule.devices[d].size();
  }
  std::vector<int> done(p, 0); // instructions finished on each device
  std::vector<bool> running(p, false);
  std::vector<double> freeAt(p, 0.0);
  // Min-heap of (end time, device): the completion events.
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;

  auto tryStart = [&](int d) {
    const std::vector<Instruction> &ops = schedule.devices[d];
    int i = done[d];
    if (running[d] || i >= static_cast<int>(ops.size()))
      return;
    double ready = freeAt[d];
    for (int k = ps.start[d][i]; k < ps.start[d][i + 1]; ++k) {
      const PreparedSchedule::Ref &dep = ps.deps[d][k];
      if (done[dep.device] <= dep.index)
        return; // an input is not produced yet
      double arrival = spans[dep.device][dep.index].end +
                       (dep.device != d ? times.p2p : 0.0);
      ready = std::max(ready, arrival);
    }
    double duration = instructionDuration(schedule, times, ops[i]);
    spans[d].push_back({ready, ready + duration});
    running[d] = true;
    events.push({ready + duration, d});
  };

  for (int d = 0; d < p; ++d)
    tryStart(d);
  while (!events.empty()) {
    auto [end, d] = events.top();
    events.pop();
    int finished = done[d]++;
    running[d] = false;
    freeAt[d] = end;
    tryStart(d);
    for (int k = ps.wstart[d][finished]; k < ps.wstart[d][finished + 1]; ++k)
      tryStart(ps.waiters[d][k]);
  }

  // Unfinished lists mean a wait cycle: report it.
  for (int first = 0; first < p; ++first)
    if (done[first] < static_cast<int>(schedule.devices[first].size()))
      return Result::failure(deadlock(ps, done, first));

  for (int d = 0; d < p; ++d)
    for (const Interval &span : spans[d])
      result.makespan = std::max(result.makespan, span.end);
  // Finite times can still sum past the largest double (1e308 x 8
  // micro-batches): a schedule that long is an input error, not a result.
  if (!std::isfinite(result.makespan))
    return Result::failure("the schedule's total time overflows (inf): the "
                           "stage times are too large");

  const double tolerance = kIdleIntervalTolerance * result.makespan;
  double idleTotal = 0;
  if (timeline)
    result.timeline.reserve(total);
  for (int d = 0; d < p; ++d) {
    DeviceResult &device = result.devices[d];
    const std::vector<Instruction> &ops = schedule.devices[d];
    double cursor = 0;
    int inFlight = 0, peak = 0;
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      const Interval &span = spans[d][i];
      if (span.start - cursor > tolerance)
        device.idleIntervals.push_back({cursor, span.start});
      cursor = span.end;
      device.busy += span.end - span.start;
      device.end = std::max(device.end, span.end);
      if (timeline)
        result.timeline.push_back({d, i, ops[i], span.start, span.end});
      if (ops[i].kind == OpKind::Forward)
        peak = std::max(peak, ++inFlight);
      else if (ops[i].kind == OpKind::FullBackward ||
               ops[i].kind == OpKind::WeightGradient)
        --inFlight;
    }
    if (result.makespan - cursor > tolerance)
      device.idleIntervals.push_back({cursor, result.makespan});
    device.idle = result.makespan - device.busy;
    device.peakActivations = static_cast<double>(peak) / schedule.config.chunks;
    idleTotal += device.idle;
  }
  if (result.makespan > 0)
    result.bubbleFraction = idleTotal / (p * result.makespan);
  return result;
}

} // namespace autoddl::pipeline
