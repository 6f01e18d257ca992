// KfacCheck --bench: one step's preconditioning of GPT-2 124M's and 355M's
// K-FAC layers (per block qkv, proj, fc and fc-proj: [out,in] gradients with
// biases, in place, as the generated program runs it) in each mode the build
// has, milliseconds a step: the median of five timed steps after a warm-up
// (cuBLASLt plans, workspaces), to set against the plan's "precond ms". One
// block's four layers serve every block: their bf16 inverses (54 and 96 MB)
// exceed the 50 MB L2 as the whole model's do.
#include "backends/cuda/kfac/Kfac.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

namespace {
using namespace autoddl;

std::mt19937 gRng(1);

void put_random(float *dst, int64_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(size_t(n > 0 ? n : 0));
  for (float &x : v)
    x = u(gRng);
  rt::copy_to_device(dst, v.data(), int64_t(v.size() * sizeof(float)));
}

/// The median of five timed calls of `step` on the compute stream (ms).
template <class Step> float median_ms(Step step) {
  cudaEvent_t t0, t1;
  AUTODDL_CUDA_CHECK(cudaEventCreate(&t0));
  AUTODDL_CUDA_CHECK(cudaEventCreate(&t1));
  std::vector<float> ms(5);
  for (float &t : ms) {
    AUTODDL_CUDA_CHECK(cudaEventRecord(t0, rt::compute_stream()));
    step();
    AUTODDL_CUDA_CHECK(cudaEventRecord(t1, rt::compute_stream()));
    AUTODDL_CUDA_CHECK(cudaEventSynchronize(t1));
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&t, t0, t1));
  }
  AUTODDL_CUDA_CHECK(cudaEventDestroy(t0));
  AUTODDL_CUDA_CHECK(cudaEventDestroy(t1));
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

} // namespace

void kfac_precondition_bench() {
  struct Model {
    const char *name;
    int64_t d, blocks;
  };
  for (const Model m : {Model{"gpt2", 768, 12}, Model{"gpt2-medium", 1024, 24}})
    for (bool bf16 : {true, false}) {
      const int64_t d = m.d;
      const int64_t dims[4][2] = {{d, 3 * d}, {d, d}, {d, 4 * d}, {4 * d, d}};
      std::vector<rt::KfacLayer> layers;
      std::vector<rt::DeviceBuffer<float>> grads; // dW, db, db_out
      for (const auto &io : dims) {
        rt::KfacLayer &l = layers.emplace_back(io[0], io[1], bf16);
        put_random(l.A_inv.data(), io[0] * io[0]);
        put_random(l.G_inv.data(), io[1] * io[1]);
        l.a_valid = l.g_valid = true;
        rt::kfac_inverses_installed(l);
        grads.emplace_back(io[0] * io[1] + 2 * io[1]);
        put_random(grads.back().data(), io[0] * io[1] + 2 * io[1]);
      }
      auto step = [&] {
        for (int64_t b = 0; b < m.blocks; ++b)
          for (size_t i = 0; i < layers.size(); ++i) {
            float *g = grads[i].data();
            const int64_t n = layers[i].in * layers[i].out;
            rt::kfac_precondition(g, g, g + n + layers[i].out, g + n, layers[i],
                                  true);
          }
      };
      step();
      const float ms = median_ms(step);
      std::printf("KfacCheck --bench: %-11s preconditioning %-4s %8.3f ms a "
                  "step\n",
                  m.name,
                  // kfac_precondition_name() is the program's mode, not
                  // this layer's: the second pass is the TF32 (fp32) one.
                  layers[0].precondition_bf16() ? "bf16"
#ifdef AUTODDL_FP32
                                                : "fp32",
#else
                                                : "tf32",
#endif
                  ms);
    }
}
