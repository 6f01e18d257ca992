// The host side of a cached cuBLASLt GEMM plan, shared by the linear kernels
// (kernels/Linear.cu), the FP8 GEMMs (kernels/Fp8Gemm.cu) and K-FAC's factor
// GEMMs (kfac/KfacFactors.cu), which keep their own keys and caches: the plan's
// cuBLASLt objects, the hash and equality of a plain key, the operands'
// alignment, a matrix layout and the heuristic's preference. Not a public
// header.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_LTPLAN_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_LTPLAN_H

#include "backends/cuda/Runtime.h" // AUTODDL_CUBLAS_CHECK, the workspace size

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cublasLt.h>
#include <mutex>
#include <unordered_map>

namespace autoddl::rt::detail {

/// act_t as cuBLASLt names it.
#ifdef AUTODDL_FP32
constexpr cudaDataType_t kActType = CUDA_R_32F;
#else
constexpr cudaDataType_t kActType = CUDA_R_16BF;
#endif

/// FNV-1a over the bytes of a plan key (a struct of plain fields, compared
/// with memcmp; no padding between them).
template <class Key> struct LtKeyHash {
  size_t operator()(const Key &k) const {
    const auto *p = reinterpret_cast<const unsigned char *>(&k);
    size_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(Key); ++i)
      h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};

/// Keys are equal when their bytes are (zeroed first: lt_key_problem).
template <class Key> struct LtKeyEqual {
  bool operator()(const Key &x, const Key &y) const {
    return std::memcmp(&x, &y, sizeof(Key)) == 0;
  }
};

/// A cached plan's cuBLASLt objects: the matmul descriptor, the layouts of
/// A, B and C (= D), and the heuristic's algorithm (found false: cuBLASLt has
/// none, the caller falls back).
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};

/// A plan's tuning state: the heuristic's candidates in its order (algo is
/// candidates[0] until tuned), tuned once the fastest has been measured.
constexpr int kLtTuneCandidates = 8;
struct LtTuning {
  cublasLtMatmulAlgo_t candidates[kLtTuneCandidates];
  int numCandidates = 0;
  bool tuned = false;
};

/// Whether GEMM plans are tuned: in the bf16 build unless
/// AUTODDL_GEMM_AUTOTUNE=0. The fp32 build is for checking against the CPU
/// and between runs (graph against eager to 1e-6), so it keeps the
/// heuristic's first choice, which does not depend on timings.
inline bool lt_autotune_enabled() {
#ifdef AUTODDL_FP32
  return false;
#else
  static const bool on = [] {
    const char *e = std::getenv("AUTODDL_GEMM_AUTOTUNE");
    return !(e && *e == '0');
  }();
  return on;
#endif
}

/// The index of the fastest of `t`'s candidates, each launched by
/// run(algo) (one GEMM on the compute stream, returning its status): one
/// warm-up and three timed launches each, CUDA events on the compute stream;
/// a candidate that refuses (the pointers) is passed over. -1 where none ran,
/// and while the stream is being captured into a graph (events cannot be
/// waited on there: the caller tunes on a later eager call).
template <class Run> int lt_fastest(const LtTuning &t, Run run) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  AUTODDL_CUDA_CHECK(cudaStreamIsCapturing(compute_stream(), &capturing));
  if (capturing != cudaStreamCaptureStatusNone)
    return -1;
  cudaEvent_t start, stop;
  AUTODDL_CUDA_CHECK(cudaEventCreate(&start));
  AUTODDL_CUDA_CHECK(cudaEventCreate(&stop));
  float bestMs = 0.0f;
  int best = -1;
  for (int i = 0; i < t.numCandidates; ++i) {
    if (run(t.candidates[i]) != CUBLAS_STATUS_SUCCESS)
      continue;
    AUTODDL_CUDA_CHECK(cudaEventRecord(start, compute_stream()));
    for (int r = 0; r < 3; ++r)
      AUTODDL_CUBLAS_CHECK(run(t.candidates[i]));
    AUTODDL_CUDA_CHECK(cudaEventRecord(stop, compute_stream()));
    AUTODDL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (best < 0 || ms < bestMs) {
      bestMs = ms;
      best = i;
    }
  }
  AUTODDL_CUDA_CHECK(cudaEventDestroy(start));
  AUTODDL_CUDA_CHECK(cudaEventDestroy(stop));
  return best;
}

/// Past this many bytes of a result it accumulates into, a GEMM is not
/// tuned (its timed runs would need a scratch copy of that size).
constexpr int64_t kLtTuneScratchMaxBytes = int64_t(64) << 20;

/// lt_fastest, the timed runs leaving the result as the real call will: a
/// call that only writes `out` is simply repeated; one that accumulates into
/// it (beta != 0, D = C) writes to a scratch of `outBytes` instead (counted
/// in the peak like every device buffer), or, past kLtTuneScratchMaxBytes,
/// is not tuned (-1). run(algo, out) launches the GEMM into `out`.
template <class Run>
int lt_fastest_keeping(const LtTuning &t, void *out, bool accumulates,
                       int64_t outBytes, Run run) {
  DeviceBuffer<char> scratch;
  if (accumulates) {
    if (outBytes > kLtTuneScratchMaxBytes)
      return -1;
    scratch = DeviceBuffer<char>(outBytes);
    out = scratch.data();
  }
  return lt_fastest(
      t, [&](const cublasLtMatmulAlgo_t &algo) { return run(algo, out); });
}

/// Fills the problem of a key as cuBLASLt sees it: row-major C[M,N] =
/// op(A) op(B) is column-major C^T = op(B)^T op(A)^T, the operands swapped.
/// The key is zeroed first (its padding takes part in hashing).
template <class Key>
void lt_key_problem(Key &k, bool transA, bool transB, int64_t M, int64_t N,
                    int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  std::memset(&k, 0, sizeof k);
  k.m = N;
  k.n = M;
  k.k = K;
  k.lda = ldb;
  k.ldb = lda;
  k.ldc = ldc;
  k.opA = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  k.opB = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/// A cache of plans by key, safe across threads. Keep one for the process in
/// a function-local `new` (never destroyed: the cuBLASLt handle may go first
/// at exit).
template <class Key, class Plan> class LtPlanCache {
public:
  /// The plan of `key` (made by build(key) the first time), a copy.
  template <class Build> Plan get(const Key &key, Build build) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it == plans_.end())
      it = plans_.emplace(key, build(key)).first;
    return it->second;
  }
  /// Changes the cached plan of `key` by f(plan) (an autotuned algorithm).
  template <class F> void update(const Key &key, F f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(plans_[key]);
  }
  int64_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return int64_t(plans_.size());
  }

private:
  std::mutex mu_;
  std::unordered_map<Key, Plan, LtKeyHash<Key>, LtKeyEqual<Key>> plans_;
};

/// Sets one attribute of a matmul descriptor to `value`.
template <class T>
void lt_set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                 const T &value) {
  AUTODDL_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value));
}

/// Largest power of two (<= 256) dividing the address.
inline int32_t lt_alignment_of(const void *p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int32_t al = 256;
  while (al > 1 && (a % uintptr_t(al)))
    al /= 2;
  return al;
}

/// A column-major rows x cols layout with leading dimension ld; `batch` > 1
/// matrices `stride` elements apart.
inline cublasLtMatrixLayout_t lt_layout(cudaDataType_t type, int64_t rows,
                                        int64_t cols, int64_t ld,
                                        int64_t batch = 1, int64_t stride = 0) {
  cublasLtMatrixLayout_t layout = nullptr;
  AUTODDL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows),
                                                  uint64_t(cols), ld));
  if (batch > 1) {
    const int32_t count = int32_t(batch);
    AUTODDL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    AUTODDL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof stride));
  }
  return layout;
}

/// The layout of operand op(X) with op(X) rows x cols: X itself is rows x
/// cols untransposed (CUBLAS_OP_N), cols x rows transposed.
inline cublasLtMatrixLayout_t
lt_op_layout(cudaDataType_t type, cublasOperation_t op, int64_t rows,
             int64_t cols, int64_t ld, int64_t batch = 1, int64_t stride = 0) {
  const bool n = op == CUBLAS_OP_N;
  return lt_layout(type, n ? rows : cols, n ? cols : rows, ld, batch, stride);
}

/// The heuristic's preference: the runtime's workspace, every operand
/// aligned to `align` bytes. The caller destroys it.
inline cublasLtMatmulPreference_t lt_preference(int32_t align) {
  cublasLtMatmulPreference_t pref = nullptr;
  AUTODDL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = uint64_t(kCublasLtWorkspaceBytes);
  AUTODDL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  const uint32_t al = uint32_t(align);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    AUTODDL_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof al));
  return pref;
}

/// The cuBLASLt epilogue of an epilogue kind as Linear.cu's Epi and Fp8.h's
/// Fp8Epi number them (0: none, 1: GELU with the pre-activation to aux, 2:
/// times the GELU derivative at aux), with a bias where `bias`.
inline cublasLtEpilogue_t lt_epilogue(int32_t kind, bool bias) {
  switch (kind) {
  case 1:
    return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  case 2:
    return CUBLASLT_EPILOGUE_DGELU;
  default:
    return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

} // namespace autoddl::rt::detail

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_LTPLAN_H
