//===- CpuTarget.cpp - the CPU + MPI program's target ---------------------===//
//
// backends/cpu: float everywhere, kernels on the fp32 parameters, the loss
// summed on the host.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Target.h"

namespace autoddl::codegen::emit {

const Target &cpuTarget() {
  static const Target target{
      /*name=*/"cpu",
      /*paramValue=*/".value.data()",
      /*actBuffers=*/false,
      /*actType=*/"float",
      /*bufferDecl=*/
      "  std::vector<{type}> {name} = std::vector<{type}>({size}); "
      "// {comment}\n",
      // Sends are non-blocking, completed at the end of the step; receives
      // block (docs/codegen.md, "The schedule spelled out").
      /*sendFormat=*/
      "  pending.push_back(isend({}, {}, device_of({}, dir), "
      "tag(mb, {}, {}, {}), g.pp));\n",
      /*recvFormat=*/
      "  recv({}, {}, device_of({}, dir), tag(mb, {}, {}, "
      "{}), g.pp);\n",
      /*opProfiling=*/false,
      /*attentionSavesLse=*/false,
      /*lossSumOnDevice=*/false,
      /*scratchInStage=*/false,
  };
  return target;
}

} // namespace autoddl::codegen::emit
