//===- KfacRun.h - K-FAC in a generated CUDA program ---------------------===//
//
// The CUDA twin of backends/cpu/harness/KfacRun.h over the device K-FAC of
// backends/cuda/kfac (docs/kfac.md "Generated programs"), with the same
// refresh cycle per layer (backends/common/harness/KfacCycle.h): the program
// lists its K-FAC layers and calls kfac_curvature_A / _G per micro-batch where
// the plan placed the items, on the layers' act_t buffers. On a refresh step s
// of a layer (s % K == 0, K its own) those calls accumulate its factors
// (cuBLASLt, fp32 accumulation); a curvature item the plan put in a later step
// of the cycle copies its operand on step s (kfac_save_A / _G) and accumulates
// it where placed (kfac_curvature_saved); kfac_reduce / kfac_invert, placed in
// the bubbles of steps s..s+K-1, reduce a factor over every rank holding the
// layer (NCCL, on the compute stream: dp replicas, tp, Chimera's mirrored
// pipelines at the step's end) and queue its inversion (cuSOLVER Cholesky)
// on a low-priority side stream. What is left runs at the end of the step
// where the plan put the tail (s+K-1 when the bubbles fill the cycle; s when
// they hold nothing, so the inversions overlap the cycle's other steps:
// KfacCycle.h finish_tail) in layer-table order, or already at the end of
// step s for a layer
// no placed item of which can still run (a rank without a phase, or
// Chimera's mirrored copies, whose reductions the bubbles leave; neither
// with operands kept for a later step), and at the start of step s+K the
// inverses are installed (the fp64 retry, else the previous inverse,
// decided then and counted in metrics). Until the first install the rule gets
// the raw gradient. Every step preconditions the K-FAC layers' gradients and
// applies the rule (momentum SGD, LAMB or Adam grafting) to every parameter.
//
// A step with K-FAC items on this rank (a refresh step, or a step of the
// cycle the plan placed items in: KfacProgram::items_at) runs eagerly,
// outside the step graph; the other steps replay it. The K-FAC step itself
// (what is left of the cycles ending, preconditioning, the rule) runs after
// the graph, as every optimizer step does.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_CUDA_HARNESS_KFACRUN_H
#define AUTODDL_BACKENDS_CUDA_HARNESS_KFACRUN_H

#include "backends/common/harness/KfacCycle.h" // KfacCycleRun
#include "backends/cuda/harness/Harness.h"
#include "backends/cuda/kfac/Kfac.h"
#include "backends/host/Checkpoint.h" // CheckpointEntry

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace autoddl::rt::harness {

class KfacRun : public KfacCycleRun<KfacRun, Param, KfacLayer, act_t> {
  friend class KfacCycleRun<KfacRun, Param, KfacLayer, act_t>;

public:
  /// The plan's reduce_A/G and inv_A/G items of the open cycle, in a bubble.
  /// A no-op when the item has run (or no cycle is open). A reduction over
  /// Chimera's pipeline devices waits for the cycle's end, or the refresh
  /// step's end where no saved operand waits (the two devices run different
  /// lists; the emitter places none); an inversion waits until both factors are
  /// reduced (π reads both), and leaves a collective reduction to its item.
  void reduce_item(int layer, bool g);
  void invert_item(int layer, bool g);
  /// Whether this step runs K-FAC work between the stages' calls: a refresh
  /// step, or a step of the cycle the plan placed this device's items in.
  bool eager_step() const {
    return due_ || (items_at_ && phase() > 0 && items_at_(phase()));
  }
  /// A factor step between refreshes whose only K-FAC work inside the step
  /// is the curvature into the step's sums: no held layer refreshes, no item
  /// is placed at this phase, and the held layers share one K (so every such
  /// step accumulates the same layers). Its device work is the same each
  /// time, so the harness replays it as a graph of its own, restoring the
  /// rows it counts (step_rows / set_step_rows) where the body did not run.
  bool factor_only_step() const {
    return due_ && !refreshing_ && rank_refresh_ > 0 &&
           !(items_at_ && phase() > 0 && items_at_(phase()));
  }
  /// The base's setup, the side stream's buffers; nothing pending.
  void setup(const KfacProgram &p, const Options &o, const ProgramSpec &s);
  /// The step's end, after the gradients are summed over every rank holding
  /// them: what is left of the cycles ending (and of the cycles opened now
  /// that no placed item can advance), preconditioning and the rule.
  /// `t` = step + 1.
  void step(const std::vector<ParamSpec> &params, int64_t t);
  void info(std::map<std::string, std::string> &m) const;
  /// The damped inverses as optimizer-state checkpoint entries
  /// ("<layer>.kfac_A_inv" [in,in], "<layer>.kfac_G_inv" [out,out], and
  /// the refresh's not yet installed ones "<layer>.kfac_A_inv_pending",
  /// "<layer>.kfac_G_inv_pending"; zeros where the layer has none), over
  /// host copies that copy_state fills (to_host: the open cycles finished
  /// first, their collectives on every rank, and their inversions waited
  /// for) or reads back into the device inverses.
  void checkpoint_entries(std::vector<CheckpointEntry> &e);
  void copy_state(bool to_host);
  /// Nothing after an item (KfacCalls.h): the streams order the sends.
  void after_item() {}
  /// Nothing: the curvature GEMMs read a set in stream order, before the
  /// next writer.
  void release_live() {}
  /// Device memory back before the CUDA context goes.
  void release();

private:
  // One factor's curvature of a micro-batch: A from the layer's input (its
  // rows counted once), G (g_side) from its output gradient.
  void curvature(int layer, const act_t *v, int64_t rows, bool g_side);
  void keep(int mb, int layer, const act_t *v, int64_t rows, bool g_side);
  void add_kept(int layer, int mb, bool g_side);
  // The running average (KfacCycle.h): its buffers per layer (A's kAverage,
  // kRecent, kStepSum, then G's; empty without a decay) and the operations,
  // on the compute stream.
  void accumulate_into(float *f, int layer, const act_t *v, int64_t rows,
                       bool g_side);
  float *average(size_t i, int kind, int f);
  static void axpby(float *y, float a, const float *x, float b, int64_t n) {
    kfac_axpby(y, a, x, b, n);
  }
  static void copy(float *y, const float *x, int64_t n);
  static void zero(float *y, int64_t n);
  static void symmetrize(float *, int64_t) {} // the GEMMs sum both halves
  std::vector<std::array<DeviceBuffer<float>, 6>> average_buf_;
  // Whether a factor's operand is split over tp (gathered to accumulate).
  bool split_operand(int layer, bool g_side) const;
  // The layer's saved operands not accumulated yet, in (factor, micro-batch)
  // order.
  void flush_saved(size_t layer);
  // The cycle's work on this backend (KfacCycle.h): a factor's scaling and
  // reduction on the compute stream, the launch of its inversion on the side
  // stream, and the install of the resolved inverses.
  int device_replicas(size_t i) const;
  void reduce(size_t i, int f, float scale);
  void invert(size_t i, int f, bool first);
  void inverted(size_t i) { unresolved_[i] = true; }
  void install(const std::vector<size_t> &due);
  void open(size_t i) { mark_[i][0] = mark_[i][1] = -1; }
  void opening() {}
  void finishing(const std::vector<size_t> &) {}
  void rule_step(Param &p, int64_t t, bool norms_over_tp);
  // Whether a saved operand of the layer waits for its item.
  bool live_saved(size_t layer) const;
  // At a refresh step's end: the cycles of its layers that no placed item
  // can still advance, closed now (KfacRun.cpp).
  void finish_unplaced();
  /// Waits for the launched inversions of these layers, decides their fp64
  /// retries, keeps their outcomes, traces them and zeroes their factors.
  void resolve(const std::vector<size_t> &layers);

  struct Saved {
    DeviceBuffer<act_t> v;
    int64_t rows = 0;
    bool live = false; // saved this cycle, not accumulated yet
  };
  std::map<std::tuple<int, bool, int>, Saved> saved_; // layer, G, micro-batch
  // Per layer: the trace's anchors of the open cycle's launches (A, G);
  // whether its inversions are launched and not resolved yet (their
  // outcomes, A and G, kept until the install).
  std::vector<std::array<int, 2>> mark_;
  std::vector<bool> unresolved_;
  std::vector<KfacInverseOutcome> outcomes_;
  bool (*items_at_)(int64_t phase) = nullptr;
  bool (*saves_)(int layer) = nullptr;
  // Set while a save finishes the open cycles outside a step: their
  // inversions are launched untimed (no trace mark).
  bool untimed_ = false;
  // per layer: A_inv, G_inv, the pending A and G inverses
  std::vector<std::vector<float>> host_inv_;
  // per layer: A's average and recent factor steps, then G's (a decay only)
  std::vector<std::vector<float>> host_avg_;
  DeviceBuffer<float> dw_, db_; // a preconditioned gradient
  // Adam grafting: the K-FAC parameters' preconditioned gradients;
  // direction(p, t) is p's for step t.
  KfacDirections<Param, DeviceBuffer<float>> direction_;
  float *direction(const Param &p, int64_t t);
  // The trace's thread of the side stream (0 compute, 1 communication).
  static constexpr int kSideStreamTid = 2;
};

extern KfacRun kfac;

} // namespace autoddl::rt::harness

// The calls generated code makes.
#include "backends/common/harness/KfacCalls.h"

#endif // AUTODDL_BACKENDS_CUDA_HARNESS_KFACRUN_H
