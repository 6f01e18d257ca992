// The FP8 linears' scaling state through a checkpoint (backends/cuda/
// kernels/Fp8.h: fp8_save_state, fp8_restore_state; docs/checkpoints.md "FP8
// scaling"), on the GPU, as a program resumes: one linear trained four steps
// of two micro-batches under a step graph (the first step eager, the second
// captured, the rest replayed), its weight and inputs changing amax every
// step (the weight's last one above its history's maximum, so its scale
// moves inside that step), its state saved after step 2. Then, as a resumed
// program starts, the linear registered afresh and its rows restored: its
// step 3 (eager, as a resumed run's first step) repeats the uninterrupted
// step 3 bit for bit (outputs, gradients and the state after it); without
// the rows (primed again from step 3's tensors, the weight's layouts learnt
// one at a time) it does not, so the check can fail.
// Exits 77 without a CUDA device, or one without FP8 tensor cores (< 8.9).
#include "backends/cuda/StepGraph.h"
#include "backends/cuda/kernels/Fp8.h"
#include "tests/unit/cuda/KernelCheckUtil.h"

namespace {
using namespace kcheck;

int gFailures = 0;
void expect(bool ok) { gFailures += ok ? 0 : 1; }

constexpr int64_t N = 1024, K = 768, O = 2304; // GPT-2's qkv at 1024 tokens
constexpr int kSteps = 4, kSaveAfter = 3;      // steps 0..2, save, step 3
// The weight's amax per step (x the stored one): step 3 above the history's
// maximum (its cast saturates at the delayed scale, and sets a new one);
// the inputs' falling, so a primed scale differs from the delayed one.
constexpr float kWeightScale[kSteps] = {0.5f, 1.0f, 0.25f, 1.5f};
constexpr float kInputScale[kSteps] = {1.0f, 0.5f, 0.25f, 0.125f};

std::vector<float> scaled(const std::vector<float> &v, float s) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = s * v[i];
  return out;
}

struct Linear {
  std::mt19937 rng{7};
  std::vector<float> w = random_values(rng, O *K, -0.05f, 0.05f);
  std::vector<float> x[2] = {random_values(rng, N *K, -1, 1),
                             random_values(rng, N *K, -1, 1)};
  std::vector<float> dy[2] = {random_values(rng, N *O, -1e-3f, 1e-3f),
                              random_values(rng, N *O, -1e-3f, 1e-3f)};
  DevAct dW{w}, dX0{x[0]}, dX1{x[1]}, dDy0{dy[0]}, dDy1{dy[1]};
  DevAlloc out0{N * O}, out1{N * O}, dx0{N * K}, dx1{N * K};
  DevFloat dw{std::vector<float>(size_t(O * K), 0.0f)};
  act_t *X[2] = {dX0.p, dX1.p}, *Dy[2] = {dDy0.p, dDy1.p};
  act_t *out[2] = {out0.p, out1.p}, *dx[2] = {dx0.p, dx1.p};

  /// Step `s`'s tensors, uploaded outside the step (as the optimizer and
  /// the data loads run).
  void load(int s) {
    upload(dW.p, scaled(w, kWeightScale[s]));
    for (int mb = 0; mb < 2; ++mb) {
      upload(X[mb], scaled(x[mb], kInputScale[s]));
      upload(Dy[mb], scaled(dy[mb], kInputScale[s]));
    }
  }
  /// The generated program's step: the forwards, then each micro-batch's
  /// input- and weight-gradient calls.
  void body() {
    rt::fp8_begin_step();
    rt::zero(dw.p, O * K * int64_t(sizeof(float)));
    for (int mb = 0; mb < 2; ++mb)
      expect(
          rt::fp8_linear_forward(out[mb], X[mb], dW.p, nullptr, N, K, O, true));
    for (int mb = 0; mb < 2; ++mb) {
      expect(rt::fp8_linear_backward_dx(dx[mb], Dy[mb], dW.p, N, K, O, true,
                                        false));
      expect(
          rt::fp8_linear_backward_dw(dw.p, Dy[mb], X[mb], dW.p, N, K, O, true));
    }
    rt::fp8_end_step();
  }
  /// The step's outputs and gradients, and the state after it.
  std::vector<std::vector<float>> results() {
    std::vector<std::vector<float>> r;
    for (int mb = 0; mb < 2; ++mb) {
      r.push_back(download(out[mb], N * O));
      r.push_back(download(dx[mb], N * K));
    }
    r.push_back(download(dw.p, O * K));
    r.push_back(rows());
    return r;
  }
  std::vector<float> rows() {
    std::vector<float> row(static_cast<size_t>(rt::kFp8RowFloats));
    const act_t *ws[] = {dW.p};
    rt::fp8_save_state(ws, 1, row.data());
    return row;
  }
};

/// Elements of a and b (each result's) that differ in their bits.
int64_t differing(const std::vector<std::vector<float>> &a,
                  const std::vector<std::vector<float>> &b) {
  int64_t d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j)
      d += std::memcmp(&a[i][j], &b[i][j], sizeof(float)) != 0;
  return d;
}

void check_resume() {
  Linear l;
  rt::fp8_clear_linears();
  rt::fp8_register_linear(l.dW.p);
  rt::StepGraph graph;
  std::vector<float> saved;
  for (int s = 0; s < kSteps; ++s) {
    if (s == kSaveAfter)
      saved = l.rows();
    l.load(s);
    graph.run([&] { l.body(); });
  }
  const auto uninterrupted = l.results();
  expect(report("fp8 state: the step graph captured and replayed",
                graph.captured() && !graph.failed() ? 0 : 1, 0));
  graph.reset();
  const rt::Fp8Meta *w = rt::fp8_linear_metas(l.dW.p) + 1;
  rt::Fp8Meta wMeta;
  rt::copy_to_host(&wMeta, w, int64_t(sizeof wMeta));
  // The priming pass and one amax a step.
  expect(report("fp8 state: the weight's amaxes recorded (5)",
                wMeta.recorded == 5 ? 0 : 1, 0));
  // resumed(restore): a program started afresh, at step 3.
  auto resumed = [&](bool restore) {
    rt::fp8_clear_linears();
    rt::fp8_register_linear(l.dW.p);
    const act_t *ws[] = {l.dW.p};
    if (restore)
      rt::fp8_restore_state(ws, 1, saved.data());
    l.load(kSaveAfter);
    rt::StepGraph first; // its first call runs eagerly
    first.run([&] { l.body(); });
    return l.results();
  };
  const auto restored = resumed(true);
  expect(report("fp8 state: a resumed step 3's bits differing from the "
                "uninterrupted one's",
                double(differing(uninterrupted, restored)), 0));
  const auto fresh = resumed(false);
  // Without them it is a fresh program's first step: the check can fail.
  expect(report("fp8 state: without the rows, step 3 the same (0: differs)",
                differing(uninterrupted, fresh) == 0 ? 1 : 0, 0));
  expect(report("fp8 state: ... the state after it the same (0: differs)",
                uninterrupted.back() == fresh.back() ? 1 : 0, 0));
}

} // namespace

int main() {
  if (!cuda_device_present("Fp8StateCheck"))
    return 77;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  if (major * 10 + minor < 89) {
    std::printf("Fp8StateCheck: compute capability %d.%d has no FP8, "
                "skipped\n",
                major, minor);
    return 77;
  }
  check_resume();
  std::printf("Fp8StateCheck: %s\n", gFailures ? "FAILED" : "all passed");
  return gFailures ? 1 : 0;
}
