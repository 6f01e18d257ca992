//===- VerifyCommand.cpp - `autoddl verify`: a plan computes what one rank does
//
//   autoddl verify plan.json [--backend cpu|cuda] [--fp32] [--steps K]
//                  [--data FILE] [--model M] [--keep DIR]
//
// Runs the plan on its ranks and the same model on one rank (tp = pp = dp = 1,
// the global batch as one micro-batch) from the same initial weights and data
// (DESIGN §6, plan invariance), then compares the loss of every step (relative
// error <= 1e-5, fp32 sums in another order) and the final parameters (both
// runs save a checkpoint of full tensors at the last step). Exits 1 on a
// mismatch. --backend cuda compares the plan on its GPUs with the single-GPU
// run; the tolerances are then 2e-2 (loss) and 5e-2 (parameters) in the bf16
// default and 1e-4 / 1e-3 with --fp32, unless given.
//
//===----------------------------------------------------------------------===//
#include "backends/common/Safetensors.h"
#include "codegen/CpuCodegen.h"
#include "codegen/ProjectRunner.h"
#include "planner/PlanJson.h"
#include "support/UserError.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace autoddl::cli {
namespace {

struct VerifyArgs {
  std::string plan, data, model, keep, backend = "cpu";
  bool fp32 = false;
  int64_t steps = 5;
  double lossTolerance = 0, paramTolerance = 0; // 0: the backend's default
};

std::vector<double> lossesOf(const std::string &metricsPath) {
  auto doc =
      nlohmann::json::parse(codegen::readTextFile(metricsPath), nullptr, false);
  if (!doc.is_object() || !doc.contains("loss") || !doc["loss"].is_array())
    throw UserError(metricsPath + ": no \"loss\" list");
  return doc["loss"].get<std::vector<double>>();
}

/// Runs one project; returns its output directory.
std::string runOne(const codegen::ProjectFiles &files, int ranks,
                   const std::string &dir, const VerifyArgs &a) {
  const std::string binary = codegen::buildCached(files, false);
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/run.log";
  std::error_code ec;
  std::filesystem::remove(log, ec);
  std::vector<std::string> args = {"--steps",      std::to_string(a.steps),
                                   "--out",        dir,
                                   "--save",       dir + "/ckpt",
                                   "--save-every", std::to_string(a.steps),
                                   "--quiet"};
  if (!a.data.empty())
    args.insert(args.end(), {"--data", a.data});
  const int rc = codegen::launchMpi(binary, ranks, args, log);
  if (rc != 0) {
    std::string text = codegen::readTextFile(log);
    if (text.size() > 2000)
      text = text.substr(text.size() - 2000);
    std::fputs(text.c_str(), stderr);
    throw UserError(fmt::format("the {}-rank run failed (exit status {}); log: "
                                "{}",
                                ranks, rc, log));
  }
  return dir;
}

bool isStateTensor(const std::string &name) {
  return name.find(".exp_avg") != std::string::npos;
}

int run(VerifyArgs a) {
  if (a.steps < 1)
    throw UserError("--steps: expected at least 1");
  const codegen::Backend backend = codegen::parseBackend(a.backend);
  const bool cuda = backend == codegen::Backend::Cuda;
  if (a.fp32 && !cuda)
    throw UserError("--fp32: only the cuda backend has a bf16 mode");
  if (cuda)
    codegen::requireGpu("--backend cuda");
  // Defaults: fp32 sums in another order (cpu, cuda --fp32: different
  // reduction orders of the GPU kernels); bf16 activations (cuda).
  if (a.lossTolerance <= 0)
    a.lossTolerance = !cuda ? 1e-5 : a.fp32 ? 1e-4 : 2e-2;
  if (a.paramTolerance <= 0)
    a.paramTolerance = !cuda ? 1e-4 : a.fp32 ? 1e-3 : 5e-2;
  planner::Plan plan = planner::readPlanFile(a.plan);
  const std::string planText = codegen::readTextFile(a.plan);
  ModelGraph g = codegen::modelForPlan(plan, a.model);
  const int ranks = plan.knobs.pp * plan.knobs.dp * plan.knobs.tp;
  planner::Plan single = codegen::singleRankPlan(plan, g.numLayers);
  ModelGraph g1 = codegen::modelForPlan(single, a.model);
  auto planFiles = codegen::generateProject(plan, g, planText, backend, a.fp32);
  auto singleFiles = codegen::generateProject(
      single, g1, planner::planToText(single), backend, a.fp32);

  std::string work = a.keep;
  if (work.empty()) {
    char tmpl[] = "/tmp/autoddl-verify-XXXXXX";
    if (!mkdtemp(tmpl))
      throw UserError("cannot create a temporary directory in /tmp");
    work = tmpl;
  }
  std::fprintf(stderr,
               "autoddl: verify %s (%d ranks) against 1 rank, %lld "
               "steps, in %s\n",
               a.plan.c_str(), ranks, (long long)a.steps, work.c_str());
  const std::string dp = runOne(planFiles, ranks, work + "/plan", a);
  const std::string ds = runOne(singleFiles, 1, work + "/single", a);

  const auto lp = lossesOf(dp + "/metrics.json");
  const auto ls = lossesOf(ds + "/metrics.json");
  if (lp.size() != ls.size() || lp.size() != size_t(a.steps))
    throw UserError(fmt::format("loss lists differ in length ({} vs {})",
                                lp.size(), ls.size()));
  bool ok = true;
  std::printf("%6s %14s %14s %10s\n", "step", "plan", "1 rank", "rel err");
  double worst = 0;
  for (size_t s = 0; s < lp.size(); ++s) {
    const double rel =
        std::fabs(lp[s] - ls[s]) / std::max(1e-30, std::fabs(ls[s]));
    worst = std::max(worst, rel);
    const bool good = rel <= a.lossTolerance && std::isfinite(lp[s]);
    ok = ok && good;
    std::printf("%6zu %14.8f %14.8f %10.2e%s\n", s, lp[s], ls[s], rel,
                good ? "" : "  MISMATCH");
  }
  // Final parameters: full tensors gathered by both runs' checkpoints.
  const std::string last =
      "/ckpt/step-" + std::to_string(a.steps) + "/model.safetensors";
  rt::SafetensorsFile fp, fs;
  try {
    fp = rt::safetensors_read(dp + last);
    fs = rt::safetensors_read(ds + last);
  } catch (const std::exception &e) {
    throw UserError(e.what());
  }
  double worstParam = 0;
  std::string worstName;
  size_t compared = 0;
  for (const auto &[name, ref] : fs.tensors) {
    if (isStateTensor(name))
      continue;
    auto it = fp.tensors.find(name);
    if (it == fp.tensors.end() || it->second.shape != ref.shape) {
      std::printf("parameter %s: missing or another shape in the plan's "
                  "checkpoint\n",
                  name.c_str());
      ok = false;
      continue;
    }
    ++compared;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double d = std::fabs(double(it->second.data[i]) - ref.data[i]);
      if (!(d <= worstParam)) {
        worstParam = d;
        worstName = name;
      }
    }
  }
  const bool paramsOk = worstParam <= a.paramTolerance;
  ok = ok && paramsOk;
  std::printf("losses: worst relative error %.2e (tolerance %.0e)\n", worst,
              a.lossTolerance);
  std::printf("parameters: %zu tensors, worst absolute difference %.2e%s%s "
              "(tolerance %.0e)\n",
              compared, worstParam, worstName.empty() ? "" : " in ",
              worstName.c_str(), a.paramTolerance);
  std::printf("%s\n", ok ? "verify: OK" : "verify: FAILED");
  return ok ? 0 : 1;
}

} // namespace

void registerVerifyCommand(CLI::App &app) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App *cmd = app.add_subcommand(
      "verify", "run a plan and the single-rank run of its model; compare "
                "the loss of every step and the final parameters");
  cmd->add_option("plan", args->plan, "plan.json")->required();
  cmd->add_option("--backend", args->backend,
                  "cpu (default) or cuda (one GPU a rank)");
  cmd->add_flag("--fp32", args->fp32,
                "cuda: fp32 activations (tight tolerances)");
  cmd->add_option("--steps", args->steps, "steps to compare (default 5)");
  cmd->add_option("--data", args->data, "token file (default synthetic)");
  cmd->add_option("--model", args->model, "the model file of the plan");
  cmd->add_option("--keep", args->keep,
                  "run in this directory and keep it (default a temporary "
                  "one)");
  cmd->add_option("--loss-tolerance", args->lossTolerance,
                  "relative error of the loss (default 1e-5; cuda: 2e-2, "
                  "1e-4 with --fp32)");
  cmd->add_option("--param-tolerance", args->paramTolerance,
                  "absolute difference of final parameters (default 1e-4; "
                  "cuda: 5e-2, 1e-3 with --fp32)");
  cmd->callback([args] {
    if (run(*args) != 0)
      throw UserError("the plan does not compute what one rank computes");
  });
}

} // namespace autoddl::cli
