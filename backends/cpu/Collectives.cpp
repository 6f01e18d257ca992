// Boxing collectives over MPI (see Collectives.h).
#include "backends/cpu/Collectives.h"

#include "backends/cpu/kernels/CrossEntropy.h"
#include "backends/host/MpiCheck.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace autoddl::rt {

namespace {

/// Times one collective into comm_stats() (and the trace) from construction to
/// destruction.
class Record {
public:
  Record(const char *kind, int64_t bytes)
      : kind_(kind), bytes_(bytes), trace_(comm_trace()),
        traceStart_(trace_ ? trace_->now_us() : 0),
        cpuStart_(thread_cpu_seconds()) {}
  ~Record() {
    // The straggler check's work time leaves out the CPU MPI spent polling
    // (harness/Anomalies.h).
    comm_add_cpu_seconds(thread_cpu_seconds() - cpuStart_);
    CollectiveStat &s = comm_stats()[kind_];
    s.calls += 1;
    s.bytes += bytes_;
    s.seconds += timer_.seconds() - excluded_;
    if (trace_)
      trace_->end(kind_, 1, traceStart_);
  }

  /// Seconds spent on other work inside the call (a recv's wait hook): not
  /// communication time in comm_stats.
  void exclude(double seconds) { excluded_ += seconds; }

private:
  const char *kind_;
  int64_t bytes_;
  TraceRecorder *trace_;
  double traceStart_;
  Timer timer_;
  double excluded_ = 0;
  double cpuStart_;
};

int mpiCount(int64_t n) {
  if (n < 0 || n > INT_MAX)
    throw std::runtime_error("collective of " + std::to_string(n) +
                             " elements exceeds MPI's int count");
  return int(n);
}

/// outer = prod shape[0:dim]; chunk = (shape[dim] / p) * prod shape[dim+1:].
void blockGeometry(const Shape &shape, int64_t dim, int64_t p, int64_t &outer,
                   int64_t &chunk) {
  if (dim < 0 || dim >= int64_t(shape.size()))
    throw std::invalid_argument("split dimension " + std::to_string(dim) +
                                " out of range for " + shape_str(shape));
  if (shape[dim] % p != 0)
    throw std::invalid_argument("dimension " + std::to_string(dim) + " of " +
                                shape_str(shape) + " does not split into " +
                                std::to_string(p) + " equal parts");
  outer = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  chunk = shape[dim] / p;
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d)
    chunk *= shape[d];
}

Shape withDim(Shape s, int64_t dim, int64_t size) {
  s.at(dim) = size;
  return s;
}

} // namespace

void split_blocks(float *blocks, const float *x, const Shape &shape,
                  int64_t dim, int64_t p) {
  int64_t outer, chunk;
  blockGeometry(shape, dim, p, outer, chunk);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < p; ++r)
      std::memcpy(blocks + (r * outer + o) * chunk, x + (o * p + r) * chunk,
                  size_t(chunk) * sizeof(float));
}

void concat_blocks(float *x, const float *blocks, const Shape &shape,
                   int64_t dim, int64_t p, bool accumulate) {
  int64_t outer, chunk;
  blockGeometry(shape, dim, p, outer, chunk);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < p; ++r) {
      float *dst = x + (o * p + r) * chunk;
      const float *src = blocks + (r * outer + o) * chunk;
      if (accumulate)
        for (int64_t k = 0; k < chunk; ++k)
          dst[k] += src[k];
      else
        std::memcpy(dst, src, size_t(chunk) * sizeof(float));
    }
}

namespace {
template <class T>
void slice_impl(T *out, const T *x, const Shape &shape, int64_t dim, int64_t p,
                int64_t r) {
  int64_t outer, chunk;
  blockGeometry(shape, dim, p, outer, chunk);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + o * chunk, x + (o * p + r) * chunk,
                size_t(chunk) * sizeof(T));
}
} // namespace

void slice_forward(float *out, const float *x, const Shape &shape, int64_t dim,
                   int64_t p, int64_t r) {
  slice_impl(out, x, shape, dim, p, r);
}
void slice_forward(int32_t *out, const int32_t *x, const Shape &shape,
                   int64_t dim, int64_t p, int64_t r) {
  slice_impl(out, x, shape, dim, p, r);
}

void all_reduce_forward(float *buf, int64_t n, MPI_Comm comm) {
  Record rec("all_reduce", n * 4);
  mpiCheck(
      MPI_Allreduce(MPI_IN_PLACE, buf, mpiCount(n), MPI_FLOAT, MPI_SUM, comm));
}

void all_reduce_max(float *buf, int64_t n, MPI_Comm comm) {
  Record rec("all_reduce", n * 4);
  mpiCheck(
      MPI_Allreduce(MPI_IN_PLACE, buf, mpiCount(n), MPI_FLOAT, MPI_MAX, comm));
}

void all_gather_forward(float *full, const float *shard,
                        const Shape &shard_shape, int64_t dim, MPI_Comm comm) {
  const int p = comm_size(comm);
  const int64_t n = numel(shard_shape);
  Record rec("all_gather", n * 4);
  const Shape fullShape = withDim(shard_shape, dim, shard_shape.at(dim) * p);
  if (dim == 0) { // shards are contiguous ranges of the full tensor
    mpiCheck(MPI_Allgather(shard, mpiCount(n), MPI_FLOAT, full, mpiCount(n),
                           MPI_FLOAT, comm));
    return;
  }
  std::vector<float> blocks(size_t(n * p));
  mpiCheck(MPI_Allgather(shard, mpiCount(n), MPI_FLOAT, blocks.data(),
                         mpiCount(n), MPI_FLOAT, comm));
  concat_blocks(full, blocks.data(), fullShape, dim, p, false);
}

void reduce_scatter_forward(float *shard, const float *full,
                            const Shape &full_shape, int64_t dim,
                            MPI_Comm comm) {
  const int p = comm_size(comm);
  const int64_t n = numel(full_shape) / p;
  Record rec("reduce_scatter", numel(full_shape) * 4);
  std::vector<float> blocks(size_t(numel(full_shape)));
  split_blocks(blocks.data(), full, full_shape, dim, p);
  mpiCheck(MPI_Reduce_scatter_block(blocks.data(), shard, mpiCount(n),
                                    MPI_FLOAT, MPI_SUM, comm));
}

void all_gather_backward(float *dshard, const float *dfull,
                         const Shape &shard_shape, int64_t dim, MPI_Comm comm) {
  const int p = comm_size(comm);
  std::vector<float> tmp(size_t(numel(shard_shape)));
  reduce_scatter_forward(tmp.data(), dfull,
                         withDim(shard_shape, dim, shard_shape.at(dim) * p),
                         dim, comm);
  for (size_t k = 0; k < tmp.size(); ++k)
    dshard[k] += tmp[k];
}

void reduce_scatter_backward(float *dfull, const float *dshard,
                             const Shape &full_shape, int64_t dim,
                             MPI_Comm comm) {
  const int p = comm_size(comm);
  std::vector<float> tmp(size_t(numel(full_shape)));
  all_gather_forward(tmp.data(), dshard,
                     withDim(full_shape, dim, full_shape.at(dim) / p), dim,
                     comm);
  for (size_t k = 0; k < tmp.size(); ++k)
    dfull[k] += tmp[k];
}

void all_to_all_forward(float *out, const float *in, const Shape &in_shape,
                        int64_t in_dim, int64_t out_dim, MPI_Comm comm) {
  if (in_dim == out_dim)
    throw std::invalid_argument("all_to_all needs two different dimensions");
  const int p = comm_size(comm);
  const int64_t n = numel(in_shape);
  Record rec("all_to_all", n * 4);
  std::vector<float> sendBuf(static_cast<size_t>(n)),
      recvBuf(static_cast<size_t>(n));
  split_blocks(sendBuf.data(), in, in_shape, out_dim,
               p); // block r: out_dim part r
  mpiCheck(MPI_Alltoall(sendBuf.data(), mpiCount(n / p), MPI_FLOAT,
                        recvBuf.data(), mpiCount(n / p), MPI_FLOAT, comm));
  // Block s came from rank s: its in_dim part s, restricted to this rank's
  // out_dim part.
  Shape outShape = withDim(in_shape, out_dim, in_shape.at(out_dim) / p);
  outShape[in_dim] *= p;
  concat_blocks(out, recvBuf.data(), outShape, in_dim, p, false);
}

void all_to_all_backward(float *din, const float *dout, const Shape &in_shape,
                         int64_t in_dim, int64_t out_dim, MPI_Comm comm) {
  const int p = comm_size(comm);
  Shape outShape = withDim(in_shape, out_dim, in_shape.at(out_dim) / p);
  outShape[in_dim] *= p;
  std::vector<float> tmp(size_t(numel(in_shape)));
  all_to_all_forward(tmp.data(), dout, outShape, out_dim, in_dim, comm);
  for (size_t k = 0; k < tmp.size(); ++k)
    din[k] += tmp[k];
}

void send(const float *buf, int64_t n, int dest, int tag, MPI_Comm comm) {
  Record rec("send", n * 4);
  mpiCheck(MPI_Send(buf, mpiCount(n), MPI_FLOAT, dest, tag, comm));
}

namespace {
RecvWaitHook recvWaitHook = nullptr;
// Per receive (communicator, source, tag): how long its message took to
// arrive last time, for the hook's budget. Tags repeat every step (tag(mb,
// stage, kind, ...)), so this is the same receive of the previous step.
std::map<std::tuple<MPI_Comm, int, int>, double> &lastWaits() {
  static std::map<std::tuple<MPI_Comm, int, int>, double> waits;
  return waits;
}
} // namespace

void set_recv_wait_hook(RecvWaitHook hook) {
  recvWaitHook = hook;
  lastWaits().clear();
}

namespace {
/// Waits for `reqs` while the wait hook works or naps (set_recv_wait_hook):
/// the budget is how long the same wait (`key`) took last time, at most
/// `cap` (a collective's peers progress only when this rank tests, so its
/// naps and items stay short). The naps are counted as `napped` in
/// comm_stats. Returns the seconds of the hook's own work (compute, not
/// communication).
double waitFilling(int count, MPI_Request *reqs,
                   const std::tuple<MPI_Comm, int, int> &key, double cap,
                   const char *napped) {
  auto last = lastWaits().find(key);
  const double expected = last == lastWaits().end()
                              ? std::numeric_limits<double>::infinity()
                              : last->second;
  Timer waited;
  double hookSeconds = 0, napSeconds = 0, notYet = 0;
  int done = 0;
  mpiCheck(MPI_Testall(count, reqs, &done, MPI_STATUSES_IGNORE));
  while (!done) {
    notYet = waited.seconds();
    Timer hook;
    const RecvWaitWork work = recvWaitHook(std::min(expected - notYet, cap));
    if (work == RecvWaitWork::None)
      break;
    (work == RecvWaitWork::Ran ? hookSeconds : napSeconds) += hook.seconds();
    mpiCheck(MPI_Testall(count, reqs, &done, MPI_STATUSES_IGNORE));
  }
  // The naps: wait time another thread of the rank could use (K-FAC's
  // filling thread had work); metrics.json's "recv_napped" and the like.
  if (napSeconds > 0) {
    CollectiveStat &s = comm_stats()[napped];
    s.calls += 1;
    s.seconds += napSeconds;
  }
  if (!done) {
    mpiCheck(MPI_Waitall(count, reqs, MPI_STATUSES_IGNORE));
    lastWaits()[key] = waited.seconds(); // exact: blocked until it came
  } else {
    lastWaits()[key] = notYet; // came during the hook's last piece, or at once
  }
  return hookSeconds;
}

constexpr double kNoCap = std::numeric_limits<double>::infinity();
// A collective's wait: at most 400 us a piece (thread filling naps an eighth
// of it, 50 us).
constexpr double kCollectiveCap = 400e-6;

/// An Iallreduce's wait: filled where a hook is set, else plain. Posted
/// non-blocking either way, so ranks in different filling modes still match
/// (a blocking and a non-blocking collective never do) and sum alike.
double waitCollective(MPI_Request &r, const std::tuple<MPI_Comm, int, int> &key,
                      const char *napped) {
  if (!recvWaitHook) {
    mpiCheck(MPI_Wait(&r, MPI_STATUS_IGNORE));
    return 0;
  }
  return waitFilling(1, &r, key, kCollectiveCap, napped);
}
} // namespace

void recv(float *buf, int64_t n, int source, int tag, MPI_Comm comm) {
  Record rec("recv", n * 4);
  if (!recvWaitHook) {
    mpiCheck(MPI_Recv(buf, mpiCount(n), MPI_FLOAT, source, tag, comm,
                      MPI_STATUS_IGNORE));
    return;
  }
  // While the message is not there: the hook's work, one piece at a time,
  // each expected to end before the message arrives. The hook's items are
  // compute (traced on their own), not receive time (the MPI_Tests between
  // them are counted with them).
  MPI_Request r;
  mpiCheck(MPI_Irecv(buf, mpiCount(n), MPI_FLOAT, source, tag, comm, &r));
  rec.exclude(waitFilling(1, &r, std::make_tuple(comm, source, tag), kNoCap,
                          "recv_napped"));
}

void all_reduce_forward_filling(float *buf, int64_t n, MPI_Comm comm,
                                int site) {
  Record rec("all_reduce", n * 4);
  MPI_Request r;
  mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, buf, mpiCount(n), MPI_FLOAT, MPI_SUM,
                          comm, &r));
  rec.exclude(
      waitCollective(r, std::make_tuple(comm, -1, site), "all_reduce_napped"));
}

double world_sum_filling(double x, int site) {
  MPI_Request r;
  mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM,
                          MPI_COMM_WORLD, &r));
  waitCollective(r, std::make_tuple(MPI_COMM_WORLD, -2, site),
                 "world_sum_napped");
  return x;
}

MPI_Request isend(const float *buf, int64_t n, int dest, int tag,
                  MPI_Comm comm) {
  comm_count("send", n * 4);
  MPI_Request r;
  mpiCheck(MPI_Isend(buf, mpiCount(n), MPI_FLOAT, dest, tag, comm, &r));
  return r;
}

MPI_Request irecv(float *buf, int64_t n, int source, int tag, MPI_Comm comm) {
  comm_count("recv", n * 4);
  MPI_Request r;
  mpiCheck(MPI_Irecv(buf, mpiCount(n), MPI_FLOAT, source, tag, comm, &r));
  return r;
}

void wait_all(std::vector<MPI_Request> &requests) {
  Record rec("wait", 0);
  if (recvWaitHook && !requests.empty())
    rec.exclude(waitFilling(int(requests.size()), requests.data(),
                            std::make_tuple(MPI_COMM_NULL, -3, 0),
                            kCollectiveCap, "wait_napped"));
  else
    mpiCheck(MPI_Waitall(int(requests.size()), requests.data(),
                         MPI_STATUSES_IGNORE));
  if (recvWaitHook && requests.empty()) // all sent already (progress_sends)
    lastWaits()[std::make_tuple(MPI_COMM_NULL, -3, 0)] = 0;
  requests.clear();
}

} // namespace autoddl::rt
