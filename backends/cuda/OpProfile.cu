// Per-op-kind device time of generated CUDA programs (see OpProfile.h).
#include "backends/cuda/OpProfile.h"

#include "backends/common/FileIo.h"
#include "backends/common/MiniJson.h"
#include "backends/host/MpiCheck.h"
#include "backends/cuda/Runtime.h"

#include <unordered_map>
#include <vector>

namespace autoddl::rt {

namespace {

struct Scope {
  int kind = 0;
  OpPhase phase = kOpForward;
  int begin = 0, end = -1; // event indices; end -1 while open
};

struct Profiler {
  bool enabled = false;
  std::vector<cudaEvent_t> events; // pooled, reused every step
  int used = 0;
  std::vector<Scope> scopes;                    // this step's
  std::unordered_map<const char *, int> kindOf; // literal -> index in names
  std::vector<std::string> names;
  std::map<std::string, OpKindTime> totals;
  int64_t steps = 0;

  int record() {
    if (used == int(events.size())) {
      cudaEvent_t e;
      AUTODDL_CUDA_CHECK(cudaEventCreate(&e));
      events.push_back(e);
    }
    AUTODDL_CUDA_CHECK(cudaEventRecord(events[size_t(used)], compute_stream()));
    return used++;
  }
};

Profiler &profiler() {
  static Profiler p;
  return p;
}

} // namespace

void op_profile_enable(bool on) { profiler().enabled = on; }
bool op_profile_enabled() { return profiler().enabled; }

int op_profile_begin(const char *kind, OpPhase phase) {
  Profiler &p = profiler();
  if (!p.enabled)
    return -1;
  auto it = p.kindOf.find(kind);
  if (it == p.kindOf.end()) {
    // Literals of one kind may differ in address across translation units:
    // key the totals by the text.
    int index = -1;
    for (size_t i = 0; i < p.names.size(); ++i)
      if (p.names[i] == kind)
        index = int(i);
    if (index < 0) {
      index = int(p.names.size());
      p.names.push_back(kind);
    }
    it = p.kindOf.emplace(kind, index).first;
  }
  Scope s;
  s.kind = it->second;
  s.phase = phase;
  s.begin = p.record();
  p.scopes.push_back(s);
  return int(p.scopes.size()) - 1;
}

void op_profile_end(int index) {
  Profiler &p = profiler();
  if (index < 0 || !p.enabled || size_t(index) >= p.scopes.size())
    return;
  p.scopes[size_t(index)].end = p.record();
}

void op_profile_finish_step(bool count) {
  Profiler &p = profiler();
  if (!p.enabled)
    return;
  // Every event was recorded on compute_stream(): waiting for the last one
  // waits for all.
  if (p.used > 0)
    AUTODDL_CUDA_CHECK(cudaEventSynchronize(p.events[size_t(p.used - 1)]));
  if (count) {
    for (const Scope &s : p.scopes) {
      if (s.end < 0)
        continue;
      float ms = 0;
      AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&ms, p.events[size_t(s.begin)],
                                              p.events[size_t(s.end)]));
      OpKindTime &t = p.totals[p.names[size_t(s.kind)]];
      if (s.phase == kOpForward) {
        ++t.forward_calls;
        t.forward_s += 1e-3 * double(ms);
      } else {
        ++t.backward_calls;
        t.backward_s += 1e-3 * double(ms);
      }
    }
    ++p.steps;
  }
  p.scopes.clear();
  p.used = 0;
}

const std::map<std::string, OpKindTime> &op_profile_totals() {
  return profiler().totals;
}
int64_t op_profile_steps() { return profiler().steps; }

std::string op_profile_json(const std::map<std::string, OpKindTime> &totals,
                            int64_t steps, bool collectives) {
  const double per = steps > 0 ? 1.0 / double(steps) : 0.0;
  const std::string comm = "comm:";
  Json kinds = Json::obj();
  for (const auto &[kind, t] : totals) {
    if ((kind.rfind(comm, 0) == 0) != collectives)
      continue;
    Json k = Json::obj();
    k.set("forward_s", Json::of(t.forward_s * per));
    k.set("backward_s", Json::of(t.backward_s * per));
    k.set("calls", Json::of(double(t.forward_calls + t.backward_calls) * per));
    kinds.set(collectives ? kind.substr(comm.size()) : kind, std::move(k));
  }
  return kinds.dump();
}

void write_op_profile(const std::string &metrics_path, MPI_Comm comm) {
  Profiler &p = profiler();
  if (!p.enabled)
    return;
  int rank = 0;
  mpiCheck(MPI_Comm_rank(comm, &rank));
  // The busiest rank: the largest profiled time per step (ties: lowest rank).
  struct {
    double seconds;
    int rank;
  } mine{0.0, rank}, busiest{0.0, 0};
  for (const auto &[kind, t] : p.totals)
    if (kind.rfind("comm:", 0) != 0)
      mine.seconds += t.forward_s + t.backward_s;
  mpiCheck(MPI_Allreduce(&mine, &busiest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
  std::string text =
      "\"op_kinds\":" + op_profile_json(p.totals, p.steps, false) +
      ",\"tp_collectives\":" + op_profile_json(p.totals, p.steps, true);
  int64_t len = int64_t(text.size());
  mpiCheck(MPI_Bcast(&len, 1, MPI_INT64_T, busiest.rank, comm));
  text.resize(size_t(len));
  mpiCheck(MPI_Bcast(text.data(), int(len), MPI_CHAR, busiest.rank, comm));
  if (rank == 0) {
    std::string metrics = read_file(metrics_path);
    if (!metrics.empty() && metrics[0] == '{') {
      metrics = "{" + text +
                ",\"op_profile_rank\":" + std::to_string(busiest.rank) +
                ",\"op_profile_steps\":" + std::to_string(p.steps) + "," +
                metrics.substr(1);
      write_file_atomically(metrics_path, metrics);
    }
  }
  mpiCheck(MPI_Barrier(comm));
}

} // namespace autoddl::rt
