// Damped factor inverses on the GPU (Kfac.h): cuSOLVER Cholesky (potrf +
// potri) in fp32, the fp64 retry, the keep-previous policy of KfacRules.h, the
// refresh of a layer, and the asynchronous refresh on a side stream.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kfac/Kfac.h"
#include "backends/cuda/kfac/KfacInternal.cuh"

#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <exception>
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

/// Status words on the device: potrf's info, potri's info, a non-finite
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

/// inv (fp32) = the symmetric matrix whose row-major upper triangle potri
/// wrote (its column-major lower one); counts non-finite results.
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
void potri(cusolverDnHandle_t h, int n, float *a, float *work, int lwork,
           int *info) {
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnSpotri(h, CUBLAS_FILL_MODE_LOWER, n, a, n, work, lwork, info));
}
void potri(cusolverDnHandle_t h, int n, double *a, double *work, int lwork,
           int *info) {
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnDpotri(h, CUBLAS_FILL_MODE_LOWER, n, a, n, work, lwork, info));
}
int work_size(cusolverDnHandle_t h, int n, float *a) {
  int lf = 0, li = 0;
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, &lf));
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnSpotri_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, &li));
  return lf > li ? lf : li;
}
int work_size(cusolverDnHandle_t h, int n, double *a) {
  int lf = 0, li = 0;
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, &lf));
  AUTODDL_CUSOLVER_CHECK(
      cusolverDnDpotri_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, &li));
  return lf > li ? lf : li;
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
  potrf(h, n, m, work, lwork, words);
  potri(h, n, m, work, lwork, words + 1);
  mirror_kernel<T><<<grid, 256, 0, compute_stream()>>>(inv, m, d, words + 2);
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

/// What the asynchronous refresh keeps between launch and finish: its own
/// stream, solver handle, status words and work area, so nothing it touches
/// is shared with the compute stream's work meanwhile.
struct AsyncRefresh {
  cudaStream_t side = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
  cusolverDnHandle_t solver = nullptr;
  DeviceBuffer<int> status;     // per factor: potrf, potri, non-finite
  DeviceBuffer<double> damping; // per layer: pi, a, g
  DeviceBuffer<float> work;     // cuSOLVER's, the largest factor's
  bool launched = false;
  // --trace: an anchor on the compute stream and, per factor, a start and an
  // end event on the side stream (timing events, created on first use).
  bool timed = false;
  cudaEvent_t anchor = nullptr;
  std::vector<cudaEvent_t> marks;
  std::vector<KfacSpan> spans;
  // Queues the work from its own host thread: queueing it from the
  // program's thread held that thread (a refresh step measured as long at
  // K = 20 as at K = 10, ~48 ms), most likely in potri's host-side part.
  std::thread queuer;
  // An exception of the queuing thread, rethrown on the program's thread by
  // join(): escaping the thread it would end the program without its
  // one-line message. (A failed CUDA check reports its line and aborts
  // itself, from either thread.)
  std::exception_ptr failure;

  void join() {
    if (queuer.joinable())
      queuer.join();
    if (failure)
      std::rethrow_exception(std::exchange(failure, nullptr));
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
    AUTODDL_CUDA_CHECK(
        cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    AUTODDL_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    AUTODDL_CUSOLVER_CHECK(cusolverDnCreate(&solver));
    AUTODDL_CUSOLVER_CHECK(cusolverDnSetStream(solver, side));
  }
};
AsyncRefresh &async_refresh() {
  static auto *a = new AsyncRefresh(); // never destroyed (as the workspaces)
  return *a;
}

/// Queues F's damped fp32 inverse into m (in place) on a.side, between
/// marks[0] and marks[1] when the refresh is timed.
void launch_inverse(AsyncRefresh &a, float *m, const float *F, int64_t d,
                    const double *diag, int *words, const cudaEvent_t *marks) {
  const int n = int(d);
  if (a.timed)
    AUTODDL_CUDA_CHECK(cudaEventRecord(marks[0], a.side));
  const unsigned grid = detail::grid_for(d * d, 256);
  load_damped_at_kernel<<<grid, 256, 0, a.side>>>(m, F, d, diag, words + 2);
  AUTODDL_CUDA_CHECK_LAUNCH();
  const int lwork = int(a.work.size());
  potrf(a.solver, n, m, a.work.data(), lwork, words);
  potri(a.solver, n, m, a.work.data(), lwork, words + 1);
  mirror_inplace_kernel<<<grid, 256, 0, a.side>>>(m, d, words + 2);
  AUTODDL_CUDA_CHECK_LAUNCH();
  if (a.timed)
    AUTODDL_CUDA_CHECK(cudaEventRecord(marks[1], a.side));
}

} // namespace

void kfac_refresh_launch(KfacLayer *const *layers, int64_t n, double damping,
                         bool timed) {
  if (n == 0) // a rank holding no K-FAC layer
    return;
  AsyncRefresh &a = async_refresh();
  a.init();
  a.join();
  AUTODDL_CUDA_CHECK(cudaStreamSynchronize(a.side)); // a previous one's done
  int64_t lwork = 1;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d : {layers[i]->in, layers[i]->out}) {
      if (d > INT_MAX / 2)
        throw std::invalid_argument("kfac: factor dimension " +
                                    std::to_string(d) +
                                    " is too large for cuSOLVER's int");
      lwork = std::max<int64_t>(
          lwork, work_size(a.solver, int(d), layers[i]->A_next.data()));
    }
  // Grown only here, with the side stream idle (first refresh).
  if (a.work.size() < lwork)
    a.work = DeviceBuffer<float>(lwork);
  if (a.status.size() < 6 * n)
    a.status = DeviceBuffer<int>(6 * n);
  if (a.damping.size() < 3 * n)
    a.damping = DeviceBuffer<double>(3 * n);
  a.timed = timed;
  if (timed) {
    // Created here, on the program's thread, before the queuer records them.
    if (!a.anchor)
      AUTODDL_CUDA_CHECK(cudaEventCreate(&a.anchor));
    while (int64_t(a.marks.size()) < 4 * n) {
      cudaEvent_t e;
      AUTODDL_CUDA_CHECK(cudaEventCreate(&e));
      a.marks.push_back(e);
    }
    AUTODDL_CUDA_CHECK(cudaEventRecord(a.anchor, compute_stream()));
  }
  AUTODDL_CUDA_CHECK(cudaEventRecord(a.ready, compute_stream()));
  AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(a.side, a.ready, 0));
  int device = 0;
  AUTODDL_CUDA_CHECK(cudaGetDevice(&device));
  // The layers stay put (the caller's table); the list is copied.
  a.queuer = std::thread(
      [&a, device, damping, ls = std::vector<KfacLayer *>(layers, layers + n)] {
        try {
          AUTODDL_CUDA_CHECK(cudaSetDevice(device));
          const int64_t count = int64_t(ls.size());
          AUTODDL_CUDA_CHECK(cudaMemsetAsync(
              a.status.data(), 0, size_t(6 * count) * sizeof(int), a.side));
          for (int64_t i = 0; i < count; ++i) {
            KfacLayer &l = *ls[size_t(i)];
            double *dp = a.damping.data() + 3 * i;
            damping_kernel<<<1, 256, 0, a.side>>>(l.A.data(), l.in, l.G.data(),
                                                  l.out, damping, dp);
            AUTODDL_CUDA_CHECK_LAUNCH();
            int *words = a.status.data() + 6 * i;
            const cudaEvent_t *marks = a.marks.data() + 4 * i;
            launch_inverse(a, l.A_next.data(), l.A.data(), l.in, dp + 1, words,
                           marks);
            launch_inverse(a, l.G_next.data(), l.G.data(), l.out, dp + 2,
                           words + 3, marks + 2);
          }
          AUTODDL_CUDA_CHECK(cudaEventRecord(a.done, a.side));
        } catch (...) {
          a.failure = std::current_exception();
        }
      });
  a.launched = true;
}

bool kfac_refresh_finish(KfacLayer *const *layers, int64_t n,
                         KfacInverseOutcome *outcomes) {
  AsyncRefresh &a = async_refresh();
  if (!a.launched)
    return false;
  a.launched = false;
  a.join(); // everything queued, `done` recorded
  // Usually long done: the side stream ran beside the steps since.
  AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(compute_stream(), a.done, 0));
  std::vector<int> status(size_t(6 * n));
  std::vector<double> damp(size_t(3 * n));
  copy_to_host(status.data(), a.status.data(), 6 * n * int64_t(sizeof(int)));
  copy_to_host(damp.data(), a.damping.data(), 3 * n * int64_t(sizeof(double)));
  // The side stream's events are complete: `done` follows them, and the
  // copies above waited for it.
  a.spans.clear();
  for (int64_t k = 0; a.timed && k < 2 * n; ++k) {
    KfacSpan span;
    const cudaEvent_t *m = a.marks.data() + 2 * k;
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&span.start_ms, a.anchor, m[0]));
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&span.dur_ms, m[0], m[1]));
    a.spans.push_back(span);
  }
  for (int64_t i = 0; i < n; ++i) {
    KfacLayer &l = *layers[i];
    l.damping = {damp[size_t(3 * i)], damp[size_t(3 * i + 1)],
                 damp[size_t(3 * i + 2)]};
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
      const int *w = status.data() + 6 * i + 3 * f;
      const bool ok32 = w[0] == 0 && w[1] == 0 && w[2] == 0;
      const Factor &x = factors[f];
      const bool ok64 =
          !ok32 && kfac_cholesky_inverse_fp64(x.next, x.F, x.d, x.diag);
      *x.next_valid = ok32 || ok64;
      outcomes[2 * i + f] = kfac_inverse_outcome(ok32, ok64, x.previous);
    }
  }
  return true;
}

std::vector<KfacSpan> kfac_refresh_spans() { return async_refresh().spans; }

void kfac_refresh_drain() {
  AsyncRefresh &a = async_refresh();
  a.join();
  if (a.side)
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

void kfac_refresh(KfacLayer &l, const KfacConfig &c, KfacStats &stats) {
  kfac_set_damping(l, c.damping);
  const KfacInverseOutcome oa = kfac_invert_factor(
      l.A_inv.data(), l.A.data(), l.in, l.damping.a, l.a_valid);
  const KfacInverseOutcome og = kfac_invert_factor(
      l.G_inv.data(), l.G.data(), l.out, l.damping.g, l.g_valid);
  kfac_record_refresh(oa, og, l.a_valid, l.g_valid, stats);
  zero(l.A.data(), l.in * l.in * int64_t(sizeof(float)));
  zero(l.G.data(), l.out * l.out * int64_t(sizeof(float)));
}

} // namespace autoddl::rt
