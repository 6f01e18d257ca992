// NCCL communicators, collectives, gradient sync and pipeline transfers (see
// Comm.h).
#include "backends/cuda/Comm.h"

#include "backends/cuda/Bootstrap.h" // the TCP world's failure hook, progress
#include "backends/cuda/kernels/CrossEntropy.h"
#include "backends/host/CommStats.h" // comm_stats: calls and bytes per kind
#include "backends/host/Mesh.h"      // mpi_init

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>

namespace autoddl::rt {

namespace {

Comm gWorld;
int gRank = 0;
std::mutex gCommsMutex;
std::vector<ncclComm_t> gComms; // every communicator made, for abort
std::atomic<bool> gWatchdogStop{false};
std::thread gWatchdog;

/// Aborts every communicator (unusable afterwards), so that no kernel waits
/// for a dead peer. After a sticky CUDA error ncclCommAbort might not return:
/// a thread ends the process after 20 s anyway.
void abort_comms() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::fprintf(stderr,
                 "autoddl: rank %d: the communicators did not abort "
                 "in 20 s; exiting\n",
                 gRank);
    std::_Exit(1);
  }).detach();
  // Another thread may hold the lock while it is the one failing: try only.
  std::unique_lock<std::mutex> lock(gCommsMutex, std::try_to_lock);
  for (ncclComm_t c : gComms)
    ncclCommAbort(c);
  gComms.clear();
}

/// Stops the job: the message (unless the caller printed it), the other
/// ranks told (without MPI: at once, over the TCP world), the communicators
/// aborted, MPI_Abort.
[[noreturn]] void abort_all(const char *message, bool printed = false) {
  if (!printed) {
    std::fprintf(stderr, "%s\n", message);
    std::fflush(stderr);
  }
  tcp::announce_failure();
  abort_comms();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

/// cuda_fail's hook (it printed the message).
void fault_hook(const char *message) { abort_all(message, true); }

/// Another rank of a TCP world failed (Bootstrap.h; it printed why): abort the
/// communicators before the process exits.
void peer_failed(const char *) { abort_comms(); }

/// Seconds without progress (a host collective or a step starting) after
/// which the watchdog stops the job: AUTODDL_WATCHDOG_TIMEOUT, default 600
/// (PyTorch's NCCL default); 0 turns it off.
double watchdog_timeout_s() {
  const char *s = std::getenv("AUTODDL_WATCHDOG_TIMEOUT");
  return s && *s ? std::atof(s) : 600.0;
}

/// Polls every communicator for an asynchronous error (a peer died, a network
/// failure), and stops the job when this rank made no progress for the
/// timeout (a rank hangs, so a collective never completes): without it a
/// rank could wait forever inside a kernel.
void watchdog() {
  const double timeout = watchdog_timeout_s();
  while (!gWatchdogStop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const char *place = nullptr;
    const double idle = tcp::progress_age_s(&place);
    if (timeout > 0 && idle > timeout) {
      const std::string m =
          "autoddl: rank " + std::to_string(gRank) +
          ": watchdog: no progress for " + std::to_string(int(idle)) +
          " s (the last at " + place +
          "): a rank hangs or a collective never completes; aborting "
          "(AUTODDL_WATCHDOG_TIMEOUT=" +
          std::to_string(int(timeout)) + ")";
      abort_all(m.c_str());
    }
    std::string asyncError;
    {
      std::lock_guard<std::mutex> lock(gCommsMutex);
      for (ncclComm_t c : gComms) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(c, &async) != ncclSuccess ||
            async == ncclSuccess || async == ncclInProgress)
          continue;
        asyncError = "autoddl: rank " + std::to_string(gRank) +
                     ": NCCL asynchronous error " + ncclGetErrorString(async) +
                     " (" + ncclGetLastError(c) + ") seen by the watchdog";
        break;
      }
    }
    if (!asyncError.empty())
      abort_all(asyncError.c_str());
  }
}

void register_comm(ncclComm_t c) {
  std::lock_guard<std::mutex> lock(gCommsMutex);
  gComms.push_back(c);
}

int local_rank_from_env() {
  for (const char *v :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID",
        "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK"})
    if (const char *s = std::getenv(v); s && *s)
      return std::atoi(s);
  return -1;
}

template <class T> ncclDataType_t nccl_type();
template <> ncclDataType_t nccl_type<float>() { return ncclFloat32; }
template <> ncclDataType_t nccl_type<__nv_bfloat16>() { return ncclBfloat16; }

/// outer = prod shape[0:dim]; chunk = (shape[dim] / p) * prod shape[dim+1:].
void geometry(const Shape &shape, int64_t dim, int64_t p, int64_t &outer,
              int64_t &chunk) {
  if (dim < 0 || dim >= int64_t(shape.size()) || shape[size_t(dim)] % p != 0)
    throw std::invalid_argument(
        "cannot split dimension " + std::to_string(dim) + " of " +
        shape_str(shape) + " into " + std::to_string(p) + " parts");
  outer = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[size_t(d)];
  chunk = shape[size_t(dim)] / p;
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d)
    chunk *= shape[d];
}

// x viewed as [outer][p][chunk]; blocks as [p][outer][chunk].
template <class T>
__global__ void concat_blocks_kernel(T *x, const T *blocks, int64_t outer,
                                     int64_t p, int64_t chunk,
                                     bool accumulate) {
  const int64_t n = outer * p * chunk;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (outer * chunk), rem = i % (outer * chunk);
    const int64_t o = rem / chunk, k = rem % chunk;
    T &dst = x[(o * p + r) * chunk + k];
    dst = accumulate ? T(float(dst) + float(blocks[i])) : blocks[i];
  }
}

template <class T>
__global__ void slice_kernel(T *out, const T *x, int64_t outer, int64_t p,
                             int64_t r, int64_t chunk, bool accumulate) {
  const int64_t n = outer * chunk;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / chunk, k = i % chunk;
    const T v = x[(o * p + r) * chunk + k];
    out[i] = accumulate ? T(float(out[i]) + float(v)) : v;
  }
}

/// Writes through `p` (AUTODDL_FAULT_INJECT "illegal": an invalid address).
__global__ void fault_kernel(float *p) { *p = 1.0f; }

int grid_for(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return int(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

/// A growable device scratch buffer for packed blocks.
/// Never freed: it lives as long as the CUDA context.
void *scratch(int64_t bytes) {
  static DeviceBuffer<char> *buf = new DeviceBuffer<char>();
  if (buf->size() < bytes) {
    synchronize(); // the previous scratch may still be read
    *buf = DeviceBuffer<char>(bytes);
  }
  return buf->data();
}

template <class T>
void all_reduce_impl(T *buf, int64_t n, const Comm &c, ncclRedOp_t op,
                     const char *kind) {
  if (c.size <= 1 || n == 0)
    return;
  comm_count(kind, n * int64_t(sizeof(T)));
  AUTODDL_NCCL_CHECK(ncclAllReduce(buf, buf, size_t(n), nccl_type<T>(), op,
                                   c.nccl, compute_stream()));
}

template <class T>
void all_gather_impl(T *full, const T *shard, const Shape &shard_shape,
                     int64_t dim, const Comm &c, bool accumulate) {
  const int64_t p = c.size;
  Shape fullShape = shard_shape;
  fullShape.at(size_t(dim)) *= p;
  int64_t outer, chunk;
  geometry(fullShape, dim, p, outer, chunk);
  const int64_t n = numel(shard_shape);
  comm_count("all_gather", n * int64_t(sizeof(T)));
  // The shards of every rank one after the other into `to` (one rank: a copy).
  auto gather_into = [&](T *to) {
    if (p == 1)
      AUTODDL_CUDA_CHECK(cudaMemcpyAsync(to, shard, size_t(n) * sizeof(T),
                                         cudaMemcpyDeviceToDevice,
                                         compute_stream()));
    else
      AUTODDL_NCCL_CHECK(ncclAllGather(shard, to, size_t(n), nccl_type<T>(),
                                       c.nccl, compute_stream()));
  };
  if (outer == 1 && !accumulate) { // shards are contiguous ranges of full
    if (p != 1 || full != shard)
      gather_into(full);
    return;
  }
  T *blocks = static_cast<T *>(scratch(n * p * int64_t(sizeof(T))));
  gather_into(blocks);
  concat_blocks_kernel<<<grid_for(n * p), 256, 0, compute_stream()>>>(
      full, blocks, outer, p, chunk, accumulate);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

template <class T>
void slice_impl(T *out, const T *x, const Shape &shape, int64_t dim, int64_t p,
                int64_t r, bool accumulate) {
  int64_t outer, chunk;
  geometry(shape, dim, p, outer, chunk);
  slice_kernel<<<grid_for(outer * chunk), 256, 0, compute_stream()>>>(
      out, x, outer, p, r, chunk, accumulate);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// dshard (+)= this rank's block (along dim) of the group's sum of dfull: a
/// reduce-scatter, with dfull's blocks packed contiguous first when dim is not
/// the outermost split; straight into dshard unless accumulating.
template <class T>
void reduce_scatter_impl(T *dshard, const T *dfull, const Shape &shard_shape,
                         int64_t dim, const Comm &c, bool accumulate) {
  const int64_t p = c.size, n = numel(shard_shape);
  Shape fullShape = shard_shape;
  fullShape.at(size_t(dim)) *= p;
  int64_t outer, chunk;
  geometry(fullShape, dim, p, outer, chunk);
  comm_count("reduce_scatter", n * p * int64_t(sizeof(T)));
  T *blocks = static_cast<T *>(scratch((n * p + n) * int64_t(sizeof(T))));
  T *mine = accumulate ? blocks + n * p : dshard;
  const T *src = dfull;
  if (outer != 1) { // blocks[r] = the r-th shard of dfull
    for (int64_t r = 0; r < p; ++r)
      slice_impl(blocks + r * n, dfull, fullShape, dim, p, r, false);
    src = blocks;
  }
  if (p == 1)
    mine = const_cast<T *>(src);
  else
    AUTODDL_NCCL_CHECK(ncclReduceScatter(src, mine, size_t(n), nccl_type<T>(),
                                         ncclSum, c.nccl, compute_stream()));
  if (accumulate || mine != dshard)
    slice_impl(dshard, mine, Shape{n}, 0, 1, 0, accumulate);
}
template <class T>
void all_gather_backward_impl(T *dshard, const T *dfull,
                              const Shape &shard_shape, int64_t dim,
                              const Comm &c) {
  reduce_scatter_impl(dshard, dfull, shard_shape, dim, c, true);
}

/// S(in_dim) -> S(out_dim) over the group: block r of the send buffer is this
/// rank's out_dim part r, exchanged by grouped send/recv (NCCL has no
/// all-to-all call), the received blocks concatenated along in_dim into out
/// (added to it with `accumulate`).
template <class T>
void all_to_all_impl(T *out, const T *in, const Shape &in_shape, int64_t in_dim,
                     int64_t out_dim, const Comm &c, bool accumulate) {
  if (in_dim == out_dim)
    throw std::invalid_argument("all_to_all needs two different dimensions");
  const int64_t p = c.size, n = numel(in_shape),
                m = n / std::max<int64_t>(p, 1);
  comm_count("all_to_all", n * int64_t(sizeof(T)));
  T *send = static_cast<T *>(scratch(2 * n * int64_t(sizeof(T))));
  T *recv = send + n;
  for (int64_t r = 0; r < p; ++r)
    slice_impl(send + r * m, in, in_shape, out_dim, p, r, false);
  if (p == 1) {
    AUTODDL_CUDA_CHECK(cudaMemcpyAsync(recv, send, size_t(n) * sizeof(T),
                                       cudaMemcpyDeviceToDevice,
                                       compute_stream()));
  } else {
    AUTODDL_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < int(p); ++r) {
      AUTODDL_NCCL_CHECK(ncclSend(send + r * m, size_t(m), nccl_type<T>(), r,
                                  c.nccl, compute_stream()));
      AUTODDL_NCCL_CHECK(ncclRecv(recv + r * m, size_t(m), nccl_type<T>(), r,
                                  c.nccl, compute_stream()));
    }
    AUTODDL_NCCL_CHECK(ncclGroupEnd());
  }
  // Block s came from rank s: its in_dim part s, restricted to this rank's
  // out_dim part.
  Shape outShape = in_shape;
  outShape.at(size_t(out_dim)) /= p;
  outShape.at(size_t(in_dim)) *= p;
  int64_t outer, chunk;
  geometry(outShape, in_dim, p, outer, chunk);
  concat_blocks_kernel<<<grid_for(n), 256, 0, compute_stream()>>>(
      out, recv, outer, p, chunk, accumulate);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace

void all_to_all_forward(float *out, const float *in, const Shape &in_shape,
                        int64_t in_dim, int64_t out_dim, const Comm &c) {
  all_to_all_impl(out, in, in_shape, in_dim, out_dim, c, false);
}
void all_to_all_forward(__nv_bfloat16 *out, const __nv_bfloat16 *in,
                        const Shape &in_shape, int64_t in_dim, int64_t out_dim,
                        const Comm &c) {
  all_to_all_impl(out, in, in_shape, in_dim, out_dim, c, false);
}
namespace {
template <class T>
void all_to_all_backward_impl(T *din, const T *dout, const Shape &in_shape,
                              int64_t in_dim, int64_t out_dim, const Comm &c) {
  Shape outShape = in_shape;
  outShape.at(size_t(out_dim)) /= c.size;
  outShape.at(size_t(in_dim)) *= c.size;
  all_to_all_impl(din, dout, outShape, out_dim, in_dim, c, true);
}
} // namespace
void all_to_all_backward(float *din, const float *dout, const Shape &in_shape,
                         int64_t in_dim, int64_t out_dim, const Comm &c) {
  all_to_all_backward_impl(din, dout, in_shape, in_dim, out_dim, c);
}
void all_to_all_backward(__nv_bfloat16 *din, const __nv_bfloat16 *dout,
                         const Shape &in_shape, int64_t in_dim, int64_t out_dim,
                         const Comm &c) {
  all_to_all_backward_impl(din, dout, in_shape, in_dim, out_dim, c);
}

/// AUTODDL_FAULT_INJECT="rank:step:kind" (Comm.h): rank `rank` fails at the
/// start of step `step` of this run.
void comm_inject_fault() {
  // "rank:step:kind", parsed once; step counts this run's steps from 0.
  static int rank = -1, step = -1, seen = 0;
  static std::string kind;
  static const bool asked = [] {
    const char *s = std::getenv("AUTODDL_FAULT_INJECT");
    char k[32] = {};
    if (!s || !*s)
      return false;
    if (std::sscanf(s, "%d:%d:%31s", &rank, &step, k) != 3)
      throw std::runtime_error("AUTODDL_FAULT_INJECT=" + std::string(s) +
                               ": expected rank:step:kind");
    kind = k;
    if (kind != "cuda" && kind != "illegal" && kind != "nccl" &&
        kind != "hang" && kind != "exit")
      throw std::runtime_error("AUTODDL_FAULT_INJECT: kind " + kind +
                               " is none of cuda, illegal, nccl, hang, exit");
    return true;
  }();
  if (!asked || rank != gRank || seen++ != step)
    return;
  std::fprintf(stderr,
               "autoddl: rank %d: AUTODDL_FAULT_INJECT: %s at step %d\n", gRank,
               kind.c_str(), step);
  std::fflush(stderr);
  if (kind == "cuda") { // a failing call: an allocation larger than any GPU
    void *p = nullptr;
    AUTODDL_CUDA_CHECK(cudaMalloc(&p, size_t(1) << 60));
  } else if (kind == "illegal") { // a kernel fault, seen by a later call
    fault_kernel<<<1, 1, 0, compute_stream()>>>(
        reinterpret_cast<float *>(uintptr_t(8)));
    AUTODDL_CUDA_CHECK_LAUNCH();
  } else if (kind == "nccl") { // a collective of a datatype NCCL has not
    AUTODDL_NCCL_CHECK(ncclAllReduce(nullptr, nullptr, 1,
                                     ncclDataType_t(ncclNumTypes), ncclSum,
                                     gWorld.nccl, compute_stream()));
  } else if (kind == "hang") { // this host stops; the others wait in NCCL
    for (;;)
      pause();
  } else { // a crash: no message, no abort
    std::_Exit(9);
  }
}

void nccl_fail(ncclResult_t r, const char *call, const char *file, int line) {
  const std::string m = "autoddl: rank " + std::to_string(gRank) +
                        ": NCCL error " + ncclGetErrorString(r) + " (" +
                        ncclGetLastError(nullptr) + ") in " + call + " at " +
                        file + ":" + std::to_string(line);
  abort_all(m.c_str());
}

void comm_init(int *argc, char ***argv) {
  mpi_init(argc, argv);
  tcp::set_failure_hook(peer_failed);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  set_rank_for_messages(gRank);
  int devices = 0;
  std::string problem;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    problem = "no CUDA device found (cudaGetDeviceCount); the cuda backend "
              "needs a GPU per rank";
  int local = local_rank_from_env();
  if (local < 0)
    local = devices > 0 ? gRank % devices : 0;
  // AUTODDL_SHARE_GPU=1 (tests only, one node): more ranks than GPUs, local
  // rank r on GPU r % count. NCCL refuses two ranks of one communicator on one
  // GPU, so each rank claims a host of its own (NCCL_HOSTID) and NCCL joins
  // them through its socket transport on loopback: every collective and
  // send/recv runs as between separate GPUs, at loopback speed.
  const char *share = std::getenv("AUTODDL_SHARE_GPU");
  const bool shareGpu = share && std::string(share) == "1";
  if (shareGpu && devices > 0 && size > devices) {
    local %= devices;
    setenv("NCCL_HOSTID", ("autoddl-rank-" + std::to_string(gRank)).c_str(), 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  if (problem.empty() && local >= devices)
    problem = "local rank " + std::to_string(local) + " but only " +
              std::to_string(devices) +
              " CUDA devices on this node: start at most one rank per GPU "
              "(AUTODDL_SHARE_GPU=1 shares them, for tests)";
  // Every rank learns whether any failed before NCCL starts (else the others
  // would wait for it in the bootstrap).
  int bad = problem.empty() ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any)
    throw std::runtime_error(bad ? problem
                                 : "another rank found no usable CUDA device");
  select_device(local);
  set_fault_hook(fault_hook);
  // NVLink SHARP (multicast) stays off unless the user asks for it.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  ncclUniqueId id;
  if (gRank == 0)
    AUTODDL_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  gWorld.size = size;
  gWorld.rank = gRank;
  AUTODDL_NCCL_CHECK(ncclCommInitRank(&gWorld.nccl, size, id, gRank));
  register_comm(gWorld.nccl);
  gWatchdogStop = false;
  gWatchdog = std::thread(watchdog);
}

const Comm &world() { return gWorld; }

Comm comm_split(int color, int key) {
  Comm c;
  ncclComm_t made = nullptr;
  AUTODDL_NCCL_CHECK(ncclCommSplit(gWorld.nccl,
                                   color < 0 ? NCCL_SPLIT_NOCOLOR : color, key,
                                   &made, nullptr));
  if (color < 0 || made == nullptr) {
    c.size = 0;
    return c;
  }
  c.nccl = made;
  AUTODDL_NCCL_CHECK(ncclCommCount(made, &c.size));
  AUTODDL_NCCL_CHECK(ncclCommUserRank(made, &c.rank));
  register_comm(made);
  return c;
}

void comm_finalize() {
  gWatchdogStop = true;
  if (gWatchdog.joinable())
    gWatchdog.join();
  if (!gWorld.nccl)
    return;
  AUTODDL_CUDA_CHECK(cudaDeviceSynchronize());
  std::lock_guard<std::mutex> lock(gCommsMutex);
  for (ncclComm_t c : gComms)
    ncclCommDestroy(c);
  gComms.clear();
  gWorld = Comm{};
}

void all_reduce_forward(float *buf, int64_t n, const Comm &c) {
  all_reduce_impl(buf, n, c, ncclSum, "all_reduce");
}
void all_reduce_forward(__nv_bfloat16 *buf, int64_t n, const Comm &c) {
  all_reduce_impl(buf, n, c, ncclSum, "all_reduce");
}
void all_reduce_max(float *buf, int64_t n, const Comm &c) {
  all_reduce_impl(buf, n, c, ncclMax, "all_reduce");
}

void all_gather_forward(float *full, const float *shard,
                        const Shape &shard_shape, int64_t dim, const Comm &c) {
  all_gather_impl(full, shard, shard_shape, dim, c, false);
}
void all_gather_forward(__nv_bfloat16 *full, const __nv_bfloat16 *shard,
                        const Shape &shard_shape, int64_t dim, const Comm &c) {
  all_gather_impl(full, shard, shard_shape, dim, c, false);
}
void all_gather_accumulate(float *full, const float *shard,
                           const Shape &shard_shape, int64_t dim,
                           const Comm &c) {
  all_gather_impl(full, shard, shard_shape, dim, c, true);
}
void all_gather_accumulate(__nv_bfloat16 *full, const __nv_bfloat16 *shard,
                           const Shape &shard_shape, int64_t dim,
                           const Comm &c) {
  all_gather_impl(full, shard, shard_shape, dim, c, true);
}

void all_gather_backward(float *dshard, const float *dfull,
                         const Shape &shard_shape, int64_t dim, const Comm &c) {
  all_gather_backward_impl(dshard, dfull, shard_shape, dim, c);
}
void all_gather_backward(__nv_bfloat16 *dshard, const __nv_bfloat16 *dfull,
                         const Shape &shard_shape, int64_t dim, const Comm &c) {
  all_gather_backward_impl(dshard, dfull, shard_shape, dim, c);
}

namespace {
Shape shardOf(Shape full, int64_t dim, int64_t p) {
  if (dim < 0 || dim >= int64_t(full.size()) || full[size_t(dim)] % p != 0)
    throw std::invalid_argument("cannot split dimension " +
                                std::to_string(dim) + " of " + shape_str(full) +
                                " into " + std::to_string(p) + " parts");
  full[size_t(dim)] /= p;
  return full;
}
} // namespace
void reduce_scatter_forward(float *shard, const float *full,
                            const Shape &full_shape, int64_t dim,
                            const Comm &c) {
  reduce_scatter_impl(shard, full, shardOf(full_shape, dim, c.size), dim, c,
                      false);
}
void reduce_scatter_forward(__nv_bfloat16 *shard, const __nv_bfloat16 *full,
                            const Shape &full_shape, int64_t dim,
                            const Comm &c) {
  reduce_scatter_impl(shard, full, shardOf(full_shape, dim, c.size), dim, c,
                      false);
}

void slice_forward(float *out, const float *x, const Shape &shape, int64_t dim,
                   int64_t p, int64_t r) {
  slice_impl(out, x, shape, dim, p, r, false);
}
void slice_forward(__nv_bfloat16 *out, const __nv_bfloat16 *x,
                   const Shape &shape, int64_t dim, int64_t p, int64_t r) {
  slice_impl(out, x, shape, dim, p, r, false);
}
void slice_forward(int32_t *out, const int32_t *x, const Shape &shape,
                   int64_t dim, int64_t p, int64_t r) {
  slice_impl(out, x, shape, dim, p, r, false);
}
void slice_accumulate(float *out, const float *x, const Shape &shape,
                      int64_t dim, int64_t p, int64_t r) {
  slice_impl(out, x, shape, dim, p, r, true);
}
void slice_accumulate(__nv_bfloat16 *out, const __nv_bfloat16 *x,
                      const Shape &shape, int64_t dim, int64_t p, int64_t r) {
  slice_impl(out, x, shape, dim, p, r, true);
}

void reduce_scatter_flat(float *shard, const float *full, int64_t shard_n,
                         const Comm &c) {
  comm_count("reduce_scatter", shard_n * c.size * int64_t(sizeof(float)));
  if (c.size <= 1) {
    AUTODDL_CUDA_CHECK(
        cudaMemcpyAsync(shard, full, size_t(shard_n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, compute_stream()));
    return;
  }
  AUTODDL_NCCL_CHECK(ncclReduceScatter(full, shard, size_t(shard_n),
                                       ncclFloat32, ncclSum, c.nccl,
                                       compute_stream()));
}

void all_gather_flat(float *full, const float *shard, int64_t shard_n,
                     const Comm &c) {
  all_gather_impl(full, shard, Shape{shard_n}, 0, c, false);
}

} // namespace autoddl::rt
