// An ONNX import's unfused primitives on the GPU: the Primitive that
// backends/common/OnnxPrimitive.h resolves (the same resolution as the CPU
// program's), run forward and backward by generic strided kernels whose
// scalar formulas are backends/common/OnnxScalar.h's (the CPU kernels'),
// and MatMul through cuBLASLt (Linear.h). Conventions as OnnxKernels.h:
// forward overwrites, backward accumulates (+=) and skips a null gradient.
// Math in fp32, reductions summed in fp32 (the CPU sums in double).
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_PRIMITIVE_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_PRIMITIVE_H

#include "backends/common/OnnxPrimitive.h"
#include "backends/cuda/Runtime.h"

#include <cstddef>
#include <type_traits>
#include <vector>

namespace autoddl::rt {

/// One operand or gradient of a primitive on the device: act_t (activations,
/// their gradients, parameters' working copies) or fp32 (the model's
/// constants, parameters' gradients). Null: absent (an index input, a
/// gradient not wanted).
struct PrimRef {
  void *p = nullptr;
  bool f32 = false;
  PrimRef() = default;
  PrimRef(std::nullptr_t) {}
  template <class T>
  PrimRef(T *ptr)
      : p(const_cast<std::remove_const_t<T> *>(ptr)),
        f32(std::is_same_v<std::remove_const_t<T>, float>) {
    static_assert(std::is_same_v<std::remove_const_t<T>, float> ||
                      std::is_same_v<std::remove_const_t<T>, act_t>,
                  "a primitive's operands are act_t or float");
  }
};

/// Ranks the kernels take (the strided index of up to this many axes);
/// onnx_kernels::primitiveCudaRefusal names what they do not run.
using onnx_kernels::kPrimitiveMaxRank;

/// The forward of p on compute_stream(): operands in ONNX order (index
/// inputs null), y the result; `key` keys a training Dropout's mask (the
/// same elements as the CPU program drops).
void primitive_forward(const onnx_kernels::Primitive &p,
                       const std::vector<PrimRef> &x, PrimRef y,
                       const onnx_kernels::DropoutKey &key = {});
/// The backward of p: dx[k] += the vector-Jacobian product for operand k
/// (null: not wanted), from the operands x, the result y and its gradient dy.
/// Without accumulate_dx, dx[0] is stored instead (codegen's, where this call
/// is its first writer: the buffer never zeroed): in the same pass for a
/// pool, a sum or mean Reduce and a batch norm, after zeroing it for others.
void primitive_backward(const onnx_kernels::Primitive &p,
                        const std::vector<PrimRef> &dx,
                        const std::vector<PrimRef> &x, PrimRef y, PrimRef dy,
                        bool accumulate_dx = true);

/// A model constant's n values on the device (fp32), uploaded at the first
/// call for `host` (a step's first, eager run: never inside a graph
/// capture) and kept for the process.
const float *primitive_constant(const float *host, int64_t n);

/// A module buffer's device copy (a batch norm's running mean or var, its
/// micro-batches' moments; docs/checkpoints.md "Buffers"), made from the
/// host array's n values at the first call as primitive_constant's, and
/// written by the kernels; primitive_buffer_made finds it (null before),
/// for the harness's copies between the two (checkpoints).
float *primitive_buffer(float *host, int64_t n);
float *primitive_buffer_made(const float *host);

/// The forward of a batch norm on batch statistics that also writes its
/// micro-batch's moments (device, 2C floats: the mean, then the unbiased
/// variance; OnnxImage.h batchnorm_moments) from the forward's own sums.
void batchnorm_forward_moments(const onnx_kernels::Primitive &p,
                               const std::vector<PrimRef> &x, PrimRef y,
                               float *moments);
/// A batch norm with the ReLU after it in its passes (codegen's
/// planProducerReluFusion): y = max(norm(x), 0) is the ReLU's output (`moments`
/// as batchnorm_forward_moments', or null); the backward takes the ReLU's
/// output y and its gradient dy (the norm's output gradient is dy where y > 0,
/// as relu_backward's), the same values as the two ops apart.
void batchnorm_relu_forward(const onnx_kernels::Primitive &p,
                            const std::vector<PrimRef> &x, PrimRef y,
                            float *moments);
void batchnorm_relu_backward(const onnx_kernels::Primitive &p,
                             const std::vector<PrimRef> &dx,
                             const std::vector<PrimRef> &x, PrimRef y,
                             PrimRef dy, bool accumulate_dx = true);
/// A batch norm whose output only a same-shape add reads, run with the add
/// in its normalise pass (codegen's planResidualNormFusion: ResNet's last
/// norm of a block and its shortcut): y = norm(x) + residual, then max(y, 0)
/// under `relu` (the ReLU after the add), the norm's own output never
/// written; `moments` as batchnorm_forward_moments' (null: none). The same
/// values as the ops apart, but for the norm's output not rounded to act_t
/// before the add. The norm's backward is batchnorm_backward as ever.
void batchnorm_add_forward(const onnx_kernels::Primitive &p,
                           const std::vector<PrimRef> &x, PrimRef residual,
                           PrimRef y, float *moments, bool relu);
/// A batch norm's backward (primitive_backward's) with accumulate_dx false:
/// x's gradient dx[0] is stored, not added (codegen's, where the norm alone
/// reads x: the buffer is then never zeroed); its parameters' are added.
/// batchnorm_relu_backward takes the same flag.
void batchnorm_backward(const onnx_kernels::Primitive &p,
                        const std::vector<PrimRef> &dx,
                        const std::vector<PrimRef> &x, PrimRef dy,
                        bool accumulate_dx);
/// The form of channels-last (and [N, C]) batch norms: Split, three
/// launches each way (sums, a per-channel finish, the normalise or dx
/// pass); Fused, one cooperative launch with grid barriers between them;
/// Auto, Fused for small tensors (the 14×14 and 7×7 ones of ResNet-50),
/// Split for others. AUTODDL_BATCHNORM (auto, split, fused) sets it at the
/// first call; checks and benches set it here. The same values either way
/// up to fp32 rounding; each form deterministic.
enum class BatchNormPath { Auto, Split, Fused };
void batchnorm_use_path(BatchNormPath path);

/// The running mean and var [C] (device) take `slots` micro-batches'
/// moments in order, then the moments are zeroed: on compute_stream(), so
/// inside the step graph.
void running_stats_update(float *moments, int64_t slots, int64_t C, float *mean,
                          float *var, double momentum);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_PRIMITIVE_H
