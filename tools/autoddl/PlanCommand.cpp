//===- PlanCommand.cpp - `autoddl plan`: search a parallel plan ----------===//
//
//   autoddl plan MODEL --cluster C [--nodes N | --gpus N] --global-batch B
//                [--seq S] [--fix tp=8,pp=4,...] [--search cd|exhaustive]
//                [--stack modern|megatron-2021] [--tp-mode any|tensor]
//                [--optimizer adamw|kfac [--kfac-damping D]
//                 [--kfac-rule sgd|lamb|adam-graft] [--kfac-refresh
//                 K|K0,K1,...]
//                 [--kfac-overhead PERCENT]
//                 [--kfac-factor-decay D [--kfac-factor-every F]]
//                 [--kfac-factor-stride S]
//                 [--kfac-fill items|fluid]]
//                [-o plan.json] [--json]
//                [--precision bf16|fp8|auto] [--no-why]
//
// Prints a summary in Megatron's vocabulary (or, with --json, the plan
// document); -o writes plan.json (docs/plan-format.md). When no configuration
// fits in memory it says so, with the smallest footprint found and what
// dominates it, and exits 1 without writing anything. The search:
// docs/planner.md.
//
//===----------------------------------------------------------------------===//
#include "backends/common/KfacRules.h" // kfac_rule_named
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "ir/import/ResolvePrimitive.h"
#include "ir/lower/FuseImported.h"
#include "ir/lower/LowerPlan.h"
#include "planner/PlanJson.h"
#include "planner/PlanReport.h"
#include "planner/Search.h"
#include "planner/Sha256.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"
#include "tools/autoddl/Commands.h"
#include "tools/autoddl/KfacRefreshFlag.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace autoddl::cli {
namespace {

struct PlanArgs {
  std::string model, cluster, fix, search = "cd", output, stack = "modern",
                                   tpMode = "any", optimizer = "adamw";
  double kfacDamping = 1e-3;
  std::string kfacRule = "sgd";
  std::string kfacRefresh;        // K or K0,K1,...; empty: set by the bubbles
  std::string kfacFill;           // items or fluid; empty: items
  std::string kfacOverhead;       // percent of the first-order step; empty: 5
  std::string kfacFactorDecay;    // the factors' running average; empty: none
  int kfacFactorEvery = 0;        // F; 0: chosen for the overhead
  int kfacFactorStride = 0;       // S; 0: not given (every sample)
  std::string precision = "bf16"; // bf16, fp8 or auto
  // Given on the command line (the defaults above are no choice of the
  // user's): K-FAC's flags need --optimizer kfac, whatever their value.
  bool kfacDampingGiven = false, kfacRuleGiven = false;
  int nodes = 0, gpus = 0;
  int64_t globalBatch = 0, seq = 0;
  std::string loss;
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
    } else if (key == "recompute_layers") {
      if (value != "all" && value != "fit")
        throw UserError("--fix: recompute_layers expects all or fit, got \"" +
                        value + "\"");
      f.recomputeAllLayers = value == "all";
    } else if (key == "order") {
      if (value == "tp-inner" || value == "pp,dp,tp")
        f.order = planner::AxisOrder::TensorInner;
      else if (value == "dp-inner" || value == "pp,tp,dp")
        f.order = planner::AxisOrder::DataInner;
      else
        throw UserError("--fix: order expects tp-inner or dp-inner, got \"" +
                        value + "\"");
    } else if (key == "partition") {
      if (value == "balanced")
        f.partition = planner::StagePartition::Balanced;
      else if (value == "uniform")
        f.partition = planner::StagePartition::Uniform;
      else
        throw UserError("--fix: partition expects balanced or uniform, got \"" +
                        value + "\"");
    } else {
      throw UserError("--fix: unknown knob \"" + key +
                      "\" (expected tp, pp, dp, microbatch, schedule, chunks, "
                      "recompute, recompute_layers, zero, order or partition)");
    }
  }
  if (f.chunks && f.schedule &&
      *f.schedule != pipeline::ScheduleKind::Interleaved && *f.chunks != 1)
    throw UserError("--fix: chunks applies to the interleaved schedule only");
  if (f.chunks && !f.schedule && *f.chunks > 1)
    f.schedule = pipeline::ScheduleKind::Interleaved;
  return f;
}

/// Whether the importer builds the model at any batch size: templates and
/// config.json files do; a graph template (whole graph, --batch must be 1)
/// and an explicit graph (fixed shapes) do not (docs/model-format.md).
bool scalesWithBatch(const ModelGraph &g) {
  return !graphTemplateFamily(g.family) && g.family != "graph" &&
         g.staticBatch == 0;
}

/// An ONNX export with a static batch S: every plan's micro-batch is S, so
/// the global batch must be a multiple of S (of S x dp when dp is fixed).
void checkStaticBatch(const std::string &model, const ModelGraph &g,
                      int64_t globalBatch, const planner::FixedKnobs &f) {
  const int64_t s = g.staticBatch;
  if (s == 0)
    return;
  const std::string head = model + ": input '" + g.staticBatchInput +
                           "' has a static batch of " + std::to_string(s) +
                           ", which is every plan's micro-batch: ";
  if (f.microbatch && *f.microbatch != s)
    throw UserError(head + "--fix microbatch=" + std::to_string(*f.microbatch) +
                    " differs (export with a dynamic batch axis to plan other "
                    "micro-batches)");
  const int64_t dp = f.dp ? *f.dp : 1;
  if (globalBatch % (s * dp) != 0)
    throw UserError(head + "--global-batch " + std::to_string(globalBatch) +
                    " is not a multiple of " + std::to_string(s) +
                    (dp > 1 ? " x dp " + std::to_string(dp) : std::string()));
}

/// A model normalising per micro-batch (batch norms on batch statistics):
/// the micro-batch size M is part of its function, so it is fixed before
/// the search, which then picks dp and the micro-batch count freely (every
/// split into micro-batches of M computes the same function, PyTorch DDP's
/// per-device statistics and its gradient accumulation's). M is the user's
/// `--fix microbatch`, else the static batch, else global/dp for a fixed dp
/// (DDP's per-device batch), else the global batch (one device's whole
/// batch). Says which on stderr.
void fixStatisticsMicrobatch(const std::string &norm, int64_t globalBatch,
                             int64_t staticBatch, planner::FixedKnobs &f) {
  const char *from = "--fix microbatch";
  if (!f.microbatch && staticBatch > 0) {
    f.microbatch = staticBatch; // checkStaticBatch checked the rest
    from = "the export's static batch";
  } else if (!f.microbatch && f.dp) {
    if (globalBatch % *f.dp != 0)
      throw UserError(fmt::format(
          "{}: the micro-batch is part of the function (statistics per "
          "micro-batch), and --fix dp={} does not divide --global-batch {} "
          "(give --fix microbatch=)",
          norm, *f.dp, globalBatch));
    f.microbatch = globalBatch / *f.dp;
    from = "--global-batch / dp, as DDP's per-device batch";
  } else if (!f.microbatch) {
    f.microbatch = globalBatch;
    from = "the global batch; --fix microbatch=M lets dp and accumulation "
           "split it";
  }
  std::fprintf(stderr,
               "autoddl: note: %s: every plan normalises over micro-batches "
               "of %lld samples (%s)\n",
               norm.c_str(), static_cast<long long>(*f.microbatch), from);
}

/// plan.json -> plan.mlir (the annotated IR beside it).
std::string mlirPathFor(const std::string &jsonPath) {
  std::string base = jsonPath;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0)
    base.resize(base.size() - 5);
  return base + ".mlir";
}

/// plan.mlir: the model at one micro-batch over all dp ranks, lowered to the
/// sbp dialect with the plan's signatures, placements, stage transfers and
/// boxing (ir/lower/LowerPlan.h). When the module cannot be built (an uneven
/// split the dialect refuses, e.g. a vocabulary the planner pads), the listing
/// below is written instead, headed by the reason, and a warning printed.
std::string annotatedIr(const ModelGraph &g, const planner::Plan &p);

std::string planModule(const std::string &model, const ModelGraph &g1,
                       bool scales, const planner::Plan &p) {
  import::ImportOptions io;
  io.seq = p.seq;
  io.loss = p.loss;
  if (scales)
    io.batch = p.knobs.microbatch * p.knobs.dp;
  ModelGraph g = scales ? import::importModel(model, io) : g1;
  PlannedModule pm;
  pm.dp = p.knobs.dp;
  pm.tp = p.knobs.tp;
  pm.stages = std::max<int>(1, static_cast<int>(p.stages.size()));
  pm.pipelineRanks = p.knobs.pp;
  for (const planner::ModelOpLayout &m : p.modelOps)
    pm.ops.push_back({m.dp, m.tp, m.stage});
  LowerResult r = lowerPlanToSbpText(g, pm);
  if (r.ok())
    return fmt::format("// autoddl plan for {}: {}\n", p.model,
                       planner::knobsToString(p.knobs)) +
           r.text;
  std::string reason = r.error.substr(0, r.error.find('\n'));
  std::fprintf(stderr,
               "autoddl: warning: plan.mlir is a listing, not an sbp module: "
               "%s\n",
               reason.c_str());
  return "// not an sbp module: " + reason + "\n" + annotatedIr(g1, p);
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

/// The precisions `--precision` asks to plan in: bf16, fp8 (refused on a
/// GPU without an FP8 peak in its cluster file: the programs would run it
/// in bf16), or auto (bf16, and fp8 where the GPU has it: the faster plan
/// wins).
std::vector<cost::Precision> planPrecisions(const std::string &text,
                                            const cost::Cluster &c) {
  const bool hasFp8 = c.peak[static_cast<int>(cost::Precision::FP8)] > 0;
  if (text == "auto")
    return hasFp8 ? std::vector<cost::Precision>{cost::Precision::BF16,
                                                 cost::Precision::FP8}
                  : std::vector<cost::Precision>{cost::Precision::BF16};
  cost::Precision p;
  if (!cost::parsePrecision(text, p) ||
      (p != cost::Precision::BF16 && p != cost::Precision::FP8))
    throw UserError("--precision: expected bf16, fp8 or auto, got \"" + text +
                    "\"");
  if (p == cost::Precision::FP8 && !hasFp8)
    throw UserError("--precision fp8: the " + c.gpuModel + " of cluster " +
                    c.name +
                    " has no FP8 peak (gpu.peak_tflops.fp8 in its cluster "
                    "file); plan it in bf16");
  return {p};
}

/// --kfac-factor-decay, --kfac-factor-every and --kfac-factor-stride into
/// `opts` (docs/kfac.md "Factor interval and running average", "Factor
/// stride"), checked against a pinned K.
void kfacFactorOptions(const PlanArgs &a, const KfacRefreshPin &refresh,
                       planner::PlannerOptions &opts) {
  double factorDecay = 0;
  if (!a.kfacFactorDecay.empty()) {
    if (a.optimizer != "kfac")
      throw UserError("--kfac-factor-decay: needs --optimizer kfac");
    char *end = nullptr;
    errno = 0;
    factorDecay = std::strtod(a.kfacFactorDecay.c_str(), &end);
    if (errno != 0 || end == a.kfacFactorDecay.c_str() || *end != '\0' ||
        !(factorDecay > 0 && factorDecay < 1))
      throw UserError("--kfac-factor-decay: expected a decay in (0, 1), got "
                      "\"" +
                      a.kfacFactorDecay + "\"");
  }
  if (a.kfacFactorEvery != 0 && factorDecay == 0)
    throw UserError("--kfac-factor-every: needs --kfac-factor-decay");
  if (a.kfacFactorEvery < 0)
    throw UserError("--kfac-factor-every: expected a number of steps >= 1");
  opts.kfacFactorDecay = factorDecay;
  opts.kfacFactorEvery = a.kfacFactorEvery;
  // Against a pinned K here; against a K the bubbles set, the planner caps F.
  if (a.kfacFactorEvery > 0 && refresh.pinned()) {
    int shortest = refresh.all;
    for (int k : refresh.perDevice)
      shortest = shortest > 0 ? std::min(shortest, k) : k;
    if (a.kfacFactorEvery > shortest)
      throw UserError(fmt::format("--kfac-factor-every {} is longer than the "
                                  "pinned refresh interval {}",
                                  a.kfacFactorEvery, shortest));
  }
  if (a.kfacFactorStride != 0 && a.optimizer != "kfac")
    throw UserError("--kfac-factor-stride: needs --optimizer kfac");
  if (a.kfacFactorStride < 0)
    throw UserError("--kfac-factor-stride: expected a number of samples >= 1");
  opts.kfacFactorStride = a.kfacFactorStride > 0 ? a.kfacFactorStride : 1;
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
  // The planner learns which dims scale with the batch from the model at
  // micro-batch 1 and 2. Models whose shapes are fixed (a gcn trains on its
  // whole graph; an explicit graph's shapes are given) are imported once, as
  // they are, and planned with that one instance as the micro-batch.
  import::ImportOptions io;
  io.seq = a.seq;
  io.loss = a.loss;
  ModelGraph g1 = import::importModel(a.model, io);
  ModelGraph g2 = g1;
  if (scalesWithBatch(g1)) {
    io.batch = 2;
    g2 = import::importModel(a.model, io);
  }

  planner::PlannerOptions opts;
  opts.globalBatch = a.globalBatch;
  opts.fixed = parseFix(a.fix);
  checkStaticBatch(a.model, g1, a.globalBatch, opts.fixed);
  // An ONNX primitive that computes a sample from others (a mean over the
  // batch, ...) runs on the whole batch: no dp, one micro-batch.
  if (const std::string why =
          sampleMixingPrimitive(scalesWithBatch(g1) ? g2 : g1);
      !why.empty()) {
    const bool split =
        (opts.fixed.dp && *opts.fixed.dp > 1) ||
        (opts.fixed.microbatch && *opts.fixed.microbatch != a.globalBatch);
    if (split)
      throw UserError(a.model + ": " + why +
                      ", so it cannot run on a part of the batch: --fix "
                      "dp=1,microbatch=" +
                      std::to_string(a.globalBatch) +
                      " (or let an sbp-fuse pass recognise it)");
    opts.fixed.dp = 1;
    opts.fixed.microbatch = a.globalBatch;
  } else if (const std::string norm = microbatchStatisticsPrimitive(g2);
             !norm.empty()) {
    fixStatisticsMicrobatch(a.model + ": " + norm, a.globalBatch,
                            g1.staticBatch, opts.fixed);
  }
  opts.mode = a.search == "exhaustive" ? planner::SearchMode::Exhaustive
                                       : planner::SearchMode::CoordinateDescent;
  opts.explain = !a.noWhy;
  if (!planner::applyStack(a.stack, opts))
    throw UserError("--stack: expected modern or megatron-2021, got \"" +
                    a.stack + "\"");
  if (a.tpMode != "any" && a.tpMode != "tensor")
    throw UserError("--tp-mode: expected any or tensor, got \"" + a.tpMode +
                    "\"");
  opts.tpDataSplits = a.tpMode == "any";
  if (a.optimizer != "adamw" && a.optimizer != "kfac")
    throw UserError("--optimizer: expected adamw or kfac, got \"" +
                    a.optimizer + "\"");
  opts.optimizer = a.optimizer;
  if (a.kfacDampingGiven && a.optimizer != "kfac")
    throw UserError("--kfac-damping: needs --optimizer kfac");
  opts.kfacDamping = a.kfacDamping;
  // An unusable -o is found before the search, not after it.
  if (!a.output.empty()) {
    checkUserOutput(a.output, "-o");
    checkUserOutput(mlirPathFor(a.output), "-o");
  }
  rt::KfacRule rule;
  if (!rt::kfac_rule_named(a.kfacRule, rule))
    throw UserError("--kfac-rule: expected " + rt::kfac_rule_choices() +
                    ", got \"" + a.kfacRule + "\"");
  if (a.kfacRuleGiven && a.optimizer != "kfac")
    throw UserError("--kfac-rule: needs --optimizer kfac");
  const KfacRefreshPin refresh = parseKfacRefresh(a.kfacRefresh);
  if (!a.kfacRefresh.empty() && a.optimizer != "kfac") // "0" too
    throw UserError("--kfac-refresh: needs --optimizer kfac");
  if (!refresh.perDevice.empty() && opts.fixed.pp &&
      static_cast<int>(refresh.perDevice.size()) != *opts.fixed.pp)
    throw UserError(fmt::format(
        "--kfac-refresh: lists {} refresh intervals, one per pipeline device, "
        "but --fix pp={}",
        refresh.perDevice.size(), *opts.fixed.pp));
  opts.kfacRefresh = refresh.all;
  opts.kfacDeviceRefresh = refresh.perDevice;
  if (!a.kfacFill.empty() && a.optimizer != "kfac")
    throw UserError("--kfac-fill: needs --optimizer kfac");
  opts.kfacFilling = parseKfacFill(a.kfacFill);
  if (!a.kfacOverhead.empty()) {
    if (a.optimizer != "kfac")
      throw UserError("--kfac-overhead: needs --optimizer kfac");
    char *end = nullptr;
    errno = 0;
    const double pct = std::strtod(a.kfacOverhead.c_str(), &end);
    if (errno != 0 || end == a.kfacOverhead.c_str() || *end != '\0' ||
        !(pct >= 0 && pct < 100))
      throw UserError("--kfac-overhead: expected a percentage in [0, 100) of "
                      "the first-order step (0: K set by the bubbles alone), "
                      "got \"" +
                      a.kfacOverhead + "\"");
    opts.kfacOverhead = pct / 100;
  }
  kfacFactorOptions(a, refresh, opts);
  const std::vector<cost::Precision> precisions =
      planPrecisions(a.precision, cluster);
  planner::PlanOutcome result = planner::Infeasible{};
  bool have = false;
  for (cost::Precision prec : precisions) { // auto: the faster feasible one
    opts.precision = prec;
    auto outcome = planner::plan(g1, g2, cluster, opts);
    if (!outcome)
      throw UserError("plan: " + outcome.error());
    const auto *p = std::get_if<planner::Plan>(&*outcome);
    const auto *best = std::get_if<planner::Plan>(&result);
    if (!have ||
        (p && (!best || p->predicted.stepTime < best->predicted.stepTime)))
      result = *std::move(outcome);
    have = true;
  }
  if (const auto *inf = std::get_if<planner::Infeasible>(&result))
    throw UserError(planner::infeasibleReport(*inf));
  planner::Plan &p = std::get<planner::Plan>(result);
  // A model file is recorded by its absolute path: codegen, run, verify and
  // validate of the plan load it from there, from any folder.
  p.modelSource = a.model;
  p.loss = a.loss;
  if (!userFileProblem(a.model, "model")) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(a.model, ec);
    if (!ec)
      p.modelSource = abs.lexically_normal().string();
  }
  if (p.kfac)
    p.kfac->rule = a.kfacRule;

  p.modelSha256 = planner::sha256Hex(import::modelBytes(a.model));
  if (import::isOnnxModel(a.model)) // the passes only an ONNX import runs
    p.fuseSkip = fuseSkipText(fuseSkipFromEnvironment());
  if (!a.output.empty()) {
    writeFileAtomically(a.output, planner::planToText(p));
    writeFileAtomically(mlirPathFor(a.output),
                        planModule(a.model, g1, scalesWithBatch(g1), p));
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
  cmd->add_option(
      "--loss", args->loss,
      "an ONNX model without an exported loss trains with: cross_entropy "
      "(a classifier's default), causal_lm (token ids to logits; "
      "their default) or squared_error (MSE to the one-hot label)");
  cmd->add_option("--seq", args->seq,
                  "sequence length (default: the model's context length)");
  cmd->add_option("--fix", args->fix,
                  "pin knobs: tp=8,pp=4,dp=..,microbatch=..,schedule=1f1b|"
                  "gpipe|interleaved|zb-h1|chimera,chunks=..,recompute=none|"
                  "selective|full,recompute_layers=fit|all (all: every "
                  "layer, as Megatron's uniform method),zero=0|1|2,"
                  "order=tp-inner|dp-inner,"
                  "partition=balanced|uniform");
  cmd->add_option("--search", args->search,
                  "cd (coordinate descent, default) or exhaustive (exact SBP "
                  "search, small models)");
  cmd->add_option("--stack", args->stack,
                  "training stack to price: modern (FlashAttention, gradient "
                  "sync behind the backward; default) or megatron-2021 "
                  "(unfused attention with dropout, fp32 gradients all-reduced "
                  "after the flush)");
  cmd->add_option("--tp-mode", args->tpMode,
                  "what the tp axis may split: any (OneFlow's full list, "
                  "batch and sequence too; default) or tensor (Megatron's "
                  "tensor splits only: column, row, vocabulary, heads)");
  cmd->add_option("--optimizer", args->optimizer,
                  "adamw (first-order, default) or kfac (K-FAC on the linear "
                  "layers, its work packed into the pipeline bubbles: "
                  "docs/pipefisher.md)");
  CLI::Option *damping =
      cmd->add_option("--kfac-damping", args->kfacDamping,
                      "K-FAC Tikhonov damping (> 0, default 1e-3)");
  cmd->add_option("--kfac-refresh", args->kfacRefresh,
                  "pin K-FAC's refresh interval: K for every pipeline device, "
                  "or K0,K1,... one per device (steps; default: what each "
                  "device's bubbles need): a device's work is packed into "
                  "its K steps' bubbles and what they do not hold runs at the "
                  "cycle's end");
  cmd->add_option(
      "--kfac-overhead", args->kfacOverhead,
      "K-FAC's budget where bubbles are few, in percent of the first-order "
      "step (default 5): a device whose work its bubbles do not hold would "
      "add more refreshes less often, every K steps so that it adds at most "
      "this much a step on average (0: K set by the bubbles alone; "
      "--kfac-refresh pins K instead)");
  cmd->add_option("--kfac-factor-decay", args->kfacFactorDecay,
                  "K-FAC: fold the factors into a running average of this "
                  "decay in (0, 1) that the refreshes invert (default none: "
                  "each refresh inverts its own step's factors)");
  cmd->add_option("--kfac-factor-every", args->kfacFactorEvery,
                  "K-FAC with --kfac-factor-decay: the factors of every F-th "
                  "step (default: the shortest F whose curvature stays "
                  "within --kfac-overhead)");
  cmd->add_option("--kfac-factor-stride", args->kfacFactorStride,
                  "K-FAC: the factors from every S-th sample of each "
                  "micro-batch, their curvature at 1/S (default 1: every "
                  "sample; only micro-batches of a multiple of S samples)");
  cmd->add_option("--kfac-fill", args->kfacFill,
                  "how K-FAC items fill the bubbles: items (whole items, each "
                  "in a gap it fits: PipeFisher; default) or fluid (a "
                  "preemptible filling thread, the CPU programs': items in "
                  "queue order, split across gaps)");
  CLI::Option *rule =
      cmd->add_option("--kfac-rule", args->kfacRule,
                      "the rule on K-FAC's preconditioned gradient in the "
                      "programs: sgd (momentum SGD, default), lamb, or "
                      "adam-graft (its direction at AdamW's step size)");
  cmd->add_option("-o,--output", args->output,
                  "write plan.json there (and plan.mlir beside it)");
  cmd->add_option("--precision", args->precision,
                  "bf16 (default); fp8: the transformer blocks' large "
                  "linears in FP8 on Hopper (docs/cost-model.md, FP8); "
                  "auto: the faster of the two");
  cmd->add_flag("--json", args->json, "print the plan document");
  cmd->add_flag("--no-why", args->noWhy,
                "skip pricing the neighbouring choices (inspect --why)");
  cmd->callback([args, damping, rule] {
    args->kfacDampingGiven = damping->count() > 0;
    args->kfacRuleGiven = rule->count() > 0;
    run(*args);
  });
}

} // namespace autoddl::cli
