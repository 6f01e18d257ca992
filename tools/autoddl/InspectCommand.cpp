//===- InspectCommand.cpp - `autoddl inspect`: a plan for people ---------===//
//
//   autoddl inspect plan.json [--trace out.json] [--why] [--max-ranks N]
//
// Prints the plan's tables (summary, stage map, per-rank times and memory,
// collectives); --why the neighbouring choices of every knob with delta time,
// delta memory and why they lost; --trace writes the predicted per-rank
// timeline as Chrome-trace JSON (one process per rank, threads compute and
// communication). The plan is validated, against its model when that can be
// read (planner/PlanValidate.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/CpuCodegen.h"
#include "planner/PlanJson.h"
#include "planner/PlanReport.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace autoddl::cli {
namespace {

struct InspectArgs {
  std::string plan, trace;
  bool why = false;
  int maxRanks = 64;
};

void run(const InspectArgs &a) {
  planner::Plan p = planner::readPlanFile(a.plan);
  // A plan whose model file moved away still inspects.
  if (codegen::planModelAtHand(p))
    codegen::validatedModelForPlan(p);
  if (a.maxRanks < 1)
    throw UserError("--max-ranks: expected at least 1, got " +
                    std::to_string(a.maxRanks));
  if (!a.trace.empty())
    checkUserOutput(a.trace, "--trace");
  if (!a.trace.empty()) {
    trace::ChromeTrace t;
    std::string error;
    if (!planner::planTrace(p, a.maxRanks, t, error))
      throw UserError(a.plan + ": the plan's times do not replay: " + error);
    writeFileAtomically(a.trace, t.render());
  }
  std::fputs(planner::planTables(p).c_str(), stdout);
  if (a.why) {
    if (p.alternatives.empty())
      std::fputs("\n(no alternatives recorded: the plan was made with "
                 "--no-why)\n",
                 stdout);
    else
      std::fputs(("\n" + planner::planWhy(p)).c_str(), stdout);
  }
}

} // namespace

void registerInspectCommand(CLI::App &app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App *cmd =
      app.add_subcommand("inspect", "print a plan's tables, why-not report "
                                    "and predicted trace");
  cmd->add_option("plan", args->plan, "plan.json written by autoddl plan")
      ->required();
  cmd->add_option("--trace", args->trace,
                  "write the predicted per-rank timeline (Chrome trace JSON)");
  cmd->add_flag("--why", args->why,
                "for each knob, the neighbouring choices and why they lost");
  cmd->add_option("--max-ranks", args->maxRanks,
                  "trace every rank up to this many, else one per stage "
                  "(default 64)");
  cmd->callback([args] { run(*args); });
}

} // namespace autoddl::cli
