// Damped factor inverses on the GPU (Kfac.h): cuSOLVER Cholesky (potrf +
// potrs on an identity) in fp32, the fp64 retry, the keep-previous policy of
// KfacRules.h, the refresh of a layer, and the asynchronous refresh on a side
// stream.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kfac/Kfac.h"
#include "backends/cuda/kfac/KfacInternal.cuh"

#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace autoddl::rt {
namespace {
using namespace kfac_detail;

const char *cusolver_status_name(cusolverStatus_t s) {
  switch (s) {
  case CUSOLVER_STATUS_NOT_INITIALIZED:
    return "CUSOLVER_STATUS_NOT_INITIALIZED";
  case CUSOLVER_STATUS_ALLOC_FAILED:
    return "CUSOLVER_STATUS_ALLOC_FAILED";
  case CUSOLVER_STATUS_INVALID_VALUE:
    return "CUSOLVER_STATUS_INVALID_VALUE";
  case CUSOLVER_STATUS_ARCH_MISMATCH:
    return "CUSOLVER_STATUS_ARCH_MISMATCH";
  case CUSOLVER_STATUS_EXECUTION_FAILED:
    return "CUSOLVER_STATUS_EXECUTION_FAILED";
  case CUSOLVER_STATUS_INTERNAL_ERROR:
    return "CUSOLVER_STATUS_INTERNAL_ERROR";
  default:
    return "cusolverStatus_t error";
  }
}
#define AUTODDL_CUSOLVER_CHECK(x)                                              \
  do {                                                                         \
    const cusolverStatus_t kfac_ss_ = (x);                                     \
    if (kfac_ss_ != CUSOLVER_STATUS_SUCCESS)                                   \
      ::autoddl::rt::cuda_fail(cusolver_status_name(kfac_ss_), #x, __FILE__,   \
                               __LINE__);                                      \
  } while (0)

/// One cuSOLVER handle per process, on compute_stream().
cusolverDnHandle_t solver() {
  static cusolverDnHandle_t h = [] {
    cusolverDnHandle_t handle = nullptr;
    AUTODDL_CUSOLVER_CHECK(cusolverDnCreate(&handle));
    AUTODDL_CUSOLVER_CHECK(cusolverDnSetStream(handle, compute_stream()));
    return handle;
  }();
  return h;
}

/// Status words on the device: potrf's info, potrs's info, a non-finite
/// count. Zeroed before each inversion.
int *status_words() {
  static auto *words = new DeviceBuffer<int>(3); // never destroyed (workspace)
  return words->data();
}

/// m[d,d] (T) = F + diag I; counts non-finite entries of F into *bad.
template <class T>
__global__ void load_damped_kernel(T *m, const float *F, int64_t d, double diag,
                                   int *bad) {
  const int64_t n = d * d, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    const float f = F[k];
    if (!isfinite(f))
      atomicAdd(bad, 1);
    const int64_t i = k / d, j = k % d;
    m[k] = T(f) + (i == j ? T(diag) : T(0));
  }
}

/// inv (fp32) = the symmetric matrix of m's row-major upper triangle (so
/// exactly symmetric); counts non-finite results.
template <class T>
__global__ void mirror_kernel(float *inv, const T *m, int64_t d, int *bad) {
  const int64_t n = d * d, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    const int64_t i = k / d, j = k % d;
    const float v = float(i <= j ? m[k] : m[j * d + i]);
    if (!isfinite(v))
      atomicAdd(bad, 1);
    inv[k] = v;
  }
}

__global__ void trace_kernel(const float *F, int64_t d, double *out) {
  __shared__ double partial[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    s += double(F[i * d + i]);
  s = detail::block_sum(s, partial);
  if (threadIdx.x == 0)
    *out = s;
}

void potrf(cusolverDnHandle_t h, int n, float *a, float *work, int lwork,
           int *info) {
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, a, n, work, lwork, info));
}
void potrf(cusolverDnHandle_t h, int n, double *a, double *work, int lwork,
           int *info) {
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, n, a, n, work, lwork, info));
}
void potrs(cusolverDnHandle_t h, int n, const float *a, float *b, int *info) {
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnSpotrs(h, CUBLAS_FILL_MODE_LOWER, n, n, a, n, b, n, info));
}
void potrs(cusolverDnHandle_t h, int n, const double *a, double *b, int *info) {
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnDpotrs(h, CUBLAS_FILL_MODE_LOWER, n, n, a, n, b, n, info));
}
int work_size(cusolverDnHandle_t h, int n, float *a) {
  int lf = 0;
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, &lf));
  return lf;
}
int work_size(cusolverDnHandle_t h, int n, double *a) {
  int lf = 0;
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, &lf));
  return lf;
}

template <class T> __global__ void identity_kernel(T *b, int64_t d) {
  const int64_t n = d * d, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride)
    b[k] = k / d == k % d ? T(1) : T(0);
}

/// b = a^-1 for the SPD n x n `a` (overwritten by its Cholesky factor):
/// potrf, then potrs on an identity. Not potri: on an H100 it took 7.8 ms
/// at n = 3072 where potrf + potrs take 4.8 ms, the same accuracy
/// (bench/results/pipefisher/2026-12-06-h100-inverse/). info[0]: potrf's,
/// info[1]: potrs's.
template <class T>
void cholesky_solve_inverse(cusolverDnHandle_t h, cudaStream_t s, int n, T *a,
                            T *b, T *work, int lwork, int *info) {
  potrf(h, n, a, work, lwork, info);
  const int64_t d = n;
  identity_kernel<T><<<detail::grid_for(d * d, 256), 256, 0, s>>>(b, d);
  AUTODDL_CUDA_CHECK_LAUNCH();
  potrs(h, n, a, b, info + 1);
}

/// The Cholesky inverse in precision T (the row-major symmetric matrix is
/// its own column-major transpose, so cuSOLVER's column-major view is the
/// same matrix). Synchronous: reads the status words back.
template <class T>
bool cholesky_inverse(float *inv, const float *F, int64_t d, double diag,
                      int slot) {
  if (d > INT_MAX / 2)
    throw std::invalid_argument("kfac: factor dimension " + std::to_string(d) +
                                " is too large for cuSOLVER's int");
  const int n = int(d);
  auto *m = static_cast<T *>(workspace(slot, d * d * int64_t(sizeof(T))));
  auto *b = static_cast<T *>(workspace(kRhs, d * d * int64_t(sizeof(T))));
  int *words = status_words();
  AUTODDL_CUDA_CHECK(
      cudaMemsetAsync(words, 0, 3 * sizeof(int), compute_stream()));
  const unsigned grid = detail::grid_for(d * d, 256);
  load_damped_kernel<T>
      <<<grid, 256, 0, compute_stream()>>>(m, F, d, diag, words + 2);
  AUTODDL_CUDA_CHECK_LAUNCH();
  cusolverDnHandle_t h = solver();
  const int lwork = work_size(h, n, m);
  auto *work = static_cast<T *>(
      workspace(kSolver, int64_t(lwork > 0 ? lwork : 1) * int64_t(sizeof(T))));
  cholesky_solve_inverse<T>(h, compute_stream(), n, m, b, work, lwork, words);
  mirror_kernel<T><<<grid, 256, 0, compute_stream()>>>(inv, b, d, words + 2);
  AUTODDL_CUDA_CHECK_LAUNCH();
  int host[3] = {0, 0, 0};
  copy_to_host(host, words, 3 * int64_t(sizeof(int)));
  return host[0] == 0 && host[1] == 0 && host[2] == 0;
}

double trace(const float *F, int64_t d) {
  auto *out = static_cast<double *>(workspace(kReduce, sizeof(double)));
  trace_kernel<<<1, 256, 0, compute_stream()>>>(F, d, out);
  AUTODDL_CUDA_CHECK_LAUNCH();
  double t = 0;
  copy_to_host(&t, out, sizeof(double));
  return t;
}

/// The damping of KfacRules.h's kfac_damping from the factors' traces, on
/// the device (the same double operations, so the same values): out[3] = pi,
/// a, g. One block.
__global__ void damping_kernel(const float *A, int64_t dA, const float *G,
                               int64_t dG, double damping, double *out) {
  __shared__ double partial[32];
  double sa = 0, sg = 0;
  for (int64_t i = threadIdx.x; i < dA; i += blockDim.x)
    sa += double(A[i * dA + i]);
  for (int64_t i = threadIdx.x; i < dG; i += blockDim.x)
    sg += double(G[i * dG + i]);
  sa = detail::block_sum(sa, partial);
  sg = detail::block_sum(sg, partial);
  if (threadIdx.x != 0)
    return;
  const double meanA = sa / double(dA), meanG = sg / double(dG);
  double pi = 1.0;
  if (meanA > 0 && meanG > 0 && isfinite(meanA) && isfinite(meanG))
    pi = sqrt(meanA / meanG);
  const double root = sqrt(damping);
  out[0] = pi;
  out[1] = fmax(root * pi, 1e-7);
  out[2] = fmax(root / pi, 1e-7);
}

/// m[d,d] = F + (*diag) I (fp32, the damping read on the device); counts
/// non-finite entries of F into *bad.
__global__ void load_damped_at_kernel(float *m, const float *F, int64_t d,
                                      const double *diag, int *bad) {
  const int64_t n = d * d, stride = int64_t(gridDim.x) * blockDim.x;
  const float add = float(*diag);
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    const float f = F[k];
    if (!isfinite(f))
      atomicAdd(bad, 1);
    m[k] = f + (k / d == k % d ? add : 0.0f);
  }
}

/// mirror_kernel in place: the lower row-major triangle from the upper one
/// (each written entry reads one that is never written).
__global__ void mirror_inplace_kernel(float *m, int64_t d, int *bad) {
  const int64_t n = d * d, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    const int64_t i = k / d, j = k % d;
    const float v = i <= j ? m[k] : m[j * d + i];
    if (!isfinite(v))
      atomicAdd(bad, 1);
    if (i > j)
      m[k] = v;
  }
}

/// What the queued inversions keep (kfac_inverse_reserve .. _finish): their
/// own stream, solver handle, work area and, per slot (a layer), status
/// words and damping, so nothing they touch is shared with the compute
/// stream's work meanwhile; per factor (2 slot + f) an event that follows
/// its inversion and, when timed, its anchor, start and end.
struct AsyncRefresh {
  cudaStream_t side = nullptr;
  cusolverDnHandle_t solver = nullptr;
  DeviceBuffer<int> status;     // per slot: A's potrf, potrs, non-finite; G's
  DeviceBuffer<double> damping; // per slot: pi, a, g
  DeviceBuffer<float> work;     // cuSOLVER's, the largest factor's
  DeviceBuffer<float> factor;   // the damped factor, then its Cholesky factor
                                // (one: the side stream runs one at a time)
  std::vector<cudaEvent_t> ready, done;        // per factor
  std::vector<cudaEvent_t> anchor, start, end; // per factor, when timed
  std::vector<bool> timed;                     // per factor
  // Per factor, under `mu`: its last launch's task has queued its work
  // (cleared by the launch, set at the task's end, even a failed one).
  std::vector<bool> posted;
  // The side stream's work is queued by a host thread of its own, task by
  // task in launch order: queueing it from the program's thread held that
  // thread (a refresh step measured as long at K = 20 as at K = 10, ~48 ms),
  // most likely in the solver's host-side part, and a launch now sits between
  // the stages' calls. An exception of a task is rethrown on the program's
  // thread by the next launch or finish (escaping the thread it would end
  // the program without its one-line message; a failed CUDA check reports
  // its line and aborts itself, from either thread).
  std::thread queuer;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  bool busy = false;
  std::exception_ptr failure;
  int device = 0;

  /// Rethrows a task's exception (`mu` held).
  void rethrow_failure() {
    if (failure)
      std::rethrow_exception(std::exchange(failure, nullptr));
  }

  /// Waits until every task is queued on the side stream; rethrows a
  /// task's exception.
  void idle() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return tasks.empty() && !busy; });
    rethrow_failure();
  }

  /// Waits until the tasks of these factors are queued on the side stream
  /// (not the other layers'); rethrows a task's exception.
  void posted_all(const std::vector<size_t> &factors) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] {
      return std::all_of(factors.begin(), factors.end(),
                         [&](size_t k) { return bool(posted[k]); });
    });
    rethrow_failure();
  }

  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      tasks.push_back(std::move(task));
    }
    cv.notify_all();
  }

  void run() {
    AUTODDL_CUDA_CHECK(cudaSetDevice(device));
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return !tasks.empty(); });
      std::function<void()> task = std::move(tasks.front());
      tasks.pop_front();
      busy = true;
      lock.unlock();
      try {
        task();
      } catch (...) {
        lock.lock();
        failure = std::current_exception();
        lock.unlock();
      }
      lock.lock();
      busy = false;
      cv.notify_all();
    }
  }

  void init() {
    if (side)
      return;
    int least = 0, greatest = 0;
    AUTODDL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // The lowest priority (the default streams' too): never ahead of the
    // step's own work.
    AUTODDL_CUDA_CHECK(
        cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, least));
    AUTODDL_CUSOLVER_CHECK(cusolverDnCreate(&solver));
    AUTODDL_CUSOLVER_CHECK(cusolverDnSetStream(solver, side));
    AUTODDL_CUDA_CHECK(cudaGetDevice(&device));
    // Never joined: the state lives as long as the process (as the
    // workspaces), the thread asleep in its wait at exit.
    queuer = std::thread([this] { run(); });
  }

  /// Events for `factors` factors (created on the program's thread).
  void grow_events(int64_t factors) {
    auto more = [&](std::vector<cudaEvent_t> &v, unsigned flags) {
      while (int64_t(v.size()) < factors) {
        cudaEvent_t e;
        AUTODDL_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
        v.push_back(e);
      }
    };
    more(ready, cudaEventDisableTiming);
    more(done, cudaEventDisableTiming);
    more(anchor, cudaEventDefault);
    more(start, cudaEventDefault);
    more(end, cudaEventDefault);
    timed.resize(size_t(factors), false);
    std::lock_guard<std::mutex> lock(mu);
    posted.resize(size_t(factors), true); // nothing launched
  }
};
AsyncRefresh &async_refresh() {
  static auto *a = new AsyncRefresh(); // never destroyed (as the workspaces)
  return *a;
}

} // namespace

void kfac_inverse_reserve(const KfacLayer *layers, int64_t n) {
  AsyncRefresh &a = async_refresh();
  a.init();
  a.idle();
  AUTODDL_CUDA_CHECK(cudaStreamSynchronize(a.side)); // nothing in flight
  int64_t lwork = 1, largest = 1;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d : {layers[i].in, layers[i].out}) {
      largest = std::max(largest, d * d);
      if (d > INT_MAX / 2)
        throw std::invalid_argument("kfac: factor dimension " +
                                    std::to_string(d) +
                                    " is too large for cuSOLVER's int");
      lwork = std::max<int64_t>(
          lwork, work_size(a.solver, int(d),
                           const_cast<float *>(layers[i].A_next.data())));
    }
  if (a.work.size() < lwork)
    a.work = DeviceBuffer<float>(lwork);
  if (a.factor.size() < largest)
    a.factor = DeviceBuffer<float>(largest);
  if (a.status.size() < 6 * n)
    a.status = DeviceBuffer<int>(std::max<int64_t>(6 * n, 6));
  if (a.damping.size() < 3 * n)
    a.damping = DeviceBuffer<double>(std::max<int64_t>(3 * n, 3));
  a.grow_events(2 * n);
}

void kfac_inverse_launch(KfacLayer &l, int64_t slot, int f, double damping,
                         bool damp, bool timed) {
  AsyncRefresh &a = async_refresh();
  const int64_t k = 2 * slot + f;
  if (!a.side || k >= int64_t(a.ready.size()))
    throw std::logic_error("kfac_inverse_launch: slot " + std::to_string(slot) +
                           " was not reserved");
  {
    std::lock_guard<std::mutex> lock(a.mu);
    a.rethrow_failure();
    a.posted[size_t(k)] = false;
  }
  // After the compute stream's work so far: the factor's reduction.
  AUTODDL_CUDA_CHECK(cudaEventRecord(a.ready[size_t(k)], compute_stream()));
  a.timed[size_t(k)] = timed;
  if (timed)
    AUTODDL_CUDA_CHECK(cudaEventRecord(a.anchor[size_t(k)], compute_stream()));
  const int64_t d = f ? l.out : l.in;
  float *m = f ? l.G_next.data() : l.A_next.data();
  const float *F = f ? l.G.data() : l.A.data();
  const float *A = l.A.data(), *G = l.G.data();
  const int64_t in = l.in, out = l.out;
  auto queue = [&a, k, slot, f, d, m, F, A, G, in, out, damping, damp, timed] {
    AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(a.side, a.ready[size_t(k)], 0));
    double *dp = a.damping.data() + 3 * slot;
    if (damp) { // the layer's first factor this refresh: pi from both
      damping_kernel<<<1, 256, 0, a.side>>>(A, in, G, out, damping, dp);
      AUTODDL_CUDA_CHECK_LAUNCH();
    }
    int *words = a.status.data() + 3 * k;
    AUTODDL_CUDA_CHECK(cudaMemsetAsync(words, 0, 3 * sizeof(int), a.side));
    if (timed)
      AUTODDL_CUDA_CHECK(cudaEventRecord(a.start[size_t(k)], a.side));
    const int n = int(d);
    const unsigned grid = detail::grid_for(d * d, 256);
    float *factor = a.factor.data();
    load_damped_at_kernel<<<grid, 256, 0, a.side>>>(factor, F, d, dp + 1 + f,
                                                    words + 2);
    AUTODDL_CUDA_CHECK_LAUNCH();
    cholesky_solve_inverse<float>(a.solver, a.side, n, factor, m, a.work.data(),
                                  int(a.work.size()), words);
    mirror_inplace_kernel<<<grid, 256, 0, a.side>>>(m, d, words + 2);
    AUTODDL_CUDA_CHECK_LAUNCH();
    if (timed)
      AUTODDL_CUDA_CHECK(cudaEventRecord(a.end[size_t(k)], a.side));
    AUTODDL_CUDA_CHECK(cudaEventRecord(a.done[size_t(k)], a.side));
  };
  // The factor posted at the task's end, a failed one too (its exception
  // kept first, for the finish that waits on it).
  a.post([&a, k, queue] {
    std::exception_ptr error;
    try {
      queue();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(a.mu);
      if (error)
        a.failure = error;
      a.posted[size_t(k)] = true;
    }
    a.cv.notify_all();
  });
}

void kfac_inverse_finish(KfacLayer *const *layers, const int64_t *slots,
                         int64_t n, KfacInverseOutcome *outcomes,
                         KfacSpan *spans) {
  if (n == 0)
    return;
  AsyncRefresh &a = async_refresh();
  // These factors' launches queued, their `done` recorded (other layers'
  // tasks may still wait in the queue).
  std::vector<size_t> factors;
  for (int64_t i = 0; i < n; ++i)
    for (int f = 0; f < 2; ++f)
      factors.push_back(size_t(2 * slots[i] + f));
  a.posted_all(factors);
  // Usually long done: the side stream ran beside the steps since.
  for (int64_t i = 0; i < n; ++i)
    for (int f = 0; f < 2; ++f)
      AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(
          compute_stream(), a.done[size_t(2 * slots[i] + f)], 0));
  // The whole arrays in one copy each; only these slots' words are read
  // (the others' inversions may still be running).
  std::vector<int> status(size_t(a.status.size()));
  std::vector<double> damp(size_t(a.damping.size()));
  copy_to_host(status.data(), a.status.data(),
               int64_t(status.size() * sizeof(int)));
  copy_to_host(damp.data(), a.damping.data(),
               int64_t(damp.size() * sizeof(double)));
  for (int64_t i = 0; i < n; ++i) {
    KfacLayer &l = *layers[i];
    const size_t s = size_t(slots[i]);
    l.damping = {damp[3 * s], damp[3 * s + 1], damp[3 * s + 2]};
    struct Factor {
      float *next;
      const float *F;
      int64_t d;
      double diag;
      bool previous, *next_valid;
    } factors[2] = {{l.A_next.data(), l.A.data(), l.in, l.damping.a, l.a_valid,
                     &l.a_next_valid},
                    {l.G_next.data(), l.G.data(), l.out, l.damping.g, l.g_valid,
                     &l.g_next_valid}};
    for (int f = 0; f < 2; ++f) {
      const size_t k = 2 * s + size_t(f);
      const int *w = status.data() + 3 * k;
      const bool ok32 = w[0] == 0 && w[1] == 0 && w[2] == 0;
      const Factor &x = factors[f];
      const bool ok64 =
          !ok32 && kfac_cholesky_inverse_fp64(x.next, x.F, x.d, x.diag);
      *x.next_valid = ok32 || ok64;
      outcomes[2 * i + f] = kfac_inverse_outcome(ok32, ok64, x.previous);
      KfacSpan span; // the `done` events above are complete, so these too
      if (spans && a.timed[k]) {
        AUTODDL_CUDA_CHECK(
            cudaEventElapsedTime(&span.start_ms, a.anchor[k], a.start[k]));
        AUTODDL_CUDA_CHECK(
            cudaEventElapsedTime(&span.dur_ms, a.start[k], a.end[k]));
      }
      if (spans)
        spans[2 * i + f] = span;
    }
  }
}

void kfac_refresh_drain() {
  AsyncRefresh &a = async_refresh();
  if (!a.side)
    return;
  a.idle();
  AUTODDL_CUDA_CHECK(cudaStreamSynchronize(a.side));
}

bool kfac_cholesky_inverse(float *inv, const float *F, int64_t d, double diag) {
  return cholesky_inverse<float>(inv, F, d, diag, kInverse);
}

bool kfac_cholesky_inverse_fp64(float *inv, const float *F, int64_t d,
                                double diag) {
  return cholesky_inverse<double>(inv, F, d, diag, kFp64);
}

KfacInverseOutcome kfac_invert_factor(float *inv, const float *F, int64_t d,
                                      double diag, bool has_previous) {
  // Into a copy: a failed attempt must leave the previous inverse in place.
  auto *tmp =
      static_cast<float *>(workspace(kProduct, d * d * int64_t(sizeof(float))));
  const bool ok32 = kfac_cholesky_inverse(tmp, F, d, diag);
  const bool ok64 = !ok32 && kfac_cholesky_inverse_fp64(tmp, F, d, diag);
  if (ok32 || ok64)
    AUTODDL_CUDA_CHECK(cudaMemcpyAsync(inv, tmp, size_t(d * d) * sizeof(float),
                                       cudaMemcpyDeviceToDevice,
                                       compute_stream()));
  return kfac_inverse_outcome(ok32, ok64, has_previous);
}

void kfac_set_damping(KfacLayer &l, double damping) {
  l.damping = kfac_damping(trace(l.A.data(), l.in), l.in,
                           trace(l.G.data(), l.out), l.out, damping);
}

void kfac_zero_factors(KfacLayer &l) {
  zero(l.A.data(), l.in * l.in * int64_t(sizeof(float)));
  zero(l.G.data(), l.out * l.out * int64_t(sizeof(float)));
}

} // namespace autoddl::rt
