//===- Anomalies.cpp - stragglers and non-finite losses, reported ---------===//
#include "backends/common/harness/Anomalies.h"

#include "backends/host/CommStats.h"
#include "backends/host/MpiCheck.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <mpi.h>

namespace autoddl::rt::harness {

namespace {

/// The lower median (of an even count, the smaller middle value): with two
/// ranks, the faster one's time is the reference.
double lower_median(std::vector<double> v) {
  if (v.empty())
    return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + long(mid), v.end());
  return v[mid];
}

std::string milliseconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

} // namespace

StragglerWatch::StragglerWatch(double factor, int64_t window)
    : factor_(factor), window_(window) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
  medians_.resize(size_t(ranks_));
}

void StragglerWatch::add(int64_t step, double work_seconds) {
  if (factor_ <= 0)
    return;
  if (samples_.empty())
    first_step_ = step;
  last_step_ = step;
  samples_.push_back(work_seconds);
  if (int64_t(samples_.size()) >= window_)
    check();
}

void StragglerWatch::check() {
  const double mine = lower_median(samples_);
  samples_.clear();
  std::vector<double> all(static_cast<size_t>(ranks_));
  mpiCheck(MPI_Allgather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE,
                         MPI_COMM_WORLD));
  if (rank_ != 0)
    return;
  for (int r = 0; r < ranks_; ++r)
    medians_[size_t(r)].push_back(all[size_t(r)]);
  const double median = lower_median(all);
  for (int r = 0; r < ranks_; ++r) {
    const double t = all[size_t(r)];
    if (!(t > factor_ * median && t - median >= kStragglerMinExcess))
      continue;
    char line[256];
    std::snprintf(line, sizeof line,
                  "rank %d at steps %lld-%lld: %s of work per step, %.1fx the "
                  "median rank's %s",
                  r, (long long)first_step_ + 1, (long long)last_step_ + 1,
                  milliseconds(t).c_str(), median > 0 ? t / median : 0.0,
                  milliseconds(median).c_str());
    named_.push_back(line);
    std::printf("straggler: %s\n", line);
    std::fflush(stdout);
  }
}

void StragglerWatch::finish(std::map<std::string, std::string> &info) {
  if (factor_ <= 0)
    return;
  if (samples_.size() >= 3) // a last partial window worth a median
    check();
  if (rank_ != 0)
    return;
  std::string named;
  for (const std::string &n : named_)
    named += (named.empty() ? "" : "; ") + n;
  info["stragglers"] = named.empty() ? "none" : named;
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "every %lld steps: a rank's median work per step above %.2fx "
                "the median rank's (and %.0f ms above it) is named",
                (long long)window_, factor_, kStragglerMinExcess * 1e3);
  info["straggler_check"] = buf;
  std::string per_rank;
  for (const std::vector<double> &m : medians_) {
    char v[32];
    std::snprintf(v, sizeof v, "%.3f", lower_median(m) * 1e3);
    per_rank += (per_rank.empty() ? "" : " ") + std::string(v);
  }
  info["rank_work_ms"] = per_rank;
}

int64_t test_slow_milliseconds(int rank) {
  const char *v = std::getenv("AUTODDL_TEST_SLOW_RANK");
  long long r = -1, ms = 0;
  if (!v || std::sscanf(v, "%lld:%lld", &r, &ms) != 2 || r != rank || ms < 0)
    return 0;
  return ms;
}

void spin_for_test(int64_t ms) {
  const double end = thread_cpu_seconds() + 1e-3 * double(ms);
  volatile double sink = 0;
  while (thread_cpu_seconds() < end)
    for (int i = 0; i < 1000; ++i)
      sink = sink + 1e-9 * i;
}

int64_t test_nan_data_batch() {
  const char *v = std::getenv("AUTODDL_TEST_NAN_DATA");
  long long b = -1;
  if (!v || std::sscanf(v, "%lld", &b) != 1 || b < 0)
    return -1;
  return b;
}

void RollbackLog::add(const std::string &entry) {
  ++count;
  entries += (entries.empty() ? "" : "; ") + entry;
}

void RollbackLog::fill(std::map<std::string, std::string> &info) const {
  info["rollbacks"] = std::to_string(count);
  if (count)
    info["rollback_log"] = entries;
}

} // namespace autoddl::rt::harness
