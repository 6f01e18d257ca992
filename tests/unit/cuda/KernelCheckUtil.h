// Host helpers of the CUDA checks and KernelBench: random act_t-representable
// data, uploads and downloads, device copies, the error measure and the
// report line.
#ifndef AUTODDL_TESTS_UNIT_CUDA_KERNELCHECKUTIL_H
#define AUTODDL_TESTS_UNIT_CUDA_KERNELCHECKUTIL_H

#include "backends/cuda/Runtime.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace kcheck {

namespace rt = autoddl::rt;
using rt::act_t;

#ifdef AUTODDL_FP32
constexpr const char *kMode = "fp32";
// fp32 everywhere: results differ from the CPU's only by the order of fp32
// operations (sums of at most ~1e5 terms, tree order against sequential),
// ~1e-6 relative in the norm; 1e-5 leaves a margin of 10.
constexpr double kActTol = 1e-5;
constexpr double kFloatTol = 1e-5;
#else
constexpr const char *kMode = "bf16";
// An act_t result is the fp32 result rounded to bf16: 2^-9 relative per
// element, so at most ~2e-3 in the norm; 1e-2 is the documented bound (an
// indexing or accumulation error moves whole elements: errors of order 1).
constexpr double kActTol = 1e-2;
// An fp32 result (parameter gradients, statistics, losses) computed from the
// same bf16-representable inputs differs only by fp32 summation order.
constexpr double kFloatTol = 1e-4;
#endif

/// A check's `[--seed N]` command line: true with the seed (a fresh one unless
/// given), printed after the check's `name` and mode; false after printing the
/// usage, with the exit code in `status` (0 for --help, 2 otherwise).
inline bool seed_from_args(int argc, char **argv, const char *name,
                           unsigned &seed, int &status) {
  seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = unsigned(std::strtoul(argv[++i], nullptr, 10));
    } else {
      std::printf("usage: %s [--seed N]\n", argv[0]);
      status = std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
      return false;
    }
  }
  std::printf("%s (%s), seed %u\n", name, kMode, seed);
  return true;
}

/// Whether this machine has a CUDA device; without one, prints "`name`: no
/// CUDA device, skipped" (the check then exits 77, ctest's skip).
inline bool cuda_device_present(const char *name) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0)
    return true;
  std::printf("%s: no CUDA device, skipped\n", name);
  return false;
}

inline float round_act(float v) { return float(act_t(v)); }

inline std::vector<float> random_values(std::mt19937 &rng, int64_t n, float lo,
                                        float hi, bool toAct = true) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n > 0 ? n : 0));
  for (float &x : v)
    x = toAct ? round_act(u(rng)) : u(rng);
  return v;
}

inline void upload(act_t *dst, const std::vector<float> &v) {
  std::vector<act_t> a(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    a[i] = act_t(v[i]);
  rt::copy_to_device(dst, a.data(), int64_t(a.size() * sizeof(act_t)));
}
#ifndef AUTODDL_FP32
inline void upload(float *dst, const std::vector<float> &v) {
  rt::copy_to_device(dst, v.data(), int64_t(v.size() * sizeof(float)));
}
#endif
inline void upload(int32_t *dst, const std::vector<int32_t> &v) {
  rt::copy_to_device(dst, v.data(), int64_t(v.size() * sizeof(int32_t)));
}

inline std::vector<float> download(const act_t *p, int64_t n) {
  std::vector<act_t> a(static_cast<size_t>(n > 0 ? n : 0));
  rt::copy_to_host(a.data(), p, n * int64_t(sizeof(act_t)));
  std::vector<float> f(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    f[i] = float(a[i]);
  return f;
}
#ifndef AUTODDL_FP32
inline std::vector<float> download(const float *p, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n > 0 ? n : 0));
  rt::copy_to_host(f.data(), p, n * int64_t(sizeof(float)));
  return f;
}
#endif

/// All bytes 0xFF: NaN in fp32 and bf16, so an element a kernel fails to
/// write fails the check.
inline void poison(void *p, int64_t bytes) {
  AUTODDL_CUDA_CHECK(
      cudaMemsetAsync(p, 0xFF, size_t(bytes), rt::compute_stream()));
}

/// A device copy of host values (rounded to act_t), `offset` elements into
/// its buffer.
struct DevAct {
  rt::DeviceBuffer<act_t> buf;
  act_t *p = nullptr;
  DevAct(const std::vector<float> &v, int64_t offset = 0)
      : buf(int64_t(v.size()) + offset), p(buf.data() + offset) {
    upload(p, v);
  }
};
struct DevFloat {
  rt::DeviceBuffer<float> buf;
  float *p = nullptr;
  DevFloat(const std::vector<float> &v, int64_t offset = 0)
      : buf(int64_t(v.size()) + offset), p(buf.data() + offset) {
    rt::copy_to_device(p, v.data(), int64_t(v.size() * sizeof(float)));
  }
  explicit DevFloat(int64_t n) : buf(n), p(buf.data()) {
    poison(p, n * int64_t(sizeof(float)));
  }
};
struct DevAlloc { // a poisoned act_t output
  rt::DeviceBuffer<act_t> buf;
  act_t *p = nullptr;
  explicit DevAlloc(int64_t n, int64_t offset = 0)
      : buf(n + offset), p(buf.data() + offset) {
    poison(p, n * int64_t(sizeof(act_t)));
  }
};

/// ||got - want|| / ||want|| (2-norms, in double); NaN when got holds a
/// non-finite value or the sizes differ.
inline double rel_error(const std::vector<float> &got,
                        const std::vector<float> &want) {
  if (got.size() != want.size())
    return NAN;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]))
      return NAN;
    const double d = double(got[i]) - double(want[i]);
    diff += d * d;
    norm += double(want[i]) * double(want[i]);
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// Prints one line and returns whether err <= tol (false for NaN).
inline bool report(const std::string &what, double err, double tol) {
  const bool ok = err <= tol;
  std::printf("%s %-58s rel err %.3e (bound %.0e)%s\n", kMode, what.c_str(),
              err, tol, ok ? "" : "  FAIL");
  return ok;
}

} // namespace kcheck

#endif // AUTODDL_TESTS_UNIT_CUDA_KERNELCHECKUTIL_H
