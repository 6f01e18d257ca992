// KernelCheck's runtime cases: DeviceBuffer, ZeroSet, StepGraph, device init.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/cuda/StepGraph.h"
#include "backends/cuda/kernels/Elementwise.h"
#include "backends/cuda/kernels/Init.h"
#include "backends/cuda/kernels/Samples.h"

#include "backends/common/Data.h"

#include <algorithm>
#include <utility>

namespace kcheck {

namespace {

/// init_normal_on_device against the host's init_normal on blocks of a full
/// tensor (whole, split along each kind of dimension, rank 1 and 3): the same
/// floats, but for the rare element where the device's log or cos rounds a
/// double differently (then 1 ulp); fill_on_device exactly.
void check_init() {
  const rt::Slice cases[] = {
      rt::Slice::whole({1001, 45}),
      rt::Slice::whole({4096, 768}).split(1, 4, 2),
      rt::Slice::whole({768, 3072}).split(0, 3, 1).split(1, 2, 1),
      rt::Slice::whole({(1 << 20) + 3}),
      rt::Slice::whole({6, 33, 70}).split(2, 2, 1),
  };
  for (const rt::Slice &slice : cases) {
    const int64_t n = slice.numel();
    std::vector<float> want(static_cast<size_t>(n));
    rt::init_normal(want.data(), slice, 1234, "h.3.attn.c_attn.weight", 0.25f,
                    0.02f);
    rt::DeviceBuffer<float> got(n + 5);
    rt::init_normal_on_device(got.data(), slice, 1234, "h.3.attn.c_attn.weight",
                              0.25f, 0.02f);
    const std::vector<float> host = download_float(got.data(), n + 5);
    int64_t differ = 0;
    double worst = 0.0;
    for (int64_t k = 0; k < n; ++k)
      if (host[size_t(k)] != want[size_t(k)]) {
        ++differ;
        worst = std::max(worst,
                         double(std::fabs(host[size_t(k)] - want[size_t(k)])) /
                             std::fabs(want[size_t(k)]));
      }
    bool tail = true; // the elements past the slice stay zero
    for (int64_t k = n; k < n + 5; ++k)
      tail &= host[size_t(k)] == 0.0f;
    std::string shape;
    for (int64_t d : slice.local)
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    gOk &= report("init_normal_on_device " + shape + ": elements differing",
                  double(differ) / double(n) + (tail ? 0.0 : 1.0), 1e-6);
    gOk &= report("init_normal_on_device " + shape + ": their error", worst,
                  1.2e-7);
  }
  rt::DeviceBuffer<float> ones(1003);
  rt::fill_on_device(ones.data(), 1000, 1.0f);
  std::vector<float> want(1003, 1.0f);
  want[1000] = want[1001] = want[1002] = 0.0f;
  gOk &= report("fill_on_device",
                rel_error(download_float(ones.data(), 1003), want), 0.0);
}

/// synthetic_classes_on_device against the host's synthetic_classes: the same
/// labels, and the same features rounded to act_t but for the rare value where
/// the device's log or cos rounds a double differently (1 ulp of the float,
/// which may move its act_t rounding by one step).
void check_class_samples() {
  const int64_t B = 24, F = 3 * 17 * 19, K = 37, b0 = 8, nb = 9, step = 5;
  std::vector<float> x(size_t(nb * F));
  std::vector<int32_t> labels(static_cast<size_t>(nb));
  rt::synthetic_classes(99, step, B, F, K, 4.0, b0, nb, x.data(),
                        labels.data());
  rt::DeviceBuffer<act_t> gx(nb * F);
  rt::DeviceBuffer<int32_t> gy(nb);
  rt::synthetic_classes_on_device(gx.data(), gy.data(), 99, step, B, F, K, 4.0,
                                  b0, nb);
  std::vector<int32_t> got(static_cast<size_t>(nb));
  AUTODDL_CUDA_CHECK(cudaMemcpy(got.data(), gy.data(), size_t(nb) * 4,
                                cudaMemcpyDeviceToHost));
  gOk &= report("synthetic_classes_on_device labels", got == labels ? 0.0 : 1.0,
                0.0);
  const std::vector<float> gotX = download(gx.data(), nb * F);
  int64_t differ = 0;
  double worst = 0.0;
  for (size_t k = 0; k < x.size(); ++k)
    if (gotX[k] != round_act(x[k])) {
      ++differ;
      worst = std::max(worst, double(std::fabs(gotX[k] - x[k])) /
                                  std::max(1e-30, double(std::fabs(x[k]))));
    }
  gOk &= report("synthetic_classes_on_device features differing",
                double(differ) / double(x.size()), 1e-4);
  gOk &= report("synthetic_classes_on_device their error", worst,
                sizeof(act_t) == 4 ? 1.2e-7 : 8e-3);
  // Labels alone (x null) and features alone (labels null) agree too.
  rt::DeviceBuffer<act_t> gx2(nb * F);
  rt::synthetic_classes_on_device(gx2.data(), nullptr, 99, step, B, F, K, 4.0,
                                  b0, nb);
  gOk &= report("synthetic_classes_on_device without labels",
                rel_error(download(gx2.data(), nb * F), gotX), 0.0);
  // Drawn channels-last (images [3, 17 * 19] stored [17 * 19, 3]): the same
  // values, permuted.
  const int64_t C = 3, P = F / C;
  rt::DeviceBuffer<act_t> gx3(nb * F);
  rt::synthetic_classes_on_device(gx3.data(), nullptr, 99, step, B, F, K, 4.0,
                                  b0, nb, C);
  std::vector<float> permuted(gotX.size());
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p)
        permuted[size_t(b * F + p * C + c)] = gotX[size_t(b * F + c * P + p)];
  gOk &= report("synthetic_classes_on_device channels-last",
                rel_error(download(gx3.data(), nb * F), permuted), 0.0);
}

/// ZeroSet: ranges at odd addresses and lengths (a byte, under 16, several
/// chunks, a chunk exactly) in one buffer of 0xAB bytes; after zero() the
/// ranges' bytes are 0 and every other byte is still 0xAB, twice (reuse).
void check_zero_set() {
  const int64_t chunk = rt::ZeroSet::kChunkBytes, total = 5 * chunk + 4096;
  rt::DeviceBuffer<unsigned char> buf(total);
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 1},
      {3, 13},
      {17, 2 * chunk + 5},
      {2 * chunk + 64, chunk},
      {4 * chunk + 7, chunk + 100}};
  std::vector<unsigned char> want(size_t(total), 0xAB);
  for (auto [at, n] : ranges)
    std::fill(want.begin() + at, want.begin() + at + n, 0);
  rt::ZeroSet set;
  for (auto [at, n] : ranges)
    set.add(buf.data() + at, n);
  set.add(buf.data(), 0); // empty: ignored
  set.seal();
  bool same = set.ranges() == int64_t(ranges.size());
  for (int round = 0; round < 2; ++round) {
    std::vector<unsigned char> fill(static_cast<size_t>(total), 0xAB),
        got(static_cast<size_t>(total), 0);
    rt::copy_to_device(buf.data(), fill.data(), total);
    set.zero();
    rt::copy_to_host(got.data(), buf.data(), total);
    same &= got == want;
  }
  gOk &= report("ZeroSet zeroes its ranges and nothing else", same ? 0.0 : 1.0,
                0.0);
}

/// StepGraph: a body (zero y, then y += x twice) run eagerly, captured, then
/// replayed with new x uploaded before each call (outside the body): y = 2x
/// every time, exactly (small integers); one graph, captured at the second
/// call, with at least the body's three nodes.
void check_step_graph() {
  const int64_t n = 4099;
  rt::DeviceBuffer<act_t> x(n), y(n);
  rt::StepGraph graph;
  auto body = [&] {
    rt::zero(y.data(), n * int64_t(sizeof(act_t)));
    rt::add_into(y.data(), x.data(), n);
    rt::add_into(y.data(), x.data(), n);
  };
  bool same = true;
  for (int call = 0; call < 4; ++call) {
    std::vector<float> xs(static_cast<size_t>(n)), want(xs.size());
    for (int64_t i = 0; i < n; ++i) {
      xs[size_t(i)] = float((i * 7 + call * 3) % 16);
      want[size_t(i)] = 2 * xs[size_t(i)];
    }
    upload(x.data(), xs);
    graph.run(body);
    same &= download(y.data(), n) == want;
    same &= graph.captured() == (call >= 1);
  }
  gOk &= report("StepGraph: eager, captured, replayed with new inputs",
                same && !graph.failed() && graph.nodes() >= 3 ? 0.0 : 1.0, 0.0);
  graph.reset();
}

} // namespace

void check_runtime() {
  const int64_t before = rt::current_device_bytes();
  {
    rt::DeviceBuffer<float> b(1000003);
    gOk &= report("DeviceBuffer zero-filled",
                  rel_error(download_float(b.data(), b.size()),
                            std::vector<float>(size_t(b.size()), 0.0f)),
                  0.0);
    gOk &= report("peak_device_bytes >= live bytes",
                  rt::peak_device_bytes() >= before + 1000003 * 4 ? 0.0 : 1.0,
                  0.0);
    rt::DeviceBuffer<float> moved = std::move(b);
    gOk &= report("DeviceBuffer move leaves the source empty",
                  b.size() == 0 && b.data() == nullptr ? 0.0 : 1.0, 0.0);
  }
  gOk &= report("DeviceBuffer frees (current bytes back)",
                double(rt::current_device_bytes() - before), 0.0);
  check_zero_set();
  check_step_graph();
  check_init();
  check_class_samples();
}

} // namespace kcheck
