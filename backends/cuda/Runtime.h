// The CUDA runtime of generated programs (docs/runtime.md, "CUDA runtime"):
// element types, checked calls, the compute stream, the cuBLASLt handle and
// device buffers. The kernels in backends/cuda/kernels/ keep the names and the
// argument order of the CPU kernels (backends/cpu/kernels/*.h) with device
// pointers, so one generator emits both backends.
//
// Precision: activations, activation gradients and the working copies of
// parameters are act_t (bf16; fp32 under AUTODDL_FP32); master weights,
// parameter gradients, optimizer state, norm statistics, log-sum-exps and
// losses are fp32. Every kernel computes in fp32.
#ifndef AUTODDL_BACKENDS_CUDA_RUNTIME_H
#define AUTODDL_BACKENDS_CUDA_RUNTIME_H

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace autoddl::rt {

#ifdef AUTODDL_FP32
using act_t = float; // the --fp32 build: matches the CPU backend tightly
#else
using act_t = __nv_bfloat16; // activations, their gradients, weight copies
#endif

/// Prints "autoddl: rank R: CUDA error <what> in <call> at file:line" on
/// stderr, runs the fault hook (the comm layer's ncclCommAbort + MPI_Abort),
/// then abort()s. Never returns.
[[noreturn]] void cuda_fail(const char *what, const char *call,
                            const char *file, int line);
/// Message text of a cublasStatus_t ("CUBLAS_STATUS_...").
const char *cublas_status_name(cublasStatus_t status);
/// Installs the hook cuda_fail runs before abort() (null: none).
void set_fault_hook(void (*hook)(const char *message));
/// The rank named in error messages (-1, the default: no rank known).
void set_rank_for_messages(int rank);

/// Checks a cudaError_t expression.
#define AUTODDL_CUDA_CHECK(x)                                                  \
  do {                                                                         \
    const cudaError_t autoddl_err_ = (x);                                      \
    if (autoddl_err_ != cudaSuccess)                                           \
      ::autoddl::rt::detail::cuda_fail_error(autoddl_err_, #x, __FILE__,       \
                                             __LINE__);                        \
  } while (0)
/// Checks a cublasStatus_t expression.
#define AUTODDL_CUBLAS_CHECK(x)                                                \
  do {                                                                         \
    const cublasStatus_t autoddl_st_ = (x);                                    \
    if (autoddl_st_ != CUBLAS_STATUS_SUCCESS)                                  \
      ::autoddl::rt::cuda_fail(::autoddl::rt::cublas_status_name(autoddl_st_), \
                               #x, __FILE__, __LINE__);                        \
  } while (0)
/// Checks the last kernel launch (launch configuration errors).
#define AUTODDL_CUDA_CHECK_LAUNCH() AUTODDL_CUDA_CHECK(cudaGetLastError())

namespace detail {
/// cuda_fail with "cudaErrorX (message)" as `what`.
[[noreturn]] void cuda_fail_error(cudaError_t err, const char *call,
                                  const char *file, int line);
void *device_alloc(int64_t bytes); // zero-filled, counted in peak bytes
void device_free(void *ptr, int64_t bytes);
/// Counts `delta` bytes held (< 0: released) by memory a library allocates
/// itself (the W8 formats of backends/cuda/sparse), as device_alloc counts
/// its own, so that peak_device_bytes() is every byte the program holds.
void count_held_bytes(int64_t delta);
/// Raises the peak to the bytes held now plus `bytes` that a library call
/// held and freed before it returned (the W8 builder's scratch).
void count_transient_bytes(int64_t bytes);
} // namespace detail

/// Bytes counted with detail::count_held_bytes for as long as this lives
/// (move-only: the bytes move with the memory they stand for).
class HeldBytes {
public:
  HeldBytes() = default;
  explicit HeldBytes(int64_t n) : n_(n) { detail::count_held_bytes(n); }
  HeldBytes(const HeldBytes &) = delete;
  HeldBytes &operator=(const HeldBytes &) = delete;
  HeldBytes(HeldBytes &&o) noexcept : n_(std::exchange(o.n_, 0)) {}
  HeldBytes &operator=(HeldBytes &&o) noexcept {
    if (this != &o) {
      detail::count_held_bytes(-n_);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~HeldBytes() { detail::count_held_bytes(-n_); }
  int64_t bytes() const { return n_; }

private:
  int64_t n_ = 0;
};

/// The stream every kernel launches on (created on first use, non-blocking).
cudaStream_t compute_stream();
/// One cuBLASLt handle per process.
cublasLtHandle_t cublaslt();
/// Its 32 MiB workspace (device memory, allocated with the handle).
void *cublaslt_workspace();
constexpr int64_t kCublasLtWorkspaceBytes = int64_t(32) << 20;
/// cudaSetDevice(local_rank); called by the comm layer before anything else.
void select_device(int local_rank);

/// A move-only device array of n T, zero-filled at construction.
template <class T> class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t n)
      : ptr_(n > 0 ? static_cast<T *>(
                         detail::device_alloc(n * int64_t(sizeof(T))))
                   : nullptr),
        n_(n > 0 ? n : 0) {}
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  DeviceBuffer(DeviceBuffer &&o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T *data() { return ptr_; }
  const T *data() const { return ptr_; }
  int64_t size() const { return n_; }

private:
  void release() {
    if (ptr_)
      detail::device_free(ptr_, n_ * int64_t(sizeof(T)));
    ptr_ = nullptr;
    n_ = 0;
  }
  T *ptr_ = nullptr;
  int64_t n_ = 0;
};

/// cudaMemsetAsync(ptr, 0, bytes) on compute_stream().
void zero(void *ptr, int64_t bytes);

/// A fixed set of device byte ranges zeroed by one kernel launch, where a
/// cudaMemsetAsync each would cost a launch each: the gradients a step clears
/// (GPT-2 124M: ~150 parameter gradients and ~12 activation gradients a layer
/// and micro-batch, ~10 us of host time per launch). add() the ranges, seal()
/// (uploads the table; synchronous, so not inside a graph capture), then
/// zero() as often as needed. Ranges may have any address and length.
class ZeroSet {
public:
  void add(void *ptr, int64_t bytes);
  void seal();
  bool sealed() const { return sealed_; }
  /// Zeroes every range on compute_stream().
  void zero();
  int64_t ranges() const { return int64_t(host_.size()); }

  /// One range on the device: [ptr, ptr + bytes), handled by blocks
  /// [first_block, first_block + ceil(bytes / kChunkBytes)).
  struct Range {
    unsigned char *ptr;
    int64_t bytes, first_block;
  };
  static constexpr int64_t kChunkBytes = 32 << 10; // per block

private:
  std::vector<Range> host_;
  DeviceBuffer<Range> table_;
  int64_t blocks_ = 0;
  bool sealed_ = false;
};
/// An asynchronous device-to-device copy on compute_stream() (a step graph
/// captures it).
void copy_on_device(void *dst, const void *src, int64_t bytes);
/// Synchronous copies (compute_stream() is drained first).
void copy_to_device(void *dst, const void *src, int64_t bytes);
void copy_to_host(void *dst, const void *src, int64_t bytes);
/// Waits for compute_stream().
void synchronize();
/// High-water mark of bytes held by DeviceBuffers (and the cuBLASLt
/// workspace, and what count_held_bytes / count_transient_bytes report: the
/// W8 formats and their builder's scratch) in this process.
int64_t peak_device_bytes();
/// Bytes held now.
int64_t current_device_bytes();
/// Device memory in use (cudaMemGetInfo: total - free) when the counted bytes
/// last reached their peak (the context, NCCL buffers and the allocator's
/// rounding included).
int64_t peak_device_used_bytes();
/// What an out-of-memory message names: the buffers being allocated now
/// (a static string: "parameter <name>" is not needed, the phase is enough)
/// and the plan's predicted peak of the counted bytes (0: unknown).
void set_allocation_context(const char *what);
/// The context set last (to put it back after a nested one).
const char *allocation_context();
void set_predicted_peak_bytes(double bytes);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_RUNTIME_H
