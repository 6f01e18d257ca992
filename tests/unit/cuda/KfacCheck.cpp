// KfacCheck: every CUDA K-FAC function (backends/cuda/kfac) against an fp64
// host reference (tests/unit/runtime/KfacReference.h: plain loops, Gauss-Jordan
// inverses) on fresh random inputs (seed printed; --seed N repeats). Built
// twice: bf16 act_t and -DAUTODDL_FP32.
//
// Error measure ||gpu - ref|| / ||ref|| per tensor. Bounds:
// - factors from act_t operands vs fp64 of the same (already rounded)
//   operands: 2e-5. A product of two bf16 values is exact in fp32 (8 + 8
//   significant bits), so the only error is fp32 summation over S <= 1001
//   terms (~sqrt(S) 2^-24 = 2e-6 typical; 2e-5 leaves a margin of 10).
// - the same factor vs fp64 of the unrounded fp32 inputs (what bf16 storage of
//   the activations costs): bf16 rounds each operand by <= 2^-9, a product by
//   <= 2^-8, so 1e-2 bounds the norm (measured ~2e-3); fp32 build 2e-5.
// - inverses by fp32 Cholesky of matrices with condition number < 50, d <= 768:
//   1e-4 (~kappa d^(1/2) 2^-24 = 8e-5 worst); the fp64 retry 1e-6 (one fp32
//   rounding of the result).
// - preconditioning (two inverses, two fp32 GEMMs): 2e-4 without TF32 (the
//   fp32 build); 3e-3 with TF32 operands (the bf16 build's fp32 mode,
//   AUTODDL_KFAC_PRECOND=fp32: each GEMM rounds its operands to 2^-11, ~sqrt(K)
//   partial errors cancel; measured below it). bf16 GEMMs (the bf16 build's
//   default): the inverses, the gradient and the intermediate each rounded to
//   bf16 (2^-9, RMS 1.1e-3 an element), fp32 sums: 1e-2; the same roundings
//   simulated in fp64 on these inputs gave 3.0e-3 to 3.3e-3 (2.7e-3 the bias).
//   The bf16 copies are bf16(A_inv), bf16(G_inv) exactly.
// - the asynchronous refresh (side stream, device-side damping) against the
//   synchronous one on the same factors: the same operations, so 1e-6.
// - SGD / LAMB against fp64 over three steps: 1e-6 (fp32 element-wise
//   arithmetic); the act_t working copy equals act_t(p) exactly.
// - the factor all-reduce, the gathered factors and the split preconditioning
//   run in two child processes over NCCL (one GPU each, or both on GPU 0 with
//   NCCL's socket transport as AUTODDL_SHARE_GPU does): against fp64 of the
//   whole layer, bounds as above.
//
// `KfacCheck --bench` times a step's preconditioning of GPT-2 124M and 355M
// in each mode (KfacCheckBench.cpp).
//
// Exit 0 pass, 1 fail, 77 no GPU (ctest SKIP_RETURN_CODE).
#include "backends/cuda/kfac/Kfac.h"
#include "tests/unit/cuda/KernelCheckUtil.h"
#include "tests/unit/runtime/KfacReference.h"

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {
using namespace kcheck;
using kfacref::Mat;

std::mt19937 gRng;
bool gOk = true;

/// Uniform values rounded to act_t (exact inputs for the reference).
std::vector<float> act_values(int64_t n, float scale) {
  return random_values(gRng, n, -scale, scale, true);
}

bool check(const std::string &what, double err, double tol) {
  const bool ok = report(what, err, tol);
  gOk &= ok;
  return ok;
}

template <class T> std::vector<float> to_host(const T *p, int64_t n) {
  return download(p, n);
}

std::vector<float> host_floats(const float *p, int64_t n) {
  std::vector<float> f(size_t(n > 0 ? n : 0));
  rt::copy_to_host(f.data(), p, n * int64_t(sizeof(float)));
  return f;
}

void put_floats(float *dst, const std::vector<float> &v) {
  rt::copy_to_device(dst, v.data(), int64_t(v.size() * sizeof(float)));
}

/// A random symmetric positive semi-definite factor X^T X / S (S >= d: with
/// the damping 0.1 its condition number is < 50).
std::vector<float> random_factor(int64_t S, int64_t d) {
  const auto X = random_values(gRng, S * d, -1.7f, 1.7f, false);
  const Mat F = kfacref::gram(X, S, d, 1.0 / double(S));
  return std::vector<float>(F.begin(), F.end());
}

void check_factors(int64_t S, int64_t d) {
  const auto X1 = random_values(gRng, S * d, -1.0f, 1.0f, false),
             X2 = random_values(gRng, S * d, -1.0f, 1.0f, false);
  std::vector<float> r1(X1.size()), r2(X2.size());
  for (size_t i = 0; i < X1.size(); ++i) {
    r1[i] = round_act(X1[i]);
    r2[i] = round_act(X2[i]);
  }
  const auto F0 = random_values(gRng, d * d, -0.1f, 0.1f, false); // +=
  rt::DeviceBuffer<act_t> x1(S * d), x2(S * d);
  upload(x1.data(), X1);
  upload(x2.data(), X2);
  rt::DeviceBuffer<float> F(d * d);
  put_floats(F.data(), F0);
  const float scale = 1.0f / float(2 * S);
  rt::kfac_accumulate(F.data(), x1.data(), S, d, scale);
  rt::kfac_accumulate(F.data(), x2.data(), S, d, scale);
  const auto got = host_floats(F.data(), d * d);
  auto reference = [&](const std::vector<float> &a,
                       const std::vector<float> &b) {
    Mat want = kfacref::gram(a, S, d, 1.0 / double(2 * S));
    const Mat w2 = kfacref::gram(b, S, d, 1.0 / double(2 * S));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] += w2[i] + F0[i];
    return want;
  };
  const std::string shape =
      "S=" + std::to_string(S) + " d=" + std::to_string(d);
  check("kfac_accumulate vs fp64 (act_t inputs) " + shape,
        kfacref::rel_error(got, reference(r1, r2)), 2e-5);
#ifdef AUTODDL_FP32
  const double unrounded = 2e-5;
#else
  const double unrounded = 1e-2;
#endif
  check("kfac_accumulate vs fp64 (fp32 inputs) " + shape,
        kfacref::rel_error(got, reference(X1, X2)), unrounded);
}

void check_inverse(int64_t d) {
  const auto F = random_factor(d + 60, d);
  const Mat want = kfacref::inverse(Mat(F.begin(), F.end()), d, 0.1);
  rt::DeviceBuffer<float> f(d * d), inv(d * d);
  put_floats(f.data(), F);
  poison(inv.data(), d * d * int64_t(sizeof(float)));
  const std::string shape = " d=" + std::to_string(d);
  gOk &= rt::kfac_cholesky_inverse(inv.data(), f.data(), d, 0.1);
  check("cholesky inverse fp32" + shape,
        kfacref::rel_error(host_floats(inv.data(), d * d), want), 1e-4);
  poison(inv.data(), d * d * int64_t(sizeof(float)));
  gOk &= rt::kfac_cholesky_inverse_fp64(inv.data(), f.data(), d, 0.1);
  check("cholesky inverse fp64" + shape,
        kfacref::rel_error(host_floats(inv.data(), d * d), want), 1e-6);
}

bool expect(const std::string &what, bool ok) {
  std::printf("%s %-58s %s\n", kMode, what.c_str(), ok ? "ok" : "FAIL");
  gOk &= ok;
  return ok;
}

void check_fallback() {
  // [[1,1],[1,1]] + 1e-9 I is singular in fp32 (1 + 1e-9 rounds to 1) and
  // positive definite in fp64: the retry succeeds.
  rt::DeviceBuffer<float> f(4), inv(4);
  put_floats(f.data(), {1, 1, 1, 1});
  expect("fallback: fp32 Cholesky refuses a singular factor",
         !rt::kfac_cholesky_inverse(inv.data(), f.data(), 2, 1e-9));
  expect("fallback: the fp64 retry inverts it",
         rt::kfac_invert_factor(inv.data(), f.data(), 2, 1e-9, false) ==
             rt::KfacInverseOutcome::Fp64);
  const double e = 1e-9, a = (1 - 1 / (2 + e)) / e, b = -1 / (2 + e) / e;
  check("fallback: fp64 inverse of the singular factor",
        kfacref::rel_error(host_floats(inv.data(), 4), Mat{a, b, b, a}), 1e-6);
  // Indefinite: kept previous (bits untouched) or none.
  put_floats(f.data(), {0, 2, 2, 0});
  const std::vector<float> prev = {3, 1, 1, 3};
  put_floats(inv.data(), prev);
  expect("fallback: an indefinite factor keeps the previous inverse",
         rt::kfac_invert_factor(inv.data(), f.data(), 2, 1e-3, true) ==
                 rt::KfacInverseOutcome::KeptPrevious &&
             host_floats(inv.data(), 4) == prev);
  expect("fallback: ... or leaves none at the first refresh",
         rt::kfac_invert_factor(inv.data(), f.data(), 2, 1e-3, false) ==
             rt::KfacInverseOutcome::NoInverse);
  put_floats(f.data(), {1, NAN, NAN, 1});
  expect("fallback: a non-finite factor fails in both precisions",
         !rt::kfac_cholesky_inverse(inv.data(), f.data(), 2, 1.0) &&
             !rt::kfac_cholesky_inverse_fp64(inv.data(), f.data(), 2, 1.0));
}

/// A refreshed layer from random act_t inputs X [S,in], dY [S,out]; the fp64
/// damped inverses of the same factors in Ai, Gi.
struct RefLayer {
  Mat Ai, Gi;
  double pi = 0;
};
RefLayer refresh_layer(rt::KfacLayer &l, int64_t S, const rt::KfacConfig &c,
                       rt::KfacStats &stats) {
  const auto X = act_values(S * l.in, 1.0f), dY = act_values(S * l.out, 0.05f);
  rt::DeviceBuffer<act_t> x(S * l.in), y(S * l.out);
  upload(x.data(), X);
  upload(y.data(), dY);
  rt::kfac_accumulate(l.A.data(), x.data(), S, l.in, 1.0f / float(S));
  rt::kfac_accumulate(l.G.data(), y.data(), S, l.out, 1.0f / float(S));
  rt::kfac_refresh(l, c, stats);
  const Mat A = kfacref::gram(X, S, l.in, 1.0 / double(S)),
            G = kfacref::gram(dY, S, l.out, 1.0 / double(S));
  RefLayer r;
  r.pi = std::sqrt((kfacref::trace(A, l.in) / double(l.in)) /
                   (kfacref::trace(G, l.out) / double(l.out)));
  r.Ai = kfacref::inverse(A, l.in, std::sqrt(c.damping) * r.pi);
  r.Gi = kfacref::inverse(G, l.out, std::sqrt(c.damping) / r.pi);
  return r;
}

/// The bound of a layer's preconditioning (see the top).
double precondition_tol(const rt::KfacLayer &l) {
#ifdef AUTODDL_FP32
  (void)l;
  return 2e-4;
#else
  return l.precondition_bf16() ? 1e-2 : 3e-3; // bf16 GEMMs; TF32 operands
#endif
}

/// The precision a layer preconditions in, for the checks' names.
std::string mode_of(const rt::KfacLayer &l) {
  return l.precondition_bf16() ? " bf16" : " fp32";
}

/// A layer of the same size, preconditioning in the other precision (in
/// the fp32 build: fp32 too), with copies of l's inverses installed.
rt::KfacLayer other_mode(const rt::KfacLayer &l) {
  rt::KfacLayer o(l.in, l.out, !l.precondition_bf16());
  // On the compute stream, which kfac_inverses_installed's rounding and the
  // preconditioning use (non-blocking: a plain cudaMemcpy is not ordered
  // before them).
  const auto copy = [](float *dst, const float *src, int64_t n) {
    AUTODDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float),
                                       cudaMemcpyDeviceToDevice,
                                       rt::compute_stream()));
  };
  copy(o.A_inv.data(), l.A_inv.data(), l.in * l.in);
  copy(o.G_inv.data(), l.G_inv.data(), l.out * l.out);
  o.a_valid = l.a_valid;
  o.g_valid = l.g_valid;
  o.damping = l.damping;
  rt::kfac_inverses_installed(o);
  return o;
}

/// The bf16 copies a refresh or an install writes: exactly the inverses
/// rounded to bf16 (none in the fp32 build).
void check_inverse_copies(const rt::KfacLayer &l, const std::string &shape) {
#ifdef AUTODDL_FP32
  expect("no bf16 inverse copies in the fp32 build" + shape,
         !l.precondition_bf16() && l.A_inv_bf16.size() == 0);
#else
  if (!l.precondition_bf16())
    return;
  for (bool g : {false, true}) {
    const int64_t d = g ? l.out : l.in;
    auto want = host_floats(g ? l.G_inv.data() : l.A_inv.data(), d * d);
    for (float &x : want)
      x = round_act(x);
    check(
        std::string("bf16 copy of the installed ") + (g ? "G" : "A") +
            " inverse" + shape,
        rel_error(to_host(g ? l.G_inv_bf16.data() : l.A_inv_bf16.data(), d * d),
                  want),
        0.0);
  }
#endif
}

/// Queued inversions (kfac_inverse_launch + kfac_inverse_finish) on a copy
/// of the factors kfac_refresh inverts synchronously: the same damping and
/// inverses. Two layers in two slots, their factors launched interleaved
/// (G first for one: the damping goes with the layer's first launch) and
/// finished one layer at a time.
void check_async_refresh(int64_t in, int64_t out) {
  rt::KfacConfig c;
  c.damping = 1e-2;
  rt::KfacStats stats;
  rt::KfacLayer sync(in, out);
  std::vector<rt::KfacLayer> async;
  async.emplace_back(out, in); // slot 0: the other shape
  async.emplace_back(in, out); // slot 1: compared
  const int64_t S = in + out + 64;
  const auto X = act_values(S * in, 1.0f), dY = act_values(S * out, 0.05f);
  rt::DeviceBuffer<act_t> x(S * in), y(S * out);
  upload(x.data(), X);
  upload(y.data(), dY);
  for (rt::KfacLayer *l : {&sync, &async[1]}) {
    rt::kfac_accumulate(l->A.data(), x.data(), S, in, 1.0f / float(S));
    rt::kfac_accumulate(l->G.data(), y.data(), S, out, 1.0f / float(S));
  }
  rt::kfac_accumulate(async[0].A.data(), y.data(), S, out, 1.0f / float(S));
  rt::kfac_accumulate(async[0].G.data(), x.data(), S, in, 1.0f / float(S));
  rt::kfac_refresh(sync, c, stats);
  rt::kfac_inverse_reserve(async.data(), 2);
  rt::kfac_inverse_launch(async[1], 1, 1, c.damping, true, true);
  rt::kfac_inverse_launch(async[0], 0, 0, c.damping, true);
  rt::kfac_inverse_launch(async[1], 1, 0, c.damping, false, true);
  rt::kfac_inverse_launch(async[0], 0, 1, c.damping, false);
  rt::KfacLayer *ls[] = {&async[1], &async[0]};
  const int64_t slots[] = {1, 0};
  rt::KfacInverseOutcome o[4];
  rt::KfacSpan spans[4];
  rt::kfac_inverse_finish(ls, slots, 1, o, spans);
  rt::kfac_inverse_finish(ls + 1, slots + 1, 1, o + 2, spans + 2);
  const std::string shape =
      " in=" + std::to_string(in) + " out=" + std::to_string(out);
  const rt::KfacLayer &a1 = async[1];
  expect("async refresh: all fp32, the same damping, timed where asked" + shape,
         o[0] == rt::KfacInverseOutcome::Fp32 &&
             o[1] == rt::KfacInverseOutcome::Fp32 &&
             o[2] == rt::KfacInverseOutcome::Fp32 &&
             o[3] == rt::KfacInverseOutcome::Fp32 && a1.a_next_valid &&
             a1.g_next_valid && async[0].a_next_valid &&
             async[0].g_next_valid && a1.damping.a == sync.damping.a &&
             a1.damping.g == sync.damping.g && spans[0].dur_ms > 0 &&
             spans[1].dur_ms > 0 && spans[2].dur_ms == 0);
  const rt::KfacLayer &async_layer = async[1];
  auto rel = [](const std::vector<float> &a, const std::vector<float> &b) {
    return kfacref::rel_error(a, Mat(b.begin(), b.end()));
  };
  check("async refresh: A inverse" + shape,
        rel(host_floats(async_layer.A_next.data(), in * in),
            host_floats(sync.A_inv.data(), in * in)),
        1e-6);
  check("async refresh: G inverse" + shape,
        rel(host_floats(async_layer.G_next.data(), out * out),
            host_floats(sync.G_inv.data(), out * out)),
        1e-6);
}

void check_preconditioned(const rt::KfacLayer &l, const RefLayer &ref,
                          const std::string &shape) {
  const int64_t in = l.in, out = l.out;
  for (bool torchLayout : {true, false}) {
    const auto dW = random_values(gRng, in * out, -1.0f, 1.0f, false),
               db = random_values(gRng, out, -1.0f, 1.0f, false);
    rt::DeviceBuffer<float> w(in * out), wo(in * out), b(out), bo(out);
    put_floats(w.data(), dW);
    put_floats(b.data(), db);
    poison(wo.data(), in * out * int64_t(sizeof(float)));
    rt::kfac_precondition(wo.data(), w.data(), bo.data(), b.data(), l,
                          torchLayout);
    const Mat D(dW.begin(), dW.end());
    const Mat want =
        torchLayout ? kfacref::matmul(kfacref::matmul(ref.Gi, D, out, out, in),
                                      ref.Ai, out, in, in)
                    : kfacref::matmul(kfacref::matmul(ref.Ai, D, in, in, out),
                                      ref.Gi, in, out, out);
    const std::string layout = torchLayout ? " [out,in]" : " [in,out]";
    check("precondition G^-1 dW A^-1" + layout + shape,
          kfacref::rel_error(host_floats(wo.data(), in * out), want),
          precondition_tol(l));
    // In place, as the program preconditions a whole layer's gradient.
    rt::kfac_precondition(w.data(), w.data(), nullptr, nullptr, l, torchLayout);
    check("precondition in place" + layout + shape,
          kfacref::rel_error(host_floats(w.data(), in * out), want),
          precondition_tol(l));
    check("precondition G^-1 db" + shape,
          kfacref::rel_error(
              host_floats(bo.data(), out),
              kfacref::matmul(ref.Gi, Mat(db.begin(), db.end()), out, out, 1)),
          precondition_tol(l));
  }
}

/// Both preconditionings (bf16 GEMMs on the copies the refresh wrote, and
/// fp32) of one refreshed layer against fp64.
void check_precondition(int64_t in, int64_t out) {
  rt::KfacConfig c;
  c.damping = 1e-2;
  rt::KfacStats stats;
  rt::KfacLayer l(in, out);
  const RefLayer ref = refresh_layer(l, in + out + 64, c, stats);
  const std::string shape =
      " in=" + std::to_string(in) + " out=" + std::to_string(out);
  check("refresh: pi from the device traces" + shape,
        std::fabs(l.damping.pi - ref.pi) / ref.pi, 1e-5);
  expect("refresh: both inverses in fp32, factors zeroed" + shape,
         stats.inverses_fp32 == 2 && stats.refreshes == 1 &&
             host_floats(l.A.data(), in * in) ==
                 std::vector<float>(size_t(in * in), 0.0f));
  check_inverse_copies(l, shape);
  const rt::KfacLayer other = other_mode(l);
  for (const rt::KfacLayer *layer : {&std::as_const(l), &other})
    check_preconditioned(*layer, ref, shape + mode_of(*layer));
}

void check_sgd(int64_t n, double momentum) {
  rt::KfacConfig c;
  c.lr = 0.05;
  c.momentum = momentum;
  c.weight_decay = 0.1;
  auto p = random_values(gRng, n, -1.0f, 1.0f, false);
  Mat pd(p.begin(), p.end()), bd(static_cast<size_t>(n), 0.0);
  rt::DeviceBuffer<float> dp(n), dd(n), buf(n);
  rt::DeviceBuffer<act_t> work(n);
  put_floats(dp.data(), p);
  for (int64_t s = 1; s <= 3; ++s) {
    const auto d = random_values(gRng, n, -1.0f, 1.0f, false);
    put_floats(dd.data(), d);
    rt::kfac_sgd_step(dp.data(), dd.data(),
                      momentum != 0 ? buf.data() : nullptr, n, c, s,
                      work.data());
    for (size_t i = 0; i < size_t(n); ++i) {
      bd[i] = s == 1 ? d[i] : momentum * bd[i] + d[i];
      pd[i] = pd[i] * (1 - c.lr * c.weight_decay) -
              c.lr * (momentum != 0 ? bd[i] : double(d[i]));
    }
  }
  const auto got = host_floats(dp.data(), n);
  check("kfac_sgd_step x3 n=" + std::to_string(n) +
            " momentum=" + std::to_string(momentum),
        kfacref::rel_error(got, pd), 1e-6);
  std::vector<float> rounded(got.size());
  for (size_t i = 0; i < got.size(); ++i)
    rounded[i] = round_act(got[i]);
  check("kfac_sgd_step working copy = act_t(p)",
        rel_error(to_host(work.data(), n), rounded), 0.0);
}

/// The running average's fold (kfac_axpby, KfacCycle.h): y = a y + b x,
/// each element one fp32 multiply-add pair as the CPU's loop (1e-6 of fp64).
void check_axpby(int64_t n) {
  const auto y = random_values(gRng, n, -1.0f, 1.0f, false);
  const auto x = random_values(gRng, n, -1.0f, 1.0f, false);
  rt::DeviceBuffer<float> dy(n), dx(n);
  put_floats(dy.data(), y);
  put_floats(dx.data(), x);
  rt::kfac_axpby(dy.data(), 0.95f, dx.data(), 0.05f * 0.25f, n);
  Mat want(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i)
    want[i] = 0.95 * double(y[i]) + 0.05 * 0.25 * double(x[i]);
  check("kfac_axpby (factor average fold) n=" + std::to_string(n),
        kfacref::rel_error(host_floats(dy.data(), n), want), 1e-6);
}

/// A factor stride's selection (kfac_select_rows, docs/kfac.md "Factor
/// stride"): samples b % S == 0 of `samples` samples of `block` rows each,
/// copied together; a copy, so exact.
void check_select_rows(int64_t samples, int64_t block, int64_t d, int64_t S) {
  const int64_t rows = samples * block;
  const auto X = act_values(rows * d, 1.0f);
  rt::DeviceBuffer<act_t> x(rows * d);
  upload(x.data(), X);
  const rt::KfacRowStride r = rt::kfac_row_stride(rows, samples, S);
  const act_t *picked = rt::kfac_select_rows(x.data(), d, r);
  std::vector<float> want;
  for (int64_t b = 0; b < samples; b += S)
    for (int64_t i = b * block * d; i < (b + 1) * block * d; ++i)
      want.push_back(X[size_t(i)]);
  check("kfac_select_rows samples=" + std::to_string(samples) +
            " block=" + std::to_string(block) + " d=" + std::to_string(d) +
            " S=" + std::to_string(S),
        rel_error(to_host(picked, r.rows() * d), want), 0.0);
}

/// The same where `step` rows span more than cudaDevAttrMaxPitch bytes (the
/// 2-d copy refuses such a pitch): rows of d = 8,192, two samples of one row
/// selected with S past the limit. Only the two selected rows are written
/// and read, of a buffer of about the limit (2 GiB).
void check_select_rows_past_max_pitch() {
  constexpr int64_t d = 8192;
  const int64_t row = d * int64_t(sizeof(act_t));
  int device = 0, maxPitch = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&maxPitch, cudaDevAttrMaxPitch, device);
  const int64_t S = int64_t(maxPitch) / row + 1; // an int: under 2 GiB
  rt::DeviceBuffer<act_t> x((S + 1) * d);
  const auto first = act_values(d, 1.0f), second = act_values(d, 1.0f);
  upload(x.data(), first);
  upload(x.data() + S * d, second);
  const rt::KfacRowStride r = rt::kfac_row_stride(2 * S, 2 * S, S);
  std::vector<float> want = first;
  want.insert(want.end(), second.begin(), second.end());
  check("kfac_select_rows S=" + std::to_string(S) + " d=8192 (pitch past " +
            std::to_string(maxPitch) + " bytes)",
        rel_error(to_host(rt::kfac_select_rows(x.data(), d, r), 2 * d), want),
        0.0);
}

void check_lamb(int64_t n) {
  rt::KfacConfig c;
  c.rule = rt::KfacRule::Lamb;
  c.lr = 0.01;
  c.weight_decay = 0.01;
  auto p = random_values(gRng, n, -1.0f, 1.0f, false);
  Mat pd(p.begin(), p.end()), md(static_cast<size_t>(n), 0.0),
      vd(static_cast<size_t>(n), 0.0);
  rt::DeviceBuffer<float> dp(n), dd(n), m(n), v(n);
  put_floats(dp.data(), p);
  for (int64_t t = 1; t <= 3; ++t) {
    const auto d = random_values(gRng, n, -0.1f, 0.1f, false);
    put_floats(dd.data(), d);
    rt::kfac_lamb_step(dp.data(), dd.data(), m.data(), v.data(), n, c, t,
                       nullptr, nullptr);
    kfacref::lamb_step(pd, md, vd, d,
                       {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay}, t);
  }
  check("kfac_lamb_step x3 n=" + std::to_string(n),
        kfacref::rel_error(host_floats(dp.data(), n), pd), 1e-6);
  check("kfac_lamb_step moments",
        kfacref::rel_error(host_floats(m.data(), n), md), 1e-6);
}

// AdamW on step 1 (no direction), grafted on steps 2 and 3.
void check_adam_graft(int64_t n) {
  rt::KfacConfig c;
  c.rule = rt::KfacRule::AdamGraft;
  c.lr = 0.01;
  c.weight_decay = 0.01;
  auto p = random_values(gRng, n, -1.0f, 1.0f, false);
  Mat pd(p.begin(), p.end()), md(static_cast<size_t>(n), 0.0),
      vd(static_cast<size_t>(n), 0.0);
  rt::DeviceBuffer<float> dp(n), dg(n), dd(n), m(n), v(n);
  put_floats(dp.data(), p);
  for (int64_t t = 1; t <= 3; ++t) {
    const auto g = random_values(gRng, n, -0.1f, 0.1f, false);
    const auto d = random_values(gRng, n, -3.0f, 3.0f, false);
    put_floats(dg.data(), g);
    put_floats(dd.data(), d);
    rt::kfac_adam_graft_step(dp.data(), dg.data(), t > 1 ? dd.data() : nullptr,
                             m.data(), v.data(), n, c, t, nullptr, nullptr);
    kfacref::adam_graft_step(pd, md, vd, g, t > 1 ? &d : nullptr,
                             {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay},
                             t);
  }
  check("kfac_adam_graft_step x3 n=" + std::to_string(n),
        kfacref::rel_error(host_floats(dp.data(), n), pd), 1e-6);
  check("kfac_adam_graft_step moments",
        kfacref::rel_error(host_floats(v.data(), n), vd), 1e-6);
}

// ---- two ranks over NCCL (child processes) ----

/// A failed NCCL call in a child: the message, and the child fails.
#define KFAC_CHECK_NCCL(x)                                                     \
  do {                                                                         \
    const ncclResult_t nr_ = (x);                                              \
    if (nr_ != ncclSuccess) {                                                  \
      std::printf("%s  FAIL\n", ncclGetErrorString(nr_));                      \
      return 1;                                                                \
    }                                                                          \
  } while (0)

/// One rank of the two-rank checks; returns the exit status (0 pass, 1 fail,
/// 77 no GPU).
int nccl_rank(int rank, int fdWrite, int fdRead, unsigned seed) {
  alarm(300); // a hung collective ends the child (the parent reports it)
  // Each end of the pipe in one child only: rank 1's read sees the end of
  // the file when rank 0 stops before writing.
  close(rank == 0 ? fdRead : fdWrite);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return 77;
  // Two ranks on one GPU: a host id each, NCCL's socket transport on
  // loopback (what AUTODDL_SHARE_GPU does for the generated programs).
  if (devices < 2) {
    setenv("NCCL_HOSTID", ("autoddl-kfac-rank-" + std::to_string(rank)).c_str(),
           1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  AUTODDL_CUDA_CHECK(cudaSetDevice(rank % devices));
  ncclUniqueId id;
  if (rank == 0) {
    KFAC_CHECK_NCCL(ncclGetUniqueId(&id));
    if (write(fdWrite, &id, sizeof id) != ssize_t(sizeof id))
      return 1;
  } else if (read(fdRead, &id, sizeof id) != ssize_t(sizeof id)) {
    return 1;
  }
  ncclComm_t comm = nullptr;
  KFAC_CHECK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
  gRng.seed(seed); // both ranks draw the same values, the whole layer's
  const int p = 2;
  const int64_t S = 96, in = 48, out = 40;
  const auto X = act_values(S * in, 1.0f), dY = act_values(S * out, 0.05f);
  // The factor all-reduce: rank r holds rows [r S/2, (r+1) S/2) (a data-
  // parallel share), scale 1/(S/2); the mean is the whole batch's factor.
  const int64_t Sl = S / p;
  rt::DeviceBuffer<act_t> xr(Sl * in);
  upload(xr.data(), std::vector<float>(X.begin() + rank * Sl * in,
                                       X.begin() + (rank + 1) * Sl * in));
  rt::DeviceBuffer<float> Fa(in * in);
  rt::kfac_accumulate(Fa.data(), xr.data(), Sl, in, 1.0f / float(Sl));
  rt::kfac_factor_all_reduce_mean(Fa.data(), in * in, comm);
  const Mat A = kfacref::gram(X, S, in, 1.0 / double(S)),
            G = kfacref::gram(dY, S, out, 1.0 / double(S));
  check("rank " + std::to_string(rank) + " factor all-reduce mean (dp)",
        kfacref::rel_error(host_floats(Fa.data(), in * in), A), 2e-5);
  // Column shards gathered (column-parallel dY, row-parallel X).
  const int64_t outL = out / p;
  std::vector<float> yShard(size_t(S * outL));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t j = 0; j < outL; ++j)
      yShard[size_t(s * outL + j)] = dY[size_t(s * out + rank * outL + j)];
  rt::DeviceBuffer<act_t> ys(S * outL);
  upload(ys.data(), yShard);
  rt::KfacLayer l(in, out);
  rt::kfac_accumulate_gathered(l.G.data(), ys.data(), S, outL, 1.0f / float(S),
                               comm);
  check("rank " + std::to_string(rank) + " gathered factor (tp column shards)",
        kfacref::rel_error(host_floats(l.G.data(), out * out), G), 2e-5);
  rt::DeviceBuffer<act_t> x(S * in);
  upload(x.data(), X);
  rt::kfac_accumulate(l.A.data(), x.data(), S, in, 1.0f / float(S));
  rt::KfacConfig c;
  c.damping = 1e-2;
  rt::KfacStats stats;
  rt::kfac_refresh(l, c, stats);
  const double pi = std::sqrt((kfacref::trace(A, in) / double(in)) /
                              (kfacref::trace(G, out) / double(out)));
  const Mat Ai = kfacref::inverse(A, in, std::sqrt(c.damping) * pi),
            Gi = kfacref::inverse(G, out, std::sqrt(c.damping) / pi);
  const auto dW = random_values(gRng, in * out, -1.0f, 1.0f, false),
             db = random_values(gRng, out, -1.0f, 1.0f, false);
  const rt::KfacLayer other = other_mode(l);
  for (const rt::KfacLayer *layer : {&std::as_const(l), &other})
    for (rt::KfacSplit split : {rt::KfacSplit::Out, rt::KfacSplit::In})
      for (bool torchLayout : {true, false}) {
        const Mat D(dW.begin(), dW.end());
        const int64_t rowsW = torchLayout ? out : in,
                      colsW = torchLayout ? in : out;
        const Mat full =
            torchLayout ? kfacref::matmul(kfacref::matmul(Gi, D, out, out, in),
                                          Ai, out, in, in)
                        : kfacref::matmul(kfacref::matmul(Ai, D, in, in, out),
                                          Gi, in, out, out);
        const bool byOut = split == rt::KfacSplit::Out;
        const bool splitRows = byOut == torchLayout;
        const int64_t r0 = splitRows ? rank * rowsW / p : 0,
                      nR = splitRows ? rowsW / p : rowsW,
                      c0 = splitRows ? 0 : rank * colsW / p,
                      nC = splitRows ? colsW : colsW / p;
        std::vector<float> shard(size_t(nR * nC));
        Mat want(size_t(nR * nC));
        for (int64_t i = 0; i < nR; ++i)
          for (int64_t j = 0; j < nC; ++j) {
            shard[size_t(i * nC + j)] = dW[size_t((r0 + i) * colsW + c0 + j)];
            want[size_t(i * nC + j)] = full[size_t((r0 + i) * colsW + c0 + j)];
          }
        const int64_t bL = byOut ? out / p : out, b0 = byOut ? rank * bL : 0;
        const Mat fullb =
            kfacref::matmul(Gi, Mat(db.begin(), db.end()), out, out, 1);
        rt::DeviceBuffer<float> w(nR * nC), wo(nR * nC), b(bL), bo(bL);
        put_floats(w.data(), shard);
        put_floats(b.data(),
                   std::vector<float>(db.begin() + b0, db.begin() + b0 + bL));
        rt::kfac_precondition_split(wo.data(), w.data(), bo.data(), b.data(),
                                    *layer, torchLayout, split, comm);
        const std::string what = "rank " + std::to_string(rank) + " split " +
                                 (byOut ? "out" : "in") +
                                 (torchLayout ? " [out,in]" : " [in,out]") +
                                 mode_of(*layer);
        check(what + " preconditioned block",
              kfacref::rel_error(host_floats(wo.data(), nR * nC), want),
              precondition_tol(*layer));
        check(what + " preconditioned bias",
              kfacref::rel_error(
                  host_floats(bo.data(), bL),
                  Mat(fullb.begin() + b0, fullb.begin() + b0 + bL)),
              precondition_tol(*layer));
      }
  // LAMB over two shards equals LAMB of the whole parameter.
  const int64_t n = 2 * 1001;
  auto whole = random_values(gRng, n, -1.0f, 1.0f, false);
  rt::KfacConfig lc;
  lc.rule = rt::KfacRule::Lamb;
  lc.lr = 0.02;
  lc.weight_decay = 0.1;
  rt::DeviceBuffer<float> pw(n), dw(n), mw(n), vw(n), ps(n / 2), ms(n / 2),
      vs(n / 2);
  put_floats(pw.data(), whole);
  put_floats(ps.data(), std::vector<float>(whole.begin() + rank * n / 2,
                                           whole.begin() + (rank + 1) * n / 2));
  for (int64_t t = 1; t <= 3; ++t) {
    put_floats(dw.data(), random_values(gRng, n, -0.1f, 0.1f, false));
    rt::kfac_lamb_step(pw.data(), dw.data(), mw.data(), vw.data(), n, lc, t,
                       nullptr, nullptr);
    rt::kfac_lamb_step(ps.data(), dw.data() + rank * n / 2, ms.data(),
                       vs.data(), n / 2, lc, t, comm, nullptr);
  }
  const auto wholeOut = host_floats(pw.data(), n);
  check("rank " + std::to_string(rank) + " LAMB over shards (norm all-reduce)",
        kfacref::rel_error(host_floats(ps.data(), n / 2),
                           Mat(wholeOut.begin() + rank * n / 2,
                               wholeOut.begin() + (rank + 1) * n / 2)),
        1e-6);
  ncclCommDestroy(comm);
  return gOk ? 0 : 1;
}

/// Runs the two NCCL ranks as child processes (before this process touches
/// CUDA: a forked CUDA context is unusable). Returns 0 pass, 1 fail, 77 no
/// GPU.
int run_nccl_ranks(unsigned seed) {
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  std::fflush(stdout);
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      const int rc = nccl_rank(r, fds[1], fds[0], seed);
      std::fflush(stdout);
      _exit(rc);
    }
  }
  close(fds[0]);
  close(fds[1]);
  int result = 0;
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (rc == 77 && result == 0)
      result = 77;
    else if (rc != 0 && rc != 77) {
      std::printf("KfacCheck: NCCL rank %d ended with status %d%s  FAIL\n", r,
                  rc, WIFSIGNALED(status) ? " (signal)" : "");
      result = 1;
    }
  }
  return result;
}

} // namespace

void kfac_precondition_bench(); // KfacCheckBench.cpp

int main(int argc, char **argv) {
  if (argc == 2 && std::strcmp(argv[1], "--bench") == 0) {
    if (!cuda_device_present("KfacCheck"))
      return 77;
    kfac_precondition_bench();
    return 0;
  }
  unsigned seed = 0;
  int status = 0;
  if (!seed_from_args(argc, argv, "KfacCheck", seed, status))
    return status;
  const int ncclResult = run_nccl_ranks(seed + 1);
  if (!cuda_device_present("KfacCheck"))
    return 77;
  gOk &= ncclResult == 0;
  gRng.seed(seed);
  check_factors(1001, 768); // GPT-2 width, rows not a multiple of a tile
  check_factors(37, 45);    // odd: unaligned leading dimensions
  check_factors(129, 64);
  for (int64_t d : {1, 2, 45, 64, 768})
    check_inverse(d);
  check_fallback();
  check_async_refresh(96, 40);
  check_async_refresh(384, 1152);
  check_precondition(96, 40);
  check_precondition(45, 37);
  check_precondition(768, 256);
  check_sgd(100003, 0.9);
  check_sgd(1001, 0.0);
  check_lamb(100003);
  check_lamb(37);
  check_adam_graft(100003);
  check_adam_graft(37);
  check_axpby(768 * 768 + 1);
  check_axpby(5);
  check_select_rows(8, 64, 96, 2);
  check_select_rows(6, 1, 5, 3);
  check_select_rows_past_max_pitch();
  std::printf("KfacCheck (%s): %s\n", kMode, gOk ? "PASS" : "FAIL");
  return gOk ? 0 : 1;
}
