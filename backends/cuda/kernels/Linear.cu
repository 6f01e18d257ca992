// GEMM-based layers (Linear.h). Every GEMM is one cuBLASLt matmul: the
// row-major product C[M,N] = op(A) op(B) is the column-major C^T = op(B)^T
// op(A)^T, so the operands are passed swapped. A plan (descriptors and the
// heuristic's algorithm) is built once per shape, type and alignment and
// cached, so a training step does not query heuristics. The heuristic's first
// choice is not always the fastest on the real shape: a bf16 build times the
// heuristic's top candidates on the first call of each plan that can be run
// again without changing the result (gemm_tune below) and keeps the fastest.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Elementwise.h"
#include "backends/cuda/kernels/Fp8.h"
#include "backends/cuda/kernels/Linear.h"
#include "backends/cuda/kernels/LtPlan.h"
#include "backends/cuda/kernels/TiledGemm.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace autoddl::rt {
namespace {
using namespace detail;

/// An epilogue beyond the bias: GELU (tanh) of the result with the result
/// before it written to aux (the pre-activation the backward needs), or the
/// result times the GELU derivative at aux (the backward through the GELU).
enum class Epi : int32_t { None = 0, GeluAux = 1, DGelu = 2 }; // lt_epilogue
struct EpiArgs {
  Epi kind = Epi::None;
  const void *aux = nullptr;
  int64_t auxLd = 0; // elements between aux's rows (row-major)
};

/// What identifies a plan: the column-major problem after the swap.
struct GemmKey {
  int64_t m, n, k, lda, ldb, ldc, batch, strideA, strideB, strideC, auxLd;
  int32_t opA, opB, typeC, bias, align, epi;
};
struct GemmPlan : LtPlan, LtTuning {}; // found false: use gemm_fallback

LtPlanCache<GemmKey, GemmPlan> &plans() {
  static auto *cache = new LtPlanCache<GemmKey, GemmPlan>();
  return *cache;
}

GemmPlan build_plan(const GemmKey &key) {
  GemmPlan p;
  const cudaDataType_t typeC = cudaDataType_t(key.typeC);
  // fp32 accumulation; CUBLAS_COMPUTE_32F never uses TF32, so the fp32 build
  // matches the CPU's sgemm to rounding.
  AUTODDL_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opA = cublasOperation_t(key.opA),
                          opB = cublasOperation_t(key.opB);
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, opA);
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, opB);
  lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
              lt_epilogue(key.epi, key.bias != 0));
  if (key.bias)
    lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(kActType));
  if (Epi(key.epi) != Epi::None) {
    // aux has the output's type and shape; the heuristic reads the pointer's
    // alignment only (the key's `align` covers it), so a stand-in aligned to
    // exactly that does.
    lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.auxLd);
    const void *stand = reinterpret_cast<const void *>(uintptr_t(key.align));
    lt_set_attr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, stand);
  }
  p.a = lt_op_layout(kActType, opA, key.m, key.k, key.lda, key.batch,
                     key.strideA);
  p.b = lt_op_layout(kActType, opB, key.k, key.n, key.ldb, key.batch,
                     key.strideB);
  p.c = lt_layout(typeC, key.m, key.n, key.ldc, key.batch, key.strideC);

  cublasLtMatmulPreference_t pref = lt_preference(key.align);
  cublasLtMatmulHeuristicResult_t results[kLtTuneCandidates] = {};
  int found = 0;
  AUTODDL_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(cublaslt(), p.desc, p.a, p.b, p.c, p.c,
                                     pref, kLtTuneCandidates, results, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    std::fprintf(stderr,
                 "autoddl: note: no cuBLASLt algorithm for GEMM m=%lld n=%lld "
                 "k=%lld batch=%lld lda=%lld ldb=%lld ldc=%lld; using the "
                 "fallback kernel\n",
                 (long long)key.m, (long long)key.n, (long long)key.k,
                 (long long)key.batch, (long long)key.lda, (long long)key.ldb,
                 (long long)key.ldc);
    return p;
  }
  p.found = true;
  p.algo = results[0].algo;
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS)
      p.candidates[p.numCandidates++] = results[i].algo;
  p.tuned = p.numCandidates < 2;
  return p;
}


/// The fastest candidate of `plan` on the call's own operands
/// (lt_fastest_keeping: C accumulated into when beta != 0 and D is C).
bool gemm_tune(GemmPlan &plan, const act_t *A, const act_t *B, float beta,
               void *C, void *D, int64_t cBytes, cublasLtMatmulAlgo_t &best) {
  const float alpha = 1.0f;
  const int i = lt_fastest_keeping(
      plan, D ? D : C, beta != 0.0f && (D == nullptr || D == C), cBytes,
      [&](const cublasLtMatmulAlgo_t &algo, void *out) {
        return cublasLtMatmul(cublaslt(), plan.desc, &alpha, B, plan.a, A,
                              plan.b, &beta, C, plan.c, out, plan.c, &algo,
                              cublaslt_workspace(),
                              size_t(kCublasLtWorkspaceBytes),
                              compute_stream());
      });
  if (i < 0)
    return false;
  best = plan.candidates[i];
  return true;
}

constexpr int kTile = kTiledGemmTile;

/// A plain tiled GEMM for the shapes cuBLASLt has no algorithm for (row-major,
/// the arguments of gemm() below; blockIdx.z is the batch).
template <class TC>
__global__ void
gemm_fallback_kernel(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                     const act_t *A, int64_t lda, const act_t *B, int64_t ldb,
                     float beta, TC *C, int64_t ldc, const act_t *bias,
                     int64_t sA, int64_t sB, int64_t sC) {
  A += int64_t(blockIdx.z) * sA;
  B += int64_t(blockIdx.z) * sB;
  C += int64_t(blockIdx.z) * sC;
  const int64_t i = int64_t(blockIdx.y) * kTile + threadIdx.y;
  const int64_t j = int64_t(blockIdx.x) * kTile + threadIdx.x;
  const float acc = tiled_gemm_sum(transA, transB, M, N, K, A, lda, B, ldb);
  if (i < M && j < N) {
    TC *c = C + i * ldc + j;
    float v = acc + (bias ? to_float(bias[j]) : 0.0f);
    if (beta != 0.0f)
      v += beta * to_float(*c);
    *c = from_float<TC>(v);
  }
}

/// Row-major C[M,N] = op(A) op(B) (+ bias[N]) + beta C for `batch` products
/// strided by sA, sB, sC elements. A is [M,K] ([K,M] when transA), B is [K,N]
/// ([N,K] when transB). C is act_t, or fp32 when cFloat. With an epilogue, or
/// a result D apart from C (one product, act_t C, D in C's layout), returns
/// false, having done nothing, where cuBLASLt has no algorithm for it; true
/// otherwise.
bool gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          const act_t *A, int64_t lda, const act_t *B, int64_t ldb, float beta,
          void *C, int64_t ldc, bool cFloat, const act_t *bias = nullptr,
          int64_t batch = 1, int64_t sA = 0, int64_t sB = 0, int64_t sC = 0,
          const EpiArgs &epi = {}, void *D = nullptr) {
  if (M == 0 || N == 0 || batch == 0)
    return true;
  GemmKey key;
  lt_key_problem(key, transA, transB, M, N, K, lda, ldb, ldc);
  key.batch = batch;
  key.strideA = sB; // swapped as the operands
  key.strideB = sA;
  key.strideC = sC;
  key.typeC = cFloat ? CUDA_R_32F : kActType;
  key.bias = bias != nullptr;
  key.epi = int32_t(epi.kind);
  key.auxLd = epi.auxLd;
  int32_t al = lt_alignment_of(A);
  for (const void *p :
       {static_cast<const void *>(B), static_cast<const void *>(C), epi.aux,
        static_cast<const void *>(D)})
    if (p)
      al = std::min(al, lt_alignment_of(p));
  key.align = al;
  GemmPlan plan = plans().get(key, build_plan);
  const bool tune = plan.found && !plan.tuned && lt_autotune_enabled();
  if (!plan.found && (epi.kind != Epi::None || D))
    return false;
  if (!plan.found) {
    const dim3 grid(unsigned((N + kTile - 1) / kTile),
                    unsigned((M + kTile - 1) / kTile), unsigned(batch));
    const dim3 block(kTile, kTile);
    if (cFloat)
      gemm_fallback_kernel<float><<<grid, block, 0, compute_stream()>>>(
          transA, transB, M, N, K, A, lda, B, ldb, beta,
          static_cast<float *>(C), ldc, bias, sA, sB, sC);
    else
      gemm_fallback_kernel<act_t><<<grid, block, 0, compute_stream()>>>(
          transA, transB, M, N, K, A, lda, B, ldb, beta,
          static_cast<act_t *>(C), ldc, bias, sA, sB, sC);
    AUTODDL_CUDA_CHECK_LAUNCH();
    return true;
  }
  if (bias)
    lt_set_attr(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (epi.kind != Epi::None)
    lt_set_attr(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, epi.aux);
  if (tune) {
    const int64_t elems =
        (key.batch > 1 ? key.strideC * (key.batch - 1) : 0) + key.ldc * key.n;
    const int64_t cBytes = elems * (cFloat ? 4 : int64_t(sizeof(act_t)));
    cublasLtMatmulAlgo_t best;
    if (gemm_tune(plan, A, B, beta, C, D, cBytes, best)) {
      plan.algo = best;
      plans().update(key, [&](GemmPlan &cached) {
        cached.algo = best;
        cached.tuned = true;
      });
    }
  }
  const float alpha = 1.0f;
  AUTODDL_CUBLAS_CHECK(cublasLtMatmul(
      cublaslt(), plan.desc, &alpha, B, plan.a, A, plan.b, &beta, C, plan.c,
      D ? D : C, plan.c, &plan.algo, cublaslt_workspace(),
      size_t(kCublasLtWorkspaceBytes), compute_stream()));
  return true;
}

/// True when the environment variable `name` is "1": the fusions' off
/// switches (AUTODDL_GEMM_NO_GELU_EPILOGUE, AUTODDL_GEMM_NO_RESIDUAL_EPILOGUE),
/// to time the fused path against the separate kernels.
bool switched_off(const char *name) {
  const char *e = std::getenv(name);
  return e && *e == '1';
}

// ---- bias ----

template <int V, bool Relu>
__global__ void bias_add_kernel(act_t *out, const act_t *x, const act_t *bias,
                                int64_t n, int64_t O) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = tid; k < n / V; k += nth) {
    const int64_t j = k * V, col = j % O;
    float a[V], b[V];
    load_floats<act_t, V>(a, x + j);
    load_floats<act_t, V>(b, bias + col);
#pragma unroll
    for (int v = 0; v < V; ++v)
      a[v] = Relu ? fmaxf(a[v] + b[v], 0.0f) : a[v] + b[v];
    store_floats<act_t, V>(out + j, a);
  }
}

constexpr int kColWarps = 8;

/// dbias[O] += column sums of g over the rows of this block's chunk, g =
/// dout[N,O], or dout where relu[N,O] > 0 (a fused ReLU's output); dx += g
/// (dx = g without `accumulate`) on the way. Lane l of each warp owns V
/// consecutive columns.
template <int V>
__global__ void __launch_bounds__(32 * kColWarps)
    column_sum_kernel(float *dbias, act_t *dx, const act_t *dout,
                      const act_t *relu, bool accumulate, int64_t N, int64_t O,
                      int64_t rowsPerChunk) {
  __shared__ float partial[kColWarps][32 * V];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = (int64_t(blockIdx.x) * 32 + lane) * V;
  const int64_t r0 = int64_t(blockIdx.y) * rowsPerChunk;
  const int64_t r1 = r0 + rowsPerChunk < N ? r0 + rowsPerChunk : N;
  float acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v)
    acc[v] = 0.0f;
  if (col < O) {
    for (int64_t r = r0 + warp; r < r1; r += kColWarps) {
      float g[V];
      load_floats<act_t, V>(g, dout + r * O + col);
      if (relu) {
        float y[V];
        load_floats<act_t, V>(y, relu + r * O + col);
#pragma unroll
        for (int v = 0; v < V; ++v)
          g[v] = y[v] > 0.0f ? g[v] : 0.0f;
      }
#pragma unroll
      for (int v = 0; v < V; ++v)
        acc[v] += g[v];
      if (dx) {
        float d[V] = {};
        if (accumulate)
          load_floats<act_t, V>(d, dx + r * O + col);
#pragma unroll
        for (int v = 0; v < V; ++v)
          d[v] += g[v];
        store_floats<act_t, V>(dx + r * O + col, d);
      }
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v)
    partial[warp][lane * V + v] = acc[v];
  __syncthreads();
  if (!dbias)
    return;
  for (int i = threadIdx.x; i < 32 * V; i += blockDim.x) {
    const int64_t c = int64_t(blockIdx.x) * 32 * V + i;
    if (c >= O)
      continue;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kColWarps; ++w)
      s += partial[w][i];
    if (gridDim.y == 1)
      dbias[c] += s;
    else
      atomicAdd(dbias + c, s);
  }
}

template <int V>
void launch_column_sum(float *dbias, act_t *dx, const act_t *dout,
                       const act_t *relu, bool accumulate, int64_t N,
                       int64_t O) {
  const int64_t colBlocks = (O + 32 * V - 1) / (32 * V);
  // Enough row chunks for about four blocks per multiprocessor.
  int64_t chunks = (int64_t(sm_count()) * 4 + colBlocks - 1) / colBlocks;
  const int64_t maxChunks = (N + kColWarps - 1) / kColWarps;
  if (chunks > maxChunks)
    chunks = maxChunks;
  if (chunks > 65535)
    chunks = 65535;
  if (chunks < 1)
    chunks = 1;
  const int64_t rowsPerChunk = (N + chunks - 1) / chunks;
  column_sum_kernel<V>
      <<<dim3(unsigned(colBlocks), unsigned(chunks)), 32 * kColWarps, 0,
         compute_stream()>>>(dbias, dx, dout, relu, accumulate, N, O,
                             rowsPerChunk);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// An [N,O] activation whose rows are not a multiple of 16 bytes (O = 50257,
// the GPT-2 vocabulary) pushes cuBLASLt onto slow kernels (H200: the lm_head
// GEMMs at 95-145 TFLOP/s). For the weight gradient a copy of dout with the
// row stride rounded up (scratch slot 1) pays: one extra pass over dout, the
// GEMM twice as fast (lm_head dw 4.3 ms -> 2.0 ms with the copy, B=8 T=1024
// C=768). The forward and dx did not gain (6.6 -> 7.3 ms, 4.5 -> 5.5 ms): the
// odd dimension stays in their problem. The generated CUDA program pads the
// vocabulary (codegen/TrainProgram.cpp planVocabPadding: the lm_head runs
// with O = Vp, a multiple of 64), so its lm_head never comes here; the copy
// stays for the unaligned shapes that remain possible (a vocabulary the
// program cannot pad: a head with a bias, logits with another consumer; a
// model's own odd feature counts). AUTODDL_GEMM_NO_PAD=1 turns the copy off.
constexpr int64_t kPadMinElements = int64_t(1) << 20;

int64_t padded_ld(int64_t N, int64_t O) {
  static const bool enabled = std::getenv("AUTODDL_GEMM_NO_PAD") == nullptr;
  constexpr int64_t a = kPack<act_t>;
  if (!enabled || O % a == 0 || N * O < kPadMinElements)
    return O;
  return (O + a - 1) / a * a;
}

/// rows x cols act_t from src (row stride sld) to dst (row stride dld).
void copy_rows(act_t *dst, int64_t dld, const act_t *src, int64_t sld,
               int64_t rows, int64_t cols) {
  AUTODDL_CUDA_CHECK(cudaMemcpy2DAsync(
      dst, size_t(dld) * sizeof(act_t), src, size_t(sld) * sizeof(act_t),
      size_t(cols) * sizeof(act_t), size_t(rows), cudaMemcpyDeviceToDevice,
      compute_stream()));
}

template <bool Relu>
void launch_bias_add(act_t *out, const act_t *x, const act_t *bias, int64_t N,
                     int64_t O) {
  const int64_t n = N * O;
  if (n == 0)
    return;
  constexpr int V = kPack<act_t>;
  with_pack<V>(O % V == 0 && aligned16(out) && aligned16(x) && aligned16(bias),
               [&](auto w) {
                 constexpr int W = decltype(w)::value;
                 bias_add_kernel<W, Relu>
                     <<<grid_for(n / W, 256), 256, 0, compute_stream()>>>(
                         out, x, bias, n, O);
               });
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void column_sums(act_t *dx, float *dbias, const act_t *dout, const act_t *relu,
                 int64_t N, int64_t O, bool accumulate) {
  if (N == 0 || O == 0 || (!dx && !dbias))
    return;
  constexpr int V = kPack<act_t>;
  if (O % V == 0 && aligned16(dout) && (!dx || aligned16(dx)) &&
      (!relu || aligned16(relu)))
    launch_column_sum<V>(dbias, dx, dout, relu, accumulate, N, O);
  else
    launch_column_sum<1>(dbias, dx, dout, relu, accumulate, N, O);
}
} // namespace

void bias_add_forward(act_t *out, const act_t *x, const act_t *bias, int64_t N,
                      int64_t O) {
  launch_bias_add<false>(out, x, bias, N, O);
}

void bias_add_backward(act_t *dx, float *dbias, const act_t *dout, int64_t N,
                       int64_t O, bool accumulate_dx) {
  column_sums(dx, dbias, dout, nullptr, N, O, accumulate_dx);
}

void bias_relu_forward(act_t *out, const act_t *x, const act_t *bias,
                       int64_t N, int64_t O) {
  launch_bias_add<true>(out, x, bias, N, O);
}

void bias_relu_backward(act_t *dx, float *dbias, const act_t *dout,
                        const act_t *out, int64_t N, int64_t O,
                        bool accumulate_dx) {
  column_sums(dx, dbias, dout, out, N, O, accumulate_dx);
}

void linear_forward(act_t *out, const act_t *x, const act_t *w,
                    const act_t *bias, int64_t N, int64_t K, int64_t O,
                    bool transpose_weight) {
  fp8_note_linear(x, false); // what FP8 casts hold across calls (Fp8.h)
  if (K == 0) { // an empty product: out = bias (or 0)
    zero(out, N * O * int64_t(sizeof(act_t)));
    if (bias)
      bias_add_forward(out, out, bias, N, O);
    return;
  }
  if (fp8_linear_eligible(w, N, K, O) &&
      fp8_linear_forward(out, x, w, bias, N, K, O, transpose_weight))
    return;
  gemm(false, transpose_weight, N, O, K, x, K, w, transpose_weight ? K : O,
       0.0f, out, O, false, bias);
}

void linear_gelu_forward(act_t *out, act_t *pre, const act_t *x, const act_t *w,
                         const act_t *bias, int64_t N, int64_t K, int64_t O,
                         bool transpose_weight) {
  // cuBLASLt wants the aux rows' stride a multiple of 8 elements.
  static const bool off = switched_off("AUTODDL_GEMM_NO_GELU_EPILOGUE");
  fp8_note_linear(x, false);
  if (!off && fp8_linear_eligible(w, N, K, O) &&
      fp8_linear_forward(out, x, w, bias, N, K, O, transpose_weight,
                         Fp8Epi::GeluAux, pre))
    return;
  if (K > 0 && O % 8 == 0 && !off &&
      gemm(false, transpose_weight, N, O, K, x, K, w, transpose_weight ? K : O,
           0.0f, out, O, false, bias, 1, 0, 0, 0, {Epi::GeluAux, pre, O}))
    return;
  linear_forward(pre, x, w, bias, N, K, O, transpose_weight);
  gelu_forward(out, pre, N * O, true);
}

void linear_residual_forward(act_t *out, const act_t *residual, const act_t *x,
                             const act_t *w, const act_t *bias, int64_t N,
                             int64_t K, int64_t O, bool transpose_weight) {
  // cuBLASLt reads C (the residual) and writes D (out): beta = 1.
  static const bool off = switched_off("AUTODDL_GEMM_NO_RESIDUAL_EPILOGUE");
  fp8_note_linear(x, false);
  if (out != residual && !off && fp8_linear_eligible(w, N, K, O) &&
      fp8_linear_forward(out, x, w, bias, N, K, O, transpose_weight,
                         Fp8Epi::None, nullptr, residual))
    return;
  if (K > 0 && out != residual && !off &&
      gemm(false, transpose_weight, N, O, K, x, K, w, transpose_weight ? K : O,
           1.0f, const_cast<act_t *>(residual), O, false, bias, 1, 0, 0, 0, {},
           out))
    return;
  linear_forward(out, x, w, bias, N, K, O, transpose_weight);
  add_forward(out, out, residual, N * O);
}

void linear_backward_dgelu(act_t *dpre, const act_t *dout, const act_t *w,
                           const act_t *pre, int64_t N, int64_t K, int64_t O,
                           bool transpose_weight) {
  fp8_note_linear(nullptr, true); // reads no x
  if (N == 0 || K == 0)
    return;
  static const bool off = switched_off("AUTODDL_GEMM_NO_GELU_EPILOGUE");
  const bool fp8 = fp8_linear_eligible(w, N, K, O);
  // Not in FP8 with the DGELU epilogue: cuBLASLt's FP8 kernels with it ran
  // at half the bf16 GEMM's speed on an H100 (the proj's dx 0.43-0.57x,
  // Fp8Check --bench, bench/results/cuda/2026-12-06-h100-fp8-mlp-calls/);
  // the weight gradient that follows stays in FP8.
  if (O > 0 && K % 8 == 0 && !off &&
      gemm(false, !transpose_weight, N, K, O, dout, O, w,
           transpose_weight ? K : O, 0.0f, dpre, K, false, nullptr, 1, 0, 0, 0,
           {Epi::DGelu, pre, K}))
    return;
  // Unfused: dx of the linear into scratch slot 2, then through the GELU.
  auto *dg = static_cast<act_t *>(scratch(2, N * K * int64_t(sizeof(act_t))));
  if (O > 0 && !(fp8 && fp8_linear_backward_dx(dg, dout, w, N, K, O,
                                               transpose_weight, false)))
    gemm(false, !transpose_weight, N, K, O, dout, O, w,
         transpose_weight ? K : O, 0.0f, dg, K, false);
  else if (O == 0)
    zero(dg, N * K * int64_t(sizeof(act_t)));
  zero(dpre, N * K * int64_t(sizeof(act_t)));
  gelu_backward(dpre, pre, dg, N * K, true);
}

void linear_backward(act_t *dx, float *dw, float *dbias, const act_t *dout,
                     const act_t *x, const act_t *w, int64_t N, int64_t K,
                     int64_t O, bool transpose_weight, bool accumulate_dx) {
  fp8_note_linear(x, true);
  const bool fp8 = O > 0 && fp8_linear_eligible(w, N, K, O);
  if (fp8 && dx && dw) { // one cast of dY for both
    const Fp8Done done = fp8_linear_backward(dx, dw, dout, x, w, N, K, O,
                                             transpose_weight, accumulate_dx);
    if (done.dx)
      dx = nullptr;
    if (done.dw)
      dw = nullptr;
  }
  if (fp8 && dx &&
      fp8_linear_backward_dx(dx, dout, w, N, K, O, transpose_weight,
                             accumulate_dx))
    dx = nullptr; // done
  if (fp8 && dw &&
      fp8_linear_backward_dw(dw, dout, x, w, N, K, O, transpose_weight))
    dw = nullptr; // done
  if (O > 0) {
    if (dx) // dx[N,K] (+)= dout[N,O] (w[O,K] as is, or w[K,O] transposed)
      gemm(false, !transpose_weight, N, K, O, dout, O, w,
           transpose_weight ? K : O, accumulate_dx ? 1.0f : 0.0f, dx, K, false);
    if (dw && N > 0) {
      const act_t *g = dout; // dout, or its copy with aligned rows
      const int64_t ldg = padded_ld(N, O);
      if (ldg != O) {
        auto *tmp =
            static_cast<act_t *>(scratch(1, N * ldg * int64_t(sizeof(act_t))));
        copy_rows(tmp, ldg, dout, O, N, O);
        g = tmp;
      }
      if (transpose_weight) // dw[O,K] += dout^T[O,N] x[N,K]
        gemm(true, false, O, K, N, g, ldg, x, K, 1.0f, dw, K, true);
      else // dw[K,O] += x^T[K,N] dout[N,O]
        gemm(true, false, K, O, N, x, K, g, ldg, 1.0f, dw, O, true);
    }
  } else if (dx && !accumulate_dx) // an empty sum
    zero(dx, N * K * int64_t(sizeof(act_t)));
  if (dbias)
    bias_add_backward(nullptr, dbias, dout, N, O);
}

void matmul_forward(act_t *out, const act_t *a, const act_t *b, int64_t Bt,
                    int64_t M, int64_t K, int64_t N, bool transpose_b) {
  if (K == 0) {
    zero(out, Bt * M * N * int64_t(sizeof(act_t)));
    return;
  }
  gemm(false, transpose_b, M, N, K, a, K, b, transpose_b ? K : N, 0.0f, out, N,
       false, nullptr, Bt, M * K, K * N, M * N);
}

void matmul_backward(act_t *da, act_t *db, const act_t *dout, const act_t *a,
                     const act_t *b, int64_t Bt, int64_t M, int64_t K,
                     int64_t N, bool transpose_b) {
  if (N == 0)
    return;
  if (da) // da[M,K] += dout[M,N] (b[K,N] transposed, or b[N,K] as is)
    gemm(false, !transpose_b, M, K, N, dout, N, b, transpose_b ? K : N, 1.0f,
         da, K, false, nullptr, Bt, M * N, K * N, M * K);
  if (db && M > 0) {
    if (transpose_b) // db[N,K] += dout^T[N,M] a[M,K]
      gemm(true, false, N, K, M, dout, N, a, K, 1.0f, db, K, false, nullptr, Bt,
           M * N, M * K, K * N);
    else // db[K,N] += a^T[K,M] dout[M,N]
      gemm(true, false, K, N, M, a, K, dout, N, 1.0f, db, N, false, nullptr, Bt,
           M * K, M * N, K * N);
  }
}

int64_t gemm_plan_cache_size() { return plans().size(); }

} // namespace autoddl::rt
