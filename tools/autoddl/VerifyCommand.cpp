//===- VerifyCommand.cpp - `autoddl verify`: a plan computes what one rank does
//
//   autoddl verify plan.json [--backend cpu|cuda] [--fp32] [--steps K]
//                  [--data FILE] [--model M] [--keep DIR] [-- FLAGS...]
//
// Runs the plan on its ranks and the same model on one rank (driver/Verify.h),
// then compares the loss of every step (relative error <= 1e-5, fp32 sums in
// another order) and the final parameters. Exits 1 on a mismatch. --backend
// cuda compares the plan on its GPUs with the single-GPU run; the tolerances
// are then 2e-2 (loss) and 5e-2 (parameters) in the bf16 default and
// 1e-4 / 1e-3 with --fp32, unless given.
//
//===----------------------------------------------------------------------===//
#include "driver/Verify.h"
#include "support/UserError.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace autoddl::cli {

void registerVerifyCommand(CLI::App &app) {
  auto args = std::make_shared<driver::VerifyOptions>();
  CLI::App *cmd = app.add_subcommand(
      "verify", "run a plan and the single-rank run of its model; compare "
                "the loss of every step and the final parameters");
  cmd->add_option("plan", args->plan, "plan.json")->required();
  addBackendOptions(*cmd, args->backend, args->fp32);
  cmd->add_option("--steps", args->steps, "steps to compare (default 5)");
  cmd->add_option("--data", args->data, "token file (default synthetic)");
  addPlanModelOption(*cmd, args->model);
  addWeightsOption(*cmd, args->weights); // both runs
  cmd->add_option("--keep", args->keep,
                  "run in this directory and keep it (default a temporary "
                  "one)");
  cmd->add_option("--loss-tolerance", args->lossTolerance,
                  "relative error of the loss (default 1e-5; cuda: 2e-2, "
                  "1e-4 with --fp32)");
  cmd->add_option("--param-tolerance", args->paramTolerance,
                  "absolute difference of final parameters (default 1e-4; "
                  "cuda: 5e-2, 1e-3 with --fp32)");
  cmd->add_option("train_flags", args->trainArgs,
                  "after --: flags of both training binaries (e.g. "
                  "--kfac-factor-every 2)");
  cmd->callback([args] {
    if (!driver::verify(*args))
      throw UserError("the plan does not compute what one rank computes");
  });
}

} // namespace autoddl::cli
