// KernelCheck's optimizer (AdamW, SGD), reduction and cast cases.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/cuda/kernels/GradClip.h"
#include "backends/cuda/kernels/Optimizer.h"
#include "backends/cuda/kernels/Reduce.h"

#include <algorithm>

namespace kcheck {

namespace {

/// Working copy check: work must equal the master weights rounded to act_t.
void check_work(const std::string &tag, const act_t *work,
                const std::vector<float> &params) {
  std::vector<float> want = params;
  for (float &v : want)
    v = round_act(v);
  gOk &= report(tag + " work copy",
                rel_error(download(work, int64_t(params.size())), want), 0.0);
}

} // namespace

void check_adamw(int64_t n, int64_t offset) {
  const std::string tag =
      "adamw n=" + std::to_string(n) + (offset ? " unaligned" : "");
  auto p = random_values(gRng, n, -1, 1, false);
  auto m = std::vector<float>(size_t(n), 0.0f), v = m;
  ref::AdamWConfig rc;
  rc.lr = 3e-4;
  rc.weight_decay = 0.1;
  rt::AdamWConfig gc;
  gc.lr = rc.lr;
  gc.weight_decay = rc.weight_decay;
  DevFloat dp(p, offset), dm(m, offset), dv(v, offset);
  rt::DeviceBuffer<act_t> work(n + offset);
  for (int64_t t = 1; t <= 3; ++t) {
    auto g = random_values(gRng, n, -0.01f, 0.01f, false);
    ref::adamw_step(p.data(), g.data(), m.data(), v.data(), n, rc, t);
    DevFloat dg(g, offset);
    rt::adamw_step(dp.p, dg.p, dm.p, dv.p, n, gc, t, work.data() + offset);
  }
  // Same operations in the same order, each correctly rounded (no FMA):
  // identical bits are expected; the bound allows for a different libm
  // rounding of the host-side pow/sqrt only.
  gOk &= report(tag + " params (3 steps)",
                rel_error(download_float(dp.p, n), p), 1e-6);
  gOk &= report(tag + " m", rel_error(download_float(dm.p, n), m), 1e-6);
  gOk &= report(tag + " v", rel_error(download_float(dv.p, n), v), 1e-6);
  check_work(tag, work.data() + offset, download_float(dp.p, n));
}

void check_sgd(int64_t n, float momentum) {
  const std::string tag = "sgd n=" + std::to_string(n) +
                          " momentum=" + std::to_string(momentum).substr(0, 3);
  auto p = random_values(gRng, n, -1, 1, false);
  std::vector<float> buf(size_t(n), 0.0f);
  DevFloat dp(p), db(buf);
  rt::DeviceBuffer<act_t> work(n);
  for (int64_t t = 1; t <= 2; ++t) {
    auto g = random_values(gRng, n, -0.1f, 0.1f, false);
    ref::sgd_step(p.data(), g.data(), momentum != 0 ? buf.data() : nullptr, n,
                  0.05f, momentum, 0.01f, t);
    DevFloat dg(g);
    rt::sgd_step(dp.p, dg.p, momentum != 0 ? db.p : nullptr, n, 0.05f, momentum,
                 0.01f, t, work.data());
  }
  gOk &= report(tag + " params (2 steps)",
                rel_error(download_float(dp.p, n), p), 1e-6);
  check_work(tag, work.data(), download_float(dp.p, n));
}

void check_grad_clip() {
  // Three ranges (one unaligned, one not counted: another rank's copy), the
  // norm against the CPU's double sum, the gradients against g x clip_factor.
  const int64_t sizes[3] = {(1 << 20) + 3, 17, 3 * rt::GradClip::kChunk + 1};
  std::vector<std::vector<float>> g;
  std::vector<DevFloat> dg;
  dg.reserve(3);
  for (int i = 0; i < 3; ++i) {
    g.push_back(random_values(gRng, sizes[i], -1, 1, false));
    dg.emplace_back(g.back(), i == 2 ? 1 : 0);
  }
  for (float max_norm : {1.0f, 1e9f}) { // clipped, then left alone
    double want = 0;
    for (int i : {0, 2})
      want += ref::grad_norm_squared(g[size_t(i)].data(), sizes[i]);
    rt::GradClip clip;
    for (int i = 0; i < 3; ++i)
      clip.add(dg[size_t(i)].p, sizes[i], i != 1);
    bool summed = false;
    clip.clip(max_norm, [&](double *) { summed = true; });
    rt::synchronize();
    const std::string tag = max_norm > 1 ? " (not clipped)" : "";
    gOk &=
        report("grad_clip norm" + tag,
               std::fabs(clip.last_norm() - std::sqrt(want)) / std::sqrt(want),
               1e-12) &&
        summed;
    const float f = ref::clip_factor(std::sqrt(want), max_norm);
    for (int i = 0; i < 3; ++i) {
      for (float &v : g[size_t(i)])
        v *= f;
      gOk &= report(
          "grad_clip scaled n=" + std::to_string(sizes[i]) + tag,
          rel_error(download_float(dg[size_t(i)].p, sizes[i]), g[size_t(i)]),
          1e-7);
    }
  }
}

void check_reductions(int64_t n) {
  const std::string sz = " n=" + std::to_string(n);
  auto g = random_values(gRng, n, -1, 1, false);
  DevFloat dg(g);
  const double want = ref::grad_norm_squared(g.data(), n);
  // Both sum the squares in double, the CPU sequentially: its error bound is
  // n 2^-53 relative, 4.7e-10 at n = 4.2M (measured 1.2e-12).
  gOk &= report("grad_norm_squared" + sz,
                std::fabs(rt::grad_norm_squared(dg.p, n) - want) / want, 1e-9);
  double sum = 0;
  for (float v : g)
    sum += v;
  gOk &= report("sum_to_host" + sz,
                std::fabs(rt::sum_to_host(dg.p, n) - sum) /
                    std::max(1.0, std::fabs(sum)),
                1e-9);
  rt::DeviceBuffer<act_t> a(n + 1);
  rt::DeviceBuffer<float> back(n + 1);
  for (int64_t off : {int64_t(0), int64_t(1)}) {
    rt::cast_to_act(a.data() + off, dg.p, n);
    std::vector<float> rounded = g;
    for (float &v : rounded)
      v = round_act(v);
    const std::string o = off ? " unaligned" : "";
    gOk &= report("cast_to_act" + sz + o,
                  rel_error(download(a.data() + off, n), rounded), 0.0);
    rt::cast_to_float(back.data() + off, a.data() + off, n);
    gOk &=
        report("cast_to_float" + sz + o,
               rel_error(download_float(back.data() + off, n), rounded), 0.0);
  }
}

} // namespace kcheck
