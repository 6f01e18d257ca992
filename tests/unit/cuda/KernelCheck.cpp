// KernelCheck: every CUDA kernel of backends/cuda/kernels (attention aside:
// AttentionCheck) against the CPU kernel of backends/cpu on fresh random
// inputs (seed printed; --seed N repeats a run), at GPT-2-like shapes and odd
// sizes (rows not a multiple of a block, C = 45, the 50257 vocabulary,
// pointers off 16-byte alignment). Built twice: bf16 and -DAUTODDL_FP32.
//
// Error measure: ||gpu - ref|| / ||ref|| over a tensor, ref from the CPU
// kernel on the same inputs (already rounded to act_t). Bounds in
// KernelCheckUtil.h: act_t results 1e-2 (bf16; storing rounds by 2^-9) or
// 1e-5 (fp32); fp32 results 1e-4 (bf16 build) or 1e-5. Outputs are poisoned
// with NaN before each forward; gradients start from random values of the
// increment's magnitude (backward adds), so overwriting instead of adding
// fails too.
//
// Exit 0 pass, 1 fail, 77 no GPU (ctest SKIP_RETURN_CODE). `--bench` times
// the kernels instead (KernelBench.cpp).
//
// Sources: this file (the run's state, the backward check, the fault path,
// main and its list of cases) and one KernelCheck<Family>.cpp a kernel
// family, declared in KernelCheck.h.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

int run_bench(); // KernelBench.cpp

namespace kcheck {

std::mt19937 gRng;
bool gOk = true;

void check_backward(const std::string &what, const std::vector<GradSpec> &specs,
                    const std::function<void(std::vector<float *> &)> &cpuFn,
                    const std::function<void(std::vector<void *> &)> &gpuFn,
                    double actTol, double floatTol, int64_t offset) {
  const size_t k = specs.size();
  std::vector<std::vector<float>> incr(k), init(k), want(k);
  std::vector<float *> ptrs(k);
  for (size_t i = 0; i < k; ++i) {
    incr[i].assign(size_t(specs[i].n), 0.0f);
    ptrs[i] = specs[i].absent ? nullptr : incr[i].data();
  }
  cpuFn(ptrs);
  for (size_t i = 0; i < k; ++i) {
    double ss = 0;
    for (float v : incr[i])
      ss += double(v) * v;
    const float rms =
        incr[i].empty() ? 1.0f : float(std::sqrt(ss / double(incr[i].size())));
    const float r = rms > 0 ? rms * 1.7320508f : 1.0f; // uniform of that rms
    init[i] = random_values(gRng, specs[i].n, -r, r, !specs[i].isFloat);
    want[i] = init[i];
    ptrs[i] = specs[i].absent ? nullptr : want[i].data();
  }
  cpuFn(ptrs);
  std::vector<rt::DeviceBuffer<act_t>> actBufs(k);
  std::vector<rt::DeviceBuffer<float>> floatBufs(k);
  std::vector<void *> dev(k, nullptr);
  for (size_t i = 0; i < k; ++i) {
    if (specs[i].absent)
      continue;
    if (specs[i].isFloat) {
      floatBufs[i] = rt::DeviceBuffer<float>(specs[i].n + offset);
      rt::copy_to_device(floatBufs[i].data() + offset, init[i].data(),
                         specs[i].n * int64_t(sizeof(float)));
      dev[i] = floatBufs[i].data() + offset;
    } else {
      actBufs[i] = rt::DeviceBuffer<act_t>(specs[i].n + offset);
      upload(actBufs[i].data() + offset, init[i]);
      dev[i] = actBufs[i].data() + offset;
    }
  }
  gpuFn(dev);
  for (size_t i = 0; i < k; ++i) {
    if (specs[i].absent)
      continue;
    std::vector<float> got(static_cast<size_t>(specs[i].n));
    if (specs[i].isFloat)
      rt::copy_to_host(got.data(), dev[i], specs[i].n * int64_t(sizeof(float)));
    else
      got = download(static_cast<act_t *>(dev[i]), specs[i].n);
    gOk &= report(what + " " + specs[i].name, rel_error(got, want[i]),
                  specs[i].isFloat ? floatTol : actTol);
  }
}

} // namespace kcheck

namespace {
using namespace kcheck;

void fault_hook(const char *m) { std::fprintf(stderr, "hook: %s\n", m); }

/// A failed check prints rank, error, call and place, runs the hook, aborts.
/// Runs in a child process before the parent touches the GPU.
void check_fault_path() {
  int fds[2];
  if (pipe(fds) != 0) {
    gOk &= report("fault path (pipe)", 1.0, 0.0);
    return;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    rt::set_rank_for_messages(3);
    rt::set_fault_hook(fault_hook);
    AUTODDL_CUDA_CHECK(cudaErrorInvalidValue);
    _exit(0); // not reached
  }
  close(fds[1]);
  std::string text;
  char buf[512];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0)
    text.append(buf, size_t(got));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  const bool named =
      text.find("autoddl: rank 3: CUDA error cudaErrorInvalidValue") == 0 &&
      text.find("in cudaErrorInvalidValue at ") != std::string::npos &&
      text.find("KernelCheck.cpp:") != std::string::npos &&
      text.find("hook: autoddl: rank 3") != std::string::npos;
  if (!named)
    std::printf("child stderr: %s\n", text.c_str());
  gOk &= report("fault path: message, hook, abort",
                aborted && named ? 0.0 : 1.0, 0.0);
}

} // namespace

int main(int argc, char **argv) {
  unsigned seed = std::random_device{}();
  bool bench = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bench") == 0)
      bench = true;
    else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      seed = unsigned(std::strtoul(argv[++i], nullptr, 10));
    else {
      std::printf("usage: %s [--seed N] [--bench]\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  check_fault_path(); // before this process initialises CUDA (fork)
  if (!cuda_device_present("KernelCheck"))
    return 77;
  if (bench)
    return run_bench();
  std::printf("KernelCheck (%s), seed %u\n", kMode, seed);
  gRng.seed(seed);

  check_runtime();
  check_linear(129, 768, 2304, false, true); // GPT-2 c_attn (Conv1D [K,O])
  check_linear(129, 768, 2304, true, true);  // torch Linear [O,K]
  check_linear(37, 45, 51, true, true);      // odd: unaligned leading dims
  check_linear(37, 45, 51, false, false);
  check_linear(33, 64, 50257, true, false);       // lm_head, odd vocabulary
  check_linear_gelu(129, 768, 3072, false, true); // GPT-2 c_fc (Conv1D)
  check_linear_gelu(129, 768, 3072, true, true);  // torch Linear
  check_linear_gelu(37, 48, 64, true, false);
  check_linear_gelu(37, 45, 51, false, true);        // O % 8 != 0: unfused path
  check_linear_residual(129, 768, 768, false, true); // GPT-2 attn c_proj
  check_linear_residual(129, 3072, 768, true, true); // mlp c_proj
  check_linear_residual(37, 45, 51, false, false);   // odd sizes
  check_matmul(3, 65, 64, 129, false);
  check_matmul(3, 65, 64, 129, true);
  check_matmul(2, 7, 9, 11, true);
  check_bias_add(1001, 768);
  check_bias_add(1001, 51);
  check_bias_relu(1001, 256, true);
  check_bias_relu(1001, 51, false);
  check_layernorm(1001, 768, true, 0); // rows not a multiple of 8 warps
  check_layernorm(37, 1600, false, 0);
  check_layernorm(9, 45, true, 0);
  check_layernorm(65, 768, true, 1);
  check_rmsnorm(1001, 768, 0);
  check_rmsnorm(9, 45, 0);
  check_rmsnorm(65, 1600, 1);
  check_elementwise((1 << 20) + 3, 0);
  check_elementwise(1001, 1);
  check_embedding(1001, 768, 50257, 0, 50257);
  check_embedding(1001, 768, 50257, 25000, 25257);
  check_embedding(77, 45, 1000, 0, 1000);
  check_positional(3, 129, 768, 0);
  check_positional(2, 65, 45, 7);
  check_rotary(2, 65, 3, 64, 0);
  check_rotary(2, 33, 4, 128, 5);
  check_softmax(37, 1001, 1);
  check_softmax(5, 33, 7);
  check_transpose({2, 3, 5, 7}, {0, 2, 1, 3});
  check_transpose({4, 33, 6, 8}, {3, 1, 0, 2});
  check_crossentropy(33, 50257);
  check_crossentropy(17, 1000);
  check_crossentropy_strided(33, 50257); // ld 50304; shards 25152, 25152
  check_crossentropy_strided(9, 1000);   // ld 1024; shards 512, 512
  check_squared_error(64, 10);
  check_squared_error(5, 1000);
  check_count_correct(1000, 10, 10);
  check_count_correct(65, 50257, 50304); // a padded vocabulary's rows
  check_adamw((1 << 20) + 5, 0);
  check_adamw(1001, 1);
  check_sgd(100003, 0.9f);
  check_sgd(1001, 0.0f);
  check_reductions((1 << 22) + 7);
  check_grad_clip();
  std::printf("KernelCheck (%s): %s\n", kMode, gOk ? "PASS" : "FAIL");
  return gOk ? 0 : 1;
}