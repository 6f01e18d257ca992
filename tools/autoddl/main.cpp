//===- main.cpp - the autoddl command-line front end ---------------------===//
#include "ir/lower/FuseImported.h"
#include "support/UserError.h"
#include "support/UserFiles.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>
#include <string>

namespace {

/// Every numeric flag of every subcommand is a count (GPUs, nodes, steps,
/// batch, sequence length, ranks...) or a non-negative quantity (seconds,
/// tolerances). CLI11 converts "-8" or "0" without complaint and saturates an
/// int64 that overflows, so each subcommand would have to reject them itself;
/// one check here rejects them for all, as a one-line error naming the flag.
/// Flags their command already checks with its own words (below) keep them:
/// here they are only refused what the command cannot see (an int64 that
/// overflowed, an infinity).
const std::set<std::string> kCheckedByCommand = {
    "simulate --stages",  "simulate --microbatches",   "simulate --chunks",
    "simulate --p2p",     "simulate --kfac-layers",    "simulate --margin",
    "validate --steps",   "validate --step-tolerance", "verify --steps",
    "collective --ranks", "plan --kfac-damping"};

void checkNumber(const std::string &flag, const std::string &value,
                 bool integer, bool signAndZeroToo) {
  if (value.empty())
    return;
  errno = 0;
  char *end = nullptr;
  if (integer) {
    long long v = std::strtoll(value.c_str(), &end, 0);
    if (*end != '\0')
      return; // not a number: CLI11's conversion reports it
    if (errno == ERANGE)
      throw autoddl::UserError(flag + ": " + value + " is out of range");
    if (signAndZeroToo && v < 1)
      throw autoddl::UserError(flag + ": expected at least 1, got " + value);
    return;
  }
  double v = std::strtod(value.c_str(), &end);
  if (*end != '\0')
    return;
  if (std::isinf(v) || (signAndZeroToo && std::isnan(v)))
    throw autoddl::UserError(flag + ": expected a finite number, got " + value);
  if (signAndZeroToo && v < 0)
    throw autoddl::UserError(flag + ": expected a non-negative number, got " +
                             value);
}

void checkNumericFlags(CLI::App &app) {
  for (CLI::Option *opt : app.get_options()) {
    std::string type = opt->get_type_name();
    bool integer = type == "INT" || type == "UINT";
    if (!integer && type != "FLOAT")
      continue;
    std::string flag = opt->get_name();
    bool strict = !kCheckedByCommand.count(app.get_name() + " " + flag);
    opt->check(CLI::Validator(
        [flag, integer, strict](std::string &value) {
          checkNumber(flag, value, integer, strict);
          return std::string();
        },
        "", "number"));
  }
  for (CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; }))
    checkNumericFlags(*sub);
}

/// An empty value is no path, model, backend or knob list: `-o ''` would
/// otherwise mean "standard output" and `--keep ''` "a temporary folder",
/// silently. Refused for every text option and argument of every subcommand.
void checkTextFlags(CLI::App &app) {
  for (CLI::Option *opt : app.get_options()) {
    if (opt->get_type_name() != "TEXT" || opt->get_expected_min() < 1)
      continue;
    const std::string flag = opt->get_name();
    opt->check(CLI::Validator(
        [flag](std::string &value) {
          if (value.empty())
            throw autoddl::UserError(flag + ": empty value");
          return std::string();
        },
        "", "non-empty"));
  }
  for (CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; }))
    checkTextFlags(*sub);
}

/// The AUTODDL_* variables every command reads through a lowering it may not
/// reach for this input (AUTODDL_FUSE_SKIP applies to ONNX imports only):
/// a bad value is refused by name whatever the command, not ignored.
void checkEnvironment() { (void)autoddl::fuseSkipFromEnvironment(); }

/// Output printed to a full device or a closed stdout is lost: say so and fail
/// rather than exit 0.
int checkStdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    int err = errno;
    std::fprintf(stderr, "autoddl: error: cannot write standard output: %s\n",
                 std::strerror(err));
    return 1;
  }
  return 0;
}

} // namespace

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
  checkNumericFlags(app);
  checkTextFlags(app);
  try {
    checkEnvironment();
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == 0) // --help, --version
      return app.exit(e) | checkStdout();
    // One line, like every other error (CLI11 adds a second, "Run with
    // --help").
    std::fprintf(stderr, "autoddl: error: %s\n",
                 autoddl::capMessage(e.what()).c_str());
    return e.get_exit_code() <= 123 ? e.get_exit_code() : 1;
  } catch (const autoddl::UserError &e) {
    std::fprintf(stderr, "autoddl: error: %s\n",
                 autoddl::capMessage(e.what()).c_str());
    return 1;
  } catch (const std::exception &e) {
    // Anything else is our bug, not the user's: say so plainly, still exit
    // cleanly.
    std::fprintf(stderr, "autoddl: internal error: %s\n",
                 autoddl::capMessage(e.what()).c_str());
    return 2;
  }
  return checkStdout();
}
