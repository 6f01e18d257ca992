//===- CudaTarget.cpp - the CUDA + NCCL program's target ------------------===//
//
// backends/cuda: act_t activations and working copies, fp32 statistics and
// gradients of parameters, FlashAttention-style attention, op profiling,
// the loss summed on the device, scratch buffers allocated with the stage.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Target.h"

namespace autoddl::codegen::emit {

const Target &cudaTarget() {
  static const Target target{
      /*name=*/"cuda",
      /*paramValue=*/".work.data()",
      /*actBuffers=*/true,
      /*actType=*/"act_t",
      /*bufferDecl=*/"  DeviceBuffer<{type}> {name}{{{size}}}; // {comment}\n",
      // On the pipeline link's stream, ordered by the recorded schedule
      // (pipe_send in backends/cuda/harness/Harness.h;
      // docs/codegen.md, "Pipeline transfers that cannot deadlock").
      /*sendFormat=*/
      "  pipe_send({}, {}, device_of({}, dir), tag(mb, {}, "
      "{}, {}));\n",
      /*recvFormat=*/
      "  pipe_recv({}, {}, device_of({}, dir), tag(mb, {}, "
      "{}, {}));\n",
      /*opProfiling=*/true,
      /*attentionSavesLse=*/true,
      /*lossSumOnDevice=*/true,
      /*scratchInStage=*/true,
      // A graph model's accuracy is the device count_correct
      // (kernels/CrossEntropy.h).
      /*includes=*/R"(
#include "backends/cuda/harness/Harness.h" // Param, the grid, pipeline links, data, run_program
#include "backends/cuda/Comm.h"           // NCCL communicators, collectives, GradSync, Pipe
#include "backends/cuda/OpProfile.h"      // OpScope: per-op-kind device time (--profile)
#include "backends/cuda/Runtime.h"        // act_t, DeviceBuffer, zero, copies
#include "backends/cuda/kernels/Attention.h"    // flash attention forward/backward
#include "backends/cuda/kernels/CrossEntropy.h" // crossentropy_forward/_backward
#include "backends/cuda/kernels/Elementwise.h"  // add, mul, gelu, relu, silu, swiglu, add_into
#include "backends/cuda/kernels/Embedding.h"    // embedding, positional, rotary
#include "backends/cuda/kernels/Linear.h"       // linear, matmul, bias_add (cuBLASLt)
#include "backends/cuda/kernels/Norm.h"         // layernorm, rmsnorm
#include "backends/cuda/kernels/Primitive.h"    // an ONNX import's primitives
#include "backends/cuda/kernels/Reduce.h"       // sum_to_host, cast_to_act
#include "backends/cuda/kernels/Shape.h"        // transpose (flatten, reshape: copies)
#include "backends/cuda/kernels/Softmax.h"      // softmax
#include "backends/cuda/kernels/Sparse.h"       // spmm, sddmm (W8 tensor-core kernels)
#include "backends/cuda/kernels/GatAttention.h" // head_dot, gat_aggregate (CUDA cores)
)",
      /*imageIncludes=*/
      R"(#include "backends/cuda/kernels/Conv.h"        // conv2d, pool2d
)",
      /*stdIncludes=*/R"(
#include <cstdint>
#include <utility>
#include <vector>
)",
      /*extraUsings=*/"using autoddl::rt::harness::pipe; // not POSIX pipe()\n",
      /*stepGraph=*/true,
      /*zeroTokenTypes=*/
      "  zero(a.{0}.data(), a.{0}.size() * sizeof(int32_t)); // one segment\n",
      /*gradZeroSet=*/true,
      /*zeroGradsCall=*/
      "  if (!pipe.recording())\n    stage{}_zero_grads(a);\n",
      /*timedCall=*/
      "  if (!pipe.recording()) {{\n    const int t0 = trace.begin();\n"
      "    {call}\n    trace.end(\"{letter}\" + std::to_string(mb), 0, "
      "t0);\n  }}\n",
      /*lossSumLoop=*/
      "    for (const auto &a : {})\n      sum += sum_to_host(a.losses.data(), "
      "a.losses.size());\n",
      /*gradBuckets=*/true,
      /*freesBuffers=*/true,
      /*reportsMfu=*/true,
      /*paddedParams=*/true,
      // On act_t device buffers; factors, inverses and the rule in fp32
      // (backends/cuda/kfac).
      /*kfacInclude=*/
      "#include \"backends/cuda/harness/KfacRun.h\" // K-FAC: "
      "kfac_curvature, KfacProgram\n",
      /*zeroBuffer=*/
      "  zero({0}.data(), {0}.size() * int64_t(sizeof(*{0}.data())));\n",
      /*kfacBubbleItems=*/true,
      // NCCL's transfers progress on the GPU.
      /*progressCall=*/"",
      /*copyElements=*/
      "  copy_on_device({dst}, {src}, {n} * int64_t(sizeof(act_t)));\n",
      /*devicePrimitives=*/true,
  };
  return target;
}

} // namespace autoddl::codegen::emit
