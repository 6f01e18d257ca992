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
  };
  return target;
}

} // namespace autoddl::codegen::emit
