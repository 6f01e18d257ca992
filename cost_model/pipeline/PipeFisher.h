//===- PipeFisher.h - K-FAC work packed into pipeline bubbles ------------===//
//
// PipeFisher (Osawa, Li, Hoefler, MLSys'23; shared/reference/pipelines.md §4)
// fills the idle intervals a synchronous pipeline leaves on every stage with
// the work of a K-FAC refresh, at the granularity of its `auto_schedule.py`:
//   - curvature, per K-FAC layer x factor (A from the layer's inputs, G from
//     its output gradients) x micro-batch, each after that micro-batch's
//     forward (A) or backward (G) of the layer's stage on this device;
//   - reduction of a factor over the ranks holding the layer (data-parallel
//     replicas, Chimera's mirrored pipeline), after all its curvature;
//   - inversion of a factor, after its reduction;
//   - preconditioning of the layer's gradient, at every step's end (never in a
//     bubble: it needs the step's gradients).
// packKfac walks each device's bubbles in time order and places ready items in
// priority order (curvature A, G, reduction A, G, inversion A, G; then layer,
// then micro-batch), with PipeFisher's 5 % margin. What does not fit spills
// into the bubbles of the following steps (with every micro-batch's curvature
// then ready, as pipe-fisher saturates its counters). A step that places
// nothing ends the refresh: the rest runs after the last step that placed
// something, lengthening it.
// Each device refreshes on its own cycle ("per-stage K"): device d's layers
// refresh every K_d steps, K_d the steps its own refresh spans, so a fast
// stage does not idle through the slowest stage's span. Devices holding
// copies of one layer (Chimera's mirrored pipelines: the same
// KfacLayerWork::name on two devices) reduce its factors together and so
// share the largest of their spans. The step stays synchronous: its amortised
// time is the makespan, the largest preconditioning and the largest
// forced_d / K_d (it assumes the devices' forced tails land on one step, a
// lower bound when the K_d differ). Deterministic: no unordered container,
// ties keep the order above. Dependencies are per layer and factor
// (pipelines.md §7.2), finer than pipe-fisher's global rule; a reduction is
// priced as one device's item, without aligning the participants in time (as
// pipe-fisher's planner does).
// KfacFilling::Fluid models the generated CPU programs' filling thread
// instead (docs/kfac.md "Thread filling"): one FIFO queue per device, run in
// whatever idle time there is, an item split across as many gaps as it needs
// (PipeFisherFluid.cpp).
//
// Plain C++, no exceptions (linked by the planner).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/OrError.h"
#include "cost_model/pipeline/Schedule.h"
#include "cost_model/pipeline/Simulator.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autoddl::pipeline {

enum class KfacItemKind {
  CurvatureA,
  CurvatureG,
  ReduceA,
  ReduceG,
  InvertA,
  InvertG,
  Precondition
};

/// "curv_A", "curv_G", "reduce_A", "reduce_G", "inv_A", "inv_G", "precond":
/// the names the plan, the traces and the generated programs use.
std::string_view kfacItemName(KfacItemKind kind);

/// How a device's items fill its bubbles (docs/pipefisher.md §3).
enum class KfacFilling {
  /// PipeFisher's GPU runtime: whole items, each into one gap it fits, in
  /// priority order as they become ready.
  Items,
  /// A preemptible filling thread (the CPU programs' SCHED_IDLE thread): a
  /// strict FIFO queue in the runtime's enqueue order, its head run in any
  /// idle time once ready and split across as many gaps as it needs.
  Fluid
};

/// "items", "fluid": the names of `--kfac-fill` and plan.json's kfac.fill.
std::string_view kfacFillingName(KfacFilling filling);
/// The filling named `name` ("items" or "fluid"); nullopt for another name.
std::optional<KfacFilling> parseKfacFilling(std::string_view name);

/// The K-FAC work of one linear layer on the device holding it, in the
/// simulator's time unit. Index 0 is factor A, 1 is factor G.
struct KfacLayerWork {
  std::string name; // the model op, e.g. "h.3.attn.qkv"
  int stage = 0;    // pipeline stage (Instruction::stage) holding it
  Direction direction = Direction::Down; // Chimera: which copy
  double curvature[2] = {0, 0};          // one micro-batch's share
  double reduce[2] = {0, 0};             // 0: one holder, no reduction
  double invert[2] = {0, 0};
  double precondition = 0;
  /// Its curvature gathers a tp-split operand (a collective the runtime runs
  /// whole on the rank's own thread, as it does a reduction).
  bool collectiveCurvature = false;
  double savedBytes[2] = {0, 0};  // a (inputs), g (output gradients) per mb
  double factorBytes[2] = {0, 0}; // one fp32 factor; its inverse as much again
  /// Low-precision copies of both inverses in use (bf16 preconditioning).
  double inverseCopyBytes = 0;
};

struct PipeFisherInput {
  std::vector<KfacLayerWork> layers;
  /// Items: an item goes into a gap only if duration * (1 + margin) fits
  /// (pipe-fisher's margin_ratio). Fluid: each item takes duration *
  /// (1 + margin) of gap time (the filling thread's naps).
  double margin = 0.05;
  /// A refresh that needs more steps than this fails (absurd inputs).
  int maxSteps = 4096;
  /// > 0: the refresh interval K of every device, pinned (`--kfac-refresh
  /// K`): items are packed into the bubbles of K steps at most, and what they
  /// do not hold is forced. 0: each device's K_d is what its bubbles need
  /// (the steps its refresh spans; mirrored devices the largest of theirs).
  int refreshSteps = 0;
  /// Empty: none. Else one K_d >= 1 per device (`--kfac-refresh K0,K1,...`),
  /// pinned as refreshSteps pins every device; devices holding copies of one
  /// layer must be pinned alike. Overrides refreshSteps.
  std::vector<int> deviceRefreshSteps;
  /// Fluid applies only where every item is local to its device: a layer
  /// with a reduction (dp replicas), copies on two devices (Chimera) or a
  /// collective curvature (tp) makes the packing Items, as the runtime runs collectives whole on the rank's
  /// own thread (PipeFisherResult::filling says which ran).
  KfacFilling filling = KfacFilling::Items;
};

/// A piece of a fluid item: [start, end) within step `step` of the refresh.
struct ItemPiece {
  int step = 0;
  double start = 0, end = 0;
};

struct PlacedItem {
  KfacItemKind kind = KfacItemKind::CurvatureA;
  int layer = 0;       // index into PipeFisherInput::layers
  int microbatch = -1; // curvature only
  int step = 0;        // 0 .. K_d-1 within the device's refresh
  /// Within that step (forced: after the makespan). Fluid: where the first
  /// piece starts and the last ends, later steps laid end to end at the
  /// makespan, so end - start can exceed the duration (the pieces interleave
  /// with the pipeline's own work).
  double start = 0, end = 0;
  bool forced = false; // not in a bubble: appended to the step (Fluid: its
                       // remainder, after the pieces that ran in gaps)
  std::vector<ItemPiece> pieces; // Fluid only: every piece, in time order
};

struct DeviceFill {
  std::vector<PlacedItem> items; // in execution order
  int steps = 1;                 // steps this device's refresh spans
  int refreshSteps = 1;          // K_d: its refresh interval (>= steps)
  double kfacWork = 0;     // curvature + reduction + inversion (per refresh)
  double precondition = 0; // per step, at its end
  double forced = 0;       // time appended to the refresh's last step
  double utilisationBefore = 0; // busy / makespan
  /// (K_d * busy + kfacWork + K_d * precondition) / (K_d * stepTime), with
  /// stepTime PipeFisherResult's amortised step: pipe-fisher's usage with the
  /// step end included (one K for all: K * (makespan + largest precondition)
  /// + largest forced below).
  double utilisationAfter = 0;
  double peakSavedBytes = 0;   // saved a / g held until their curvature ran
  double factorBytes = 0;      // factors + inverses (fp32) of its layers
  double inverseCopyBytes = 0; // their inverses' bf16 copies (KfacLayerWork)
};

struct PipeFisherResult {
  int refreshSteps = 1;                     // K: the largest K_d
  KfacFilling filling = KfacFilling::Items; // the packing that ran
  std::vector<DeviceFill> devices;
  /// Over all devices: busy / (devices * makespan); sum over d of K-FAC-era
  /// work_d / K_d per step over (devices * stepTime).
  double utilisationBefore = 0, utilisationAfter = 0;
  /// Amortised step: makespan + the largest precondition + the largest
  /// forced_d / K_d (each device's tail, once per its refresh).
  double stepTime = 0;
  /// "stage 2: inv_A h.3.attn.qkv (12 ms)" for every forced item.
  std::vector<std::string> unfitted;
};

/// Packs `input` into the bubbles of `sim` (the simulation of `schedule`).
/// Fails on negative or non-finite times, a layer whose stage no device of
/// the schedule runs, a refresh longer than maxSteps, a pin out of 1..maxSteps,
/// a deviceRefreshSteps whose length is not the device count, or devices
/// holding copies of one layer pinned to different K.
OrError<PipeFisherResult> packKfac(const Schedule &schedule,
                                   const SimulationResult &sim,
                                   const PipeFisherInput &input);

} // namespace autoddl::pipeline
