//===- Verify.cpp - `autoddl verify`: a plan against one rank -------------===//
#include "driver/Verify.h"

#include "backends/common/FileIo.h"
#include "backends/common/Safetensors.h"
#include "driver/Build.h"
#include "driver/Driver.h"
#include "ir/import/ResolvePrimitive.h"
#include "planner/PlanJson.h"
#include "support/UserError.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace autoddl::driver {
namespace {

std::vector<double> lossesOf(const std::string &metricsPath) {
  auto doc =
      nlohmann::json::parse(codegen::readTextFile(metricsPath), nullptr, false);
  if (!doc.is_object() || !doc.contains("loss") || !doc["loss"].is_array())
    throw UserError(metricsPath + ": no \"loss\" list");
  return doc["loss"].get<std::vector<double>>();
}

/// Runs one project; returns its output directory.
std::string runOne(const codegen::ProjectFiles &files, int ranks,
                   const std::string &dir, const VerifyOptions &a) {
  const Program p{buildCached(files, false), ranks};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw UserError(dir + ": cannot create the folder: " + ec.message());
  const std::string log = dir + "/run.log";
  std::filesystem::remove(log, ec);
  std::vector<std::string> args = {"--steps",      std::to_string(a.steps),
                                   "--out",        dir,
                                   "--save",       dir + "/ckpt",
                                   "--save-every", std::to_string(a.steps),
                                   "--quiet"};
  if (!a.data.empty())
    args.insert(args.end(), {"--data", a.data});
  if (!a.weights.empty())
    args.insert(args.end(), {"--init", std::filesystem::path(dir)
                                           .parent_path()
                                           .append("weights.safetensors")
                                           .string()});
  args.insert(args.end(), a.trainArgs.begin(), a.trainArgs.end());
  const int rc = launch(p, args, log, false);
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

/// --keep DIR: a folder verify may fill (plan/, single/, their logs and
/// checkpoints): a new or empty one, never a file or a folder holding the
/// user's files, which the runs would replace.
void checkKeepDir(const std::string &dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st))
      throw UserError("--keep " + dir + ": exists and is not a folder");
    if (fs::directory_iterator(dir, ec) != fs::directory_iterator() || ec)
      throw UserError("--keep " + dir +
                      ": the folder holds files; refusing to write the runs "
                      "over them (give a new or empty folder)");
  }
  try {
    rt::check_output_dir(dir, "--keep");
  } catch (const std::runtime_error &e) {
    throw UserError(e.what());
  }
}

bool isStateTensor(const std::string &name) {
  return name.find(".exp_avg") != std::string::npos;
}

} // namespace

bool verify(VerifyOptions a) {
  if (a.steps < 1)
    throw UserError("--steps: expected at least 1");
  const codegen::Backend backend = codegen::parseBackend(a.backend);
  const bool cuda = backend == codegen::Backend::Cuda;
  checkBackend(backend, a.fp32);
  checkDataFile(a.data);
  checkWeightsFlag(a.weights);
  if (!a.keep.empty())
    checkKeepDir(a.keep);
  // Defaults: fp32 sums in another order (cpu, cuda --fp32: different
  // reduction orders of the GPU kernels); bf16 activations (cuda).
  if (a.lossTolerance <= 0)
    a.lossTolerance = !cuda ? 1e-5 : a.fp32 ? 1e-4 : 2e-2;
  if (a.paramTolerance <= 0)
    a.paramTolerance = !cuda ? 1e-4 : a.fp32 ? 1e-3 : 5e-2;
  planner::Plan plan = planner::readPlanFile(a.plan);
  const std::string planText = codegen::readTextFile(a.plan);
  const int ranks = planRanks(plan);
  const ModelGraph model = codegen::validatedModelForPlan(plan, a.model);
  planner::Plan single = singleRankPlan(
      plan, model.numLayers,
      model.staticBatch > 0 || !microbatchStatisticsPrimitive(model).empty());
  auto planFiles = planProject(plan, planText, a.model, backend, a.fp32);
  auto singleFiles = planProject(single, planner::planToText(single), a.model,
                                 backend, a.fp32);

  WorkDir workDir(a.keep, "verify");
  workDir.create(); // before the builds: --keep may name a folder never made
  const std::string &work = workDir.path();
  std::fprintf(stderr,
               "autoddl: verify %s (%d ranks) against 1 rank, %lld "
               "steps, in %s\n",
               a.plan.c_str(), ranks, (long long)a.steps, work.c_str());
  std::string dp, ds;
  if (!a.weights.empty())
    writeOnnxWeights(plan, a.model, work + "/weights.safetensors");
  try {
    dp = runOne(planFiles, ranks, work + "/plan", a);
    ds = runOne(singleFiles, 1, work + "/single", a);
  } catch (const UserError &) {
    workDir.keep(); // the message names the failed run's log in it
    throw;
  }

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
  // AdamW moves an element whose gradients so far are within rounding of
  // zero by up to lr a step either way (its step is m / sqrt(v)), so such an
  // element can differ by ~lr where the rest agree to 1e-6: the final
  // parameters compare element by element, except that elements whose
  // second moment in the one-rank run is under 1% of their tensor's mean
  // may exceed the bound, at most 0.1% of a tensor (said in the output).
  rt::SafetensorsFile moments; // absent (another optimizer): no exception
  try {
    moments = rt::safetensors_read(
        ds + "/ckpt/step-" + std::to_string(a.steps) + "/optimizer.safetensors");
  } catch (const std::exception &) {
  }
  double worstParam = 0;
  std::string worstName;
  size_t compared = 0, excused = 0;
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
    auto v = moments.tensors.find(name + ".exp_avg_sq");
    const bool haveV =
        v != moments.tensors.end() && v->second.numel() == ref.numel();
    double meanV = 0;
    if (haveV) {
      for (int64_t i = 0; i < ref.numel(); ++i)
        meanV += v->second.data[i];
      meanV /= double(std::max<int64_t>(1, ref.numel()));
    }
    int64_t over = 0;
    double worstKept = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double d = std::fabs(double(it->second.data[i]) - ref.data[i]);
      if (!(d <= a.paramTolerance) && std::isfinite(d) && haveV &&
          v->second.data[i] <= 0.01 * meanV && ++over <= ref.numel() / 1000) {
        ++excused;
        continue;
      }
      worstKept = std::max(worstKept, std::isnan(d) ? HUGE_VAL : d);
    }
    if (!(worstKept <= worstParam)) {
      worstParam = worstKept;
      worstName = name;
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
  if (excused > 0)
    std::printf("parameters: %zu elements over the tolerance left out: their "
                "AdamW second moment is under 1%% of their tensor's mean\n",
                excused);
  std::printf("%s\n", ok ? "verify: OK" : "verify: FAILED");
  return ok;
}

} // namespace autoddl::driver
