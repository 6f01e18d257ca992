//===- RunCommand.cpp - `autoddl run`: plan, generate, build, launch -----===//
//
//   autoddl run MODEL_OR_PLAN --backend cpu|cuda --ranks N [--steps K] [--data
//   FILE]
//               [--global-batch B] [--seq T] [--fix ...] [--cluster C]
//               [--out DIR] [-- TRAIN_FLAGS...]
//
// Given a model, plans it first (`autoddl plan ... --gpus N`, printing the
// plan); given plan.json, runs that plan (on its own rank count). The project
// is generated, built once into ~/.cache/autoddl/<hash> and launched under
// mpirun; flags after `--` go to the training binary (--save, --resume, ...).
// --backend cuda runs one rank per GPU and refuses a machine without one.
//
//===----------------------------------------------------------------------===//
#include "codegen/CpuCodegen.h"
#include "codegen/ProjectRunner.h"
#include "planner/PlanJson.h"
#include "support/UserError.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <unistd.h>

namespace autoddl::cli {
namespace {

struct RunArgs {
  std::string input, backend = "cpu", data, fix, out, cluster = "dgx-h100-ndr",
                     model;
  int ranks = 0;
  bool fp32 = false;
  int64_t steps = 20, globalBatch = 0, seq = 0;
  std::vector<std::string> trainArgs;
};

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

void run(const RunArgs &a) {
  const codegen::Backend backend = codegen::parseBackend(a.backend);
  if (backend == codegen::Backend::Cuda)
    codegen::requireGpu("--backend cuda");
  else if (a.fp32)
    throw UserError("--fp32: only the cuda backend has a bf16 mode");
  std::string planPath = a.input;
  if (!isPlanFile(a.input)) {
    if (a.ranks < 1)
      throw UserError("--ranks: required (at least 1) when running a model");
    std::string dir = a.out;
    if (dir.empty()) {
      char tmpl[] = "/tmp/autoddl-run-XXXXXX";
      if (!mkdtemp(tmpl))
        throw UserError("cannot create a temporary directory in /tmp");
      dir = tmpl;
    }
    std::filesystem::create_directories(dir);
    planPath = dir + "/plan.json";
    const int64_t batch = a.globalBatch ? a.globalBatch : 8;
    std::vector<std::string> argv = {selfPath(),
                                     "plan",
                                     a.input,
                                     "--cluster",
                                     a.cluster,
                                     "--gpus",
                                     std::to_string(a.ranks),
                                     "--global-batch",
                                     std::to_string(batch),
                                     "--no-why",
                                     "-o",
                                     planPath};
    if (a.seq)
      argv.insert(argv.end(), {"--seq", std::to_string(a.seq)});
    if (!a.fix.empty())
      argv.insert(argv.end(), {"--fix", a.fix});
    std::string cmd;
    for (const auto &s : argv)
      cmd += "'" + s + "' ";
    if (std::system(cmd.c_str()) != 0)
      throw UserError("planning " + a.input + " failed");
  } else if (a.globalBatch || a.seq || !a.fix.empty()) {
    throw UserError("--global-batch/--seq/--fix apply when planning a model; " +
                    a.input + " is already a plan");
  }
  planner::Plan plan = planner::readPlanFile(planPath);
  const int ranks = plan.knobs.pp * plan.knobs.dp * plan.knobs.tp;
  if (a.ranks && a.ranks != ranks)
    throw UserError(fmt::format("--ranks {}: the plan {} runs on {} ranks "
                                "(pp={} x dp={} x tp={})",
                                a.ranks, planPath, ranks, plan.knobs.pp,
                                plan.knobs.dp, plan.knobs.tp));
  ModelGraph g = codegen::modelForPlan(plan, a.model);
  auto files = codegen::generateProject(
      plan, g, codegen::readTextFile(planPath), backend, a.fp32);
  const std::string binary = codegen::buildCached(files, true);
  std::vector<std::string> args = {"--steps", std::to_string(a.steps)};
  if (!a.data.empty())
    args.insert(args.end(), {"--data", a.data});
  if (!a.out.empty())
    args.insert(args.end(), {"--out", a.out});
  args.insert(args.end(), a.trainArgs.begin(), a.trainArgs.end());
  std::fprintf(stderr, "autoddl: mpirun -np %d %s\n", ranks, binary.c_str());
  const int rc = codegen::launchMpi(binary, ranks, args);
  if (rc != 0)
    throw UserError(
        fmt::format("the training run failed (exit status {})", rc));
}

} // namespace

void registerRunCommand(CLI::App &app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App *cmd = app.add_subcommand(
      "run", "plan (if given a model), generate, build and train under mpirun");
  cmd->add_option("model_or_plan", args->input,
                  "a model (built-in name or JSON file) or plan.json")
      ->required();
  cmd->add_option("--backend", args->backend, "cpu or cuda (one GPU a rank)");
  cmd->add_flag("--fp32", args->fp32, "cuda: fp32 activations instead of bf16");
  cmd->add_option("--ranks", args->ranks, "MPI ranks (planning: GPUs)");
  cmd->add_option("--steps", args->steps, "training steps (default 20)");
  cmd->add_option("--data", args->data,
                  "token file: .bin (uint16) or any file read as bytes");
  cmd->add_option("--global-batch", args->globalBatch,
                  "samples per step when planning (default 8)");
  cmd->add_option("--seq", args->seq, "sequence length when planning");
  cmd->add_option("--fix", args->fix,
                  "pin knobs when planning (as autoddl plan)");
  cmd->add_option("--cluster", args->cluster,
                  "cluster the plan is priced for (default dgx-h100-ndr)");
  cmd->add_option("--model", args->model,
                  "the model file a plan was made from");
  cmd->add_option("--out", args->out,
                  "directory for plan.json and metrics.json (trace.json with "
                  "-- --trace)");
  cmd->add_option("train_flags", args->trainArgs,
                  "after --: flags of the training binary");
  cmd->callback([args] { run(*args); });
}

} // namespace autoddl::cli
