//===- ProjectRunner.h - build a generated project, launch it under mpirun ===//
//
// Edge code shared by `autoddl run` and `autoddl verify`: a generated project
// is written into a cache directory named by a hash of its files
// ($AUTODDL_CACHE, else ~/.cache/autoddl/<hash>), built there once with CMake
// (through ccache when it is installed), and launched with
// `mpirun --oversubscribe -np N`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/CpuCodegen.h"

#include <string>
#include <vector>

namespace autoddl::codegen {

/// FNV-1a 64 over every path and file, as 16 hex digits.
std::string projectHash(const ProjectFiles &files);

/// Writes and builds the project in the cache; returns the path of the built
/// `train` binary. Throws UserError (naming the build log) when the build
/// fails.
std::string buildCached(const ProjectFiles &files, bool verbose);

/// Throws UserError naming `what` when this machine has no NVIDIA GPU (no
/// /proc/driver/nvidia/gpus/* and no /dev/nvidia0): the cuda backend's
/// programs need one per rank.
void requireGpu(const std::string &what);

/// Runs `binary args...` on `ranks` MPI ranks; returns its exit status.
/// stdout/stderr go to the caller's unless `logFile` is given.
int launchMpi(const std::string &binary, int ranks,
              const std::vector<std::string> &args,
              const std::string &logFile = "");

/// A copy of `plan` as one rank runs it: tp = pp = dp = 1, the global batch as
/// one micro-batch, one stage, no ZeRO (the reference of `verify`).
planner::Plan singleRankPlan(const planner::Plan &plan, int64_t layers);

} // namespace autoddl::codegen
