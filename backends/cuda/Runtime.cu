// The CUDA runtime: checked-call failure path, compute stream, cuBLASLt
// handle, counted device allocations, copies (Runtime.h).
#include "backends/cuda/Runtime.h"
#include "backends/cuda/kernels/Common.cuh"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace autoddl::rt {
namespace {
std::atomic<int> gRank{-1};
std::atomic<void (*)(const char *)> gFaultHook{nullptr};
std::atomic<int64_t> gCurrentBytes{0};
std::atomic<int64_t> gPeakBytes{0};
std::atomic<int64_t> gPeakUsedBytes{0};
std::atomic<const char *> gAllocContext{"a runtime buffer"};
std::atomic<double> gPredictedPeak{0};

/// An allocation that does not fit: one line with the rank, the allocation,
/// what is held and the plan's prediction, then the fault path (the comm
/// layer aborts the communicators and MPI: no rank waits on this one), and a
/// non-zero exit. Nothing is checkpointed.
[[noreturn]] void out_of_memory(int64_t bytes, cudaError_t err) {
  size_t free = 0, total = 0;
  (void)cudaGetLastError(); // clear the sticky-free error state of the call
  (void)cudaMemGetInfo(&free, &total);
  char what[768];
  const double gib = double(1 << 30), predicted = gPredictedPeak.load();
  char pred[96] = "no prediction known";
  if (predicted > 0)
    std::snprintf(pred, sizeof pred, "the plan predicted a peak of %.2f GiB",
                  predicted / gib);
  std::snprintf(what, sizeof what,
                "%s: out of device memory allocating %lld bytes (%.2f GiB) for "
                "%s, with %.2f GiB allocated by the program and %.2f of %.2f "
                "GiB in use on the device; %s",
                cudaGetErrorName(err), static_cast<long long>(bytes),
                double(bytes) / gib, gAllocContext.load(),
                double(gCurrentBytes.load()) / gib, double(total - free) / gib,
                double(total) / gib, pred);
  cuda_fail(what, "cudaMalloc", __FILE__, __LINE__);
}
} // namespace

void cuda_fail(const char *what, const char *call, const char *file, int line) {
  char message[1024];
  const int rank = gRank.load();
  if (rank >= 0)
    std::snprintf(message, sizeof message,
                  "autoddl: rank %d: CUDA error %s in %s at %s:%d", rank, what,
                  call, file, line);
  else
    std::snprintf(message, sizeof message,
                  "autoddl: CUDA error %s in %s at %s:%d", what, call, file,
                  line);
  std::fprintf(stderr, "%s\n", message);
  std::fflush(stderr);
  // The hook runs once: a failure inside it (a CUDA call during the abort of
  // the communicators) must not recurse.
  if (auto *hook = gFaultHook.exchange(nullptr))
    hook(message);
  std::abort();
}

namespace detail {
namespace {
/// The counted peak is at least `now` bytes.
void raise_peak(int64_t now) {
  int64_t peak = gPeakBytes.load();
  bool raised = false;
  while (now > peak &&
         !(raised = gPeakBytes.compare_exchange_weak(peak, now))) {
  }
  if (raised) { // the device's use at the counted peak (a host call, no sync)
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess)
      gPeakUsedBytes.store(int64_t(total - free));
  }
}
} // namespace

void cuda_fail_error(cudaError_t err, const char *call, const char *file,
                     int line) {
  char what[512];
  std::snprintf(what, sizeof what, "%s (%s)", cudaGetErrorName(err),
                cudaGetErrorString(err));
  cuda_fail(what, call, file, line);
}

void *device_alloc(int64_t bytes) {
  void *p = nullptr;
  const cudaError_t err = cudaMalloc(&p, size_t(bytes));
  if (err == cudaErrorMemoryAllocation)
    out_of_memory(bytes, err);
  if (err != cudaSuccess)
    cuda_fail_error(err, "cudaMalloc(&p, size_t(bytes))", __FILE__, __LINE__);
  // Zero on the compute stream and wait, so that work on any stream sees the
  // zeros (the compute stream does not synchronise with the legacy stream).
  AUTODDL_CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(bytes), compute_stream()));
  AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
  count_held_bytes(bytes);
  return p;
}

void count_held_bytes(int64_t delta) {
  const int64_t now = gCurrentBytes.fetch_add(delta) + delta;
  if (delta > 0)
    raise_peak(now);
}

void count_transient_bytes(int64_t bytes) {
  raise_peak(gCurrentBytes.load() + bytes);
}

void device_free(void *ptr, int64_t bytes) {
  count_held_bytes(-bytes);
  const cudaError_t err = cudaFree(ptr);
  // At process exit the runtime may be unloaded before static buffers die.
  if (err != cudaSuccess && err != cudaErrorCudartUnloading)
    cuda_fail_error(err, "cudaFree(ptr)", __FILE__, __LINE__);
}

namespace {
int current_device_attribute(cudaDeviceAttr attr) {
  int device = 0, n = 0;
  AUTODDL_CUDA_CHECK(cudaGetDevice(&device));
  AUTODDL_CUDA_CHECK(cudaDeviceGetAttribute(&n, attr, device));
  return n;
}
} // namespace

int sm_count() {
  static const int count =
      current_device_attribute(cudaDevAttrMultiProcessorCount);
  return count;
}

int64_t l2_cache_bytes() {
  static const int64_t bytes = current_device_attribute(cudaDevAttrL2CacheSize);
  return bytes;
}

void *scratch(int slot, int64_t bytes) {
  constexpr int kSlots = 4;
  // Never destroyed: nothing may free device memory after the runtime unloads.
  static auto *buffers = new DeviceBuffer<unsigned char>[kSlots];
  if (slot < 0 || slot >= kSlots)
    cuda_fail("cudaErrorInvalidValue (bad scratch slot)", "scratch", __FILE__,
              __LINE__);
  if (buffers[slot].size() < bytes) {
    AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
    buffers[slot] = DeviceBuffer<unsigned char>(bytes);
  }
  return buffers[slot].data();
}
} // namespace detail

const char *cublas_status_name(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR:
    return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR:
    return "CUBLAS_STATUS_LICENSE_ERROR";
  default:
    return "CUBLAS_STATUS_UNKNOWN";
  }
}

void set_fault_hook(void (*hook)(const char *message)) { gFaultHook = hook; }
void set_rank_for_messages(int rank) { gRank = rank; }

cudaStream_t compute_stream() {
  static const cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    AUTODDL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

namespace {
struct CublasLt {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer<unsigned char> workspace;
  CublasLt() {
    AUTODDL_CUBLAS_CHECK(cublasLtCreate(&handle));
    workspace = DeviceBuffer<unsigned char>(kCublasLtWorkspaceBytes);
  }
};
CublasLt &cublaslt_state() {
  // Never destroyed: cuBLASLt must not be torn down after the CUDA runtime.
  static CublasLt *state = new CublasLt();
  return *state;
}
} // namespace

cublasLtHandle_t cublaslt() { return cublaslt_state().handle; }
void *cublaslt_workspace() { return cublaslt_state().workspace.data(); }

void select_device(int local_rank) {
  AUTODDL_CUDA_CHECK(cudaSetDevice(local_rank));
}

void zero(void *ptr, int64_t bytes) {
  if (bytes > 0)
    AUTODDL_CUDA_CHECK(
        cudaMemsetAsync(ptr, 0, size_t(bytes), compute_stream()));
}

namespace {
constexpr int kZeroThreads = 256;

/// Block b zeroes chunk (b - first_block) of the range whose block span holds
/// b (binary search over the ranges' first blocks): 16-byte stores over the
/// chunk's aligned middle, byte stores at its ends.
__global__ void __launch_bounds__(kZeroThreads)
    zero_set_kernel(const ZeroSet::Range *ranges, int64_t count) {
  const int64_t b = blockIdx.x;
  int64_t lo = 0, hi = count - 1;
  while (lo < hi) { // the last range with first_block <= b
    const int64_t mid = (lo + hi + 1) / 2;
    if (ranges[mid].first_block <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  const ZeroSet::Range r = ranges[lo];
  const int64_t off = (b - r.first_block) * ZeroSet::kChunkBytes;
  if (off >= r.bytes)
    return;
  const int64_t len = min(ZeroSet::kChunkBytes, r.bytes - off);
  unsigned char *p = r.ptr + off;
  const int64_t head =
      min(len, int64_t((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15));
  const int64_t vecs = (len - head) / 16;
  uint4 *v = reinterpret_cast<uint4 *>(p + head);
  for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x)
    v[i] = make_uint4(0, 0, 0, 0);
  const int64_t tail0 = head + vecs * 16;
  for (int64_t i = threadIdx.x; i < head; i += blockDim.x)
    p[i] = 0;
  for (int64_t i = tail0 + threadIdx.x; i < len; i += blockDim.x)
    p[i] = 0;
}
} // namespace

void ZeroSet::add(void *ptr, int64_t bytes) {
  if (sealed_)
    cuda_fail("cudaErrorInvalidValue (ZeroSet::add after seal)", "ZeroSet::add",
              __FILE__, __LINE__);
  if (!ptr || bytes <= 0)
    return;
  host_.push_back({static_cast<unsigned char *>(ptr), bytes, blocks_});
  blocks_ += (bytes + kChunkBytes - 1) / kChunkBytes;
}

void ZeroSet::seal() {
  sealed_ = true;
  if (host_.empty())
    return;
  table_ = DeviceBuffer<Range>(int64_t(host_.size()));
  copy_to_device(table_.data(), host_.data(),
                 int64_t(host_.size() * sizeof(Range)));
}

void ZeroSet::zero() {
  if (!sealed_)
    cuda_fail("cudaErrorInvalidValue (ZeroSet::zero before seal)",
              "ZeroSet::zero", __FILE__, __LINE__);
  if (blocks_ == 0)
    return;
  zero_set_kernel<<<unsigned(blocks_), kZeroThreads, 0, compute_stream()>>>(
      table_.data(), int64_t(host_.size()));
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void copy_on_device(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0)
    AUTODDL_CUDA_CHECK(cudaMemcpyAsync(
        dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, compute_stream()));
}

namespace {
// A copy between host and device on the compute stream, waited for.
void copy_synchronously(void *dst, const void *src, int64_t bytes,
                        cudaMemcpyKind kind) {
  if (bytes <= 0)
    return;
  AUTODDL_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, size_t(bytes), kind, compute_stream()));
  AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
}
} // namespace

void copy_to_device(void *dst, const void *src, int64_t bytes) {
  copy_synchronously(dst, src, bytes, cudaMemcpyHostToDevice);
}

void copy_to_host(void *dst, const void *src, int64_t bytes) {
  copy_synchronously(dst, src, bytes, cudaMemcpyDeviceToHost);
}

void synchronize() {
  AUTODDL_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
}

int64_t peak_device_bytes() { return gPeakBytes.load(); }
int64_t current_device_bytes() { return gCurrentBytes.load(); }
int64_t peak_device_used_bytes() { return gPeakUsedBytes.load(); }
void set_allocation_context(const char *what) { gAllocContext = what; }
const char *allocation_context() { return gAllocContext.load(); }
void set_predicted_peak_bytes(double bytes) { gPredictedPeak = bytes; }

} // namespace autoddl::rt
