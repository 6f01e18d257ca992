// attention_bench: times the GPU attention (backends/cuda/kernels/Attention.h)
// forward and backward at GPT-2- and LLaMA-like shapes, both implementations
// of one binary: the own kernels (attention_use_cudnn(false)) and cuDNN's
// fused attention (where the build has libcudnn and cuDNN takes the shape).
// One JSON object a line on stdout (bench/cuda/attention_compare.py adds
// PyTorch's numbers from the same run and checks every output against a
// reference).
//
// Layout: one fused qkv [B,T,(H+2G)*D] bf16 tensor, as the generated programs
// use it; gradients stored, not added (accumulate = false, as the programs
// call it where attention alone writes dqkv). Inputs uniform in [-1, 1]
// (never zeros: zeros run faster). Timing: CUDA events around kTiming.iters
// back-to-back calls after warm-up, median of kTiming.reps such groups. FLOPs
// as FlashAttention counts them: forward 4*B*H*T^2*D (half when causal),
// backward 2.5 times the forward.
//
// usage: attention_bench [--dump DIR]
//   --dump: writes each shape's inputs (qkv, dout: bf16) and each
//   implementation's out (bf16), lse (fp32) and dqkv (bf16) as raw files
//   DIR/<shape>_<name>.bin, for the reference check.
#include "backends/cuda/kernels/Attention.h"
#include "bench/cuda/BenchTiming.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

namespace rt = autoddl::rt;
using rt::act_t;

namespace bench = autoddl::bench;
constexpr bench::Timing kTiming{5, 20, 7}; // warm-up, calls a group, groups
using bench::fill;

struct Shape {
  int64_t B, T, H, G, D;
  bool causal;
};

std::string shape_name(const Shape &s) {
  char b[96];
  std::snprintf(b, sizeof b, "B%lld_T%lld_H%lld_G%lld_D%lld_%s", (long long)s.B,
                (long long)s.T, (long long)s.H, (long long)s.G, (long long)s.D,
                s.causal ? "causal" : "full");
  return b;
}

void dump(const std::string &dir, const std::string &name, const void *dev,
          int64_t bytes) {
  if (dir.empty())
    return;
  std::vector<char> host(static_cast<size_t>(bytes));
  rt::copy_to_host(host.data(), dev, bytes);
  const std::string path = dir + "/" + name + ".bin";
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(host.data(), 1, host.size(), f) != host.size()) {
    std::fprintf(stderr, "attention_bench: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

} // namespace

int main(int argc, char **argv) {
  std::string dumpDir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
      dumpDir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: attention_bench [--dump DIR]\n");
      return 2;
    }
  }
  const Shape shapes[] = {
      {16, 1024, 12, 12, 64, true},  // GPT-2 124M, the programs' 16 sequences
      {16, 1024, 25, 25, 64, true},  // GPT-2 1.5B
      {16, 1024, 12, 12, 64, false}, // GPT-2 124M, no mask
      {4, 2048, 32, 32, 128, true},  // LLaMA-7B-like heads
      {4, 2048, 32, 32, 128, false}, // the same, no mask
      {4, 2048, 32, 8, 128, true},   // grouped kv heads (LLaMA-2-70B-like)
      {8, 1024, 16, 4, 64, false},   // grouped kv heads, D 64, no mask
  };
  std::fprintf(stderr,
               "attention_bench: cuDNN path %s (cudnnGetVersion %lld)\n",
               rt::attention_cudnn_built() ? "built" : "not built",
               (long long)rt::attention_cudnn_version());
  for (const Shape &s : shapes) {
    const int64_t B = s.B, T = s.T, H = s.H, G = s.G, D = s.D;
    const int64_t fused = B * T * (H + 2 * G) * D, rows = B * T * H * D;
    rt::DeviceBuffer<act_t> qkv(fused), dqkv(fused), out(rows), dout(rows);
    rt::DeviceBuffer<float> lse(rt::attention_saved_floats(B, H, T));
    fill(qkv.data(), fused, 1);
    fill(dout.data(), rows, 2);
    const std::string name = shape_name(s);
    dump(dumpDir, name + "_qkv", qkv.data(), fused * 2);
    dump(dumpDir, name + "_dout", dout.data(), rows * 2);
    const rt::AttentionViews in = rt::attention_qkv_views(qkv.data(), H, G, D);
    const rt::AttentionGradViews grad =
        rt::attention_qkv_grad_views(dqkv.data(), H, G, D);
    const double flops = 4.0 * double(B * H) * double(T) * double(T) *
                         double(D) * (s.causal ? 0.5 : 1.0);
    std::string line;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"B\": %lld, \"T\": %lld, \"H\": %lld, \"G\": %lld, "
                  "\"D\": %lld, \"causal\": %s, \"name\": \"%s\", "
                  "\"tensor_cores\": %s",
                  (long long)B, (long long)T, (long long)H, (long long)G,
                  (long long)D, s.causal ? "true" : "false", name.c_str(),
                  rt::attention_uses_tensor_cores(in, D) ? "true" : "false");
    line += buf;
    for (const bool cudnn : {false, true}) {
      const char *impl = cudnn ? "cudnn" : "own";
      rt::attention_use_cudnn(cudnn);
      const bool fwdTaken =
          rt::attention_forward_uses_cudnn(in, B, T, H, G, D, s.causal);
      const bool bwdTaken =
          rt::attention_backward_uses_cudnn(grad, in, B, T, H, G, D, s.causal);
      if (cudnn) {
        std::snprintf(buf, sizeof buf,
                      ", \"cudnn_forward_taken\": %s, "
                      "\"cudnn_backward_taken\": %s",
                      fwdTaken ? "true" : "false", bwdTaken ? "true" : "false");
        line += buf;
        if (!fwdTaken && !bwdTaken)
          continue; // the own kernels again: nothing new to time
      }
      auto forward = [&] {
        rt::attention_forward(out.data(), lse.data(), in, B, T, H, G, D,
                              s.causal);
      };
      auto backward = [&] {
        rt::attention_backward(grad, dout.data(), out.data(), lse.data(), in, B,
                               T, H, G, D, s.causal, false);
      };
      // One checked run of each for the dump (outputs poisoned first).
      AUTODDL_CUDA_CHECK(cudaMemset(out.data(), 0xff, rows * 2));
      AUTODDL_CUDA_CHECK(cudaMemset(lse.data(), 0xff, lse.size() * 4));
      AUTODDL_CUDA_CHECK(cudaMemset(dqkv.data(), 0xff, fused * 2));
      forward();
      backward();
      rt::synchronize();
      dump(dumpDir, name + "_" + impl + "_out", out.data(), rows * 2);
      dump(dumpDir, name + "_" + impl + "_lse", lse.data(), lse.size() * 4);
      dump(dumpDir, name + "_" + impl + "_dqkv", dqkv.data(), fused * 2);
      const double fwd = bench::median_ms(kTiming, forward),
                   bwd = bench::median_ms(kTiming, backward);
      std::snprintf(buf, sizeof buf,
                    ", \"%s_fwd_ms\": %.4f, \"%s_bwd_ms\": %.4f, "
                    "\"%s_fwd_tflops\": %.1f, \"%s_bwd_tflops\": %.1f",
                    impl, fwd, impl, bwd, impl, flops / fwd * 1e-9, impl,
                    2.5 * flops / bwd * 1e-9);
      line += buf;
    }
    rt::attention_use_cudnn(true);
    std::printf("%s}\n", line.c_str());
    std::fflush(stdout);
  }
  return 0;
}
