//===- SimulatePipeFisher.h - `autoddl simulate --pipefisher` ------------===//
//
// K-FAC work of explicit per-stage times packed into the simulated bubbles
// (cost_model/pipeline/PipeFisher.h): the filled timeline, utilisation per
// stage with and without K-FAC, the refresh interval K and what did not fit.
// docs/pipefisher.md §4.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/ChromeTrace.h"
#include "cost_model/pipeline/PipeFisher.h"
#include "cost_model/pipeline/Simulator.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace autoddl::cli {

/// Per stage (index = pipeline stage, i.e. device; interleaved: every chunk
/// of that device), per K-FAC layer, in the simulator's unit (ms).
struct PipeFisherTimes {
  int layers = 1;                // K-FAC layers per (virtual) stage
  std::vector<double> curvature; // one factor, one micro-batch
  std::vector<double> inversion; // one factor
  std::vector<double> reduction; // one factor; 0: no reduction
  std::vector<double> precondition;
  double margin = 0.05;
  int refresh = 0; // > 0: K pinned (--kfac-refresh K)
  /// Non-empty: one K_d per pipeline device (--kfac-refresh K0,K1,...).
  std::vector<int> deviceRefresh;
  pipeline::KfacFilling filling = pipeline::KfacFilling::Items; // --kfac-fill
};

struct PipeFisherOutput {
  std::string text;    // timeline, per-stage table, what did not fit
  nlohmann::json json; // "pipefisher" object of --json
};

/// Packs and reports; adds the K-FAC items to `trace` (when not null) as
/// rows "stage d K-FAC, step s of K". Throws UserError on bad input.
PipeFisherOutput simulatePipeFisher(const pipeline::Schedule &schedule,
                                    const pipeline::SimulationResult &sim,
                                    const PipeFisherTimes &times,
                                    trace::ChromeTrace *trace,
                                    double microsecondsPerUnit);

} // namespace autoddl::cli
