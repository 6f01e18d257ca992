// KernelCheck's shared parts: CPU reference, state, backward check, cases.
#ifndef AUTODDL_TESTS_UNIT_CUDA_KERNELCHECK_H
#define AUTODDL_TESTS_UNIT_CUDA_KERNELCHECK_H

// Include this header first: the CPU headers below include only standard
// headers, which must already be included at global scope.
#include <cblas.h> // before the CPU headers: their guard keeps it global

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

// The CPU kernels declare the same names in autoddl::rt (identical
// signatures under AUTODDL_FP32), so the reference lives in namespace cpu.
namespace cpu {
#include "backends/cpu/Optimizer.h"
#include "backends/cpu/kernels/CrossEntropy.h"
#include "backends/cpu/kernels/Elementwise.h"
#include "backends/cpu/kernels/Embedding.h"
#include "backends/cpu/kernels/Linear.h"
#include "backends/cpu/kernels/Norm.h"
#include "backends/cpu/kernels/Shape.h"
#include "backends/cpu/kernels/Softmax.h"
} // namespace cpu

#include "tests/unit/cuda/KernelCheckUtil.h"

namespace kcheck {

namespace ref = cpu::autoddl::rt;

extern std::mt19937 gRng; // seeded by main (--seed N)
extern bool gOk;          // false once a check fails

/// A gradient the backward adds into: n elements, stored as act_t or fp32,
/// or absent (null on both sides).
struct GradSpec {
  std::string name;
  int64_t n;
  bool isFloat = false;
  bool absent = false;
};

/// Runs the CPU backward once from zero (to size the increment) and once from
/// random initial values, the GPU backward once from the same initial values,
/// and checks every gradient. `offset` shifts each device gradient by that
/// many elements (alignment paths).
void check_backward(const std::string &what, const std::vector<GradSpec> &specs,
                    const std::function<void(std::vector<float *> &)> &cpuFn,
                    const std::function<void(std::vector<void *> &)> &gpuFn,
                    double actTol = kActTol, double floatTol = kFloatTol,
                    int64_t offset = 0);

inline std::vector<float> download_float(const float *p, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  rt::copy_to_host(f.data(), p, n * int64_t(sizeof(float)));
  return f;
}

inline std::string shape(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// KernelCheckLinear.cpp: the GEMMs.
void check_linear(int64_t N, int64_t K, int64_t O, bool tw, bool bias);
void check_linear_gelu(int64_t N, int64_t K, int64_t O, bool tw, bool bias);
void check_linear_residual(int64_t N, int64_t K, int64_t O, bool tw, bool bias);
void check_matmul(int64_t Bt, int64_t M, int64_t K, int64_t N, bool tb);
void check_bias_add(int64_t N, int64_t O);
void check_bias_relu(int64_t N, int64_t O, bool accumulate);
// KernelCheckNorm.cpp
void check_layernorm(int64_t N, int64_t C, bool withBeta, int64_t offset);
void check_rmsnorm(int64_t N, int64_t C, int64_t offset);
// KernelCheckElementwise.cpp
void check_elementwise(int64_t n, int64_t offset);
// KernelCheckEmbedding.cpp: embedding, positions, rotary.
void check_embedding(int64_t N, int64_t C, int64_t V, int64_t v0, int64_t Vl);
void check_positional(int64_t B, int64_t T, int64_t C, int64_t t0);
void check_rotary(int64_t B, int64_t T, int64_t H, int64_t D, int64_t t0);
// KernelCheckSoftmaxTranspose.cpp
void check_softmax(int64_t outer, int64_t L, int64_t inner);
void check_transpose(const std::vector<int64_t> &shp,
                     const std::vector<int64_t> &perm);
// KernelCheckLoss.cpp: cross-entropy (whole, vocab-parallel, strided rows)
// and squared error.
void check_crossentropy(int64_t N, int64_t V);
void check_crossentropy_strided(int64_t N, int64_t V);
void check_squared_error(int64_t N, int64_t C);
void check_count_correct(int64_t N, int64_t V, int64_t ld);
// KernelCheckOptimizer.cpp: optimizers, gradient clipping, reductions, casts.
void check_adamw(int64_t n, int64_t offset);
void check_sgd(int64_t n, float momentum);
void check_reductions(int64_t n);
void check_grad_clip();
// KernelCheckRuntime.cpp: device memory, ZeroSet, StepGraph, device init.
void check_runtime();

} // namespace kcheck

#endif // AUTODDL_TESTS_UNIT_CUDA_KERNELCHECK_H
