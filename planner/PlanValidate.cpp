//===- PlanValidate.cpp ---------------------------------------------------===//
#include "planner/PlanValidate.h"
#include "planner/Sha256.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
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
  const bool nodeSplit = p.modelFamily == "gcn" || p.modelFamily == "gat" ||
                         p.modelFamily == "graph";
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
  if (p.seq < 0) // 0: a model without a sequence (a CNN, a GCN)
    c.fail(root / "model" / "seq", "must not be negative");
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
  }
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
    if (p.collectives[i].perStep < 0)
      c.fail(at / "per_step", "must not be negative");
  }
  for (size_t i = 0; i < p.devices.size(); ++i) {
    const Pointer at = root / "pipeline_ranks" / i;
    const DeviceTimes &t = p.devices[i];
    for (auto [key, v] : t.jsonFields())
      c.quantity(v, at / key);
    const Pointer m = at / "memory";
    c.quantity(t.memoryParts.state.weights, m / "weights");
    c.quantity(t.memoryParts.state.gradients, m / "gradients");
    c.quantity(t.memoryParts.state.optimizer, m / "optimizer");
    c.quantity(t.memoryParts.activations, m / "activations");
    c.quantity(t.memoryParts.workspace, m / "workspace");
    c.quantity(t.memoryParts.overhead, m / "overhead");
    c.quantity(t.memoryParts.host, m / "host");
  }
  const Pointer pr = root / "predicted";
  const Prediction &q = p.predicted;
  for (auto [key, v] : std::initializer_list<std::pair<const char *, double>>{
           {"step_time_s", q.stepTime},
           {"tflops_per_gpu", q.tflopsPerGpu},
           {"hardware_tflops_per_gpu", q.hardwareTflopsPerGpu},
           {"mfu", q.mfu},
           {"bubble_fraction", q.bubbleFraction},
           {"peak_memory_bytes", q.peakMemory},
           {"peak_allocated_bytes", q.peakAllocated},
           {"peak_host_memory_bytes", q.peakHostMemory},
           {"memory_margin_bytes", q.memoryMargin},
           {"model_flops_per_step", q.modelFlopsPerStep}})
    c.quantity(v, pr / key);
  const Pointer bd = pr / "breakdown_s";
  for (auto [key, v] : std::initializer_list<std::pair<const char *, double>>{
           {"compute", q.compute},
           {"tp_comm", q.tpComm},
           {"p2p", q.p2p},
           {"bubble", q.bubble},
           {"grad_sync_exposed", q.gradSync},
           {"optimizer", q.optimizer}})
    c.quantity(v, bd / key);
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

} // namespace

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
  checkNumbers(plan, c);
  checkModelFile(plan, c);
}

} // namespace autoddl::planner
