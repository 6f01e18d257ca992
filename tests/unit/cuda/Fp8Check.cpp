// The FP8 GEMM module (backends/cuda/kernels/Fp8.h) on the GPU:
// - the cast: bytes equal to the host's fp8 rounding of x * scale (as is and
//   transposed, odd shapes), the amax history and the delayed scale (primed
//   on the first cast, delayed after it, the history rolling its maximum
//   out), a non-recording cast changing nothing;
// - the linears' three GEMMs (forward E4M3 x E4M3, input gradient E5M2 x
//   E4M3, weight gradient E5M2 x E4M3 into fp32) at GPT-2's linear sizes and
//   an odd one, against an fp32 GEMM (OpenBLAS) on the fp8-rounded inputs
//   (bound 1e-2: bf16 output rounding and Hopper's accumulation) and on the
//   unrounded ones (bound 0.06 for E4M3 x E4M3, 0.1 with E5M2: the formats'
//   rounding, ~2^-4 and ~2^-3 relative per element);
// - the weight's FP8 copy for a step (fp8_begin_step): two micro-batches
//   over three steps with W changed between them, bit for bit with the
//   per-call casts, W cast (its amax recorded) once a step, also in a step
//   graph's replays (W changed between them); an input two
//   linears read in turn cast once in a step (forward and x^T), again after
//   a backward call;
// - the dispatch rule (backends/common/Fp8Rule.h): an eligible registered
//   linear runs in FP8, an unregistered or odd one in bf16.
// Exits 77 without a CUDA device, or one without FP8 tensor cores (< 8.9).
// `Fp8Check --bench` times a linear's three GEMMs in bf16 and in FP8 (with
// the casts; "step": W's cast once a step, not in the time) at GPT-2 and 7B
// shapes beside the size rule's verdict.
#include <cblas.h>

#include "backends/common/Fp8Rule.h"
#include "backends/cuda/StepGraph.h"
#include "backends/cuda/kernels/Fp8.h"
#include "backends/cuda/kernels/Linear.h"
#include "tests/unit/cuda/KernelCheckUtil.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <array>

namespace {
using namespace kcheck;
using rt::Fp8Format;
using rt::Fp8Meta;

std::mt19937 gRng;
int gFailures = 0;

void expect(bool ok) { gFailures += ok ? 0 : 1; }

float fp8_round(float v, Fp8Format f) {
  return f == Fp8Format::E4M3 ? float(__nv_fp8_e4m3(v))
                              : float(__nv_fp8_e5m2(v));
}
unsigned char fp8_bits(float v, Fp8Format f) {
  return f == Fp8Format::E4M3 ? __nv_fp8_e4m3(v).__x : __nv_fp8_e5m2(v).__x;
}
float amax_of(const std::vector<float> &v) {
  float m = 0;
  for (float x : v)
    m = std::max(m, std::fabs(x));
  return m;
}
/// v rounded through fp8 at the scale fmax / amax(v) and back.
std::vector<float> quantized(const std::vector<float> &v, Fp8Format f) {
  const float s = rt::fp8_max(f) / amax_of(v);
  std::vector<float> q(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    q[i] = fp8_round(v[i] * s, f) / s;
  return q;
}
Fp8Meta download_meta(const Fp8Meta *m) {
  Fp8Meta h;
  rt::copy_to_host(&h, m, int64_t(sizeof h));
  return h;
}
std::vector<unsigned char> download_bytes(const void *p, int64_t n) {
  std::vector<unsigned char> b(static_cast<size_t>(n));
  rt::copy_to_host(b.data(), p, n);
  return b;
}

/// One cast of x (R x C) at meta's scale `s`: out and outT against the host.
bool cast_matches(const std::vector<float> &x, int64_t R, int64_t C, float s,
                  Fp8Format f, const void *out, const void *outT) {
  const auto a = download_bytes(out, R * C), t = download_bytes(outT, R * C);
  int64_t bad = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const unsigned char want = fp8_bits(x[size_t(r * C + c)] * s, f);
      bad += a[size_t(r * C + c)] != want;
      bad += t[size_t(c * R + r)] != want;
    }
  return bad == 0;
}

void check_cast(int64_t R, int64_t C, Fp8Format f) {
  const std::string tag = std::string(f == Fp8Format::E4M3 ? "E4M3" : "E5M2") +
                          " cast " + std::to_string(R) + "x" +
                          std::to_string(C);
  const float fmax = rt::fp8_max(f);
  auto x = random_values(gRng, R * C, -3, 3);
  rt::DeviceBuffer<Fp8Meta> meta(1);
  rt::fp8_meta_init(meta.data(), 1);
  rt::DeviceBuffer<unsigned char> out(R * C), outT(R * C);
  rt::DeviceBuffer<float> sinv(1);
  DevAct dx(x);
  // First cast: primed, so it casts at fmax / amax(x).
  rt::fp8_cast(out.data(), outT.data(), sinv.data(), dx.p, R, C, f, meta.data(),
               true);
  const float a = amax_of(x);
  Fp8Meta m = download_meta(meta.data());
  float used = 0;
  rt::copy_to_host(&used, sinv.data(), 4);
  bool ok = cast_matches(x, R, C, fmax / a, f, out.data(), outT.data());
  ok &= m.history[0] == a && m.history[1] == a && m.pos == 2 &&
        m.recorded == 2 && m.amax == 0 && m.blocksDone == 0;
  ok &= std::fabs(m.scale - fmax / a) <= 1e-6f * m.scale &&
        std::fabs(used - a / fmax) <= 1e-6f * used;
  expect(report(tag + " primed: bytes, amax, scale", ok ? 0 : 1, 0));
  // Delayed: 2x is cast at the old scale (saturating), then raises amax.
  std::vector<float> x2(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    x2[i] = 2 * x[i];
  DevAct dx2(x2);
  rt::fp8_cast(out.data(), outT.data(), sinv.data(), dx2.p, R, C, f,
               meta.data(), true);
  m = download_meta(meta.data());
  ok = cast_matches(x2, R, C, fmax / a, f, out.data(), outT.data());
  ok &= m.history[2] == 2 * a && m.pos == 3 &&
        std::fabs(m.scale - fmax / (2 * a)) <= 1e-6f * m.scale;
  expect(report(tag + " delayed scale, saturation", ok ? 0 : 1, 0));
  // A non-recording cast leaves the meta as it is.
  rt::fp8_cast(out.data(), nullptr, sinv.data(), dx.p, R, C, f, meta.data(),
               false);
  const Fp8Meta same = download_meta(meta.data());
  expect(report(tag + " non-recording keeps the meta",
                std::memcmp(&same, &m, sizeof m) == 0 ? 0 : 1, 0));
  // kFp8AmaxHistory casts of x / 2 roll 2a out: the scale follows a / 2.
  std::vector<float> xh(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xh[i] = x[i] / 2;
  DevAct dxh(xh);
  for (int i = 0; i < rt::kFp8AmaxHistory; ++i)
    rt::fp8_cast(out.data(), nullptr, sinv.data(), dxh.p, R, C, f, meta.data(),
                 true);
  m = download_meta(meta.data());
  expect(report(tag + " history rolls over",
                std::fabs(m.scale - fmax / (a / 2)) / m.scale, 1e-6));
}

/// Row-major C[M,N] = A B^T (A [M,K], B [N,K]) in fp32 (OpenBLAS).
std::vector<float> gemm_tn(const std::vector<float> &A,
                           const std::vector<float> &B, int64_t M, int64_t N,
                           int64_t K) {
  std::vector<float> C(size_t(M * N));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K),
              1.0f, A.data(), int(K), B.data(), int(K), 0.0f, C.data(), int(N));
  return C;
}
std::vector<float> transposed(const std::vector<float> &v, int64_t R,
                              int64_t C) {
  std::vector<float> t(v.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      t[size_t(c * R + r)] = v[size_t(r * C + c)];
  return t;
}

/// The two bounds of a GEMM result: against the rounded and the unrounded
/// inputs' product.
void report2(const std::string &tag, const std::vector<float> &got,
             const std::vector<float> &rounded, const std::vector<float> &exact,
             double exactTol) {
  expect(report(tag + " vs fp8-rounded inputs", rel_error(got, rounded), 1e-2));
  expect(report(tag + " vs unrounded inputs", rel_error(got, exact), exactTol));
}

/// Forward, input and weight gradient of one FP8 linear (weight [O,K] when
/// tw, else [K,O]), called directly (not through the size rule).
void check_linear(int64_t N, int64_t K, int64_t O, bool tw) {
  const std::string tag = "fp8 linear " + std::to_string(N) + "x" +
                          std::to_string(K) + "x" + std::to_string(O) +
                          (tw ? " wT" : " w");
  auto x = random_values(gRng, N * K, -1, 1);
  auto wOK = random_values(gRng, O * K, -0.05f, 0.05f); // [O,K]
  auto dy = random_values(gRng, N * O, -1e-3f, 1e-3f);
  const auto w = tw ? wOK : transposed(wOK, O, K);
  DevAct dX(x), dW(w), dDy(dy);
  rt::fp8_clear_linears();
  rt::fp8_register_linear(dW.p);
  DevAlloc out(N * O), dxOut(N * K);
  expect(report(
      tag + " forward ran",
      rt::fp8_linear_forward(out.p, dX.p, dW.p, nullptr, N, K, O, tw) ? 0 : 1,
      0));
  const auto xq = quantized(x, Fp8Format::E4M3),
             wq = quantized(wOK, Fp8Format::E4M3),
             dyq = quantized(dy, Fp8Format::E5M2);
  report2(tag + " forward", download(out.p, N * O), gemm_tn(xq, wq, N, O, K),
          gemm_tn(x, wOK, N, O, K), 0.06);
  // dx[N,K] = dy[N,O] W[O,K] = dy (W^T)^T.
  expect(rt::fp8_linear_backward_dx(dxOut.p, dDy.p, dW.p, N, K, O, tw, false));
  report2(tag + " input gradient", download(dxOut.p, N * K),
          gemm_tn(dyq, transposed(wq, O, K), N, K, O),
          gemm_tn(dy, transposed(wOK, O, K), N, K, O), 0.1);
  // dw (+)= dy^T x: [O,K] = dy^T (x^T)^T, or its transpose.
  std::vector<float> zeros(size_t(O * K), 0.0f);
  DevFloat dw(zeros);
  expect(rt::fp8_linear_backward_dw(dw.p, dDy.p, dX.p, dW.p, N, K, O, tw));
  auto want = gemm_tn(transposed(dyq, N, O), transposed(xq, N, K), O, K, N);
  auto exact = gemm_tn(transposed(dy, N, O), transposed(x, N, K), O, K, N);
  if (!tw) {
    want = transposed(want, O, K);
    exact = transposed(exact, O, K);
  }
  report2(tag + " weight gradient (fp32)", download(dw.p, O * K), want, exact,
          0.1);
  // The call above read the dY^T that the input-gradient call left; alone,
  // and after an input-gradient call of another dY (-dy: negated exactly),
  // the weight gradient casts its own.
  DevFloat dwAlone(zeros), dwOther(zeros);
  expect(rt::fp8_linear_backward_dw(dwAlone.p, dDy.p, dX.p, dW.p, N, K, O, tw));
  report2(tag + " weight gradient alone (fp32)", download(dwAlone.p, O * K),
          want, exact, 0.1);
  std::vector<float> negDy(dy.size());
  for (size_t i = 0; i < dy.size(); ++i)
    negDy[i] = -dy[i];
  DevAct dNegDy(negDy);
  expect(rt::fp8_linear_backward_dx(dxOut.p, dNegDy.p, dW.p, N, K, O, tw,
                                    false));
  expect(rt::fp8_linear_backward_dw(dwOther.p, dDy.p, dX.p, dW.p, N, K, O, tw));
  report2(tag + " weight gradient after another dY's (fp32)",
          download(dwOther.p, O * K), want, exact, 0.1);
  // Both gradients from one cast of dY (what linear_backward runs).
  DevFloat dw2(zeros);
  DevAlloc dx2(N * K);
  const rt::Fp8Done done = rt::fp8_linear_backward(dx2.p, dw2.p, dDy.p, dX.p,
                                                   dW.p, N, K, O, tw, false);
  expect(report(tag + " both gradients ran", done.dx && done.dw ? 0 : 1, 0));
  report2(tag + " both: input gradient", download(dx2.p, N * K),
          gemm_tn(dyq, transposed(wq, O, K), N, K, O),
          gemm_tn(dy, transposed(wOK, O, K), N, K, O), 0.1);
  report2(tag + " both: weight gradient (fp32)", download(dw2.p, O * K), want,
          exact, 0.1);
}

/// Two micro-batches' inputs x[N,K] and output gradients dy[N,O] of a
/// linear, on the device.
struct Microbatches {
  DevAct x0, x1, dy0, dy1;
  const act_t *x[2], *dy[2];
  Microbatches(int64_t N, int64_t K, int64_t O)
      : x0(random_values(gRng, N * K, -1, 1)),
        x1(random_values(gRng, N * K, -1, 1)),
        dy0(random_values(gRng, N * O, -1e-3f, 1e-3f)),
        dy1(random_values(gRng, N * O, -1e-3f, 1e-3f)), x{x0.p, x1.p},
        dy{dy0.p, dy1.p} {}
};

/// Expects `other`'s outputs equal, bit for bit, to the per-call casts'
/// (each of the runs' output tensors).
template <class T>
void expect_as_per_call(const std::string &tag, const std::vector<T> &perCall,
                        const std::vector<T> &other) {
  int64_t differing = 0;
  for (size_t i = 0; i < perCall.size(); ++i)
    differing += perCall[i] != other[i];
  expect(report(tag + ": outputs differing from the per-call casts' (of " +
                    std::to_string(perCall.size()) + ")",
                double(differing), 0));
}

/// dst = s * w, exact in bf16 for a power-of-two s (a weight changed
/// between steps, its amax at most w's for |s| <= 1).
void upload_scaled(act_t *dst, const std::vector<float> &w, float s) {
  std::vector<float> ws(w.size());
  for (size_t i = 0; i < w.size(); ++i)
    ws[i] = s * float(act_t(w[i]));
  upload(dst, ws);
}

/// The weight's FP8 copy for a step (fp8_begin_step) against the per-call
/// casts (outside a step): three steps of two micro-batches (the forwards,
/// then each micro-batch's input-gradient call and weight-gradient call, as
/// the generated program makes them), W changed between steps. Step 0 runs
/// W, step 1 -W/2 (a stale copy would give step 0's bits), step 2 W/4 with
/// the backward calls only (the forward in bf16: the input gradient casts
/// the copy). W's scale is fmax / amax(W) after its first cast in both
/// paths (its history's maximum stays amax(W)), so every output is equal bit
/// for bit; W's meta records one amax a step, not one a GEMM.
void check_weight_copy(int64_t N, int64_t K, int64_t O, bool tw) {
  const std::string tag = "fp8 weight copy " + std::to_string(N) + "x" +
                          std::to_string(K) + "x" + std::to_string(O) +
                          (tw ? " wT" : " w");
  const auto w = random_values(gRng, O * K, -0.05f, 0.05f); // as stored
  const float stepScale[] = {1.0f, -0.5f, 0.25f};
  DevAct dW(w);
  const Microbatches mbs(N, K, O);
  const act_t *const *dX = mbs.x, *const *dDy = mbs.dy;
  struct Run {
    std::vector<std::vector<float>> values; // per step: outs, dxs, dw
    int32_t recorded[3] = {};               // W's meta after each step
    int64_t copyBytes = 0;
  };
  auto run = [&](bool inStep) {
    Run r;
    rt::fp8_clear_linears();
    rt::fp8_register_linear(dW.p); // fresh metas
    DevAlloc out(N * O), dx(N * K);
    DevFloat dw(std::vector<float>(size_t(O * K), 0.0f));
    for (int step = 0; step < 3; ++step) {
      upload_scaled(dW.p, w, stepScale[step]);
      rt::zero(dw.p, O * K * int64_t(sizeof(float)));
      if (inStep)
        rt::fp8_begin_step();
      for (int mb = 0; mb < 2 && step < 2; ++mb) {
        expect(
            rt::fp8_linear_forward(out.p, dX[mb], dW.p, nullptr, N, K, O, tw));
        r.values.push_back(download(out.p, N * O));
      }
      for (int mb = 0; mb < 2; ++mb) {
        expect(rt::fp8_linear_backward_dx(dx.p, dDy[mb], dW.p, N, K, O, tw,
                                          false));
        r.values.push_back(download(dx.p, N * K));
        expect(rt::fp8_linear_backward_dw(dw.p, dDy[mb], dX[mb], dW.p, N, K, O,
                                          tw));
      }
      r.values.push_back(download(dw.p, O * K));
      if (inStep)
        rt::fp8_end_step();
      r.recorded[step] = download_meta(rt::fp8_linear_metas(dW.p) + 1).recorded;
    }
    r.copyBytes = rt::fp8_weight_copy_bytes();
    return r;
  };
  const Run perCall = run(false), cached = run(true);
  expect_as_per_call(tag, perCall.values, cached.values);
  // Step 1's first forward (after step 0's 2 outputs, 2 input gradients
  // and weight gradient) follows -W/2: a stale copy would repeat step 0's.
  expect(report(tag + ": step 1's output equal to step 0's",
                cached.values[0] == cached.values[5] ? 1 : 0, 0));
  // Recorded amaxes: the priming pass and one a cast (saturating at 32).
  // Per call: 2 forward + 2 input-gradient casts a step (2 in step 2);
  // cached: one a step.
  const bool counts = perCall.recorded[0] == 5 && perCall.recorded[1] == 9 &&
                      perCall.recorded[2] == 11 && cached.recorded[0] == 2 &&
                      cached.recorded[1] == 3 && cached.recorded[2] == 4;
  expect(report(tag + ": W's recorded amaxes (per call 5, 9, 11; cached "
                      "2, 3, 4)",
                counts ? 0 : 1, 0));
  // The copy: 256 bytes of scale, then [O,K] and [K,O], each 256-aligned;
  // none outside a step.
  const int64_t slot = (O * K + 255) / 256 * 256;
  expect(report(
      tag + ": copy bytes (per call none, cached 256 + 2 layouts)",
      perCall.copyBytes == 0 && cached.copyBytes == 256 + 2 * slot ? 0 : 1, 0));
}

/// The step's copies under a CUDA graph, as the program runs its steps
/// (StepGraph: the first step eager, the second captured, the rest
/// replayed): four steps of two micro-batches' forward and gradients, W
/// changed before each (outside the body, as the optimizer runs), against
/// the per-call casts run eagerly, bit for bit. A replay that kept step 2's
/// copy would repeat its outputs; W's meta records one amax a step there too
/// (the priming pass, then one a step: 5).
void check_weight_copy_graph(int64_t N, int64_t K, int64_t O) {
  const std::string tag = "fp8 weight copy under a step graph " +
                          std::to_string(N) + "x" + std::to_string(K) + "x" +
                          std::to_string(O);
  const auto w = random_values(gRng, O * K, -0.05f, 0.05f); // [O,K]
  const float stepScale[] = {1.0f, -0.5f, 0.25f, 0.5f};     // amax <= step 0's
  DevAct dW(w);
  const Microbatches mbs(N, K, O);
  const act_t *const *dX = mbs.x, *const *dDy = mbs.dy;
  DevAlloc out0(N * O), out1(N * O), dx0(N * K), dx1(N * K);
  act_t *out[2] = {out0.p, out1.p}, *dx[2] = {dx0.p, dx1.p};
  DevFloat dw(std::vector<float>(size_t(O * K), 0.0f));
  auto body = [&](bool inStep) {
    if (inStep)
      rt::fp8_begin_step();
    rt::zero(dw.p, O * K * int64_t(sizeof(float)));
    for (int mb = 0; mb < 2; ++mb)
      expect(rt::fp8_linear_forward(out[mb], dX[mb], dW.p, nullptr, N, K, O,
                                    true));
    for (int mb = 0; mb < 2; ++mb) {
      expect(rt::fp8_linear_backward_dx(dx[mb], dDy[mb], dW.p, N, K, O, true,
                                        false));
      expect(rt::fp8_linear_backward_dw(dw.p, dDy[mb], dX[mb], dW.p, N, K, O,
                                        true));
    }
    if (inStep)
      rt::fp8_end_step();
  };
  auto run = [&](bool graphed) {
    std::vector<std::vector<float>> values;
    rt::fp8_clear_linears();
    rt::fp8_register_linear(dW.p); // fresh metas
    rt::StepGraph graph;
    for (int step = 0; step < 4; ++step) {
      upload_scaled(dW.p, w, stepScale[step]);
      if (graphed)
        graph.run([&] { body(true); });
      else
        body(false);
      for (int mb = 0; mb < 2; ++mb) {
        values.push_back(download(out[mb], N * O));
        values.push_back(download(dx[mb], N * K));
      }
      values.push_back(download(dw.p, O * K));
    }
    const bool replayed = graph.captured() && !graph.failed();
    graph.reset();
    return std::make_pair(values, replayed);
  };
  const auto perCall = run(false);
  const auto graphed = run(true);
  const int32_t recorded =
      download_meta(rt::fp8_linear_metas(dW.p) + 1).recorded;
  expect(report(tag + ": captured and replayed", graphed.second ? 0 : 1, 0));
  expect_as_per_call(tag, perCall.first, graphed.first);
  expect(report(tag + ": W's recorded amaxes (5)", recorded == 5 ? 0 : 1, 0));
}

/// An input two linears read in turn (LLaMA's gate and up), in a step: the
/// first forward casts x, the second reads it; the first weight-gradient
/// call casts x^T, the second reads it across the input-gradient call
/// between them. Against the per-call casts (outside a step) bit for bit:
/// both x metas scale by fmax / amax(x) after their first cast. Another op
/// between two forwards (fp8_note_op: a norm rewriting a recomputed layer's
/// scratch), or a backward call (fp8_note_linear), drops the held x: the
/// second forward then casts x again, with its new values.
void check_shared_input(int64_t N, int64_t K, int64_t O1, int64_t O2) {
  const std::string tag = "fp8 shared input " + std::to_string(N) + "x" +
                          std::to_string(K) + " -> " + std::to_string(O1) +
                          ", " + std::to_string(O2);
  const auto x = random_values(gRng, N * K, -1, 1),
             x2 = random_values(gRng, N * K, -1, 1);
  const auto w1 = random_values(gRng, O1 * K, -0.05f, 0.05f),
             w2 = random_values(gRng, O2 * K, -0.05f, 0.05f);
  const auto dy1 = random_values(gRng, N * O1, -1e-3f, 1e-3f),
             dy2 = random_values(gRng, N * O2, -1e-3f, 1e-3f);
  DevAct dX(x), dW1(w1), dW2(w2), dDy1(dy1), dDy2(dy2);
  struct Run {
    std::vector<std::vector<float>> values;
    int32_t recorded[2] = {}; // the x metas of W1's and W2's linears
  };
  auto run = [&](bool inStep, int refill) { // 0, 1 another op, 2 backward
    Run r;
    rt::fp8_clear_linears();
    rt::fp8_register_linear(dW1.p);
    rt::fp8_register_linear(dW2.p);
    upload(dX.p, x);
    DevAlloc out1(N * O1), out2(N * O2), dx(N * K);
    DevFloat dw1(std::vector<float>(size_t(O1 * K), 0.0f)),
        dw2(std::vector<float>(size_t(O2 * K), 0.0f));
    if (inStep)
      rt::fp8_begin_step();
    expect(
        rt::fp8_linear_forward(out1.p, dX.p, dW1.p, nullptr, N, K, O1, true));
    if (refill == 1)
      rt::fp8_note_op("rmsnorm");
    if (refill == 2)
      rt::fp8_note_linear(dX.p, true);
    if (refill)
      upload(dX.p, x2);
    expect(
        rt::fp8_linear_forward(out2.p, dX.p, dW2.p, nullptr, N, K, O2, true));
    r.values = {download(out1.p, N * O1), download(out2.p, N * O2)};
    if (!refill) {
      expect(rt::fp8_linear_backward_dx(dx.p, dDy2.p, dW2.p, N, K, O2, true,
                                        false));
      expect(rt::fp8_linear_backward_dw(dw2.p, dDy2.p, dX.p, dW2.p, N, K, O2,
                                        true));
      expect(rt::fp8_linear_backward_dx(dx.p, dDy1.p, dW1.p, N, K, O1, true,
                                        true));
      expect(rt::fp8_linear_backward_dw(dw1.p, dDy1.p, dX.p, dW1.p, N, K, O1,
                                        true));
      r.values.push_back(download(dx.p, N * K));
      r.values.push_back(download(dw1.p, O1 * K));
      r.values.push_back(download(dw2.p, O2 * K));
    }
    if (inStep)
      rt::fp8_end_step();
    for (int i = 0; i < 2; ++i)
      r.recorded[i] =
          download_meta(rt::fp8_linear_metas(i ? dW2.p : dW1.p)).recorded;
    return r;
  };
  const Run perCall = run(false, 0), shared = run(true, 0);
  expect(report(tag + ": outputs and gradients equal to the per-call casts'",
                perCall.values == shared.values ? 0 : 1, 0));
  // x's amaxes recorded, with the priming pass: per call forward and
  // weight-gradient casts of each (3, 3); shared, W1's forward casts x and
  // W2's weight-gradient call x^T (2, 2).
  expect(report(tag + ": x's recorded amaxes (per call 3, 3; shared 2, 2)",
                perCall.recorded[0] == 3 && perCall.recorded[1] == 3 &&
                        shared.recorded[0] == 2 && shared.recorded[1] == 2
                    ? 0
                    : 1,
                0));
  for (int refill : {1, 2}) {
    const Run refilledPerCall = run(false, refill),
              refilled = run(true, refill);
    expect(report(tag +
                      (refill == 1 ? ": after another op"
                                   : ": after a "
                                     "backward call") +
                      ", x cast again (new values)",
                  refilled.values == refilledPerCall.values &&
                          refilled.recorded[1] == 2
                      ? 0
                      : 1,
                  0));
  }
}

/// The size rule through Linear.h: a registered eligible linear runs FP8
/// GEMMs (new FP8 plans), an unregistered one and an odd one do not.
void check_dispatch() {
  const int64_t N = 2048, K = 2048, O = 2048, Nodd = 100, Kodd = 37;
  expect(report("rule: 2048x2048x2048 in FP8, 16384x768x768 not",
                autoddl::rt::fp8RunsLinear(N, K, O) &&
                        !autoddl::rt::fp8RunsLinear(16384, 768, 768) &&
                        !autoddl::rt::fp8RunsLinear(Nodd, Kodd, O)
                    ? 0
                    : 1,
                0));
  auto x = random_values(gRng, N * K, -1, 1);
  auto w = random_values(gRng, O * K, -0.05f, 0.05f);
  DevAct dX(x), dW(w), dU(w);
  DevAlloc out(N * O);
  rt::fp8_clear_linears();
  rt::fp8_register_linear(dW.p);
  const int64_t before = rt::fp8_gemm_plan_cache_size();
  rt::linear_forward(out.p, dX.p, dU.p, nullptr, N, K, O, true);
  const int64_t unregistered = rt::fp8_gemm_plan_cache_size() - before;
  rt::linear_forward(out.p, dX.p, dW.p, nullptr, N, K, O, true);
  const int64_t registered = rt::fp8_gemm_plan_cache_size() - before;
  report2("dispatch 2048x2048x2048 forward", download(out.p, N * O),
          gemm_tn(quantized(x, Fp8Format::E4M3), quantized(w, Fp8Format::E4M3),
                  N, O, K),
          gemm_tn(x, w, N, O, K), 0.06);
  // An odd registered linear: bf16, its FP8 plans untouched.
  auto xo = random_values(gRng, Nodd * Kodd, -1, 1);
  auto wo = random_values(gRng, O * Kodd, -0.05f, 0.05f);
  DevAct dXo(xo), dWo(wo);
  DevAlloc outo(Nodd * O);
  rt::fp8_register_linear(dWo.p);
  rt::linear_forward(outo.p, dXo.p, dWo.p, nullptr, Nodd, Kodd, O, true);
  const int64_t odd = rt::fp8_gemm_plan_cache_size() - before - registered;
  expect(report("dispatch: FP8 plans made (unregistered, registered, odd)",
                unregistered == 0 && registered == 1 && odd == 0 ? 0 : 1, 0));
  expect(report(
      "dispatch odd 100x37x2048 forward (bf16)",
      rel_error(download(outo.p, Nodd * O), gemm_tn(xo, wo, Nodd, O, Kodd)),
      kActTol));
}
/// Milliseconds per call of `fn`: the median of 5 runs of 10 after a
/// warm-up call (plans, autotuning, the casts' priming).
template <class Fn> float time_ms(Fn fn) {
  fn();
  cudaEvent_t a, b;
  AUTODDL_CUDA_CHECK(cudaEventCreate(&a));
  AUTODDL_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    AUTODDL_CUDA_CHECK(cudaEventRecord(a, rt::compute_stream()));
    for (int i = 0; i < 10; ++i)
      fn();
    AUTODDL_CUDA_CHECK(cudaEventRecord(b, rt::compute_stream()));
    AUTODDL_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / 10);
  }
  AUTODDL_CUDA_CHECK(cudaEventDestroy(a));
  AUTODDL_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

/// --bench: one linear's three GEMMs (forward, input and weight gradient) in
/// bf16 and in FP8 with its casts, at GPT-2 and 7B shapes, beside the size
/// rule's verdict (backends/common/Fp8Rule.h): the data to set
/// kFp8MinIntensity from. Milliseconds per linear and micro-batch.
void bench() {
  struct Shape {
    int64_t N, K, O;
  };
  const Shape shapes[] = {
      {16384, 768, 768},   {16384, 768, 2304},  {16384, 768, 3072},
      {16384, 3072, 768},  {16384, 1024, 1024}, {16384, 1024, 3072},
      {16384, 1024, 4096}, {16384, 1280, 1280}, {16384, 1280, 5120},
      {8192, 1600, 1600},  {8192, 1600, 4800},  {8192, 1600, 6400},
      {8192, 6400, 1600},  {4096, 4096, 4096},  {4096, 4096, 11008},
      {1024, 4096, 4096}};
  std::printf("%-20s %9s %9s %9s %7s %9s %7s %9s %9s %s\n", "N x K x O",
              "intensity", "bf16 ms", "fp8 ms", "fp8 x", "step ms", "step x",
              "gemms ms", "casts ms", "rule");
  for (const Shape &sh : shapes) {
    const int64_t N = sh.N, K = sh.K, O = sh.O;
    auto x = random_values(gRng, N * K, -1, 1);
    auto w = random_values(gRng, O * K, -0.05f, 0.05f);
    auto dy = random_values(gRng, N * O, -1e-3f, 1e-3f);
    DevAct dX(x), dW(w), dWb(w), dDy(dy); // dWb: unregistered, bf16
    DevAlloc out(N * O), dxo(N * K);
    DevFloat dw(std::vector<float>(size_t(O * K), 0.0f));
    rt::fp8_clear_linears();
    rt::fp8_register_linear(dW.p);
    const float tb = time_ms([&] {
      rt::linear_forward(out.p, dX.p, dWb.p, nullptr, N, K, O, true);
      rt::linear_backward(dxo.p, dw.p, nullptr, dDy.p, dX.p, dWb.p, N, K, O,
                          true, false);
    });
    auto fp8Calls = [&] {
      rt::fp8_linear_forward(out.p, dX.p, dW.p, nullptr, N, K, O, true);
      rt::fp8_linear_backward(dxo.p, dw.p, dDy.p, dX.p, dW.p, N, K, O, true,
                              false);
    };
    const float t8 = time_ms(fp8Calls);
    // In a step: W cast once (in the warm-up call), as a step's later
    // micro-batches run.
    rt::fp8_begin_step();
    const float t8s = time_ms(fp8Calls);
    rt::fp8_end_step();
    // Where the FP8 time goes: its three GEMMs on operands cast beforehand,
    // and its five casts alone (x, W twice each, dY once into both layouts,
    // as fp8_linear_forward and fp8_linear_backward cast).
    rt::DeviceBuffer<unsigned char> xq(N * K), wq(O * K), dyq(N * O),
        wT(K * O), dyT(O * N), xT(K * N);
    DevFloat scales(std::vector<float>(6 * 32, 1.0f)); // 128 bytes apart
    float *sc[6];
    for (int i = 0; i < 6; ++i)
      sc[i] = scales.p + 32 * i;
    rt::Fp8Meta *meta = rt::fp8_linear_metas(dW.p);
    auto casts = [&] {
      rt::fp8_cast(xq.data(), nullptr, sc[0], dX.p, N, K, Fp8Format::E4M3,
                   meta, true);
      rt::fp8_cast(wq.data(), nullptr, sc[1], dW.p, O, K, Fp8Format::E4M3,
                   meta + 1, true);
      rt::fp8_cast(dyq.data(), dyT.data(), sc[2], dDy.p, N, O,
                   Fp8Format::E5M2, meta + 2, true);
      rt::fp8_cast(nullptr, wT.data(), sc[3], dW.p, O, K, Fp8Format::E4M3,
                   meta + 1, true);
      rt::fp8_cast(nullptr, xT.data(), sc[5], dX.p, N, K, Fp8Format::E4M3,
                   meta, true);
    };
    casts();
    const float tc = time_ms(casts);
    const float tg = time_ms([&] {
      const auto none = rt::Fp8Epi::None;
      rt::fp8_gemm(N, O, K, xq.data(), Fp8Format::E4M3, sc[0], wq.data(),
                   Fp8Format::E4M3, sc[1], 0.0f, out.p, false, nullptr,
                   nullptr, none, nullptr, 0, true, false);
      rt::fp8_gemm(N, K, O, dyq.data(), Fp8Format::E5M2, sc[2], wT.data(),
                   Fp8Format::E4M3, sc[3], 0.0f, dxo.p, false, nullptr,
                   nullptr, none, nullptr, 0, false, false);
      rt::fp8_gemm(O, K, N, dyT.data(), Fp8Format::E5M2, sc[2], xT.data(),
                   Fp8Format::E4M3, sc[5], 1.0f, dw.p, true, nullptr, nullptr,
                   none, nullptr, 0, false, false);
    });
    const double n = double(N), k = double(K), o = double(O);
    const std::string name =
        std::to_string(N) + "x" + std::to_string(K) + "x" + std::to_string(O);
    std::printf("%-20s %9.0f %9.3f %9.3f %7.3f %9.3f %7.3f %9.3f %9.3f %s\n",
                name.c_str(), n * k * o / (n * k + k * o + n * o), tb, t8,
                tb / t8, t8s, tb / t8s, tg, tc,
                autoddl::rt::fp8RunsLinear(N, K, O) ? "fp8" : "bf16");
  }
}

/// --bench, second table: a GPT-2 MLP as the generated program calls it
/// (fc with its GELU epilogue, proj with its residual epilogue, proj's input
/// gradient through the GELU then its weight gradient, fc's two gradient
/// calls), bf16 against FP8, milliseconds per call pair and micro-batch.
void bench_mlp_calls() {
  struct Shape {
    int64_t N, C;
  };
  const Shape shapes[] = {{16384, 1024}, {16384, 1280}, {8192, 1600}};
  std::printf("\n%-14s %5s %21s %21s %21s %21s %9s\n", "N x C (MLP 4C)",
              "", "fc fwd +gelu", "proj fwd +residual", "proj bwd dgelu+dw",
              "fc bwd dx+dw", "total");
  for (const Shape &sh : shapes) {
    const int64_t N = sh.N, C = sh.C, H = 4 * C;
    auto v = [&](int64_t n, float a) { return random_values(gRng, n, -a, a); };
    DevAct x(v(N * C, 1)), res(v(N * C, 1)), dy(v(N * C, 1e-3f)),
        w1(v(C * H, 0.03f)), w2(v(H * C, 0.03f)), w1b(v(C * H, 0.03f)),
        w2b(v(H * C, 0.03f)), b1(v(H, 0.03f)), b2(v(C, 0.03f));
    DevAlloc pre(N * H), act(N * H), out(N * C), dpre(N * H), dx(N * C);
    DevFloat dw1(std::vector<float>(size_t(C * H), 0.0f)),
        dw2(std::vector<float>(size_t(H * C), 0.0f)),
        db1(std::vector<float>(size_t(H), 0.0f)),
        db2(std::vector<float>(size_t(C), 0.0f));
    rt::fp8_clear_linears();
    rt::fp8_register_linear(w1.p);
    rt::fp8_register_linear(w2.p);
    // The weights stored [in, out] as GPT-2's (transpose_weight false).
    auto calls = [&](const act_t *W1, const act_t *W2) {
      return std::array<float, 4>{
          time_ms([&] {
            rt::linear_gelu_forward(act.p, pre.p, x.p, W1, b1.p, N, C, H,
                                    false);
          }),
          time_ms([&] {
            rt::linear_residual_forward(out.p, res.p, act.p, W2, b2.p, N, H, C,
                                        false);
          }),
          time_ms([&] {
            rt::linear_backward_dgelu(dpre.p, dy.p, W2, pre.p, N, H, C, false);
            rt::linear_backward(nullptr, dw2.p, db2.p, dy.p, act.p, W2, N, H, C,
                                false);
          }),
          time_ms([&] {
            rt::linear_backward(dx.p, nullptr, nullptr, dpre.p, x.p, W1, N, C,
                                H, false, false);
            rt::linear_backward(nullptr, dw1.p, db1.p, dpre.p, x.p, W1, N, C, H,
                                false);
          })};
    };
    const auto tb = calls(w1b.p, w2b.p), t8 = calls(w1.p, w2.p);
    float sb = 0, s8 = 0;
    std::string row;
    char cell[64];
    for (int i = 0; i < 4; ++i) {
      sb += tb[size_t(i)], s8 += t8[size_t(i)];
      std::snprintf(cell, sizeof cell, " %6.3f/%6.3f %6.3fx", tb[size_t(i)],
                    t8[size_t(i)], tb[size_t(i)] / t8[size_t(i)]);
      row += cell;
    }
    const std::string name = std::to_string(N) + "x" + std::to_string(C);
    std::printf("%-14s %5s%s %6.3fx  (bf16/fp8 ms)\n", name.c_str(), "",
                row.c_str(), sb / s8);
  }
}
} // namespace

int main(int argc, char **argv) {
  if (!cuda_device_present("Fp8Check"))
    return 77;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  if (major * 10 + minor < 89) {
    std::printf("Fp8Check: compute capability %d.%d has no FP8, skipped\n",
                major, minor);
    return 77;
  }
  if (argc == 2 && std::strcmp(argv[1], "--bench") == 0) {
    gRng.seed(1);
    bench();
    bench_mlp_calls();
    return 0;
  }
  unsigned seed = 0;
  int status = 0;
  if (!seed_from_args(argc, argv, "Fp8Check", seed, status))
    return status;
  gRng.seed(seed);
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    check_cast(64, 96, f);
    check_cast(37, 53, f); // partial tiles
  }
  // GPT-2's block linears at 1024 tokens (qkv, attention projection, fc,
  // proj), the weight stored both ways, and an odd size (multiples of 16).
  check_linear(1024, 768, 2304, true);
  check_linear(1024, 768, 768, false);
  check_linear(1024, 768, 3072, true);
  check_linear(1024, 3072, 768, true);
  check_linear(272, 400, 1040, false);
  check_weight_copy(1024, 768, 2304, true);
  check_weight_copy(272, 400, 1040, false);
  check_weight_copy_graph(1024, 768, 2304);
  check_shared_input(1024, 768, 768, 2304);
  check_dispatch();
  std::printf("Fp8Check: %s\n", gFailures ? "FAILED" : "all passed");
  return gFailures ? 1 : 0;
}
