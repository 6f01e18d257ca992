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
      /*opProfiling=*/false,
      /*attentionSavesLse=*/false,
      /*lossSumOnDevice=*/false,
      /*scratchInStage=*/false,
  };
  return target;
}

} // namespace autoddl::codegen::emit
