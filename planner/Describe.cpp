//===- Describe.cpp - the chosen candidate as a Plan ---------------------===//
//
// The plan's descriptive parts (docs/plan-format.md): the per-op signatures,
// tensor and model-op layouts, stages, the collectives of a step, the
// predicted times per op kind and device; the report (PlanReport.cpp) prints
// them as tables.
//
//===----------------------------------------------------------------------===//
#include "planner/Planner.h"

#include <algorithm>

namespace autoddl::planner::search {

using cost::Sbp;

namespace {

std::string linkOf(const cost::Cluster &c, const cost::GroupPlacement &g) {
  if (g.size() <= 1)
    return "none";
  if (g.nodes <= 1)
    return c.intraNode.kind;
  if (g.gpusPerNode <= 1)
    return c.interNode.kind;
  return c.intraNode.kind + "+" + c.interNode.kind;
}

std::string sbpStr(const Sbp &s) { return cost::sbpToString(s); }

/// The plan's descriptive parts, one kind of table per member.
struct Describer {
  Planner &pl;
  const Candidate &cand;
  const Priced &pr;
  Plan &plan;
  const ModelGraph &g = pl.g1;
  const cost::Cluster &c = pl.c;
  Context &ctx = *cand.ctx;
  PricingContext &pc = *ctx.pricing;
  const Assignment a = ctx.assignments[cand.assignment];
  const SearchGraph &sg = ctx.sg;
  const Knobs &k = cand.knobs;

  /// Model, cluster, knobs, links, and each collapsed op's signature.
  void header() {
    plan.model = g.name;
    plan.modelFamily = g.family;
    plan.parameters = g.parameterCount();
    plan.layers = sg.layers;
    plan.seq = g.seq;
    plan.cluster = c.name;
    plan.gpu = c.gpuModel;
    plan.nodes = c.nodes;
    plan.gpusPerNode = c.gpusPerNode;
    plan.peakFlops = c.peakFlops(cost::bulkPrecision(pl.o.precision));
    plan.memoryCapacity = pl.capacity;
    plan.globalBatch = pl.o.globalBatch;
    plan.stack = pl.o.stack;
    plan.precision = pl.o.precision;
    plan.knobs = k;
    plan.axisLinks = {linkOf(c, pc.ppGroup()), linkOf(c, pc.dpGroup()),
                      linkOf(c, pc.tpGroup())};
    for (size_t i = 0; i < sg.ops.size(); ++i) {
      const CollapsedOp &op = sg.ops[i];
      const Signature &s = op.sigs[a[i]];
      OpChoice ch;
      ch.segment = segmentName(op.segment);
      ch.op = g.ops[op.op].name;
      ch.kind = g.ops[op.op].kind;
      ch.signature = s.name;
      for (const Sbp &x : s.operands)
        ch.operands.push_back(sbpStr(x));
      ch.result = sbpStr(s.result);
      for (const Signature &x : op.sigs)
        ch.candidates.push_back(x.name);
      plan.ops.push_back(ch);
    }
  }

  /// Per tensor and per model op: its stage and its dp and tp layouts.
  void layouts() {
    // Stage of each layer.
    std::vector<int> stageOfLayer(std::max<int64_t>(1, sg.layers), 0);
    for (const StageInfo &st : pr.stages)
      for (int l = st.firstLayer; l < st.endLayer; ++l)
        stageOfLayer[l] = st.stage;
    const int lastStage = static_cast<int>(pr.stages.size()) - 1;
    auto stageOfOp = [&](int op) {
      int l = g.ops[op].layer;
      if (sg.collapsed && l >= 0 && l < static_cast<int>(stageOfLayer.size()))
        return stageOfLayer[l];
      return sg.ops[sg.opOf[op]].segment == Segment::Post ? lastStage : 0;
    };
    std::vector<int> producer(g.tensors.size(), -1),
        firstUse(g.tensors.size(), -1);
    std::vector<int> firstSlot(g.tensors.size(), -1);
    for (size_t i = 0; i < g.ops.size(); ++i) {
      for (int t : g.ops[i].results)
        producer[t] = static_cast<int>(i);
      for (size_t kk = 0; kk < g.ops[i].operands.size(); ++kk) {
        int t = g.ops[i].operands[kk];
        if (firstUse[t] < 0) {
          firstUse[t] = static_cast<int>(i);
          firstSlot[t] = static_cast<int>(kk);
        }
      }
    }
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      const TensorDef &td = g.tensors[t];
      TensorLayout tl;
      tl.name = td.name;
      tl.role = td.role == TensorRole::Parameter ? "parameter"
                : td.role == TensorRole::Input   ? "input"
                                                 : "activation";
      tl.shape = sg.shapeAt(static_cast<int>(t), k.microbatch);
      const int bd = sg.batchDim(t);
      tl.dp = (td.role != TensorRole::Parameter && bd >= 0)
                  ? sbpStr(Sbp::split(bd))
                  : "B";
      Sbp tp = Sbp::broadcast();
      if (producer[t] >= 0) {
        tp = sg.ops[sg.opOf[producer[t]]].sigs[a[sg.opOf[producer[t]]]].result;
        tl.stage = stageOfOp(producer[t]);
      } else if (firstUse[t] >= 0) {
        int op = sg.opOf[firstUse[t]];
        tp = sg.ops[op].sigs[a[op]].operands[firstSlot[t]];
        tl.stage = stageOfOp(firstUse[t]);
      }
      tl.tp = sbpStr(tp);
      plan.tensors.push_back(tl);
    }
    // Per model op, for plan.mlir: the tp signature of its collapsed op; on dp
    // activations split along their batch dim, parameters whole, a batch-less
    // result of split inputs (the loss) partial.
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const OpDef &op = g.ops[i];
      const Signature &s = sg.ops[sg.opOf[i]].sigs[a[sg.opOf[i]]];
      ModelOpLayout ml;
      ml.stage = stageOfOp(static_cast<int>(i));
      bool anySplit = false;
      for (size_t kk = 0; kk < op.operands.size(); ++kk) {
        const int t = op.operands[kk];
        const int bd = sg.batchDim(t);
        const bool split =
            k.dp > 1 && bd >= 0 && g.tensors[t].role != TensorRole::Parameter;
        anySplit |= split;
        ml.dp.push_back(split ? sbpStr(Sbp::split(bd)) : "B");
        ml.tp.push_back(k.tp > 1 ? sbpStr(s.operands[kk]) : "B");
      }
      for (int t : op.results) {
        const int bd = sg.batchDim(t);
        ml.dp.push_back(k.dp > 1 && bd >= 0 ? sbpStr(Sbp::split(bd))
                        : anySplit          ? "P"
                                            : "B");
        ml.tp.push_back(k.tp > 1 ? sbpStr(s.result) : "B");
      }
      plan.modelOps.push_back(std::move(ml));
    }
  }

  /// The collectives of a step: tp boxing per collapsed edge, in-op
  /// all-reduces, the gradient sync per pipeline rank and the p2p.
  void collectives() {
    // Collectives, per collapsed edge (calls per step = weight x
    // micro-batches).
    const double mb = static_cast<double>(k.microbatches);
    auto addBoxing = [&](const CollapsedEdge &e, const Sbp &from, const Sbp &to,
                         const char *phase) {
      cost::BoxingCost bc = pc.boxingDetail(e.tensor, from, to);
      for (const cost::BoxingStep &st : bc.steps) {
        if (st.free)
          continue;
        CollectiveUse u;
        u.where = g.tensors[e.tensor].name;
        u.phase = phase;
        u.collective = std::string(cost::collectiveName(st.collective));
        u.axis = "tp";
        u.bytes = st.bytes;
        u.time = st.estimate.time;
        u.perStep = static_cast<int64_t>(e.weight * mb);
        plan.collectives.push_back(u);
      }
    };
    for (const CollapsedEdge &e : sg.edges) {
      if (e.input || e.producer < 0)
        continue;
      const Signature &ps = sg.ops[e.producer].sigs[a[e.producer]];
      const Sbp R = ps.result;
      const Sbp expected = R.kind == Sbp::Partial ? Sbp::broadcast() : R;
      int seenX[8] = {0}, seenG[8] = {0};
      for (auto [op, slot] : e.consumers) {
        const Signature &cs = sg.ops[op].sigs[a[op]];
        if (cs.operands[slot] != R && !seenX[sbpCode(cs.operands[slot])]++)
          addBoxing(e, R, cs.operands[slot], "forward");
        if (cs.operandGrads[slot] != expected &&
            !seenG[sbpCode(cs.operandGrads[slot])]++)
          addBoxing(e, cs.operandGrads[slot], expected, "backward");
      }
    }
    for (size_t i = 0; i < sg.ops.size(); ++i) {
      const Signature &s = sg.ops[i].sigs[a[i]];
      if (s.inOpAllReduceBytes <= 0)
        continue;
      CollectiveUse u;
      u.where = g.ops[sg.ops[i].op].name;
      u.phase = "forward";
      u.collective = "all_reduce";
      u.axis = "tp";
      u.bytes = s.inOpAllReduceBytes / 3;
      u.time = cost::collectiveCost(c, cost::Collective::AllReduce, u.bytes,
                                    pc.tpGroup())
                   .best.time;
      u.perStep = static_cast<int64_t>(3 * sg.ops[i].count * mb);
      plan.collectives.push_back(u);
    }
    for (int dev = 0; dev < k.pp; ++dev) {
      const DeviceTimes &dt = pr.devices[dev];
      if (dt.gradSync <= 0)
        continue;
      CollectiveUse u;
      u.where = gradientSyncWhere(dev);
      u.phase = "gradient-sync";
      u.collective = k.zero == 0 ? "all_reduce" : "reduce_scatter+all_gather";
      u.axis = "dp";
      u.time = dt.gradSync;
      u.perStep = k.zero == 2 ? k.microbatches : 1;
      // Bytes: this rank's gradients (dp-only and dp+tp groups together).
      u.bytes = 0;
      plan.collectives.push_back(u);
    }
    if (k.pp > 1) {
      CollectiveUse u;
      u.where = "stage boundary activations and their gradients";
      u.phase = "p2p";
      u.collective = "send_recv";
      u.axis = "pp";
      u.bytes = ctx.aggregates[cand.assignment].seg[1].p2pBytes;
      u.time = pr.p2p;
      u.perStep = static_cast<int64_t>(2 * mb);
      plan.collectives.push_back(u);
    }
  }

  /// Stages, per-device times and the prediction; per op kind per device.
  void predicted() {
    plan.stages = pr.stages;
    if (!sg.collapsed) {
      // Blocks that differ are not pipelined (pp = 1): the one stage holds
      // every model layer, so readers that place ops by layer find them there.
      int64_t endLayer = 0;
      for (const OpDef &op : g.ops)
        endLayer = std::max<int64_t>(endLayer, op.layer + 1);
      for (StageInfo &st : plan.stages)
        st.endLayer = static_cast<int>(endLayer);
    }
    plan.devices = pr.devices;
    plan.p2pTime = pr.p2p;
    plan.simForward = pr.times.forward;
    plan.simBackward = pr.times.backward;
    plan.simWeightGradient = pr.times.weightGradient;
    plan.predicted = pr.pred;
    plan.kfac = pr.kfac;
    plan.predicted.stepGraph = pc.stepGraph();
    plan.predicted.attentionKernel = pc.attentionKernel();
    // Per op kind on the critical rank, as layout() sums its stages' segments
    // (Chimera's up pipeline runs a second copy of a mirrored stage).
    // The same for every pipeline device, for validating a profile of another.
    const auto kinds = pc.opKindTimes(a);
    plan.predicted.opKindsByDevice.assign(static_cast<size_t>(k.pp), {});
    for (int device = 0; device < k.pp; ++device) {
      auto &out = plan.predicted.opKindsByDevice[static_cast<size_t>(device)];
      for (const StageInfo &st : pr.stages) {
        const bool mirrored = k.schedule == ScheduleKind::Chimera &&
                              k.pp - 1 - st.device == device;
        const int copies = (st.device == device) + mirrored;
        if (!copies)
          continue;
        const double n = pr.layersPerStage[static_cast<size_t>(st.stage)];
        auto add = [&](int segment, double times) {
          for (const auto &[kind, t] : kinds[segment])
            for (int half = 0; half < 2; ++half)
              out[kind][half] +=
                  copies * times * microbatchesPerStage(k) * t[half];
        };
        add(1, n);
        if (st.pre)
          add(0, 1);
        if (st.post)
          add(2, 1);
      }
    }
    plan.predicted.opKinds =
        plan.predicted.opKindsByDevice[static_cast<size_t>(pr.criticalDevice)];
  }
};

} // namespace

/// Fills the plan's descriptive parts from the chosen candidate.
void describe(Planner &pl, const Candidate &cand, const Priced &pr,
              Plan &plan) {
  Describer d{pl, cand, pr, plan};
  d.header();
  d.layouts();
  d.collectives();
  d.predicted();
  if (pl.o.explain)
    plan.alternatives = explain(pl, cand, pr);
}

} // namespace autoddl::planner::search
