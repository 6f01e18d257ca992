//===- Anomalies.h - stragglers and non-finite losses, reported ----------===//
//
// TRANSOM's TEE in the generated programs (issue 46 item 5, docs/checkpoints.md
// "Anomalies"): a rank slower than the others is named in the log and in
// metrics.json, and a non-finite loss under --on-nan rollback reloads the
// newest checkpoint and skips the data that produced it. The step loop
// (ProgramRun.cpp) drives both; this file holds their bookkeeping.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_ANOMALIES_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_ANOMALIES_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// Below this excess over the median rank (seconds) a rank is never named:
/// timer noise on steps of a few milliseconds, far under any real step.
constexpr double kStragglerMinExcess = 5e-3;

/// The straggler check. Each rank notes its work per step (Backend::
/// work_clock: on the CPU its step thread's CPU time less that spent in the
/// collectives,
/// where MPI polls while waiting for a slow peer; wall time would be the
/// same on every rank, each waiting for the slowest, and would name a rank
/// the OS merely descheduled on a loaded machine). Every `window` steps the
/// ranks exchange the median of their window (one MPI_Allgather of one double
/// per rank: no per-step traffic), and a rank whose median is above `factor`
/// x the median rank's (the lower median over ranks) and at least
/// kStragglerMinExcess above it is named, by rank 0, in one line. A median
/// over the window, not a mean, so one slow step (a page fault, a
/// checkpoint's snapshot) names nobody.
class StragglerWatch {
public:
  /// factor 0: off (add and finish do nothing, no collective).
  /// Its lines are printed under --quiet too (--quiet drops the step lines).
  StragglerWatch(double factor, int64_t window);
  /// After step `step` (0-based) with this rank's work seconds. Collective
  /// (every rank calls it at the same steps) at each window's last step.
  void add(int64_t step, double work_seconds);
  /// At the run's end: checks a last partial window of at least 3 steps
  /// (collective), then fills metrics.json's info (rank 0): "stragglers"
  /// ("none" or one entry per rank and window named), "straggler_check" (the
  /// window and factor) and "rank_work_ms" (each rank's median work per
  /// step over the windows checked, in rank order).
  void finish(std::map<std::string, std::string> &info);

private:
  void check();
  double factor_;
  int64_t window_;
  int rank_ = 0, ranks_ = 1;
  int64_t first_step_ = -1, last_step_ = -1; // of the window being filled
  std::vector<double> samples_;              // this rank's, this window
  std::vector<std::vector<double>> medians_; // per rank, per window checked
  std::vector<std::string> named_;
};

/// The test hook AUTODDL_TEST_SLOW_RANK=R:MS (tests only): rank R spends MS
/// milliseconds of CPU time more in each step's work, as a slow node would
/// (spin_for_test). 0: not here.
int64_t test_slow_milliseconds(int rank);
/// Burns `ms` milliseconds of the calling thread's CPU time (a sleep would be
/// no work: the straggler check counts CPU time).
void spin_for_test(int64_t ms);

/// The test hook AUTODDL_TEST_NAN_DATA=B (tests only): the loss of the step
/// that reads global data batch B is replaced by NaN on every rank, as a bad
/// batch would make it. -1: none.
int64_t test_nan_data_batch();

/// The record of --on-nan rollback for metrics.json's info: "rollbacks" (the
/// count) and "rollback_log" (one entry per rollback: the step whose loss was
/// not finite, the checkpoint reloaded, the data batches skipped).
struct RollbackLog {
  int64_t count = 0;
  std::string entries;
  void add(const std::string &entry);
  void fill(std::map<std::string, std::string> &info) const;
};

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_ANOMALIES_H
