//===- PlanValidate.cpp ---------------------------------------------------===//
#include "planner/PlanValidate.h"

#include "cost_model/pipeline/Schedule.h"
#include "ir/ops/SbpRules.h"
#include "planner/ProgramDecisions.h"
#include "planner/Runnable.h"
#include "planner/Sha256.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"

#include "ir/import/ModelGraph.h"
#include "ir/import/ModelImporter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace autoddl::planner {

namespace {

using Pointer = nlohmann::json::json_pointer;

struct Checker {
  const std::string &origin;

  [[noreturn]] void fail(const Pointer &where, const std::string &why) const {
    throw UserError(jsonPlace(origin, where) + why);
  }
  /// Times, sizes and memory: finite and not negative.
  void quantity(double v, const Pointer &where) const {
    if (!std::isfinite(v))
      fail(where, "expected a finite number");
    if (v < 0)
      fail(where, "must not be negative, got " + fmtNumber(v));
  }
  /// Each {key, value} as a quantity at `at` / key.
  void quantities(
      const Pointer &at,
      std::initializer_list<std::pair<const char *, double>> fields) const {
    for (auto [key, v] : fields)
      quantity(v, at / key);
  }
  /// A plan's string as a message shows it: JSON-quoted (control bytes
  /// escaped, so the message stays one line), at most 64 bytes of it.
  static std::string shown(const std::string &text) {
    return nlohmann::json(text.substr(0, 64))
        .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  }
  static std::string fmtNumber(double v) {
    nlohmann::json j = v;
    return j.dump();
  }
};

void checkMesh(const Plan &p, const Checker &c) {
  const Pointer root;
  if (p.nodes < 1)
    c.fail(root / "cluster" / "nodes", "expected at least 1 node");
  if (p.gpusPerNode < 1)
    c.fail(root / "cluster" / "gpus_per_node", "expected at least 1 GPU");
  const Knobs &k = p.knobs;
  long long gpus = static_cast<long long>(p.nodes) * p.gpusPerNode;
  long long mesh = static_cast<long long>(k.pp) * k.dp * k.tp;
  if (mesh != gpus)
    c.fail(root / "mesh", "pp x dp x tp = " + std::to_string(k.pp) + " x " +
                              std::to_string(k.dp) + " x " +
                              std::to_string(k.tp) + " = " +
                              std::to_string(mesh) + ", but the cluster has " +
                              std::to_string(gpus) + " GPUs");
  if (p.globalBatch < 1)
    c.fail(root / "global_batch", "expected at least 1");
  // 128 bits: three int64 factors of a hand-edited file may overflow 64.
  const __int128 perReplica =
      static_cast<__int128>(k.microbatch) * k.microbatches;
  // A graph model's dp splits the graph's nodes, not the batch: every dp rank
  // runs each instance (planner/Search.cpp, graphNodes). Whether an explicit
  // graph has a sparse adjacency is the model's to say, so its plans may
  // follow either rule.
  const bool nodeSplit =
      graphTemplateFamily(p.modelFamily) || p.modelFamily == "graph";
  if (perReplica * k.dp != p.globalBatch &&
      !(nodeSplit && perReplica == p.globalBatch))
    c.fail(root / "microbatches",
           "micro-batch " + std::to_string(k.microbatch) + " x " +
               std::to_string(k.microbatches) + " micro-batches x dp " +
               std::to_string(k.dp) + " does not make up the global batch " +
               std::to_string(p.globalBatch));
  if (k.chunks < 1)
    c.fail(root / "schedule" / "chunks", "expected at least 1");
  if (k.zero < 0 || k.zero > 2)
    c.fail(root / "zero", "expected 0, 1 or 2");
  if (p.seq < 0 || p.seq > (1 << 24)) // 0: no sequence (a CNN, a GCN)
    c.fail(root / "model" / "seq",
           "expected 0 to 2^24, got " + std::to_string(p.seq));
  if (p.parameters < 1)
    c.fail(root / "model" / "parameters", "expected at least 1 parameter");
  if (p.ops.empty())
    c.fail(root / "ops", "expected the model's ops, got none");
  // The simulator's times: per stage, or per pipeline rank (interleaved).
  for (auto [key, v] : {std::pair<const char *, const std::vector<double> *>{
                            "forward", &p.simForward},
                        {"backward", &p.simBackward},
                        {"weight_gradient", &p.simWeightGradient}})
    if (v->size() != p.stages.size() && v->size() != static_cast<size_t>(k.pp))
      c.fail(root / "simulator_times_s" / key,
             "expected one time per stage or pipeline rank, got " +
                 std::to_string(v->size()));
  if (p.layers < 0)
    c.fail(root / "model" / "layers", "must not be negative");
}

/// Stages are numbered 0..S-1, once each, and their [first, end) layer ranges
/// tile the model's layers in stage order: no gap, no overlap.
void checkStages(const Plan &p, const Checker &c) {
  const Pointer root;
  std::vector<size_t> order(p.stages.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return p.stages[a].stage < p.stages[b].stage;
  });
  int previousEnd = 0;
  for (size_t n = 0; n < order.size(); ++n) {
    const StageInfo &s = p.stages[order[n]];
    const Pointer at = root / "stages" / order[n];
    if (s.stage != static_cast<int>(n))
      c.fail(at / "stage",
             s.stage < static_cast<int>(n)
                 ? "stage " + std::to_string(s.stage) + " appears twice"
                 : "stage " + std::to_string(n) +
                       " is missing (stages must be numbered "
                       "0.." +
                       std::to_string(order.size() - 1) + ")");
    if (s.chunk < 0 || s.chunk >= p.knobs.chunks)
      c.fail(at / "chunk",
             "expected a chunk below " + std::to_string(p.knobs.chunks));
    if (s.firstLayer > s.endLayer)
      c.fail(at / "layers", "first layer " + std::to_string(s.firstLayer) +
                                " is after the end " +
                                std::to_string(s.endLayer));
    if (s.firstLayer != previousEnd)
      c.fail(at / "layers",
             s.firstLayer < previousEnd
                 ? "layers overlap the previous stage's (which ends at " +
                       std::to_string(previousEnd) + ")"
                 : "layers " + std::to_string(previousEnd) + ".." +
                       std::to_string(s.firstLayer - 1) + " are in no stage");
    previousEnd = s.endLayer;
  }
  if (order.empty())
    c.fail(root / "stages", "expected at least one stage");
  const long long expected =
      static_cast<long long>(p.knobs.pp) * p.knobs.chunks;
  if (static_cast<long long>(order.size()) != expected)
    c.fail(root / "stages",
           "expected pp x chunks = " + std::to_string(expected) +
               " stages, got " + std::to_string(order.size()));
  // The embedding opens the first stage and the head closes the last: ops
  // before the first layer and after the last run there (codegen/Layout.cpp).
  for (size_t n = 0; n < order.size(); ++n) {
    const StageInfo &s = p.stages[order[n]];
    const Pointer at = root / "stages" / order[n];
    if (s.pre != (n == 0))
      c.fail(at / "embedding", n == 0 ? "the first stage holds the embedding"
                                      : "only the first stage holds the "
                                        "embedding");
    if (s.post != (n + 1 == order.size()))
      c.fail(at / "head", n + 1 == order.size()
                              ? "the last stage holds the head"
                              : "only the last stage holds the head");
    if (s.firstLayer == s.endLayer && !s.pre && !s.post)
      c.fail(at / "layers", "the stage is empty (no layer, no embedding, no "
                            "head)");
  }
  if (!order.empty() && p.layers > 0 && previousEnd != p.layers)
    c.fail(root / "stages" / order.back() / "layers",
           "the stages end at layer " + std::to_string(previousEnd) +
               ", the model has " + std::to_string(p.layers));
}

void checkSbp(const Plan &p, const Checker &c) {
  const Pointer root;
  auto check = [&](const std::string &s, const Pointer &where) {
    if (!isSbpName(s))
      c.fail(where, "unknown SBP \"" + s + "\" (expected B, P or S(<dim>))");
  };
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Pointer at = root / "ops" / i;
    for (size_t j = 0; j < p.ops[i].operands.size(); ++j)
      check(p.ops[i].operands[j], at / "operands" / j);
    check(p.ops[i].result, at / "result");
    const auto &cands = p.ops[i].candidates;
    if (std::find(cands.begin(), cands.end(), p.ops[i].signature) ==
        cands.end())
      c.fail(at / "signature", "\"" + p.ops[i].signature +
                                   "\" is not one of the op's candidates");
  }
}

/// "B", "P" or "S(d)" with d below the tensor's rank: the dialect's rule for
/// one mesh axis (ir/dialect/Verifiers.cpp, checkLayoutFits).
void checkAxisSbp(const std::string &s, size_t rank, const Pointer &where,
                  const Checker &c) {
  if (!isSbpName(s))
    c.fail(where, "unknown SBP \"" + s + "\" (expected B, P or S(<dim>))");
  if (s[0] == 'S' && (s.size() > 12 || std::stoll(s.substr(2, s.size() - 3)) >=
                                           static_cast<long long>(rank)))
    c.fail(where, "split dimension of " + s +
                      " is not below the tensor's "
                      "rank " +
                      std::to_string(rank));
}

/// Every model tensor with its shape at the plan's micro-batch, its per-axis
/// SBP and its stage: dimensions positive, their product far from overflow.
void checkTensors(const Plan &p, const Checker &c) {
  const Pointer root;
  if (p.tensors.empty())
    c.fail(root / "tensors", "expected the model's tensors, got none");
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorLayout &t = p.tensors[i];
    const Pointer at = root / "tensors" / i;
    if (t.name.empty())
      c.fail(at / "name", "expected a tensor name");
    if (t.role != "input" && t.role != "parameter" && t.role != "activation")
      c.fail(at / "role",
             "expected input, parameter or activation, got \"" + t.role + "\"");
    // 2^48 elements is past any device's memory; products stay in int64.
    __int128 elements = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 1)
        c.fail(at / "shape" / d,
               "expected a positive size, got " + std::to_string(t.shape[d]));
      elements *= t.shape[d];
      if (elements > (static_cast<__int128>(1) << 48))
        c.fail(at / "shape", "more than 2^48 elements");
    }
    checkAxisSbp(t.dp, t.shape.size(), at / "sbp" / "dp", c);
    checkAxisSbp(t.tp, t.shape.size(), at / "sbp" / "tp", c);
    if (t.role == "parameter" && t.dp != "B")
      c.fail(at / "sbp" / "dp", "a parameter is whole on every data-parallel "
                                "rank: expected B, got " +
                                    t.dp);
    if (t.stage < 0 || t.stage >= static_cast<int>(p.stages.size()))
      c.fail(at / "stage", "expected a stage below " +
                               std::to_string(p.stages.size()) + ", got " +
                               std::to_string(t.stage));
  }
}

/// Each collective names a phase, a collective and mesh axes the plan has.
void checkCollectives(const Plan &p, const Checker &c) {
  static const std::set<std::string> phases = {
      "forward", "backward", "gradient-sync", "p2p", "recompute"};
  static const std::set<std::string> kinds = {
      "all_reduce", "all_gather", "reduce_scatter",
      "all_to_all", "send_recv",  "reduce_scatter+all_gather"};
  static const std::set<std::string> axes = {"pp", "dp", "tp"};
  for (size_t i = 0; i < p.collectives.size(); ++i) {
    const CollectiveUse &u = p.collectives[i];
    const Pointer at = Pointer() / "collectives" / i;
    if (!phases.count(u.phase))
      c.fail(at / "phase", "unknown phase " + c.shown(u.phase));
    if (!kinds.count(u.collective))
      c.fail(at / "collective", "unknown collective " + c.shown(u.collective));
    if (u.phase == "gradient-sync") {
      const int rank = gradientSyncRank(u.where);
      if (rank < 0 || rank >= p.knobs.pp)
        c.fail(at / "where", "expected \"gradients of pipeline rank <d>\" "
                             "with d below pp=" +
                                 std::to_string(p.knobs.pp) + ", got " +
                                 c.shown(u.where));
    }
    size_t from = 0;
    do {
      const size_t plus = u.axis.find('+', from);
      const std::string a = u.axis.substr(from, plus - from);
      if (!axes.count(a))
        c.fail(at / "axis", "no mesh axis " + c.shown(a) +
                                " (the mesh's axes are pp, dp and tp)");
      from = plus == std::string::npos ? plus : plus + 1;
    } while (from != std::string::npos);
  }
  // A pipeline sends activations between its stages.
  if (p.knobs.pp > 1 && std::none_of(p.collectives.begin(), p.collectives.end(),
                                     [](const CollectiveUse &u) {
                                       return u.phase == "p2p" &&
                                              u.axis == "pp";
                                     }))
    c.fail(Pointer() / "collectives", "pp > 1 and no p2p collective over pp");
}

void checkNumbers(const Plan &p, const Checker &c) {
  const Pointer root;
  c.quantity(p.peakFlops, root / "cluster" / "peak_flops");
  c.quantity(p.memoryCapacity, root / "cluster" / "memory_bytes");
  c.quantity(p.p2pTime, root / "p2p_time_s");
  for (size_t i = 0; i < p.collectives.size(); ++i) {
    const Pointer at = root / "collectives" / i;
    c.quantity(p.collectives[i].bytes, at / "bytes");
    c.quantity(p.collectives[i].time, at / "time_s");
    if (p.collectives[i].perStep < 0 || p.collectives[i].perStep > INT32_MAX)
      c.fail(at / "per_step", "expected 0 to 2^31 calls");
  }
  for (size_t i = 0; i < p.devices.size(); ++i) {
    const Pointer at = root / "pipeline_ranks" / i;
    const DeviceTimes &t = p.devices[i];
    for (auto [key, v] : t.jsonFields())
      c.quantity(v, at / key);
    const auto &m = t.memoryParts;
    c.quantities(at / "memory", {{"weights", m.state.weights},
                                 {"gradients", m.state.gradients},
                                 {"optimizer", m.state.optimizer},
                                 {"activations", m.activations},
                                 {"workspace", m.workspace},
                                 {"graph", m.graph},
                                 {"overhead", m.overhead},
                                 {"host", m.host}});
  }
  const Pointer pr = root / "predicted";
  const Prediction &q = p.predicted;
  for (const auto &f : Prediction::numbers(q))
    c.quantity(*f.value, pr / f.key);
  for (const auto &f : Prediction::breakdown(q))
    c.quantity(*f.value, pr / "breakdown_s" / f.key);
  for (const auto &[kind, t] : q.opKinds) {
    c.quantity(t[0], pr / "op_kinds_s" / kind / "forward");
    c.quantity(t[1], pr / "op_kinds_s" / kind / "backward");
  }
}

/// A plan made from a model file records the file's sha256: a file that has
/// changed since would be run with a plan made for something else. A source
/// that is no file here (a built-in name, a file moved away) is left to the
/// command that loads the model.
void checkModelFile(const Plan &p, const Checker &c) {
  if (p.modelSource.empty() || p.modelSha256.empty() ||
      userFileProblem(p.modelSource, "model"))
    return;
  std::string now = sha256Hex(readUserFile(p.modelSource, "model"));
  if (now != p.modelSha256)
    c.fail(Pointer() / "model" / "sha256",
           "the model file " + p.modelSource +
               " has changed since the plan was made (its sha256 is " + now +
               ", the plan's " + p.modelSha256 + ")");
}

/// K-FAC's layers lie on the plan's stages and its items are the kinds the
/// programs run.
void checkKfac(const Plan &p, const Checker &c) {
  if (!p.kfac)
    return;
  const Pointer at = Pointer() / "kfac";
  std::set<std::string> kinds;
  for (auto k :
       {pipeline::KfacItemKind::CurvatureA, pipeline::KfacItemKind::CurvatureG,
        pipeline::KfacItemKind::ReduceA, pipeline::KfacItemKind::ReduceG,
        pipeline::KfacItemKind::InvertA, pipeline::KfacItemKind::InvertG,
        pipeline::KfacItemKind::Precondition})
    kinds.insert(std::string(pipeline::kfacItemName(k)));
  for (size_t i = 0; i < p.kfac->layers.size(); ++i) {
    const KfacLayerPlan &l = p.kfac->layers[i];
    if (l.stage < 0 || l.stage >= static_cast<int>(p.stages.size()))
      c.fail(at / "layers" / i / "stage",
             "expected a stage below " + std::to_string(p.stages.size()) +
                 ", got " + std::to_string(l.stage));
  }
  if (p.kfac->devices.size() != static_cast<size_t>(p.knobs.pp))
    c.fail(at / "devices", "expected one entry per pipeline rank (" +
                               std::to_string(p.knobs.pp) + "), got " +
                               std::to_string(p.kfac->devices.size()));
  // The instruction lists the slots index (codegen walks the same table).
  pipeline::ScheduleConfig cfg;
  cfg.kind = p.knobs.schedule;
  cfg.stages = p.knobs.pp;
  cfg.microbatches = static_cast<int>(p.knobs.microbatches);
  cfg.chunks = p.knobs.schedule == pipeline::ScheduleKind::Interleaved
                   ? p.knobs.chunks
                   : 1;
  const auto schedule = pipeline::generateSchedule(cfg);
  for (size_t d = 0; d < p.kfac->devices.size(); ++d) {
    const KfacDevicePlan &dev = p.kfac->devices[d];
    const Pointer dp = at / "devices" / d;
    const size_t listSize = schedule && d < schedule->devices.size()
                                ? schedule->devices[d].size()
                                : 0;
    if (dev.device != static_cast<int>(d))
      c.fail(dp / "device", "expected pipeline rank " + std::to_string(d) +
                                " (one entry per rank, in order)");
    for (size_t k = 0; k < dev.items.size(); ++k) {
      const KfacItemPlacement &it = dev.items[k];
      const Pointer ip = dp / "items" / k;
      if (!kinds.count(it.item))
        c.fail(ip / "item",
               "unknown K-FAC item \"" + it.item +
                   "\" (expected curv_A, curv_G, reduce_A, reduce_G, inv_A, "
                   "inv_G or precond)");
      // Curvature is per micro-batch; the other items per step.
      const bool curvature = it.item.rfind("curv_", 0) == 0;
      if (curvature ? it.microbatch < 0 || it.microbatch >= p.knobs.microbatches
                    : it.microbatch != -1)
        c.fail(ip / "microbatch",
               curvature ? "expected the micro-batch (below " +
                               std::to_string(p.knobs.microbatches) +
                               ") of a curvature item"
                         : "only curvature items have a micro-batch");
      if (schedule && static_cast<size_t>(it.slot) > listSize)
        c.fail(ip / "slot", "expected an instruction slot of the device's " +
                                std::to_string(listSize) +
                                " instructions (0.." +
                                std::to_string(listSize) + "), got " +
                                std::to_string(it.slot));
      c.quantity(it.start, ip / "start_s");
      c.quantity(it.end, ip / "end_s");
      if (it.end < it.start)
        c.fail(ip / "end_s", "ends before its start_s");
    }
  }
}

} // namespace

void validateModelBytes(const Plan &p, const std::string &model,
                        const std::string &origin) {
  // The model loaded must be the one planned: the recorded file, or a
  // --model naming the same bytes elsewhere (a moved file).
  if (p.modelSha256.empty())
    return;
  const std::string now = sha256Hex(import::modelBytes(model));
  if (now != p.modelSha256)
    Checker{origin}.fail(Pointer() / "model" / "sha256",
                         "the plan was made for another model than " + model +
                             " (its sha256 is " + now + ", the plan's " +
                             p.modelSha256 + ")");
}

void validatePlanForModel(const Plan &p, const ModelGraph &g,
                          const std::string &model, const std::string &origin) {
  Checker c{origin};
  const Pointer root, mp = root / "model";
  // What the programs run (planner/Runnable.h): the knobs as a whole.
  if (std::string why =
          RunnableConfigurations(g).refusal(p.knobs, p.kfac.has_value());
      !why.empty())
    c.fail(root, "the generated programs do not run this plan: " + why);
  if (p.model != g.name)
    c.fail(mp / "name", "the model " + model + " is named \"" + g.name +
                            "\", the plan's \"" + p.model + "\"");
  if (p.modelFamily != g.family)
    c.fail(mp / "family", "the model " + model + " is a " + g.family +
                              ", the plan's a " + p.modelFamily);
  if (p.parameters != g.parameterCount())
    c.fail(mp / "parameters",
           "the model " + model + " has " + std::to_string(g.parameterCount()) +
               " parameters, the plan says " + std::to_string(p.parameters));
  if (p.seq != g.seq)
    c.fail(mp / "seq", "the model " + model + " is read at sequence " +
                           std::to_string(g.seq) + ", the plan says " +
                           std::to_string(p.seq));
  if (p.tensors.size() != g.tensors.size())
    c.fail(root / "tensors",
           "the model " + model + " has " + std::to_string(g.tensors.size()) +
               " tensors, the plan lists " + std::to_string(p.tensors.size()));
  static const char *roles[] = {"input", "parameter", "activation"};
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const TensorDef &m = g.tensors[i];
    const TensorLayout &t = p.tensors[i];
    const Pointer at = root / "tensors" / i;
    if (t.name != m.name)
      c.fail(at / "name", "expected the model's tensor \"" + m.name + "\"");
    const char *role = m.role == TensorRole::Parameter ? roles[1]
                       : m.role == TensorRole::Input   ? roles[0]
                                                       : roles[2];
    if (t.role != role)
      c.fail(at / "role", std::string("the model's ") + m.name + " is an " +
                              (role == roles[1] ? "parameter" : role));
    if (t.shape != std::vector<int64_t>(m.shape.begin(), m.shape.end())) {
      std::string dims;
      for (int64_t d : m.shape)
        dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      c.fail(at / "shape", "the model's " + m.name + " is [" + dims +
                               "] at micro-batch " +
                               std::to_string(p.knobs.microbatch));
    }
    // The tp split divides its dimension (the sbp dialect's rule), but for
    // a vocabulary the programs pad: GPT-2's 50257 rows over tp = 2.
    if (t.tp[0] == 'S') {
      const int64_t d = std::stoll(t.tp.substr(2));
      const std::string why = ops::layoutFitProblem(
          t.shape, {ops::AxisLayout::split(d)}, {p.knobs.tp}, {"tp"});
      const int64_t n = t.shape[static_cast<size_t>(d)];
      if (!why.empty() &&
          !(n == g.vocabularyRows() && unevenVocabSplitRuns(n, p.knobs.tp)))
        c.fail(at / "sbp" / "tp", why);
    }
  }
  std::map<std::string, const OpDef *> ops;
  for (const OpDef &op : g.ops)
    ops[op.name] = &op;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Pointer at = root / "ops" / i;
    auto it = ops.find(p.ops[i].op);
    if (it == ops.end())
      c.fail(at / "op", "the model has no op \"" + p.ops[i].op + "\"");
    const OpDef &op = *it->second;
    if (op.kind != p.ops[i].kind)
      c.fail(at / "kind", "the model's " + p.ops[i].op + " is a " + op.kind);
    if (p.ops[i].operands.size() != op.operands.size())
      c.fail(at / "operands", "the model's " + p.ops[i].op + " has " +
                                  std::to_string(op.operands.size()) +
                                  " operands");
    for (size_t j = 0; j < op.operands.size(); ++j)
      checkAxisSbp(p.ops[i].operands[j],
                   g.tensors[static_cast<size_t>(op.operands[j])].shape.size(),
                   at / "operands" / j, c);
    if (!op.results.empty())
      checkAxisSbp(p.ops[i].result,
                   g.tensors[static_cast<size_t>(op.results[0])].shape.size(),
                   at / "result", c);
  }
  if (p.kfac)
    for (size_t i = 0; i < p.kfac->layers.size(); ++i) {
      const std::string &name = p.kfac->layers[i].name;
      auto it = ops.find(name);
      if (it == ops.end() || it->second->kind != "linear")
        c.fail(root / "kfac" / "layers" / i / "name",
               "the model has no linear layer \"" + name + "\"");
    }
}

bool isSbpName(const std::string &s) {
  if (s == "B" || s == "P")
    return true;
  if (s.size() < 4 || s.compare(0, 2, "S(") != 0 || s.back() != ')')
    return false;
  return std::all_of(s.begin() + 2, s.end() - 1,
                     [](unsigned char ch) { return std::isdigit(ch); });
}

void validatePlan(const Plan &plan, const std::string &origin) {
  Checker c{origin};
  checkMesh(plan, c);
  checkStages(plan, c);
  checkSbp(plan, c);
  checkTensors(plan, c);
  checkCollectives(plan, c);
  checkKfac(plan, c);
  checkNumbers(plan, c);
  checkModelFile(plan, c);
}

} // namespace autoddl::planner
