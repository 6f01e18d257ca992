//===- PipelineTrace.h - a simulated pipeline step as a Chrome trace -----===//
//
// One process ("pipeline <schedule>"), one thread per stage ("stage k"), one
// complete event per executed instruction named like "F3" / "B3" / "W3"
// (kind and micro-batch) with the chunk, pipeline stage and direction in args.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/ChromeTrace.h"
#include "cost_model/pipeline/Simulator.h"

namespace autoddl::pipeline {

/// `microsecondsPerUnit` converts the simulator's time unit (1000 for ms).
trace::ChromeTrace pipelineTrace(const Schedule &schedule,
                                 const SimulationResult &result,
                                 double microsecondsPerUnit);

} // namespace autoddl::pipeline
