// Metrics and device-timed traces of generated CUDA programs (see RunReport.h).
#include "backends/cuda/RunReport.h"

#include "backends/common/FileIo.h"
#include "backends/common/MiniJson.h"
#include "backends/common/Trace.h"
#include "backends/host/CommStats.h" // comm_stats
#include "backends/host/MpiCheck.h"
#include "backends/host/RunReport.h" // gather_run_metrics, write_trace_fragments

#include <algorithm>
#include <chrono>

namespace autoddl::rt {

namespace {
double host_us() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - origin)
      .count();
}
} // namespace

cudaEvent_t GpuTrace::event(int index) {
  while (int(events_.size()) <= index) {
    cudaEvent_t e;
    AUTODDL_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_[size_t(index)];
}

void GpuTrace::start_step() {
  if (!enabled_)
    return;
  used_ = 0;
  pending_.clear();
  step_marks_.clear(); // a step left unfinished: its marks stay unresolved
  synchronize();
  step_host_us_ = host_us();
  AUTODDL_CUDA_CHECK(cudaEventRecord(event(used_++), compute_stream()));
}

int GpuTrace::begin() {
  if (!enabled_)
    return -1;
  const int i = used_++;
  AUTODDL_CUDA_CHECK(cudaEventRecord(event(i), compute_stream()));
  return i;
}

void GpuTrace::end(const std::string &name, int tid, int begin_index) {
  if (!enabled_ || begin_index < 0)
    return;
  const int i = used_++;
  AUTODDL_CUDA_CHECK(cudaEventRecord(event(i), compute_stream()));
  pending_.push_back({name, tid, begin_index, i});
}

int GpuTrace::mark() {
  if (!enabled_)
    return -1;
  const int i = used_++;
  AUTODDL_CUDA_CHECK(cudaEventRecord(event(i), compute_stream()));
  step_marks_.push_back({i, int(mark_us_.size())});
  mark_us_.push_back(-1);
  return step_marks_.back().second;
}

void GpuTrace::add_after_mark(const std::string &name, int tid, int id,
                              double start_ms, double dur_ms) {
  if (id < 0 || id >= int(mark_us_.size()))
    return;
  after_marks_.push_back({{name, tid, 1e3 * start_ms, 1e3 * dur_ms}, id});
  flush_after_marks();
}

void GpuTrace::flush_after_marks() {
  auto ready = [&](const AfterMark &a) { return mark_us_[size_t(a.id)] >= 0; };
  for (AfterMark &a : after_marks_)
    if (ready(a)) {
      a.event.ts_us += mark_us_[size_t(a.id)];
      done_.push_back(std::move(a.event));
    }
  after_marks_.erase(
      std::remove_if(after_marks_.begin(), after_marks_.end(), ready),
      after_marks_.end());
}

void GpuTrace::finish_step() {
  if (!enabled_ || used_ == 0)
    return;
  synchronize();
  for (const auto &[index, id] : step_marks_) {
    float at_ms = 0;
    AUTODDL_CUDA_CHECK(
        cudaEventElapsedTime(&at_ms, events_[0], events_[size_t(index)]));
    mark_us_[size_t(id)] = step_host_us_ + 1e3 * double(at_ms);
  }
  step_marks_.clear();
  flush_after_marks();
  for (const Pending &p : pending_) {
    float start_ms = 0, dur_ms = 0;
    AUTODDL_CUDA_CHECK(
        cudaEventElapsedTime(&start_ms, events_[0], events_[size_t(p.begin)]));
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&dur_ms, events_[size_t(p.begin)],
                                            events_[size_t(p.end)]));
    done_.push_back({p.name, p.tid, step_host_us_ + 1e3 * double(start_ms),
                     1e3 * double(dur_ms)});
  }
  pending_.clear();
  used_ = 0;
}

std::string GpuTrace::events_json(int pid) const {
  return trace_events_json(done_, pid);
}

void write_cuda_run_metrics(RunMetrics &m, double model_flops_per_step,
                            double peak_flops_per_gpu, const std::string &path,
                            MPI_Comm comm) {
  const int p = comm_size(comm);
  gather_run_metrics(m, peak_device_bytes(), comm);
  const int64_t used = peak_device_used_bytes();
  m.peak_device_used_bytes.assign(size_t(p), 0);
  mpiCheck(MPI_Allgather(&used, 1, MPI_INT64_T,
                         m.peak_device_used_bytes.data(), 1, MPI_INT64_T,
                         comm));
  if (comm_rank(comm) == 0) {
    double total = 0;
    size_t first = m.step_seconds.size() >= 2 ? 1 : 0, counted = 0;
    for (size_t i = first; i < m.step_seconds.size(); ++i, ++counted)
      total += m.step_seconds[i];
    const double mean = counted ? total / double(counted) : 0;
    const double mfu =
        mean > 0 && peak_flops_per_gpu > 0
            ? model_flops_per_step / mean / (double(p) * peak_flops_per_gpu)
            : 0.0;
    // metrics_json's object with two more members in front.
    std::string text = metrics_json(m);
    Json extra = Json::obj();
    extra.set("mfu", Json::of(mfu));
    extra.set("model_flops_per_step", Json::of(model_flops_per_step));
    std::string e = extra.dump(); // {"mfu":..,"model_flops_per_step":..}
    text = "{" + e.substr(1, e.size() - 2) + "," + text.substr(1);
    write_file_atomically(path, text);
  }
  mpiCheck(MPI_Barrier(comm));
}

void write_cuda_run_trace(const GpuTrace &trace, const std::string &path,
                          MPI_Comm comm) {
  write_trace_fragments(trace.events_json(comm_rank(comm)), path, comm);
}

} // namespace autoddl::rt
