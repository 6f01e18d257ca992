//===- Build.h - the build and launch stages of the driver ---------------===//
//
// Edge code (throws UserError) shared by every project autoddl runs itself (a
// plan's program for run, verify and validate; the calibration probe): the
// project is written into a cache directory named by a hash of its files
// ($AUTODDL_CACHE, else ~/.cache/autoddl/<hash>), built there once with CMake
// (through ccache when it is installed), and launched with
// `mpirun --oversubscribe -np N`. A CPU program links the runtime library
// built once per cache (<cache>/runtime-<hash>, named by the project's
// AUTODDL_PREBUILT_RUNTIME) instead of compiling its own copy.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/CpuCodegen.h"

#include <string>
#include <vector>

namespace autoddl::driver {

/// FNV-1a 64 over every path and file, as 16 hex digits.
std::string projectHash(const codegen::ProjectFiles &files);

/// Writes and builds the project in the cache; returns the path of the built
/// `train` binary. Throws UserError (naming the build log) when the build
/// fails.
std::string buildCached(const codegen::ProjectFiles &files, bool verbose);

/// Throws UserError naming `what` when this machine has no NVIDIA GPU (no
/// /proc/driver/nvidia/gpus/* and no /dev/nvidia0): the cuda backend's
/// programs need one per rank.
void requireGpu(const std::string &what);

/// `dir` when given, else a new directory $TMPDIR/autoddl-<what>-XXXXXX
/// (/tmp without TMPDIR; the work folder of a run, verify or validate).
std::string workDir(const std::string &dir, const std::string &what);

/// Throws UserError naming the path unless `data` (a --data flag) is empty or
/// a regular file: found before the plan is built and run, not by the
/// program after the build.
void checkDataFile(const std::string &data);

/// The work folder of a run or verify: `dir` when the user gave one (kept),
/// else a new /tmp/autoddl-<what>-XXXXXX removed when this object goes, and
/// also when the command is stopped by SIGINT or SIGTERM meanwhile; keep()
/// leaves it (a failed run whose log the message names).
class WorkDir {
public:
  WorkDir(const std::string &dir, const std::string &what);
  ~WorkDir();
  WorkDir(const WorkDir &) = delete;
  WorkDir &operator=(const WorkDir &) = delete;
  const std::string &path() const { return path_; }
  /// Creates the folder (the user's may not exist yet); UserError naming it.
  void create() const;
  void keep();

private:
  std::string path_;
  bool temporary_ = false;
};

/// Runs `binary args...` on `ranks` MPI ranks; returns its exit status.
/// stdout/stderr go to the caller's unless `logFile` is given. mpirun runs in
/// a process group of its own: a SIGINT or SIGTERM to autoddl meanwhile is
/// forwarded to the group, the job is waited for, the temporary work folders
/// (WorkDir) are removed, and autoddl then ends by that signal.
int launchMpi(const std::string &binary, int ranks,
              const std::vector<std::string> &args,
              const std::string &logFile = "");

/// `argv` as a child process, under the same signal rules as launchMpi (the
/// plan stage of `autoddl run` is autoddl itself); returns its exit status.
int runJob(const std::vector<std::string> &argv);

} // namespace autoddl::driver
