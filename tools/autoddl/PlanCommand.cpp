//===- PlanCommand.cpp - `autoddl plan`: search a parallel plan ----------===//
//
//   autoddl plan MODEL --cluster C [--nodes N | --gpus N] --global-batch B
//                [--seq S] [--fix tp=8,pp=4,...] [--search cd|exhaustive]
//                [-o plan.json] [--json] [--no-why]
//
// Prints a summary in Megatron's vocabulary (or, with --json, the plan
// document); -o writes plan.json (docs/plan-format.md). When no configuration
// fits in memory it says so, with the smallest footprint found and what
// dominates it, and exits 1 without writing anything. The search:
// docs/planner.md.
//
//===----------------------------------------------------------------------===//
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/PlanJson.h"
#include "planner/PlanReport.h"
#include "planner/Search.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>

namespace autoddl::cli {
namespace {

struct PlanArgs {
  std::string model, cluster, fix, search = "cd", output;
  int nodes = 0, gpus = 0;
  int64_t globalBatch = 0, seq = 0;
  bool json = false, noWhy = false;
};

int64_t parseCount(const std::string &key, const std::string &value) {
  size_t used = 0;
  long long v = 0;
  bool ok = !value.empty();
  if (ok) {
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception &) {
      ok = false;
    }
  }
  if (!ok || used != value.size() || v < 0)
    throw UserError("--fix: " + key +
                    " expects a non-negative integer, got \"" + value + "\"");
  return v;
}

planner::FixedKnobs parseFix(const std::string &text) {
  planner::FixedKnobs f;
  if (text.empty())
    return f;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    std::string item = text.substr(begin, end - begin);
    begin = end + 1;
    if (item.empty())
      throw UserError("--fix: empty item in \"" + text + "\"");
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw UserError("--fix: expected key=value, got \"" + item + "\"");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto positive = [&](int64_t v) {
      if (v < 1)
        throw UserError("--fix: " + key + " must be at least 1, got " + value);
      return v;
    };
    if (key == "tp")
      f.tp = static_cast<int>(positive(parseCount(key, value)));
    else if (key == "pp")
      f.pp = static_cast<int>(positive(parseCount(key, value)));
    else if (key == "dp")
      f.dp = static_cast<int>(positive(parseCount(key, value)));
    else if (key == "microbatch" || key == "mb")
      f.microbatch = positive(parseCount(key, value));
    else if (key == "chunks")
      f.chunks = static_cast<int>(positive(parseCount(key, value)));
    else if (key == "zero") {
      int64_t z = parseCount(key, value);
      if (z > 2)
        throw UserError("--fix: zero expects 0, 1 or 2, got " + value);
      f.zero = static_cast<int>(z);
    } else if (key == "schedule") {
      auto s = pipeline::parseScheduleName(value);
      if (!s)
        throw UserError("--fix: unknown schedule \"" + value +
                        "\" (expected one of " +
                        pipeline::validScheduleNames() + ")");
      f.schedule = *s;
    } else if (key == "recompute") {
      cost::Recompute r;
      if (!planner::parseRecompute(value, r))
        throw UserError("--fix: recompute expects none, selective or full, "
                        "got \"" +
                        value + "\"");
      f.recompute = r;
    } else if (key == "order") {
      if (value == "tp-inner" || value == "pp,dp,tp")
        f.order = planner::AxisOrder::TensorInner;
      else if (value == "dp-inner" || value == "pp,tp,dp")
        f.order = planner::AxisOrder::DataInner;
      else
        throw UserError("--fix: order expects tp-inner or dp-inner, got \"" +
                        value + "\"");
    } else {
      throw UserError("--fix: unknown knob \"" + key +
                      "\" (expected tp, pp, dp, microbatch, schedule, chunks, "
                      "recompute, zero or order)");
    }
  }
  if (f.chunks && f.schedule &&
      *f.schedule != pipeline::ScheduleKind::Interleaved && *f.chunks != 1)
    throw UserError("--fix: chunks applies to the interleaved schedule only");
  if (f.chunks && !f.schedule && *f.chunks > 1)
    f.schedule = pipeline::ScheduleKind::Interleaved;
  return f;
}

/// plan.json -> plan.mlir (the annotated IR beside it).
std::string mlirPathFor(const std::string &jsonPath) {
  std::string base = jsonPath;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0)
    base.resize(base.size() - 5);
  return base + ".mlir";
}

/// The annotated IR: the plan's per-op signatures and placements as a readable
/// listing over the model's ops (sbp dialect spelling of layouts).
std::string annotatedIr(const ModelGraph &g, const planner::Plan &p) {
  std::string s = fmt::format(
      "// autoddl plan for {}: mesh pp={} dp={} tp={} ({}), micro-batch {} x "
      "{}, schedule {}\n",
      p.model, p.knobs.pp, p.knobs.dp, p.knobs.tp,
      planner::axisOrderName(p.knobs.order), p.knobs.microbatch,
      p.knobs.microbatches, pipeline::scheduleName(p.knobs.schedule));
  s += "// Each line: op, its nd-SBP signature over (dp, tp) and its stage.\n";
  std::map<std::string, size_t> tensorIndex;
  for (size_t i = 0; i < p.tensors.size(); ++i)
    tensorIndex[p.tensors[i].name] = i;
  for (const OpDef &op : g.ops) {
    std::string ins, outs;
    int stage = 0;
    auto layout = [&](int t) {
      auto it = tensorIndex.find(g.tensors[t].name);
      if (it == tensorIndex.end())
        return std::string("?");
      const planner::TensorLayout &l = p.tensors[it->second];
      stage = l.stage;
      return "(" + l.dp + ", " + l.tp + ")";
    };
    for (int t : op.operands)
      ins += (ins.empty() ? "" : ", ") + layout(t);
    for (int t : op.results)
      outs += (outs.empty() ? "" : ", ") + layout(t);
    s += fmt::format("sbp.{} \"{}\" {{sbp.sig = [{}] -> [{}], "
                     "sbp.placement = {}}}\n",
                     op.kind, op.name, ins, outs, stage);
  }
  return s;
}

void run(const PlanArgs &a) {
  if (a.globalBatch < 1)
    throw UserError("--global-batch: expected at least 1, got " +
                    std::to_string(a.globalBatch));
  if (a.search != "cd" && a.search != "exhaustive")
    throw UserError("--search: expected cd or exhaustive, got \"" + a.search +
                    "\"");
  cost::Cluster cluster = cost::loadCluster(a.cluster, a.nodes);
  if (a.gpus > 0) {
    const int G = cluster.gpusPerNode;
    if (a.gpus < G) {
      cluster.gpusPerNode = a.gpus;
      cluster = cost::withNodes(cluster, 1);
    } else if (a.gpus % G == 0) {
      cluster = cost::withNodes(cluster, a.gpus / G);
    } else {
      throw UserError("--gpus: " + std::to_string(a.gpus) +
                      " is neither below nor a multiple of the " +
                      std::to_string(G) + " GPUs per node of " + cluster.name);
    }
  }
  import::ImportOptions io;
  io.seq = a.seq;
  io.batch = 1;
  ModelGraph g1 = import::importModel(a.model, io);
  io.batch = 2;
  ModelGraph g2 = import::importModel(a.model, io);

  planner::PlannerOptions opts;
  opts.globalBatch = a.globalBatch;
  opts.fixed = parseFix(a.fix);
  opts.mode = a.search == "exhaustive" ? planner::SearchMode::Exhaustive
                                       : planner::SearchMode::CoordinateDescent;
  opts.explain = !a.noWhy;
  auto outcome = planner::plan(g1, g2, cluster, opts);
  if (!outcome)
    throw UserError("plan: " + outcome.error());
  if (const auto *inf = std::get_if<planner::Infeasible>(&*outcome))
    throw UserError(planner::infeasibleReport(*inf));
  const planner::Plan &p = std::get<planner::Plan>(*outcome);
  if (!a.output.empty()) {
    writeFileAtomically(a.output, planner::planToText(p));
    writeFileAtomically(mlirPathFor(a.output), annotatedIr(g1, p));
  }
  if (a.json)
    std::fputs(planner::planToText(p).c_str(), stdout);
  else
    std::fputs(planner::planSummary(p).c_str(), stdout);
}

} // namespace

void registerPlanCommand(CLI::App &app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App *cmd = app.add_subcommand(
      "plan", "search a parallel plan (tp/pp/dp, micro-batches, schedule, "
              "recomputation, ZeRO, per-op SBP) for a model on a cluster");
  cmd->add_option("model", args->model,
                  "model: a built-in name (autoddl import --list) or a JSON "
                  "file")
      ->required();
  cmd->add_option("--cluster", args->cluster,
                  "cluster preset name (examples/clusters/<name>.json) or a "
                  "cluster JSON file")
      ->required();
  auto *nodes = cmd->add_option("--nodes", args->nodes,
                                "scale the cluster to this many nodes");
  auto *gpus = cmd->add_option("--gpus", args->gpus,
                               "use this many GPUs (fewer than a node, or "
                               "whole nodes)");
  nodes->excludes(gpus);
  cmd->add_option("--global-batch", args->globalBatch,
                  "samples per training step over all data-parallel ranks")
      ->required();
  cmd->add_option("--seq", args->seq,
                  "sequence length (default: the model's context length)");
  cmd->add_option("--fix", args->fix,
                  "pin knobs: tp=8,pp=4,dp=..,microbatch=..,schedule=1f1b|"
                  "gpipe|interleaved|zb-h1|chimera,chunks=..,recompute=none|"
                  "selective|full,zero=0|1|2,order=tp-inner|dp-inner");
  cmd->add_option("--search", args->search,
                  "cd (coordinate descent, default) or exhaustive (exact SBP "
                  "search, small models)");
  cmd->add_option("-o,--output", args->output,
                  "write plan.json there (and plan.mlir beside it)");
  cmd->add_flag("--json", args->json, "print the plan document");
  cmd->add_flag("--no-why", args->noWhy,
                "skip pricing the neighbouring choices (inspect --why)");
  cmd->callback([args] { run(*args); });
}

} // namespace autoddl::cli
