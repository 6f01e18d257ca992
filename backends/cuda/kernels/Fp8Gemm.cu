// FP8 GEMMs through cuBLASLt (Fp8.h). Row-major D[M,N] = a[M,K] b[N,K]^T is
// the column-major D^T[N,M] = b^T a with b as cuBLASLt's A (transposed: the
// "TN" form FP8 kernels require) and a as its B. A plan (descriptors and the
// heuristic's candidates) is built once per shape, formats, output type,
// epilogue and alignment, and cached (LtPlan.h), and tuned on its first eager
// call as the bf16 GEMMs are (AUTODDL_GEMM_AUTOTUNE=0 keeps the heuristic's
// first choice).
#include "backends/cuda/kernels/Fp8.h"
#include "backends/cuda/kernels/LtPlan.h"

#include <cstdio>
#include <cstring>

namespace autoddl::rt {
namespace {
using namespace detail;

cudaDataType_t fp8_type(Fp8Format f) {
  return f == Fp8Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

/// What identifies a plan: the column-major problem after the swap.
struct Fp8Key {
  int64_t m, n, k, lda, ldb, ldc, auxLd;
  int32_t opA, opB, typeA, typeB, typeD, bias, align, epi, fastAccum, pad;
};
struct Fp8Plan : LtPlan, LtTuning {}; // c: the output D's layout

LtPlanCache<Fp8Key, Fp8Plan> &plans() {
  static auto *cache = new LtPlanCache<Fp8Key, Fp8Plan>();
  return *cache;
}

/// The heuristic's algorithms for p's descriptors (as they are set now):
/// the first into p.algo, all into p's candidates (untuned); false where
/// there is none (NOT_SUPPORTED: no FP8 kernel for this device or problem).
bool heuristic(Fp8Plan &p, int32_t align) {
  cublasLtMatmulPreference_t pref = lt_preference(align);
  cublasLtMatmulHeuristicResult_t results[kLtTuneCandidates] = {};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      cublaslt(), p.desc, p.a, p.b, p.c, p.c, pref, kLtTuneCandidates, results,
      &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
    AUTODDL_CUBLAS_CHECK(st);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0 ||
      results[0].state != CUBLAS_STATUS_SUCCESS)
    return false;
  p.algo = results[0].algo;
  p.numCandidates = 0;
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS)
      p.candidates[p.numCandidates++] = results[i].algo;
  p.tuned = p.numCandidates < 2;
  return true;
}

Fp8Plan build_plan(const Fp8Key &key) {
  Fp8Plan p;
  AUTODDL_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, cublasOperation_t(key.opA));
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, cublasOperation_t(key.opB));
  const int8_t fast = int8_t(key.fastAccum);
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast);
  const cublasLtEpilogue_t epi = lt_epilogue(key.epi, key.bias != 0);
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
  if (key.bias)
    lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(kActType));
  // The heuristic checks that scale pointers are set; any device-looking
  // value does, the real ones are set per call.
  const float *stand = reinterpret_cast<const float *>(uintptr_t(256));
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, stand);
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, stand);
  if (Fp8Epi(key.epi) != Fp8Epi::None) {
    lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.auxLd);
    // aux (the pre-activation, or dgelu's input) has D's type, cuBLASLt's
    // default where D is not FP8.
    const void *aux = reinterpret_cast<const void *>(uintptr_t(key.align));
    lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  }
  // A: k x m (transposed), B: k x n, D: m x n, all column-major.
  p.a = lt_layout(cudaDataType_t(key.typeA), key.k, key.m, key.lda);
  p.b = lt_layout(cudaDataType_t(key.typeB), key.k, key.n, key.ldb);
  p.c = lt_layout(cudaDataType_t(key.typeD), key.m, key.n, key.ldc);
  p.found = heuristic(p, key.align);
  if (!p.found) {
    std::fprintf(stderr,
                 "autoddl: note: no cuBLASLt FP8 algorithm for GEMM m=%lld "
                 "n=%lld k=%lld epilogue %d; running it in bf16\n",
                 (long long)key.m, (long long)key.n, (long long)key.k, key.epi);
  }
  return p;
}
} // namespace

bool fp8_gemm(int64_t M, int64_t N, int64_t K, const void *a, Fp8Format fa,
              const float *sa, const void *b, Fp8Format fb, const float *sb,
              float beta, void *d, bool dFloat, const act_t *bias,
              const act_t *c, Fp8Epi epi, const void *aux, int64_t auxLd,
              bool fastAccum, bool probe) {
  if (M == 0 || N == 0)
    return true;
  if (fa == Fp8Format::E5M2 && fb == Fp8Format::E5M2)
    return false; // no E5M2 x E5M2 kernels
  Fp8Key key;
  // Row-major D[M,N] = a[M,K] b[N,K]^T: cuBLASLt's A is b ([N,K] row-major,
  // a column-major K x N, transposed), its B is a (K x M, as is).
  lt_key_problem(key, false, true, M, N, K, K, K, N);
  key.typeA = fp8_type(fb);
  key.typeB = fp8_type(fa);
  key.typeD = dFloat ? CUDA_R_32F : kActType;
  key.bias = bias != nullptr;
  key.epi = int32_t(epi);
  key.auxLd = auxLd;
  key.fastAccum = fastAccum ? 1 : 0;
  int32_t al = lt_alignment_of(a);
  for (const void *p :
       {b, static_cast<const void *>(d), static_cast<const void *>(c), aux})
    if (p)
      al = std::min(al, lt_alignment_of(p));
  key.align = al;
  Fp8Plan plan = plans().get(key, build_plan);
  if (!plan.found || probe)
    return plan.found;
  lt_set_attr(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sb);
  lt_set_attr(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sa);
  if (bias)
    lt_set_attr(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (epi != Fp8Epi::None)
    lt_set_attr(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  const float alpha = 1.0f;
  const void *cIn = c ? static_cast<const void *>(c) : d;
  auto launch = [&](const cublasLtMatmulAlgo_t &algo, void *out) {
    return cublasLtMatmul(cublaslt(), plan.desc, &alpha, b, plan.a, a, plan.b,
                          &beta, cIn, plan.c, out, plan.c, &algo,
                          cublaslt_workspace(), size_t(kCublasLtWorkspaceBytes),
                          compute_stream());
  };
  if (!plan.tuned && lt_autotune_enabled()) {
    // As gemm_tune in Linear.cu: D accumulated into when beta != 0 and no
    // separate C is read.
    const int64_t dBytes = M * N * (dFloat ? 4 : int64_t(sizeof(act_t)));
    const int i = lt_fastest_keeping(plan, d, beta != 0.0f && c == nullptr,
                                     dBytes, launch);
    if (i >= 0) {
      plan.algo = plan.candidates[i];
      plans().update(key, [&](Fp8Plan &p) {
        p.algo = plan.algo;
        p.tuned = true;
      });
    }
  }
  auto run = [&] { return launch(plan.algo, d); };
  cublasStatus_t st = run();
  if (st == CUBLAS_STATUS_NOT_SUPPORTED && heuristic(plan, key.align)) {
    // The algorithm chosen with stand-in scale pointers refused the real
    // ones: asked again with them set, kept if it runs.
    st = run();
    if (st == CUBLAS_STATUS_SUCCESS)
      plans().update(key, [&](Fp8Plan &p) { p.algo = plan.algo; });
  }
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    // Nothing launched: the caller runs this GEMM in bf16, now and for every
    // later call. cuBLASLt's own check of the algorithm says more.
    cublasLtMatmulHeuristicResult_t check = {};
    const cublasStatus_t cs =
        cublasLtMatmulAlgoCheck(cublaslt(), plan.desc, plan.a, plan.b, plan.c,
                                plan.c, &plan.algo, &check);
    std::fprintf(stderr,
                 "autoddl: note: cuBLASLt refused the FP8 GEMM m=%lld n=%lld "
                 "k=%lld epilogue %d at run time (its algorithm check: %s, "
                 "workspace %zu bytes); running it in bf16\n",
                 (long long)key.m, (long long)key.n, (long long)key.k, key.epi,
                 cublasLtGetStatusName(cs), check.workspaceSize);
    plans().update(key, [](Fp8Plan &p) { p.found = false; });
    return false;
  }
  AUTODDL_CUBLAS_CHECK(st);
  return true;
}

int64_t fp8_gemm_plan_cache_size() { return plans().size(); }

} // namespace autoddl::rt
