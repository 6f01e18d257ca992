//===- CalibrateCommand.cpp - `autoddl calibrate`: measure this machine --===//
//
//   autoddl calibrate -o cluster.json [--name N] [--nodes N] [--gpus G]
//                     [--raw FILE] [--shapes FILE] [--quick] [--max-bytes B]
//   autoddl calibrate --emit DIR
//
// Builds the calibration probe (backends/cuda/calibrate/probe) and runs it on
// this machine's GPUs under mpirun (driver/Calibrate.h): bf16 GEMM times by
// shape, HBM bandwidth, launch floor, NCCL bus bandwidth and latency by message
// size; writes a cluster file the planner takes with --cluster. --emit only
// writes the probe project, to build and run where autoddl is not installed.
// docs/calibrate.md.
//
//===----------------------------------------------------------------------===//
#include "driver/Calibrate.h"
#include "support/UserError.h"
#include "support/UserFiles.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace autoddl::cli {

void registerCalibrateCommand(CLI::App &app) {
  auto o = std::make_shared<calibrate::Options>();
  auto emit = std::make_shared<std::string>();
  CLI::App *cmd = app.add_subcommand(
      "calibrate", "measure this machine's GPUs and links (GEMM by shape, "
                   "HBM, NCCL) and write a cluster file");
  cmd->add_option("-o,--output", o->output, "the cluster file to write");
  cmd->add_option("--name", o->name,
                  "the cluster's name (default: the file name without .json)");
  cmd->add_option(
      "--nodes", o->nodes,
      "nodes to run on (hosts from the MPI environment; default 1)");
  cmd->add_option("--gpus", o->gpus,
                  "GPUs per node (default: all that nvidia-smi lists)");
  cmd->add_option("--raw", o->raw, "also write every raw measurement (JSON)");
  cmd->add_option("--shapes", o->shapes,
                  "GEMM shapes to time, one 'M N K' a line (default: GPT-2 "
                  "124M..1.5B linears, tp 1 and 2)");
  cmd->add_flag("--quick", o->quick, "shorter timings");
  cmd->add_option("--max-bytes", o->maxBytes,
                  "largest collective message in bytes (default 1 GiB)");
  cmd->add_option("--emit", *emit,
                  "only write the probe project into this folder");
  cmd->callback([o, emit] {
    if (!emit->empty()) {
      calibrate::emitProbe(*emit);
      std::printf("wrote the calibration probe to %s; build and run it with\n"
                  "  cmake -S %s -B %s/build && cmake --build %s/build -j\n"
                  "  mpirun -np <GPUs> %s/build/calibrate -o cluster.json\n",
                  emit->c_str(), emit->c_str(), emit->c_str(), emit->c_str(),
                  emit->c_str());
      return;
    }
    if (o->output.empty())
      throw UserError("calibrate: -o FILE is required (or --emit DIR)");
    checkUserOutput(o->output, "-o");
    if (!o->raw.empty())
      checkUserOutput(o->raw, "--raw");
    calibrate::run(*o);
  });
}

} // namespace autoddl::cli
