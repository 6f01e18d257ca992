//===- Calibrate.h - `autoddl calibrate`: measure, write a cluster --------===//
//
// Edge code (throws UserError). The calibration probe
// (backends/cuda/calibrate/probe/, embedded at build time) is written into
// autoddl's build cache, built there with CMake and run under mpirun on the
// local GPUs (the driver's build and launch stages, Build.h), and what it
// writes is loaded with the cluster reader before it is copied to the user's
// file, which is never touched when anything fails. docs/calibrate.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace autoddl::calibrate {

/// The probe project: relative path -> text (CMakeLists.txt, calibrate.cu,
/// ClusterWriter.{h,cpp}, the .autoddl-project marker).
std::map<std::string, std::string> probeProject();

/// Writes the probe project into `dir` (codegen::writeProject's rules: an
/// existing non-empty directory must be an earlier autoddl project).
void emitProbe(const std::string &dir);

/// GPUs `nvidia-smi -L` lists here; 0 when it lists none or is missing.
int localGpuCount();

struct Options {
  std::string output;    // the cluster file to write
  std::string name;      // the cluster's name; default: output's file stem
  std::string raw;       // optional: every raw measurement as JSON
  std::string shapes;    // optional: "M N K" lines replacing the GEMM shapes
  int nodes = 1;         // hosts come from the MPI environment (hostfile)
  int gpus = 0;          // per node; 0: every GPU nvidia-smi lists
  bool quick = false;    // shorter timings
  uint64_t maxBytes = 0; // largest collective message; 0: the probe's 1 GiB
  bool verbose = true;
};

/// Builds and runs the probe, checks its output with the cluster reader and
/// writes it to `o.output`. Throws UserError: no GPU, bad options, a failed
/// build or run, or output the reader rejects.
void run(const Options &o);

} // namespace autoddl::calibrate
