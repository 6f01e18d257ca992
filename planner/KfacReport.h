//===- KfacReport.h - K-FAC placements for people and for Perfetto -------===//
//
// Edge code shared by `autoddl plan`/`inspect` (a kfac plan) and `autoddl
// simulate --pipefisher`: a summary of the refresh (K, utilisation with and
// without K-FAC, what did not fit), an ASCII timeline of the filled bubbles,
// and Chrome-trace events named as the generated programs name their K-FAC
// items ("curv_A h.3.attn.qkv mb 2").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/ChromeTrace.h"
#include "cost_model/pipeline/Simulator.h"
#include "planner/KfacPlan.h"

#include <string>

namespace autoddl::planner {

/// "curv_A h.3.attn.qkv mb 2" / "inv_G h.3.attn.qkv".
std::string kfacItemLabel(const KfacPlan &plan, const KfacItemPlacement &item);

/// "fluid (a preemptible filling thread; items split across gaps)" or
/// "whole items in gaps (PipeFisher)".
std::string kfacPackingText(pipeline::KfacFilling filling);

/// Lines: K, packing, step and utilisation with and without K-FAC, per device
/// its refresh interval K_d, the steps its refresh spans, work, forced tail and
/// memory, then every item that did not
/// fit a bubble. `unit` scales seconds for printing (1e3: ms), `unitName`.
std::string kfacSummary(const KfacPlan &plan, double unit,
                        const char *unitName);

/// One row per (device, step of its refresh of K_d steps): the pipeline's
/// instructions
/// ("F3", lower case for Chimera's up pipeline) and the K-FAC items ('a', 'g'
/// curvature, 'r' reduction, 'i' inversion, 'p' preconditioning, upper case
/// when forced; a fluid item in each gap it ran in), '.' idle. Empty when wider
/// than `maxColumns`.
std::string kfacTimeline(const pipeline::SimulationResult &sim,
                         const KfacPlan &plan, int maxColumns);

/// Adds `device`'s K-FAC items as events of trace process `process`, one
/// thread per step of its refresh of K_d steps (thread `firstThread` + step;
/// a fluid item one event per piece),
/// `us`
/// microseconds per plan time unit; thread names start with `rowPrefix`.
void addKfacEvents(const KfacPlan &plan, int device, int process,
                   int firstThread, double us, trace::ChromeTrace &out,
                   const std::string &rowPrefix = "");

} // namespace autoddl::planner
