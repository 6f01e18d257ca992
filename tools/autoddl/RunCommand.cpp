//===- RunCommand.cpp - `autoddl run`: plan, generate, build, launch -----===//
//
//   autoddl run MODEL_OR_PLAN --backend cpu|cuda --ranks N [--steps K] [--data
//   FILE]
//               [--global-batch B] [--seq T] [--fix ...] [--cluster C]
//               [--out DIR] [--weights onnx] [--restarts N]
//               [-- TRAIN_FLAGS...]
//
// Given a model, plans it first (`autoddl plan ... --gpus N`, printing the
// plan); given plan.json, runs that plan (on its own rank count). The project
// is generated, built once into ~/.cache/autoddl/<hash> and launched under
// mpirun (driver/Driver.h); flags after `--` go to the training binary
// (--save, --resume, ...). --backend cuda runs one rank per GPU and refuses a
// machine without one. --restarts N relaunches a run that failed (a rank
// lost) from its newest checkpoint (driver::run).
//
//===----------------------------------------------------------------------===//
#include "driver/Driver.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace autoddl::cli {

void registerRunCommand(CLI::App &app) {
  auto args = std::make_shared<driver::RunOptions>();
  CLI::App *cmd = app.add_subcommand(
      "run", "plan (if given a model), generate, build and train under mpirun");
  cmd->add_option("model_or_plan", args->input,
                  "a model (built-in name or JSON file) or plan.json")
      ->required();
  addBackendOptions(*cmd, args->backend, args->fp32);
  cmd->add_option("--ranks", args->ranks, "MPI ranks (planning: GPUs)");
  cmd->add_option("--steps", args->steps, "training steps (default 20)");
  cmd->add_option("--data", args->data,
                  "token file: .bin (uint16) or any file read as bytes");
  cmd->add_option("--global-batch", args->globalBatch,
                  "samples per step when planning (default 8)");
  cmd->add_option("--seq", args->seq, "sequence length when planning");
  cmd->add_option("--loss", args->loss,
                  "planning an ONNX model: its loss (autoddl plan --loss)");
  cmd->add_option("--fix", args->fix,
                  "pin knobs when planning (as autoddl plan)");
  cmd->add_option("--cluster", args->cluster,
                  "cluster the plan is priced for (default dgx-h100-ndr)");
  addPlanModelOption(*cmd, args->model);
  addWeightsOption(*cmd, args->weights);
  cmd->add_option("--out", args->out,
                  "directory for plan.json and metrics.json (trace.json with "
                  "-- --trace)");
  cmd->add_option("--restarts", args->restarts,
                  "launch a failed run again from its newest checkpoint "
                  "(--resume auto; needs -- --save DIR), at most N times");
  cmd->add_option("train_flags", args->trainArgs,
                  "after --: flags of the training binary");
  cmd->callback([args] { driver::run(*args); });
}

} // namespace autoddl::cli
