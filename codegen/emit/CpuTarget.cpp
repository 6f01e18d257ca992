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
      "  pipe_isend({}, {}, device_of({}, dir), tag(mb, {}, {}, {}));\n",
      /*recvFormat=*/
      "  recv({}, {}, device_of({}, dir), tag(mb, {}, {}, "
      "{}), g.pp);\n",
      /*opProfiling=*/false,
      /*attentionSavesLse=*/false,
      /*lossSumOnDevice=*/false,
      /*scratchInStage=*/false,
      /*includes=*/R"(
#include "backends/cpu/harness/Harness.h"  // Param, the grid, data, pipeline tags, run_program
#include "backends/cpu/Collectives.h"      // all_reduce/all_gather/slice, send/recv
#include "backends/cpu/kernels/Attention.h"    // attention_forward/_backward
#include "backends/cpu/kernels/CrossEntropy.h" // crossentropy_forward/_backward
#include "backends/cpu/kernels/Elementwise.h"  // add, mul, gelu, relu, elu, silu, swiglu
#include "backends/cpu/kernels/GatAttention.h" // head_dot, gat_aggregate
#include "backends/cpu/kernels/Embedding.h"    // embedding, positional, rotary
#include "backends/cpu/kernels/Linear.h"       // linear, matmul, bias_add
#include "backends/cpu/kernels/Norm.h"         // layernorm, rmsnorm
#include "backends/cpu/kernels/Softmax.h"      // softmax
#include "backends/cpu/kernels/Sparse.h"       // spmm
)",
      /*imageIncludes=*/
      R"(#include "backends/cpu/kernels/Conv.h"         // conv2d, pool2d
#include "backends/cpu/kernels/Shape.h"        // transpose
)",
      /*stdIncludes=*/R"(
#include <cstdint>
#include <vector>
)",
      /*extraUsings=*/"",
      /*stepGraph=*/false,
      /*zeroTokenTypes=*/
      "  std::fill(a.{0}.begin(), a.{0}.end(), 0); // one segment\n",
      /*gradZeroSet=*/false,
      /*zeroGradsCall=*/"  stage{}_zero_grads(a);\n",
      /*timedCall=*/
      "  const double t0 = trace.now_us();\n  {call}\n  trace.end(\"{letter}\" "
      "+ std::to_string(mb), 0, t0);\n",
      /*lossSumLoop=*/
      "    for (const auto &a : {})\n      sum += a.loss_sum;\n",
      /*gradBuckets=*/false,
      /*freesBuffers=*/false,
      /*reportsMfu=*/false,
      /*paddedParams=*/false,
      /*kfacInclude=*/
      "#include \"backends/cpu/harness/KfacRun.h\" // K-FAC: "
      "kfac_curvature, KfacProgram\n",
      /*zeroBuffer=*/"  std::fill({0}.begin(), {0}.end(), 0.0f);\n",
      /*kfacBubbleItems=*/true,
      /*progressCall=*/"  progress_sends();\n",
      /*copyElements=*/"  std::copy_n({src}, {n}, {dst});\n",
      /*devicePrimitives=*/false,
  };
  return target;
}

} // namespace autoddl::codegen::emit
