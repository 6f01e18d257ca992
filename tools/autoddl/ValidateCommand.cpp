//===- ValidateCommand.cpp - `autoddl validate`: predicted vs measured ----===//
//
//   autoddl validate PLAN [--measured RUN_DIR] [--trace-out merged.json]
//                         [--json] [--step-tolerance F] [--steps N]
//                         [--model FILE]
//
// Compares a plan's prediction with a run of its generated CUDA program made
// with `--profile --trace` (issue 6 part 6; docs/calibrate.md "Validate"):
//   - per op kind: plan.json predicted.op_kinds_s (the critical rank's
//     compute seconds per step, forward and backward) against metrics.json
//     "op_kinds" (the busiest rank's CUDA-event time per step);
//   - per tensor-parallel collective kind: the plan's tp collectives, their
//     shares of predicted.breakdown_s.tp_comm, against metrics.json
//     "tp_collectives";
//   - per step: predicted.step_time_s against mean_step_seconds, and whether
//     the error is within --step-tolerance (issue 6: 15% after calibration);
//   - per rank: the predicted peak memory against peak_memory_bytes (and the
//     device's use, cudaMemGetInfo), within --memory-tolerance
//     (ValidateMemory.h; issue 27: 10%);
// and the mean absolute percentage error (MAPE) over the op kinds both sides
// have. --trace-out writes one Chrome-trace/Perfetto document holding the
// predicted timeline (the one `autoddl inspect --trace` writes, names
// prefixed "predicted: ", placed at the start of the measured second step)
// and the measured one (trace.json, when the run has it; names prefixed
// "measured: ", process ids after the predicted ones).
// Without --measured, on a machine with a GPU, the program is generated,
// built and run here (`autoddl run --backend cuda PLAN -- --profile --trace`)
// into a temporary directory (driver::profiledRun). --fit-cluster writes the
// cluster fitted to the run (cost_model/fit/ClusterFit.h). The report is the
// product: exit 0 whatever the errors; bad input exits 1.
//
//===----------------------------------------------------------------------===//
#include "codegen/CpuCodegen.h"
#include "cost_model/fit/ClusterFit.h"
#include "cost_model/pipeline/ChromeTrace.h"
#include "driver/Build.h"
#include "driver/Driver.h"
#include "planner/PlanJson.h"
#include "planner/PlanReport.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"
#include "tools/autoddl/Commands.h"
#include "tools/autoddl/ValidateMemory.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace autoddl::cli {
namespace {

using nlohmann::json;

struct ValidateArgs {
  std::string plan, measured, traceOut, model, cluster, fitCluster, graphRun;
  bool json = false;
  int64_t steps = 10;
  double stepTolerance = 0.15;   // issue 6: within 15% after calibration
  double memoryTolerance = 0.10; // issue 27: within 10%
};

/// A number of `j` at `key`, or nullopt when absent; a present non-number is
/// bad input.
std::optional<double> optNumber(const json &j, const char *key,
                                const std::string &origin,
                                const json::json_pointer &where) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null())
    return std::nullopt;
  if (!j.at(key).is_number())
    throw UserError(jsonPlace(origin, where / key) + "expected a number");
  return j.at(key).get<double>();
}

/// The kinds either side has a row for, in order: a kind only predicted or
/// only measured still gets its row.
template <class A, class B>
std::set<std::string> keysOfEither(const A &a, const B &b) {
  std::set<std::string> keys;
  for (const auto &kv : a)
    keys.insert(kv.first);
  for (const auto &kv : b)
    keys.insert(kv.first);
  return keys;
}

/// Per kind {forward, backward, calls} of a metrics.json object such as
/// "op_kinds"; empty when absent.
std::map<std::string, std::array<double, 3>>
kindTimes(const json &metrics, const char *key, const std::string &origin) {
  std::map<std::string, std::array<double, 3>> out;
  const json *kinds =
      optionalMetric(metrics, key, origin, &json::is_object, "an object");
  if (!kinds)
    return out;
  const json::json_pointer at = json::json_pointer("/") / key;
  for (const auto &[kind, t] : kinds->items()) {
    if (!t.is_object())
      throw UserError(jsonPlace(origin, at / kind) + "expected an object");
    std::array<double, 3> v{};
    const char *fields[] = {"forward_s", "backward_s", "calls"};
    for (int i = 0; i < 3; ++i) {
      auto x = optNumber(t, fields[i], origin, at / kind);
      if (!x || *x < 0)
        throw UserError(jsonPlace(origin, at / kind / fields[i]) +
                        "expected a non-negative number");
      v[size_t(i)] = *x;
    }
    out[kind] = v;
  }
  return out;
}

/// (predicted - measured) / measured, or nullopt when nothing was measured.
std::optional<double> relError(double predicted, double measured) {
  if (!(measured > 0))
    return std::nullopt;
  return (predicted - measured) / measured;
}

json numOrNull(std::optional<double> x) { return x ? json(*x) : json(nullptr); }

std::string ms(std::optional<double> seconds) {
  return seconds ? fmt::format("{:.3f}", *seconds * 1e3) : std::string("-");
}

std::string pct(std::optional<double> e) {
  return e ? fmt::format("{:+.1f}%", *e * 100) : std::string("-");
}

struct Row {
  std::string kind;
  std::optional<double> predForward, predBackward, measForward, measBackward;
  double measCalls = 0;
  std::optional<double> error; // of forward + backward
};

/// The predicted trace (inspect --trace) and the measured trace.json in one
/// document: see the file comment.
json mergedTrace(const planner::Plan &plan, const std::string &planPath,
                 const std::string &measuredTrace) {
  trace::ChromeTrace t;
  std::string error;
  if (!planner::planTrace(plan, 64, t, error))
    throw UserError(planPath + ": the plan's times do not replay: " + error);
  json predicted = parseJsonText(t.render(), planPath + " (predicted trace)");
  json measured = json::object({{"traceEvents", json::array()}});
  if (!measuredTrace.empty()) {
    measured = readJsonFile(measuredTrace, "trace");
    if (!measured.is_object() || !measured.contains("traceEvents") ||
        !measured.at("traceEvents").is_array())
      throw UserError(measuredTrace +
                      ": expected a Chrome trace with a traceEvents array");
  }
  // Where the measured second step starts: the second F0 of the lowest rank
  // (its first compute of each step), else its first.
  std::vector<double> f0;
  int64_t lowest = -1;
  for (const json &e : measured.at("traceEvents"))
    if (e.is_object() && e.value("ph", "") == "X" && e.contains("pid") &&
        e.at("pid").is_number_integer())
      lowest = lowest < 0 ? e.at("pid").get<int64_t>()
                          : std::min(lowest, e.at("pid").get<int64_t>());
  for (const json &e : measured.at("traceEvents"))
    if (e.is_object() && e.value("ph", "") == "X" &&
        e.value("name", "") == "F0" && e.value("pid", int64_t(-1)) == lowest &&
        e.contains("ts") && e.at("ts").is_number())
      f0.push_back(e.at("ts").get<double>());
  std::sort(f0.begin(), f0.end());
  const double shift = f0.size() >= 2 ? f0[1] : f0.empty() ? 0 : f0[0];

  json events = json::array();
  int64_t maxPid = -1;
  for (json e : predicted.at("traceEvents")) {
    if (e.contains("pid") && e.at("pid").is_number_integer())
      maxPid = std::max(maxPid, e.at("pid").get<int64_t>());
    if (e.value("ph", "") == "M") {
      if (e.contains("args") && e.at("args").contains("name"))
        e["args"]["name"] =
            "predicted: " + e.at("args").at("name").get<std::string>();
    } else {
      e["name"] = "predicted: " + e.value("name", std::string());
      if (e.contains("ts") && e.at("ts").is_number())
        e["ts"] = e.at("ts").get<double>() + shift;
    }
    events.push_back(std::move(e));
  }
  const int64_t offset = maxPid + 1;
  std::set<int64_t> measuredPids;
  for (json e : measured.at("traceEvents")) {
    if (!e.is_object())
      continue;
    const int64_t pid = e.contains("pid") && e.at("pid").is_number_integer()
                            ? e.at("pid").get<int64_t>()
                            : 0;
    measuredPids.insert(pid);
    e["pid"] = pid + offset;
    if (e.value("ph", "") == "M") {
      if (e.contains("args") && e.at("args").contains("name") &&
          e.at("args").at("name").is_string())
        e["args"]["name"] =
            "measured: " + e.at("args").at("name").get<std::string>();
    } else {
      e["name"] = "measured: " + e.value("name", std::string());
    }
    events.push_back(std::move(e));
  }
  for (int64_t pid : measuredPids) {
    events.push_back(
        {{"ph", "M"},
         {"name", "process_name"},
         {"pid", pid + offset},
         {"args", {{"name", fmt::format("measured: rank {}", pid)}}}});
    // The program's F/B/W events are timed by CUDA events on thread 0.
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid + offset},
                      {"tid", 0},
                      {"args", {{"name", "measured: compute (CUDA events)"}}}});
  }
  return json::object({{"traceEvents", events}, {"displayTimeUnit", "ms"}});
}

/// Times and ranks no run produces (a negative step time, the profile of a
/// rank beyond the plan's) are refused by place, not compared.
void checkMeasuredNumbers(const json &m, const std::string &path, int ranks) {
  const json::json_pointer root;
  for (const char *key :
       {"mean_step_seconds", "tokens_per_second", "samples_per_second"})
    if (auto x = optNumber(m, key, path, root); x && !(*x >= 0))
      throw UserError(jsonPlace(path, root / key) +
                      "expected a non-negative number");
  if (m.contains("step_seconds")) {
    const json &steps = m.at("step_seconds");
    const json::json_pointer at = root / "step_seconds";
    if (!steps.is_array())
      throw UserError(jsonPlace(path, at) + "expected an array");
    for (size_t i = 0; i < steps.size(); ++i)
      if (!steps[i].is_number() || !(steps[i].get<double>() >= 0))
        throw UserError(jsonPlace(path, at / i) +
                        "expected a non-negative number");
  }
  if (auto r = optNumber(m, "op_profile_rank", path, root))
    if (!(*r >= 0 && *r < ranks) || *r != std::floor(*r))
      throw UserError(
          jsonPlace(path, root / "op_profile_rank") +
          fmt::format("rank {} is not one of the plan's {} ranks", *r, ranks));
}

/// DIR/metrics.json of a run of the plan's program, checked to be a run of
/// this plan: its model and rank count. `flags`: what the run needed beyond
/// --out DIR (for the message when the file is missing).
json readRunMetrics(const ValidateArgs &a, const planner::Plan &plan,
                    const std::string &dir, const char *flags) {
  const std::string path = dir + "/metrics.json";
  if (!std::filesystem::exists(path))
    throw UserError(path + ": no metrics.json in " + dir +
                    " (a run of the plan's program with --out " + dir + flags +
                    " writes it)");
  const json m = readJsonFile(path, "metrics");
  if (!m.is_object())
    throw UserError(path + ": expected a JSON object");
  const json info = m.value("info", json::object());
  const std::string model = info.value("model", std::string());
  if (model != plan.model)
    throw UserError(
        fmt::format("{}: a run of model {}, but {} is a plan of {}", path,
                    model.empty() ? std::string("(none recorded)") : model,
                    a.plan, plan.model));
  const int ranks = plan.knobs.pp * plan.knobs.dp * plan.knobs.tp;
  if (info.contains("ranks") && info.at("ranks").is_string() &&
      info.at("ranks").get<std::string>() != std::to_string(ranks))
    throw UserError(fmt::format("{}: a run on {} ranks, but the plan {} runs "
                                "on {} (pp={} x dp={} x tp={})",
                                path, info.at("ranks").get<std::string>(),
                                a.plan, ranks, plan.knobs.pp, plan.knobs.dp,
                                plan.knobs.tp));
  checkMeasuredNumbers(m, path, ranks);
  return m;
}

/// --graph-run DIR: the mean step of DIR/metrics.json, a run of the plan's
/// program (without --profile) whose step ran as a CUDA graph; nullopt
/// without --graph-run.
std::optional<double> graphRunStep(const ValidateArgs &a,
                                   const planner::Plan &plan) {
  if (a.graphRun.empty())
    return std::nullopt;
  const std::string path = a.graphRun + "/metrics.json";
  const json m = readRunMetrics(a, plan, a.graphRun, "");
  const std::string graph =
      m.value("info", json::object()).value("cuda_graph", std::string());
  if (graph.rfind("on", 0) != 0)
    throw UserError(fmt::format(
        "{}: its step did not run as a CUDA graph (info.cuda_graph: {})", path,
        graph.empty() ? std::string("absent") : graph));
  const std::optional<double> step =
      optNumber(m, "mean_step_seconds", path, json::json_pointer());
  if (!step)
    throw UserError(path + ": no mean_step_seconds");
  return step;
}

/// --fit-cluster: the cluster of --cluster fitted to this run
/// (cost_model/fit/ClusterFit.h).
void fitCluster(const ValidateArgs &a, const planner::Plan &plan,
                const std::vector<Row> &ops, std::optional<double> measuredStep,
                std::optional<double> graphStep) {
  if (!measuredStep)
    throw UserError("--fit-cluster: the run has no mean_step_seconds");
  cost::RunFitInput in;
  in.cluster = a.cluster;
  for (const Row &r : ops)
    if (r.predForward &&
        r.measForward) // a kind only one side has is not fitted
      in.ops.push_back({r.kind, *r.predForward, *r.predBackward, *r.measForward,
                        *r.measBackward, r.measCalls});
  in.predictedStep = plan.predicted.stepTime;
  in.measuredStep = *measuredStep;
  in.graphStep = graphStep;
  in.planName = fmt::format("the {} plan {}", plan.model,
                            std::filesystem::path(a.plan).filename().string());
  in.measuredRun = a.measured.empty() ? std::string("(run here)") : a.measured;
  in.graphRun = a.graphRun;
  const cost::RunFit fit =
      cost::fitClusterToRun(in, a.fitCluster, "--fit-cluster");
  std::fprintf(
      stderr, "autoddl: wrote %s: %zu op kinds scaled, op overhead %.1f us%s\n",
      a.fitCluster.c_str(), fit.kinds, fit.overhead * 1e6,
      fit.graphOverhead ? fmt::format(", in a graphed step {:.1f} us",
                                      *fit.graphOverhead * 1e6)
                              .c_str()
                        : "");
}

void run(const ValidateArgs &a) {
  if (!(a.stepTolerance >= 0))
    throw UserError("--step-tolerance: expected a non-negative fraction, got " +
                    fmt::format("{}", a.stepTolerance));
  if (!(a.memoryTolerance >= 0))
    throw UserError("--memory-tolerance: expected a non-negative fraction, "
                    "got " +
                    fmt::format("{}", a.memoryTolerance));
  if (!a.fitCluster.empty() && a.cluster.empty())
    throw UserError("--fit-cluster: needs --cluster, the cluster the plan "
                    "was made on (preset name or file)");
  planner::Plan plan = planner::readPlanFile(a.plan);
  // A profiled run loads the model (and checks the plan against it); a
  // measured run's plan is checked against its model where it is here.
  if (!a.measured.empty() &&
      (!a.model.empty() || codegen::planModelAtHand(plan)))
    codegen::validatedModelForPlan(plan, a.model);
  // Before the run (a build and a profiled run when --measured is not
  // given): an output that cannot be written fails now, not after it.
  if (!a.traceOut.empty())
    checkUserOutput(a.traceOut, "--trace-out");
  if (!a.fitCluster.empty())
    checkUserOutput(a.fitCluster, "--fit-cluster");
  // The profiled run's folder lives until the report is written.
  std::unique_ptr<driver::WorkDir> work;
  if (a.measured.empty())
    work = std::make_unique<driver::WorkDir>("", "validate");
  const std::string dir =
      a.measured.empty()
          ? driver::profiledRun(plan, a.plan, a.model, a.steps, *work)
          : a.measured;
  const std::string metricsPath = dir + "/metrics.json";
  const json m = readRunMetrics(a, plan, dir, " --profile");
  if (!m.contains("op_kinds"))
    throw UserError(metricsPath +
                    ": no op_kinds (run the program with --profile)");
  const auto measuredOps = kindTimes(m, "op_kinds", metricsPath);
  const auto measuredComm = kindTimes(m, "tp_collectives", metricsPath);
  const std::optional<double> measuredStep =
      optNumber(m, "mean_step_seconds", metricsPath, json::json_pointer());
  if (plan.predicted.opKinds.empty())
    std::fprintf(stderr,
                 "autoddl: warning: %s has no predicted.op_kinds_s "
                 "(a plan from before it existed: plan it again)\n",
                 a.plan.c_str());

  // Op kinds: the prediction for the pipeline device of the profiled rank
  // (the program profiles its busiest rank; the plan's op_kinds_s is its
  // critical one, another device in a pipeline).
  auto predictedKinds = plan.predicted.opKinds;
  const std::optional<double> profiledRank =
      optNumber(m, "op_profile_rank", metricsPath, json::json_pointer());
  if (profiledRank && !plan.predicted.opKindsByDevice.empty()) {
    const size_t device =
        size_t(*profiledRank) / size_t(plan.knobs.dp * plan.knobs.tp);
    if (device < plan.predicted.opKindsByDevice.size())
      predictedKinds = plan.predicted.opKindsByDevice[device];
  }
  std::vector<Row> ops;
  double apeSum = 0;
  int apeCount = 0;
  for (const std::string &k : keysOfEither(predictedKinds, measuredOps)) {
    Row r;
    r.kind = k;
    auto p = predictedKinds.find(k);
    if (p != predictedKinds.end()) {
      r.predForward = p->second[0];
      r.predBackward = p->second[1];
    }
    auto q = measuredOps.find(k);
    if (q != measuredOps.end()) {
      r.measForward = q->second[0];
      r.measBackward = q->second[1];
      r.measCalls = q->second[2];
    }
    if (r.predForward && r.measForward) {
      r.error = relError(*r.predForward + *r.predBackward,
                         *r.measForward + *r.measBackward);
      if (r.error) {
        apeSum += std::fabs(*r.error);
        ++apeCount;
      }
    }
    ops.push_back(r);
  }
  const std::optional<double> mape =
      apeCount ? std::optional<double>(apeSum / apeCount) : std::nullopt;

  // Tensor-parallel collectives: each kind's share of the plan's tp
  // collective time (time x calls), scaled to the critical rank's tp_comm.
  std::map<std::string, double> share;
  double shareTotal = 0;
  for (const planner::CollectiveUse &u : plan.collectives)
    if (u.axis == "tp") {
      share[u.collective] += u.time * double(u.perStep);
      shareTotal += u.time * double(u.perStep);
    }
  std::vector<Row> comms;
  for (const std::string &k : keysOfEither(share, measuredComm)) {
    Row r;
    r.kind = k;
    auto s = share.find(k);
    if (s != share.end() && shareTotal > 0)
      r.predForward = plan.predicted.tpComm * s->second / shareTotal;
    auto q = measuredComm.find(k);
    if (q != measuredComm.end()) {
      r.measForward = q->second[0] + q->second[1];
      r.measCalls = q->second[2];
    }
    if (r.measForward)
      r.error = relError(r.predForward.value_or(0), *r.measForward);
    comms.push_back(r);
  }
  // The step is compared with the graphed run when there is one (the
  // profiled run's step is always eager: --profile times each op).
  const std::optional<double> graphStep = graphRunStep(a, plan);
  const std::optional<double> stepMeasured =
      graphStep ? graphStep : measuredStep;
  const std::optional<double> stepError =
      stepMeasured ? relError(plan.predicted.stepTime, *stepMeasured)
                   : std::nullopt;
  std::string stepNote;
  if (graphStep)
    stepNote = "the step measured in " + a.graphRun +
               ", replayed as a CUDA "
               "graph";
  else if (plan.predicted.stepGraph)
    stepNote = "the plan prices a step replayed as a CUDA graph, this run's "
               "step ran eagerly (--profile): compare the step with "
               "--graph-run RUN, a run without --profile";

  const std::vector<MemoryRow> memory = memoryRows(plan, m, metricsPath);

  if (!a.fitCluster.empty())
    fitCluster(a, plan, ops, measuredStep, graphStep);

  std::string traceNote;
  if (!a.traceOut.empty()) {
    const std::string tracePath = dir + "/trace.json";
    const bool hasTrace = std::filesystem::exists(tracePath);
    writeFileAtomically(
        a.traceOut,
        mergedTrace(plan, a.plan, hasTrace ? tracePath : "").dump() + "\n");
    traceNote = hasTrace ? "" : " (no measured trace.json: predicted only)";
  }

  if (a.json) {
    json out = json::object();
    out["plan"] = a.plan;
    out["measured"] = dir;
    json jo = json::array();
    for (const Row &r : ops)
      jo.push_back({{"kind", r.kind},
                    {"predicted_forward_s", numOrNull(r.predForward)},
                    {"predicted_backward_s", numOrNull(r.predBackward)},
                    {"measured_forward_s", numOrNull(r.measForward)},
                    {"measured_backward_s", numOrNull(r.measBackward)},
                    {"measured_calls", r.measCalls},
                    {"error", numOrNull(r.error)}});
    out["op_kinds"] = jo;
    out["op_kinds_mape"] = numOrNull(mape);
    json jc = json::array();
    for (const Row &r : comms)
      jc.push_back({{"kind", r.kind},
                    {"predicted_s", numOrNull(r.predForward)},
                    {"measured_s", numOrNull(r.measForward)},
                    {"measured_calls", r.measCalls},
                    {"error", numOrNull(r.error)}});
    out["tp_collectives"] = jc;
    out["step"] = {{"predicted_s", plan.predicted.stepTime},
                   {"measured_s", numOrNull(stepMeasured)},
                   {"graphed", graphStep.has_value()},
                   {"note", stepNote},
                   {"error", numOrNull(stepError)},
                   {"tolerance", a.stepTolerance},
                   {"within_tolerance",
                    stepError ? json(std::fabs(*stepError) <= a.stepTolerance)
                              : json(nullptr)}};
    out["memory"] = memoryJson(memory, a.memoryTolerance);
    if (!a.traceOut.empty())
      out["trace"] = a.traceOut;
    std::fputs((out.dump(2) + "\n").c_str(), stdout);
    return;
  }
  std::string s = fmt::format(
      "validate {} against {}\n(per step on the critical / busiest rank, "
      "milliseconds; error = (predicted - measured) / measured)\n\n",
      a.plan, metricsPath);
  s += fmt::format("{:<16} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}\n",
                   "op kind", "pred fwd", "meas fwd", "pred bwd", "meas bwd",
                   "calls", "error");
  for (const Row &r : ops)
    s += fmt::format("{:<16} {:>10} {:>10} {:>10} {:>10} {:>8.0f} {:>8}\n",
                     r.kind, ms(r.predForward), ms(r.measForward),
                     ms(r.predBackward), ms(r.measBackward), r.measCalls,
                     pct(r.error));
  s += fmt::format("MAPE over {} op kinds: {}\n\n", apeCount,
                   mape ? fmt::format("{:.1f}%", *mape * 100) : "-");
  s += fmt::format("{:<16} {:>10} {:>10} {:>8} {:>8}\n", "tp collective",
                   "predicted", "measured", "calls", "error");
  for (const Row &r : comms)
    s += fmt::format("{:<16} {:>10} {:>10} {:>8.0f} {:>8}\n", r.kind,
                     ms(r.predForward), ms(r.measForward), r.measCalls,
                     pct(r.error));
  if (comms.empty())
    s += "(none: the plan and the run have no tensor-parallel collectives)\n";
  s += fmt::format("\n{:<16} {:>10} {:>10} {:>8} {:>8}\n", "step",
                   ms(plan.predicted.stepTime), ms(stepMeasured), "",
                   pct(stepError));
  if (!stepNote.empty())
    s += "(" + stepNote + ")\n";
  if (stepError)
    s += fmt::format("step within {:.0f}%: {}\n", a.stepTolerance * 100,
                     std::fabs(*stepError) <= a.stepTolerance ? "yes" : "no");
  s += memoryText(memory, a.memoryTolerance);
  if (!a.traceOut.empty())
    s += fmt::format("\ntrace: {}{}\n", a.traceOut, traceNote);
  std::fputs(s.c_str(), stdout);
}

} // namespace

void registerValidateCommand(CLI::App &app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App *cmd = app.add_subcommand(
      "validate", "compare a plan's predicted times with a profiled run of "
                  "its CUDA program (per op kind, collective, step; MAPE)");
  cmd->add_option("plan", args->plan, "plan.json written by autoddl plan")
      ->required();
  cmd->add_option("--measured", args->measured,
                  "directory of a run made with --out DIR --profile --trace "
                  "(else: run it here, on this machine's GPUs)");
  cmd->add_option("--trace-out", args->traceOut,
                  "write the predicted and measured timelines into one "
                  "Chrome-trace/Perfetto JSON file");
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_option("--steps", args->steps,
                  "steps of the run made here (default 10; the first is "
                  "warm-up)");
  cmd->add_option("--step-tolerance", args->stepTolerance,
                  "report whether |step error| is within this fraction "
                  "(default 0.15, issue 6's bound after calibration)");
  cmd->add_option("--memory-tolerance", args->memoryTolerance,
                  "report whether every rank's |peak memory error| is "
                  "within this fraction (default 0.10, issue 27)");
  cmd->add_option("--cluster", args->cluster,
                  "the cluster the plan was made on (for --fit-cluster)");
  cmd->add_option("--fit-cluster", args->fitCluster,
                  "write that cluster with op-kind time scales and a per-op "
                  "overhead fitted to this run (fit on a 1-GPU plan; "
                  "docs/calibrate.md)");
  cmd->add_option("--graph-run", args->graphRun,
                  "directory of a run of the same plan (no --profile) whose "
                  "step ran as a CUDA graph: the step is compared with it, "
                  "and --fit-cluster fits gpu.graph_op_overhead_us");
  addPlanModelOption(*cmd, args->model); // for the run made here
  cmd->callback([args] { run(*args); });
}

} // namespace autoddl::cli
