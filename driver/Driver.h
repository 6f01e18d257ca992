//===- Driver.h - plan -> project -> build -> launch ----------------------===//
//
// The one sequence behind `autoddl run`, `verify` and `validate`: plan a model
// (run, when given one), generate the plan's project (codegen), build it in
// the cache and launch it under mpirun (Build.h, whose stages `calibrate`
// shares for its probe). The commands in tools/autoddl only parse flags and
// call in here. Edge code: throws UserError; every message is the command's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/CpuCodegen.h"
#include "driver/Build.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::driver {

/// MPI ranks a plan runs on: pp x dp x tp.
int planRanks(const planner::Plan &plan);

/// Refuses what `backend` cannot run on this machine: --fp32 off the cuda
/// backend (it has the only bf16 mode), the cuda backend without a GPU.
void checkBackend(codegen::Backend backend, bool fp32);

/// The project stage: the files of the plan's program (`model`: the model
/// file the plan was made from, default its built-in name).
codegen::ProjectFiles planProject(const planner::Plan &plan,
                                  const std::string &planText,
                                  const std::string &model,
                                  codegen::Backend backend, bool fp32);

/// `--weights`: "" (the programs' own initialisation) or "onnx" (the
/// exported values of an ONNX model, through the programs' --init). Throws
/// UserError naming the flag on another value.
void checkWeightsFlag(const std::string &weights);

/// `--weights onnx`: writes the parameters of the plan's ONNX model (`model`,
/// default the plan's model file) to `file` (safetensors, what the programs'
/// --init reads). Throws UserError when the model is not an ONNX file or a
/// parameter's values are missing.
void writeOnnxWeights(const planner::Plan &plan, const std::string &model,
                      const std::string &file);

/// A built program and the ranks it runs on.
struct Program {
  std::string binary;
  int ranks = 0;
};

/// The project and build stages of a plan: its program, built in the cache
/// (`verbose`: say whether it is built or reused, and where).
Program buildPlan(const planner::Plan &plan, const std::string &planText,
                  const std::string &model, codegen::Backend backend, bool fp32,
                  bool verbose);

/// The launch stage: runs `p` on its ranks with `args`; output into `log`
/// when given. `announce` prints the mpirun line (and the log) first.
/// Returns the exit status.
int launch(const Program &p, const std::vector<std::string> &args,
           const std::string &log, bool announce);

/// A copy of `plan` as one rank runs it: tp = pp = dp = 1, the global batch as
/// one micro-batch, one stage, no ZeRO (the reference of `verify`). A model
/// whose micro-batch is part of it keeps the plan's, accumulating over the
/// global batch (`keepMicrobatch`: an ONNX export's static batch,
/// ModelGraph::staticBatch, or statistics per micro-batch,
/// microbatchStatisticsPrimitive; graph models always).
planner::Plan singleRankPlan(const planner::Plan &plan, int64_t layers,
                             bool keepMicrobatch = false);

/// `autoddl run` (docs/codegen.md): given a model, plans it first (`autoddl
/// plan ... --gpus ranks`); given plan.json, runs that plan on its ranks.
struct RunOptions {
  std::string input; // a model (built-in name or JSON file) or plan.json
  std::string backend = "cpu", data, fix, out, cluster = "dgx-h100-ndr", model;
  std::string weights; // "" or "onnx" (checkWeightsFlag)
  int ranks = 0;
  bool fp32 = false;
  int64_t steps = 20, globalBatch = 0, seq = 0;
  std::string loss;                   // planning: an ONNX model's --loss
  std::vector<std::string> trainArgs; // after --: the program's own flags
  // --restarts N: a run that fails other than by bad input (exit status 1)
  // is launched again with --resume auto, up to N times (needs -- --save).
  int restarts = 0;
};
void run(const RunOptions &o);

/// `autoddl validate` without --measured: runs the plan's CUDA program here
/// with --profile --trace for `steps` steps into `work`; returns its path.
/// `work` holds the run (removed when it goes, kept when the run fails: the
/// message names its log).
std::string profiledRun(const planner::Plan &plan, const std::string &planPath,
                        const std::string &model, int64_t steps, WorkDir &work);

} // namespace autoddl::driver
