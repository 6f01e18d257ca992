// attention_bench: times the GPU attention (backends/cuda/kernels/Attention.h)
// forward and backward at GPT-2-like shapes; one JSON object a line on stdout
// (bench/cuda/attention_compare.py adds PyTorch's numbers from the same run).
//
// Layout: one fused qkv [B,T,3*H*D] bf16 tensor, as the generated programs
// use it. Inputs uniform in [-1, 1] (never zeros: zeros run faster). Timing:
// CUDA events around kIters back-to-back calls after warm-up, median of kReps
// such groups. FLOPs as FlashAttention counts them: forward 4*B*H*T^2*D (half
// when causal), backward 2.5 times the forward.
#include "backends/cuda/kernels/Attention.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

namespace rt = autoddl::rt;
using rt::act_t;

constexpr int kWarmup = 5, kIters = 20, kReps = 7;

/// x[i] uniform in [-1, 1) from a hash of (i, seed).
__global__ void fill_uniform(act_t *x, int64_t n, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = uint64_t(i) + seed * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x[i] = act_t(float(z >> 40) / float(1 << 23) - 1.0f);
  }
}

void fill(act_t *x, int64_t n, uint64_t seed) {
  fill_uniform<<<1024, 256, 0, rt::compute_stream()>>>(x, n, seed);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

template <class F> double median_ms(F &&call) {
  cudaEvent_t start, stop;
  AUTODDL_CUDA_CHECK(cudaEventCreate(&start));
  AUTODDL_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmup; ++i)
    call();
  std::vector<double> ms;
  for (int r = 0; r < kReps; ++r) {
    AUTODDL_CUDA_CHECK(cudaEventRecord(start, rt::compute_stream()));
    for (int i = 0; i < kIters; ++i)
      call();
    AUTODDL_CUDA_CHECK(cudaEventRecord(stop, rt::compute_stream()));
    AUTODDL_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(double(t) / kIters);
  }
  std::sort(ms.begin(), ms.end());
  AUTODDL_CUDA_CHECK(cudaEventDestroy(start));
  AUTODDL_CUDA_CHECK(cudaEventDestroy(stop));
  return ms[ms.size() / 2];
}

struct Shape {
  int64_t B, T, H, D;
  bool causal;
};

} // namespace

int main() {
  const Shape shapes[] = {
      {8, 1024, 12, 64, true},  // GPT-2 124M
      {8, 1024, 25, 64, true},  // GPT-2 1.5B
      {8, 1024, 12, 64, false}, // GPT-2 124M, no mask
      {4, 2048, 32, 128, true}, // LLaMA-7B-like heads
  };
  for (const Shape &s : shapes) {
    const int64_t B = s.B, T = s.T, H = s.H, D = s.D;
    const int64_t fused = B * T * 3 * H * D, rows = B * T * H * D;
    rt::DeviceBuffer<act_t> qkv(fused), dqkv(fused), out(rows), dout(rows);
    rt::DeviceBuffer<float> lse(rt::attention_saved_floats(B, H, T));
    fill(qkv.data(), fused, 1);
    fill(dout.data(), rows, 2);
    const rt::AttentionViews in = rt::attention_qkv_views(qkv.data(), H, H, D);
    const rt::AttentionGradViews grad =
        rt::attention_qkv_grad_views(dqkv.data(), H, H, D);
    const double fwd = median_ms([&] {
      rt::attention_forward(out.data(), lse.data(), in, B, T, H, H, D,
                            s.causal);
    });
    const double bwd = median_ms([&] {
      rt::attention_backward(grad, dout.data(), out.data(), lse.data(), in, B,
                             T, H, H, D, s.causal);
    });
    // Diagnostic: the backward without dq (no dQ pass, no atomics).
    const rt::AttentionGradViews noDq{nullptr, grad.dk, grad.dv, grad.q_stride,
                                      grad.kv_stride};
    const double bwdNoDq = median_ms([&] {
      rt::attention_backward(noDq, dout.data(), out.data(), lse.data(), in, B,
                             T, H, H, D, s.causal);
    });
    const double flops = 4.0 * double(B * H) * double(T) * double(T) *
                         double(D) * (s.causal ? 0.5 : 1.0);
    std::printf(
        "{\"B\": %lld, \"T\": %lld, \"H\": %lld, \"D\": %lld, "
        "\"causal\": %s, \"tensor_cores\": %s, \"fwd_ms\": %.4f, "
        "\"bwd_ms\": %.4f, \"bwd_no_dq_ms\": %.4f, \"fwd_tflops\": %.1f, "
        "\"bwd_tflops\": %.1f}\n",
        (long long)B, (long long)T, (long long)H, (long long)D,
        s.causal ? "true" : "false",
        rt::attention_uses_tensor_cores(in, D) ? "true" : "false", fwd, bwd,
        bwdNoDq, flops / fwd * 1e-9, 2.5 * flops / bwd * 1e-9);
    std::fflush(stdout);
  }
  return 0;
}
