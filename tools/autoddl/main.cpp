//===- main.cpp - the autoddl command-line front end ---------------------===//
#include "tools/autoddl/Commands.h"
#include "support/UserError.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char **argv) {
  CLI::App app{"autoddl: automatic parallelization planner and code generator "
               "for distributed deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "autoddl 0.1.0");

  autoddl::cli::registerImportCommand(app);
  autoddl::cli::registerSimulateCommand(app);
  autoddl::cli::registerCostCommand(app);
  autoddl::cli::registerPlanCommand(app);
  autoddl::cli::registerInspectCommand(app);
  autoddl::cli::registerCodegenCommand(app);
  autoddl::cli::registerRunCommand(app);
  autoddl::cli::registerVerifyCommand(app);
  autoddl::cli::registerCalibrateCommand(app);
  autoddl::cli::registerValidateCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  } catch (const autoddl::UserError &e) {
    std::fprintf(stderr, "autoddl: error: %s\n", e.what());
    return 1;
  } catch (const std::exception &e) {
    // Anything else is our bug, not the user's: say so plainly, still exit cleanly.
    std::fprintf(stderr, "autoddl: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
