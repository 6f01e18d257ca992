//===- Driver.cpp - plan -> project -> build -> launch --------------------===//
#include "driver/Driver.h"

#include "backends/common/FileIo.h"
#include "backends/common/Safetensors.h"
#include "driver/Build.h"
#include "ir/import/ModelGraph.h"
#include "ir/import/OnnxWeights.h"
#include "planner/PlanJson.h"
#include "support/UserError.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace autoddl::driver {

int planRanks(const planner::Plan &plan) {
  return plan.knobs.pp * plan.knobs.dp * plan.knobs.tp;
}

void checkBackend(codegen::Backend backend, bool fp32) {
  if (backend == codegen::Backend::Cuda)
    requireGpu("--backend cuda");
  else if (fp32)
    throw UserError("--fp32: only the cuda backend has a bf16 mode");
}

codegen::ProjectFiles planProject(const planner::Plan &plan,
                                  const std::string &planText,
                                  const std::string &model,
                                  codegen::Backend backend, bool fp32) {
  ModelGraph g = codegen::modelForPlan(plan, model);
  return codegen::generateProject(plan, g, planText, backend, fp32);
}

void checkWeightsFlag(const std::string &weights) {
  if (!weights.empty() && weights != "onnx")
    throw UserError("--weights: expected onnx (the exported values of an "
                    "ONNX model), got '" +
                    weights + "'");
}

void writeOnnxWeights(const planner::Plan &plan, const std::string &model,
                      const std::string &file) {
  const std::string source =
      model.empty() ? codegen::planModelSource(plan) : model;
  const auto dot = source.rfind('.');
  if (dot == std::string::npos || source.substr(dot) != ".onnx")
    throw UserError("--weights onnx: the plan's model " + source +
                    " is not an ONNX file (give --model FILE.onnx)");
  const ModelGraph g = codegen::modelForPlan(plan, model);
  const std::vector<import::ParameterValues> values =
      import::readOnnxWeights(source, g);
  std::vector<rt::NamedTensor> tensors;
  for (const import::ParameterValues &v : values)
    tensors.push_back({v.name, rt::Shape(v.shape.begin(), v.shape.end()),
                       v.values.data()});
  try {
    rt::safetensors_write(file, tensors,
                          {{"format", "pt"}, {"source", source}});
  } catch (const std::exception &e) {
    throw UserError(std::string("--weights onnx: ") + e.what());
  }
}

Program buildPlan(const planner::Plan &plan, const std::string &planText,
                  const std::string &model, codegen::Backend backend, bool fp32,
                  bool verbose) {
  return {
      buildCached(planProject(plan, planText, model, backend, fp32), verbose),
      planRanks(plan)};
}

int launch(const Program &p, const std::vector<std::string> &args,
           const std::string &log, bool announce) {
  if (announce)
    std::fprintf(stderr, "autoddl: mpirun -np %d %s%s\n", p.ranks,
                 p.binary.c_str(),
                 log.empty() ? "" : (" (log " + log + ")").c_str());
  return launchMpi(p.binary, p.ranks, args, log);
}

planner::Plan singleRankPlan(const planner::Plan &plan, int64_t layers,
                             bool keepMicrobatch) {
  planner::Plan p = plan;
  p.knobs.tp = p.knobs.pp = p.knobs.dp = 1;
  p.knobs.microbatch = plan.globalBatch;
  p.knobs.microbatches = 1;
  // Fixed-shape models (an explicit op graph, a graph template, a static-batch
  // ONNX export): a micro-batch is one instance of the graph; batch norms
  // normalise over it. The one rank runs the global batch as that many.
  if (plan.modelFamily == "graph" || graphTemplateFamily(plan.modelFamily) ||
      keepMicrobatch) {
    p.knobs.microbatch = plan.knobs.microbatch;
    p.knobs.microbatches = plan.globalBatch / plan.knobs.microbatch;
  }
  p.knobs.schedule = pipeline::ScheduleKind::OneFOneB;
  p.knobs.chunks = 1;
  p.knobs.zero = 0;
  // The reference keeps every activation: a recomputing plan is checked
  // against the run that recomputes nothing.
  p.knobs.recompute = cost::Recompute::None;
  planner::StageInfo s;
  s.stage = 0;
  s.device = 0;
  s.firstLayer = 0;
  s.endLayer = int(layers);
  s.pre = s.post = true;
  p.stages = {s};
  p.collectives.clear();
  // The K-FAC items keep their steps of the cycle (the semantics) but not
  // their slots, which index the plan's own schedule: on one rank each runs
  // as soon as its inputs exist.
  if (p.kfac)
    for (planner::KfacDevicePlan &d : p.kfac->devices)
      for (planner::KfacItemPlacement &it : d.items)
        it.slot = 0;
  return p;
}

namespace {

bool isPlanFile(const std::string &path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return false;
  auto doc = nlohmann::json::parse(codegen::readTextFile(path), nullptr, false);
  return doc.is_object() && doc.value("format", "") == "autoddl-plan";
}

std::string selfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw UserError("cannot find the autoddl executable (/proc/self/exe)");
  return p.string();
}

/// The plan stage of `run`: `autoddl plan` on the model, as its own process
/// (it prints the plan), into `planPath`.
void planModel(const RunOptions &o, const std::string &planPath) {
  const int64_t batch = o.globalBatch ? o.globalBatch : 8;
  std::vector<std::string> argv = {selfPath(),
                                   "plan",
                                   o.input,
                                   "--cluster",
                                   o.cluster,
                                   "--gpus",
                                   std::to_string(o.ranks),
                                   "--global-batch",
                                   std::to_string(batch),
                                   "--no-why",
                                   "-o",
                                   planPath};
  if (o.seq)
    argv.insert(argv.end(), {"--seq", std::to_string(o.seq)});
  if (!o.loss.empty())
    argv.insert(argv.end(), {"--loss", o.loss});
  if (!o.fix.empty())
    argv.insert(argv.end(), {"--fix", o.fix});
  // A child of its own (no shell: a model path with quotes stays one
  // argument), stopped with autoddl by SIGINT/SIGTERM.
  if (runJob(argv) != 0)
    throw UserError("planning " + o.input + " failed");
}

/// The folder the training flags give --save ("" when none).
std::string saveFolder(const std::vector<std::string> &args) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--save")
      return args[i + 1];
  return "";
}

/// Launches the program; under --restarts N, a run that fails other than by
/// exit status 1 (bad input, a diverged loss, an error the program reported:
/// a rerun would repeat them) is launched again from the newest checkpoint
/// (--resume auto replacing any --resume), at most N times. A rank killed
/// mid-run ends the whole job (mpirun stops every rank and names the lost
/// one), so each attempt ends in bounded time.
int launchWithRestarts(const Program &p, std::vector<std::string> args,
                       int restarts) {
  int rc = launch(p, args, "", true);
  for (int attempt = 1; rc != 0 && rc != 1 && attempt <= restarts; ++attempt) {
    for (size_t i = 0; i < args.size();)
      if (args[i] == "--resume")
        args.erase(args.begin() + long(i),
                   args.begin() + long(std::min(i + 2, args.size())));
      else
        ++i;
    args.insert(args.end(), {"--resume", "auto"});
    std::fprintf(stderr,
                 "autoddl: the training run failed (exit status %d); restart "
                 "%d of %d from the newest checkpoint under %s\n",
                 rc, attempt, restarts, saveFolder(args).c_str());
    rc = launch(p, args, "", true);
  }
  return rc;
}

} // namespace

void run(const RunOptions &o) {
  const codegen::Backend backend = codegen::parseBackend(o.backend);
  checkBackend(backend, o.fp32);
  checkDataFile(o.data);
  checkWeightsFlag(o.weights);
  if (o.restarts < 0)
    throw UserError("--restarts: expected a count >= 0, got " +
                    std::to_string(o.restarts));
  if (o.restarts > 0 && saveFolder(o.trainArgs).empty())
    throw UserError("--restarts: a restart resumes from the run's "
                    "checkpoints; give them a folder (-- --save DIR "
                    "--save-every K)");
  std::string planPath = o.input;
  // A folder this run creates holds nothing of the user's: only there may the
  // program replace what it finds (--overwrite).
  std::error_code outEc;
  const bool outIsNew =
      !o.out.empty() &&
      !std::filesystem::exists(std::filesystem::symlink_status(o.out, outEc));
  // A folder that cannot be made is named now, not by a filesystem error
  // after the planning.
  if (!o.out.empty()) {
    try {
      rt::check_output_dir(o.out, "--out");
    } catch (const std::runtime_error &e) {
      throw UserError(e.what());
    }
  }
  // Results the user already has are never overwritten.
  if (!o.out.empty())
    for (const char *f : {"plan.json", "metrics.json", "trace.json"}) {
      std::error_code ec;
      const std::string p = o.out + "/" + f;
      if (std::filesystem::exists(std::filesystem::symlink_status(p, ec)))
        throw UserError("--out " + o.out + ": " + p +
                        " exists; refusing to overwrite the results of an "
                        "earlier run (give a new folder)");
    }
  std::unique_ptr<WorkDir> work;
  if (!isPlanFile(o.input)) {
    if (o.ranks < 1)
      throw UserError("--ranks: required (at least 1) when running a model");
    work = std::make_unique<WorkDir>(o.out, "run");
    work->create();
    planPath = work->path() + "/plan.json";
    planModel(o, planPath);
  } else if (o.globalBatch || o.seq || !o.fix.empty() || !o.loss.empty()) {
    throw UserError("--global-batch/--seq/--fix/--loss apply when planning a "
                    "model; " +
                    o.input + " is already a plan");
  }
  planner::Plan plan = planner::readPlanFile(planPath);
  codegen::validatedModelForPlan(plan, o.model); // before anything is built
  const int ranks = planRanks(plan);
  if (o.ranks && o.ranks != ranks)
    throw UserError(fmt::format("--ranks {}: the plan {} runs on {} ranks "
                                "(pp={} x dp={} x tp={})",
                                o.ranks, planPath, ranks, plan.knobs.pp,
                                plan.knobs.dp, plan.knobs.tp));
  std::vector<std::string> args = {"--steps", std::to_string(o.steps)};
  if (!o.weights.empty()) { // before the build: a file without values fails fast
    if (!work)
      work = std::make_unique<WorkDir>(o.out, "run");
    work->create();
    const std::string file = work->path() + "/weights.safetensors";
    writeOnnxWeights(plan, isPlanFile(o.input) ? o.model : o.input, file);
    args.insert(args.end(), {"--init", file});
  }
  const Program p = buildPlan(plan, codegen::readTextFile(planPath), o.model,
                              backend, o.fp32, true);
  if (!o.data.empty())
    args.insert(args.end(), {"--data", o.data});
  if (!o.out.empty())
    args.insert(args.end(), {"--out", o.out});
  if (outIsNew)
    args.push_back("--overwrite");
  args.insert(args.end(), o.trainArgs.begin(), o.trainArgs.end());
  const int rc = launchWithRestarts(p, args, o.restarts);
  if (rc != 0)
    throw UserError(
        fmt::format("the training run failed (exit status {})", rc));
}

std::string profiledRun(const planner::Plan &plan, const std::string &planPath,
                        const std::string &model, int64_t steps,
                        WorkDir &work) {
  requireGpu("autoddl validate without --measured");
  if (steps < 2)
    throw UserError("--steps: expected at least 2 (the first step is "
                    "warm-up), got " +
                    std::to_string(steps));
  codegen::validatedModelForPlan(plan, model);
  const std::string dir = work.path();
  const Program p = buildPlan(plan, codegen::readTextFile(planPath), model,
                              codegen::Backend::Cuda, false, false);
  const int rc = launch(p,
                        {"--steps", std::to_string(steps), "--out", dir,
                         "--profile", "--trace", "--quiet"},
                        dir + "/run.log", true);
  if (rc != 0)
    work.keep();
  if (rc != 0)
    throw UserError(fmt::format("the profiled run failed (exit status {}); "
                                "see {}/run.log",
                                rc, dir));
  return dir;
}

} // namespace autoddl::driver
