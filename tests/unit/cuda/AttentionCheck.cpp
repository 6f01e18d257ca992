// AttentionCheck: the GPU attention (backends/cuda/kernels/Attention.h)
// against the CPU kernel (backends/cpu/kernels/Attention.h) on fresh random
// inputs: fused and separate q/k/v, causal and not, grouped-query heads,
// lengths that are not multiples of the tiles, D = 16/32/64/128 (tensor
// cores under bf16) and D = 48 (the simple kernels). Exit 0 pass, 1 fail, 77
// no GPU (ctest SKIP_RETURN_CODE).
//
// Error bound, per tensor (out, dq, dk, dv): max |gpu - ref| <= tol *
// max |ref|, ref computed in fp32 by the CPU kernel from the same inputs
// (rounded to act_t first). tol = 2e-2 under bf16: the kernels round P and dS
// to bf16 (relative 2^-9) before their second GEMMs and the results to bf16
// (2^-9 again), each element a sum of terms of both signs, so a few 2^-8 of
// the largest element is what rounding alone gives; an indexing or masking
// error moves whole elements (errors of order max|ref|). tol = 1e-4 under
// AUTODDL_FP32 (fp32 throughout: sums of at most 1000 terms in a different
// order, ~1e-6 relative). Gradients start from random values (the kernels
// add), so the check covers the accumulation too. Where the build has cuDNN,
// each case runs four ways: the own kernels, cuDNN's fused attention, and
// each mixed (one's forward and lse, the other's backward); cuDNN also rounds
// P and dS to bf16 before its second GEMMs, so the same bound holds.
#include "backends/cuda/kernels/Attention.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

// The CPU kernels declare the same names in autoddl::rt (with float
// pointers; identical signatures under AUTODDL_FP32), so the reference lives
// in its own namespace. Its standard includes are already in, so their guards
// keep them out of it.
// The views (backends/common/AttentionViews.h, templates over the element
// type) are already in too: the reference uses them as they are.
namespace cpu::autoddl::rt {
using ::autoddl::rt::attention_qkv_grad_views;
using ::autoddl::rt::attention_qkv_views;
using ::autoddl::rt::AttentionGradViewsOf;
using ::autoddl::rt::AttentionViewsOf;
} // namespace cpu::autoddl::rt
namespace cpu {
#include "backends/cpu/kernels/Attention.h"
} // namespace cpu

namespace {

namespace rt = autoddl::rt;
namespace ref = cpu::autoddl::rt;
using rt::act_t;

#ifdef AUTODDL_FP32
constexpr double kTol = 1e-4;
const char *const kMode = "fp32";
#else
constexpr double kTol = 2e-2;
const char *const kMode = "bf16";
#endif

struct Case {
  int64_t B, T, H, G, D;
  bool causal, fused, needDq;
  bool store = false; // accumulate = false: gradients stored, not added
};

/// One tensor on host (values already rounded to act_t) and device.
struct Tensor {
  std::vector<float> host;
  rt::DeviceBuffer<act_t> dev;
};

Tensor random_tensor(std::mt19937 &rng, int64_t n, float range) {
  std::uniform_real_distribution<float> u(-range, range);
  Tensor t{std::vector<float>(size_t(n)), rt::DeviceBuffer<act_t>(n)};
  std::vector<act_t> a(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    a[size_t(i)] = act_t(u(rng));
    t.host[size_t(i)] = float(a[size_t(i)]);
  }
  rt::copy_to_device(t.dev.data(), a.data(), n * int64_t(sizeof(act_t)));
  return t;
}

std::vector<float> download(const act_t *p, int64_t n) {
  std::vector<act_t> a(static_cast<size_t>(n));
  rt::copy_to_host(a.data(), p, n * int64_t(sizeof(act_t)));
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    f[size_t(i)] = float(a[size_t(i)]);
  return f;
}

#ifdef AUTODDL_FP32
constexpr double kStoreRounding = 1e-6; // relative rounding of a stored value
#else
constexpr double kStoreRounding = 1.0 / 256; // bf16: 2^-8 relative, rounded
#endif

/// The error of an output or of what a backward added to a gradient that
/// started at `init` (empty: started at 0): max over elements of |got - ref|
/// less the rounding of storing ref itself in act_t, over max |ref - init|.
/// NaN anywhere in got gives NaN (fails).
double rel_error(const std::vector<float> &got, const std::vector<float> &ref,
                 const std::vector<float> &init) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(double(got[i]) - double(ref[i]));
    if (std::isnan(e))
      return NAN;
    err = std::max(err, e - kStoreRounding * std::fabs(double(ref[i])));
    mag = std::max(mag, std::fabs(double(ref[i]) -
                                  (init.empty() ? 0.0 : double(init[i]))));
  }
  return mag > 0 ? err / mag : err;
}

/// Columns [c0, c1) of a row-major [rows, cols] matrix.
std::vector<float> columns(const std::vector<float> &m, int64_t cols,
                           int64_t c0, int64_t c1) {
  std::vector<float> r;
  for (size_t i = 0; i < m.size(); i += size_t(cols))
    r.insert(r.end(), m.begin() + long(i + size_t(c0)),
             m.begin() + long(i + size_t(c1)));
  return r;
}

/// Which implementation runs the forward and the backward (cuDNN where the
/// build has it and cuDNN takes the shape, else the own kernels).
struct Path {
  const char *name;
  bool cudnnForward, cudnnBackward;
};

bool report(const char *what, const Case &c, const Path &path, double err) {
  const bool ok = err <= kTol; // false for NaN
  std::printf("%s %-13s %-4s B=%lld T=%lld H=%lld G=%lld D=%lld %s %s%s: "
              "max err / max |ref| = %.3g (tol %.0e)%s\n",
              kMode, path.name, what, (long long)c.B, (long long)c.T,
              (long long)c.H, (long long)c.G, (long long)c.D,
              c.causal ? "causal" : "full", c.fused ? "fused" : "separate",
              !c.needDq ? " no-dq"
              : c.store ? " stored"
                        : "",
              err, kTol, ok ? "" : "  FAIL");
  return ok;
}

/// Puts a gradient back to its starting state: its random values, or the
/// poison (all-ones bytes: NaN) of a stored one.
void reset_grad(Tensor &g, bool store) {
  if (store) {
    AUTODDL_CUDA_CHECK(
        cudaMemset(g.dev.data(), 0xff, g.dev.size() * sizeof(act_t)));
    return;
  }
  std::vector<act_t> a(g.host.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = act_t(g.host[i]);
  rt::copy_to_device(g.dev.data(), a.data(), int64_t(a.size() * sizeof(act_t)));
}

/// One path's GPU run against the reference (outputs poisoned first:
/// all-ones bytes are NaN in bf16 and fp32, so an element the kernel does not
/// write fails the check).
bool check_path(const Case &c, const Path &path, const rt::AttentionViews &in,
                const rt::AttentionGradViews &grad, std::vector<Tensor> &grads,
                const std::vector<std::vector<float>> &refGrads,
                const std::vector<float> &refOut, const Tensor &dout) {
  const int64_t B = c.B, T = c.T, H = c.H, G = c.G, D = c.D;
  const int64_t rows = B * T;
  const int64_t fusedCols = (H + 2 * G) * D;
  rt::DeviceBuffer<act_t> out(rows * H * D);
  rt::DeviceBuffer<float> lse(rt::attention_saved_floats(B, H, T));
  AUTODDL_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.size() * sizeof(act_t)));
  AUTODDL_CUDA_CHECK(cudaMemset(lse.data(), 0xff, lse.size() * sizeof(float)));
  rt::attention_use_cudnn(path.cudnnForward);
  rt::attention_forward(out.data(), lse.data(), in, B, T, H, G, D, c.causal);
  const std::vector<float> gotOut = download(out.data(), out.size());
  // The forward has no atomics: a second run must give the same bits (a
  // missing barrier shows up here as a difference).
  rt::attention_forward(out.data(), lse.data(), in, B, T, H, G, D, c.causal);
  const std::vector<float> gotOut2 = download(out.data(), out.size());
  const bool repeatable =
      std::equal(gotOut.begin(), gotOut.end(), gotOut2.begin(),
                 [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; });

  rt::attention_use_cudnn(path.cudnnBackward);
  rt::attention_backward(grad, dout.dev.data(), out.data(), lse.data(), in, B,
                         T, H, G, D, c.causal, !c.store);
  rt::synchronize();

  bool ok = report("out", c, path, rel_error(gotOut, refOut, {}));
  if (!repeatable) {
    std::printf("%s %s out: two forward runs differ  FAIL\n", kMode, path.name);
    ok = false;
  }
  // Each of dq, dk, dv on its own (a fused gradient is cut into its parts).
  const char *names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    if (i == 0 && !c.needDq) {
      // Not asked for: dq must be left exactly as it was.
      const std::vector<float> got =
          c.fused ? columns(download(grads[0].dev.data(), grads[0].dev.size()),
                            fusedCols, 0, H * D)
                  : download(grads[0].dev.data(), grads[0].dev.size());
      const std::vector<float> init =
          c.fused ? columns(grads[0].host, fusedCols, 0, H * D) : grads[0].host;
      if (got != init) {
        std::printf("%s %s dq changed though not asked for  FAIL\n", kMode,
                    path.name);
        ok = false;
      }
      continue;
    }
    std::vector<float> got, want, init;
    if (c.fused) {
      const int64_t c0 = i == 0 ? 0 : (H + (i - 1) * G) * D;
      const int64_t c1 = i == 0 ? H * D : c0 + G * D;
      got = columns(download(grads[0].dev.data(), grads[0].dev.size()),
                    fusedCols, c0, c1);
      want = columns(refGrads[0], fusedCols, c0, c1);
      init = columns(grads[0].host, fusedCols, c0, c1);
    } else {
      const Tensor &g = grads[size_t(i)];
      got = download(g.dev.data(), g.dev.size());
      want = refGrads[size_t(i)];
      init = g.host;
    }
    ok &= report(names[i], c, path, rel_error(got, want, init));
  }
  return ok;
}

bool check(const Case &c, std::mt19937 &rng) {
  const int64_t B = c.B, T = c.T, H = c.H, G = c.G, D = c.D;
  const int64_t rows = B * T;
  // Inputs in [-2, 2]: scores q.k/sqrt(D) with standard deviation ~1.3, so
  // both sharp and flat softmax rows occur.
  const float range = 2.0f;
  // q/k/v either one fused [B,T,(H+2G)D] tensor or three; the same for their
  // gradients, which start random (the kernels add into them).
  const int64_t fusedCols = (H + 2 * G) * D;
  std::vector<Tensor> inputs, grads;
  if (c.fused) {
    inputs.push_back(random_tensor(rng, rows * fusedCols, range));
    grads.push_back(random_tensor(rng, rows * fusedCols, 0.5f));
  } else {
    for (int64_t cols : {H * D, G * D, G * D}) {
      inputs.push_back(random_tensor(rng, rows * cols, range));
      grads.push_back(random_tensor(rng, rows * cols, 0.5f));
    }
  }
  Tensor dout = random_tensor(rng, rows * H * D, 1.0f);
  // A stored gradient starts poisoned on the device (all-ones bytes: NaN)
  // and is compared with the reference's from zero.
  if (c.store)
    for (Tensor &g : grads)
      std::fill(g.host.begin(), g.host.end(), 0.0f);

  rt::AttentionViews in;
  rt::AttentionGradViews grad;
  ref::AttentionViews refIn;
  ref::AttentionGradViews refGrad;
  std::vector<std::vector<float>> refGrads;
  for (const Tensor &g : grads)
    refGrads.push_back(g.host);
  if (c.fused) {
    in = rt::attention_qkv_views(inputs[0].dev.data(), H, G, D);
    grad = rt::attention_qkv_grad_views(grads[0].dev.data(), H, G, D);
    refIn = ref::attention_qkv_views(inputs[0].host.data(), H, G, D);
    refGrad = ref::attention_qkv_grad_views(refGrads[0].data(), H, G, D);
  } else {
    in = {inputs[0].dev.data(), inputs[1].dev.data(), inputs[2].dev.data(),
          H * D, G * D};
    grad = {grads[0].dev.data(), grads[1].dev.data(), grads[2].dev.data(),
            H * D, G * D};
    refIn = {inputs[0].host.data(), inputs[1].host.data(),
             inputs[2].host.data(), H * D, G * D};
    refGrad = {refGrads[0].data(), refGrads[1].data(), refGrads[2].data(),
               H * D, G * D};
  }
  if (!c.needDq) {
    grad.dq = nullptr;
    refGrad.dq = nullptr;
  }

  // CPU reference (fp32, probabilities saved).
  std::vector<float> refOut(size_t(rows * H * D)), att(size_t(B * H * T * T));
  ref::attention_forward(refOut.data(), att.data(), refIn, B, T, H, G, D,
                         c.causal);
  ref::attention_backward(refGrad, dout.host.data(), att.data(), refIn, B, T, H,
                          G, D);

  // Each path on the same inputs: the own kernels, cuDNN, and each mixed
  // (cuDNN's saved lse read by the own backward and the reverse).
  std::vector<Path> paths{{"own", false, false}};
  if (rt::attention_cudnn_built())
    paths.insert(paths.end(), {{"cudnn", true, true},
                               {"cudnn-fwd/own", true, false},
                               {"own-fwd/cudnn", false, true}});
  bool ok = true;
  for (const Path &path : paths) {
    rt::attention_use_cudnn(path.cudnnForward);
    const bool fwdTaken =
        rt::attention_forward_uses_cudnn(in, B, T, H, G, D, c.causal);
    rt::attention_use_cudnn(path.cudnnBackward);
    const bool bwdTaken =
        rt::attention_backward_uses_cudnn(grad, in, B, T, H, G, D, c.causal);
    if ((path.cudnnForward && !fwdTaken) || (path.cudnnBackward && !bwdTaken)) {
      std::printf("%s %-13s B=%lld T=%lld H=%lld G=%lld D=%lld %s: cuDNN "
                  "takes forward %s, backward %s (own kernels run there)\n",
                  kMode, path.name, (long long)B, (long long)T, (long long)H,
                  (long long)G, (long long)D, c.causal ? "causal" : "full",
                  fwdTaken ? "yes" : "no", bwdTaken ? "yes" : "no");
      if (!fwdTaken && !bwdTaken)
        continue; // the own path again
    }
    for (Tensor &g : grads)
      reset_grad(g, c.store);
    ok &= check_path(c, path, in, grad, grads, refGrads, refOut, dout);
  }
  rt::attention_use_cudnn(true);
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  // --quick: only the cases with T <= 200 (for compute-sanitizer runs).
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("AttentionCheck: no CUDA device, skipped\n");
    return 77;
  }
  std::random_device seed;
  const unsigned s = seed();
  std::printf("AttentionCheck (%s), seed %u\n", kMode, s);
  std::mt19937 rng(s);
  const Case cases[] = {
      // B, T, H, G, D, causal, fused, needDq
      {2, 100, 4, 2, 64, true, true, true},
      {2, 100, 4, 4, 64, false, false, true},
      {1, 1000, 4, 2, 64, true, false, true},
      {1, 1000, 2, 1, 128, true, true, true},
      {2, 300, 2, 2, 128, false, false, true},
      {2, 130, 4, 2, 128, true, true, true},
      {2, 77, 4, 1, 16, true, true, true},
      {2, 200, 4, 2, 16, false, true, true},
      {2, 129, 4, 2, 32, true, false, true},
      {1, 64, 2, 2, 64, true, true, true},
      {1, 1, 2, 1, 64, true, false, true},
      {2, 150, 4, 2, 64, true, true, false},
      {2, 90, 3, 3, 48, true, true, true},
      {1, 70, 2, 1, 48, false, false, true},
      // B*T*H odd (the dQ accumulator after the delta rows must stay 8-byte
      // aligned for the float2 atomics); D = 32 and 64 without the mask (the
      // two-key-tile backward).
      {1, 77, 3, 3, 64, true, true, true},
      {1, 77, 3, 1, 64, false, false, true},
      {1, 95, 3, 3, 32, false, true, true},
      // Stored gradients (tensor cores fused and separate, the simple path).
      {2, 100, 4, 2, 64, true, true, true, true},
      {2, 130, 4, 2, 128, false, false, true, true},
      {2, 90, 3, 3, 48, true, true, true, true},
  };
  bool ok = true;
  for (const Case &c : cases) {
    std::mt19937 caseRng(rng());
    if (quick && c.T > 200)
      continue;
    ok &= check(c, caseRng);
  }
  std::printf("AttentionCheck (%s): %s\n", kMode, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
