//===- ClusterFit.h - fit a cluster's op times to a profiled run ----------===//
//
// Edge code (reads and writes JSON; throws UserError). `autoddl validate
// --fit-cluster` (docs/calibrate.md "Fitting the cluster to a run"): the
// cluster a plan was priced on, with each op kind's measured / predicted time
// as gpu.op_time_scale (composed with the scale it had) and the step time no
// op accounts for, spread over the op executions, as gpu.op_overhead_us; with
// a run of the same plan whose step replayed as a CUDA graph, also
// gpu.graph_op_overhead_us. The calibration probe's own fits (alpha-beta of
// collectives, datasheet fractions) are compiled into the probe program:
// backends/cuda/calibrate/probe/ClusterWriter.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace autoddl::cost {

/// One op kind the plan predicts and the run measured, per step on the
/// profiled rank, in seconds.
struct OpKindTimes {
  std::string kind;
  double predictedForward = 0, predictedBackward = 0;
  double measuredForward = 0, measuredBackward = 0;
  double executions = 0; // forward + backward executions per step
};

struct RunFitInput {
  std::string cluster; // preset name or file the plan was priced on
  std::vector<OpKindTimes> ops;
  double predictedStep = 0; // the plan's step, seconds
  double measuredStep = 0;  // the profiled (eager) run's mean step, seconds
  std::optional<double> graphStep; // the same plan's step as a CUDA graph
  // For the fitted fields' sources: "the MODEL plan FILE", where the profiled
  // run is, and where the graphed one is.
  std::string planName, measuredRun, graphRun;
};

struct RunFit {
  size_t kinds = 0;    // op kinds the written cluster scales
  double overhead = 0; // seconds per op execution
  std::optional<double> graphOverhead;
};

/// Writes `out` (atomically; its file stem becomes the cluster's name, as a
/// preset's) once it loads with the cluster reader. Throws UserError: an
/// unknown or bad cluster, or ("`what`: ...") no op kind with executions.
RunFit fitClusterToRun(const RunFitInput &in, const std::string &out,
                       const std::string &what);

} // namespace autoddl::cost
