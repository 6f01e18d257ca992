//===- Runnable.cpp - what the generated programs run ---------------------===//
//
// Each rule says which part of the programs it comes from, so that changing
// that part is where the rule changes.
//
//===----------------------------------------------------------------------===//
#include "planner/Runnable.h"

#include "cost_model/pipeline/Schedule.h"
#include "ir/import/ModelGraph.h"
#include "ir/import/ResolvePrimitive.h"

namespace autoddl::planner {

RunnableConfigurations::RunnableConfigurations(const ModelGraph &g)
    : graphNodes_(g.graphNodes()), // gcn, gat, an explicit graph
      sampleMixing_(sampleMixingPrimitive(g)) {
  // The importer keeps only a training Dropout as a primitive.
  for (const OpDef &op : g.ops)
    if (op.kind == "primitive" &&
        attrOr(op, ops::attr::kOpType, "") == "Dropout") {
      dropout_ = op.name;
      break;
    }
}

std::string RunnableConfigurations::precisionRefusal(cost::Precision p,
                                                     bool cpuBackend) {
  // backends/cpu computes in fp32; backends/cuda/kernels/Fp8.h is the FP8.
  if (cpuBackend && p == cost::Precision::FP8)
    return "precision fp8: the CPU programs compute in fp32 and have no FP8 "
           "GEMMs (generate it with --backend cuda, or plan with --precision "
           "bf16)";
  return "";
}

std::string RunnableConfigurations::refusal(const Knobs &k, bool kfac) const {
  using pipeline::ScheduleKind;
  const std::string zero = "zero=" + std::to_string(k.zero);
  const std::string rc = "recompute " + recomputeName(k.recompute);
  // The instruction table the programs walk (codegen/emit/Schedule.cpp).
  pipeline::ScheduleConfig cfg;
  cfg.kind = k.schedule;
  cfg.stages = k.pp;
  cfg.microbatches = static_cast<int>(k.microbatches);
  cfg.chunks = k.schedule == ScheduleKind::Interleaved ? k.chunks : 1;
  if (std::optional<std::string> problem = pipeline::checkScheduleConfig(cfg))
    return "schedule " + std::string(pipeline::scheduleName(k.schedule)) +
           ": " + *problem;
  // backends/{cpu,cuda}/Zero.h shard the optimizer state only.
  if (k.zero < 0 || k.zero > kMaxGeneratedZero)
    return zero + ": the generated programs shard the optimizer state only "
                  "(ZeRO-1); ZeRO-2 would hold full gradients, more memory "
                  "than it is priced with (zero 0 or 1)";
  if (k.zero > 0 && k.dp < 2)
    return zero + " needs dp > 1";
  // K-FAC's curvature reads a linear's input and output gradient outside the
  // layer's backward (codegen/emit/KfacEmitter.cpp): kept under selective
  // recomputation (it reruns an attention's scores only), in the stage's
  // scratch under full (codegen/emit/Recompute.cpp).
  if (kfac && k.recompute == cost::Recompute::Full)
    return rc + " with the kfac optimizer: its factors read a layer's "
                "linear inputs, which full recomputation keeps only inside "
                "the layer's backward (recompute none or selective)";
  // ZB-H1's weight-gradient half runs after the input-gradient half that
  // reruns a layer, reading buffers the next rerun overwrites
  // (codegen/emit/Recompute.cpp).
  if (k.schedule == ScheduleKind::ZeroBubbleH1 &&
      k.recompute != cost::Recompute::None)
    return rc + " with schedule zb-h1: its weight-gradient pass reads a "
                "recomputed layer's buffers after the next rerun has "
                "overwritten them (another schedule, or recompute none)";
  // A training Dropout's mask is keyed by the step, which a recomputed
  // layer's rerun does not know (codegen/emit/PrimitiveEmitter.cpp).
  if (!dropout_.empty() && k.recompute != cost::Recompute::None)
    return rc + " with a training Dropout (" + dropout_ +
           "): its mask is keyed by the step, which a rerun does not know "
           "(recompute none)";
  // A graph model's step is the whole graph; dp splits its nodes in blocks
  // (codegen/emit/ProgramAssembly.cpp).
  if (graphNodes_ > 0 && k.microbatches != 1)
    return "a graph model trains on the whole graph: micro-batches must be 1";
  if (graphNodes_ > 0 && k.dp > 0 && graphNodes_ % k.dp != 0)
    return "dp=" + std::to_string(k.dp) + " splits the graph's nodes, and " +
           "does not divide its " + std::to_string(graphNodes_);
  // An unfused ONNX primitive computing a sample from others runs on the
  // whole batch (codegen/emit/PrimitiveEmitter.cpp).
  if (!sampleMixing_.empty() && (k.dp > 1 || k.microbatches > 1))
    return sampleMixing_ + ", so it cannot run on a part of the batch "
                           "(dp=1 and one micro-batch, or let an sbp-fuse "
                           "pass recognise it)";
  return "";
}

} // namespace autoddl::planner
