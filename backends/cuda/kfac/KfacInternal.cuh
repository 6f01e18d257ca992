// Helpers shared by the CUDA K-FAC sources (not a public header): an fp32-
// accumulating cuBLASLt GEMM on act_t or fp32 operands, NCCL checks, grow-only
// workspaces.
#ifndef AUTODDL_BACKENDS_CUDA_KFAC_KFACINTERNAL_CUH
#define AUTODDL_BACKENDS_CUDA_KFAC_KFACINTERNAL_CUH

#include "backends/cuda/NcclCheck.h"
#include "backends/cuda/Runtime.h"

#include <cstdint>
#include <nccl.h>

namespace autoddl::rt::kfac_detail {

/// Row-major C[M,N] (fp32) = alpha op(A) op(B) + beta C: A [M,K] ([K,M] when
/// transA), B [K,N] ([N,K] when transB), both of `type` (CUDA_R_16BF or
/// CUDA_R_32F); fp32 accumulation (CUBLAS_COMPUTE_32F; TF32 inputs when
/// `tf32` and the operands are fp32). One cuBLASLt matmul with a plan cached
/// per shape, alignment and compute type; a plain tiled kernel where cuBLASLt
/// has no algorithm.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
          cudaDataType_t type, float beta, float *C, int64_t ldc,
          bool tf32 = false);
/// Row-major C[M,N] = A[M,K] B[K,N], A and B of `type`, C of `ctype`
/// (CUDA_R_32F, or CUDA_R_16BF rounded from the fp32 sums): the same GEMM
/// with alpha 1, beta 0, no TF32 (bf16 preconditioning's GEMMs).
void gemm_into(int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
               const void *B, int64_t ldb, cudaDataType_t type, void *C,
               int64_t ldc, cudaDataType_t ctype);

/// Whether preconditioning rounds its fp32 operands to TF32 (10-bit
/// mantissa): in the bf16 build, whose activations already carry 8 bits
/// (docs/kfac.md "Overlap and batching on the GPU"); never under AUTODDL_FP32.
#ifdef AUTODDL_FP32
constexpr bool kPreconditionTf32 = false;
#else
constexpr bool kPreconditionTf32 = true;
#endif

/// The cudaDataType_t of act_t.
#ifdef AUTODDL_FP32
constexpr cudaDataType_t kActDataType = CUDA_R_32F;
#else
constexpr cudaDataType_t kActDataType = CUDA_R_16BF;
#endif

/// A failed NCCL call: cuda_fail with NCCL's message (the fault hook of the
/// comm layer aborts the communicators).
[[noreturn]] void nccl_fail(ncclResult_t r, const char *call, const char *file,
                            int line);
#define AUTODDL_KFAC_NCCL_CHECK(x)                                             \
  AUTODDL_NCCL_CHECK_WITH(::autoddl::rt::kfac_detail::nccl_fail, x)

/// Ranks of a communicator (1 for null).
int comm_ranks(ncclComm_t comm);
int comm_rank_of(ncclComm_t comm);

/// A device workspace of at least `bytes` for `slot` (grown on demand, never
/// shrunk; one host thread per device, as the kernels' scratch).
void *workspace(int slot, int64_t bytes);
enum WorkspaceSlot : int {
  kGather = 0,  // gathered operands and gradients
  kProduct = 1, // the intermediate of a two-GEMM product
  kInverse = 2, // a factor being inverted
  kSolver = 3,  // cuSOLVER's work area
  kFp64 = 4,    // the fp64 retry's matrix
  kBias = 5,    // a gathered bias gradient
  kReduce = 6,  // partial sums of the LAMB norms
  kRhs = 7,     // the identity potrs solves into (the inverse)
  kStride = 8,  // the rows a factor stride selects (kfac_select_rows)
  kCast = 9,    // a gradient rounded to bf16 (bf16 preconditioning)
  kSlots = 10
};

/// x[n] *= s on compute_stream().
void scale_floats(float *x, int64_t n, float s);

} // namespace autoddl::rt::kfac_detail

#endif // AUTODDL_BACKENDS_CUDA_KFAC_KFACINTERNAL_CUH
