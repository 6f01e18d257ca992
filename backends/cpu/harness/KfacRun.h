//===- KfacRun.h - K-FAC in a generated CPU program ----------------------===//
//
// A program generated from a K-FAC plan (docs/kfac.md "Generated programs")
// lists its K-FAC layers (the linear layers the plan preconditions) and calls
// kfac_curvature_A / _G per micro-batch where the plan placed the items.
// On a refresh step s of the layer (step % K == 0, K the layer's own: each
// pipeline device's layers refresh on the device's K) that call accumulates the
// layer's factors; kfac_reduce / kfac_invert, placed in the bubbles of steps
// s..s+K-1 as the plan says, reduce them over every rank holding the layer
// (dp replicas, tp) and invert them into pending inverses; what is left runs
// at the end of step s+K-1 in layer-table order, and the pending inverses
// are installed at the start of step s+K (kfac_install_due): the cycle of
// backends/common/harness/KfacCycle.h, on host floats. Every step then
// preconditions the K-FAC layers' gradients with the installed inverses and
// applies the rule (momentum SGD, LAMB or Adam grafting) to every parameter.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_CPU_HARNESS_KFACRUN_H
#define AUTODDL_BACKENDS_CPU_HARNESS_KFACRUN_H

#include "backends/common/harness/KfacCycle.h" // KfacCycleRun
#include "backends/cpu/Collectives.h"          // RecvWaitWork
#include "backends/cpu/harness/Harness.h"
#include "backends/cpu/kfac/Kfac.h"
#include "backends/host/Checkpoint.h" // CheckpointEntry

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace autoddl::rt::harness {

class KfacRun : public KfacCycleRun<KfacRun, Param, KfacLayer, float> {
  friend class KfacCycleRun<KfacRun, Param, KfacLayer, float>;

public:
  /// Wait filling (AUTODDL_KFAC_FILL=waits; `placed` runs each item at its
  /// place; thread, the default, below): the local items (curvature of an
  /// unsplit operand; a reduction or inversion that is no collective) are
  /// queued where the plan placed them instead of run there, and run while the
  /// rank waits for a pipeline receive (set_recv_wait_hook): one at a time,
  /// each only if its duration (measured the last time the same item ran) fits
  /// the wait's budget, in queue order within a layer (so every factor
  /// accumulates in the plan's order and the results are those of `placed`),
  /// across layers the first that fits. What the step's waits leave stays
  /// queued for the next steps' waits (a curvature operand copied first,
  /// end_schedule) until the cycle's end, which runs the rest (finish_cycle); a
  /// collective item runs what is queued first. True when one item ran.
  ///
  /// Thread filling (AUTODDL_KFAC_FILL=thread): the same queue, run in queue
  /// order by a second thread of the rank at SCHED_IDLE on the rank's core, so
  /// the kernel runs it whenever the rank's thread sleeps and preempts it the
  /// moment that thread has work: the bubbles are filled to the microsecond
  /// instead of by whole items (the CPU's counterpart of the CUDA programs'
  /// low-priority side stream). recv then waits by sleeping (run_queued
  /// naps, 20-500 us, while the thread has work). Its items are traced on tid 2
  /// with the CPU time they took (args.cpu_us).
  RecvWaitWork run_queued(double budget_s);
  void drain();
  /// After the step's schedule: the queued curvature items of live
  /// activation buffers (the next step overwrites them) take a copy.
  void end_schedule();
  /// Before an activation set is taken again: the same copies (the set's
  /// next micro-batch overwrites it), and a running item reading one ends.
  void release_live();
  /// After an item run between the schedule's instructions (KfacCalls.h):
  /// the pending pipeline sends are tested, as after the stages' ops.
  void after_item() { progress_sends(); }
  /// Stops the filling thread (after draining its queue).
  ~KfacRun();
  /// The base's setup, and the pending inverses of the held layers.
  void setup(const KfacProgram &p, const Options &o, const ProgramSpec &s);
  /// The plan's reduce_A/G and inv_A/G items of the open cycle, in a bubble.
  /// A no-op when the item has run (or no cycle is open). A reduction over
  /// Chimera's pipeline devices waits for the step end (the two devices run
  /// different lists); an inversion waits until both factors are reduced
  /// (π reads both).
  void reduce_item(int layer, bool g);
  void invert_item(int layer, bool g);
  /// The step's end, after the gradients are summed over every rank holding
  /// them: the refresh (on a refresh step), preconditioning and the rule.
  /// `t` = 1, 2, ...
  void step(const std::vector<ParamSpec> &params, int64_t t);
  void info(std::map<std::string, std::string> &m) const;
  /// The damped inverses as optimizer-state checkpoint entries
  /// ("<layer>.kfac_A_inv" [in,in], "<layer>.kfac_G_inv" [out,out]; zeros
  /// where the layer has none), over the inverses themselves; restored()
  /// after a load marks the loaded ones valid.
  /// A save finishes the open cycle first (its collectives on every rank),
  /// and the pending inverses go beside the installed ones
  /// ("<layer>.kfac_A_inv_pending"), so a resumed run installs them at the
  /// same step as the uninterrupted one.
  void checkpoint_entries(std::vector<CheckpointEntry> &e);
  void restored();

private:
  // The queued curvature items of live buffers take a copy of their operand.
  void copy_live();
  // One factor's curvature of a micro-batch: A from the layer's input (its
  // rows counted once), G (g_side) from its output gradient.
  void curvature(int layer, const float *v, int64_t rows, bool g_side);
  void keep(int mb, int layer, const float *v, int64_t rows, bool g_side);
  void add_kept(int layer, int mb, bool g_side);
  // The running average (KfacCycle.h): its buffers per layer (A's kAverage,
  // kRecent, kStepSum, then G's; empty without a decay) and the operations.
  void accumulate_into(float *f, int layer, const float *v, int64_t rows,
                       bool g_side);
  float *average(size_t i, int kind, int f);
  static void axpby(float *y, float a, const float *x, float b, int64_t n);
  static void copy(float *y, const float *x, int64_t n);
  static void zero(float *y, int64_t n);
  static void symmetrize(float *F, int64_t d);
  std::vector<std::array<std::vector<float>, 6>> average_buf_;
  struct Saved {
    std::vector<float> v;
    int64_t rows = 0;
  };
  std::map<std::tuple<int, bool, int>, Saved> saved_; // layer, G, micro-batch
  void curvature_saved_now(int layer, int mb, bool g_side);
  // Whether a layer's factor curvature, or its reductions and inversions,
  // involve no collective (what wait filling may move).
  bool local_curvature(int layer, bool g_side) const;
  bool local_refresh(size_t i) const;
  bool fill_waits_ = false;
  std::string fill_mode_ = "placed";
  // A queued item (wait filling): what it runs, its layer, and the key of
  // its measured duration (kind, layer, factor).
  struct Queued {
    enum Kind { Curvature, CurvatureSaved, Reduce, Invert };
    Queued(Kind k, int l, bool g_side) : kind(k), layer(l), g(g_side) {}
    /// 0 curvature (live or saved), 1 reduction, 2 inversion: the item's
    /// trace name and the key of its measured duration.
    int group() const { return kind == Reduce ? 1 : kind == Invert ? 2 : 0; }
    Kind kind;
    int layer;
    bool g;
    int mb = 0;               // CurvatureSaved: the saved_ entry
    const float *v = nullptr; // Curvature: the operand, live or
    std::vector<float> copy;  // copied at the schedule's end
    int64_t rows = 0;
  };
  void run_item(Queued &q);
  void enqueue(Queued q);
  // Thread filling: the worker, and what mu_ guards (queue_ in that mode,
  // whether an item runs and whether it reads a live buffer).
  bool fill_thread_ = false;
  void worker_loop();
  void set_worker_idle(bool idle);
  /// The rank's thread waits until `done` (under mu_, held by `lock`), the
  /// filling thread at normal priority meanwhile; the pending pipeline sends
  /// keep moving (progress_sends).
  void await_filler(std::unique_lock<std::mutex> &lock,
                    const std::function<bool()> &done);

public:
  /// Stops the filling thread (what is queued is dropped): the harness's
  /// shutdown, before MPI is finalised and the program's statics go.
  void stop_worker();

private:
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false, running_live_ = false, stop_ = false;
  std::mutex saved_mu_; // saved_, which both threads use
  std::deque<Queued> queue_;
  std::map<std::tuple<int, int, bool>, double> seconds_; // last duration
  // Per layer, the open cycle's inverses-to-be (copies of the installed
  // ones at the cycle's start: the fallback keeps those).
  struct Pending {
    std::vector<float> A_inv, G_inv;
    bool a_valid = false, g_valid = false;
    KfacInverseOutcome outcome[2] = {KfacInverseOutcome::NoInverse,
                                     KfacInverseOutcome::NoInverse};
  };
  std::vector<Pending> pending_;
  // The cycle's work on this backend (KfacCycle.h).
  int device_replicas(size_t i) const;
  void flush_saved(size_t i);
  void reduce(size_t i, int f, float scale);
  void invert(size_t i, int f, bool first);
  void inverted(size_t i);
  void install(const std::vector<size_t> &due);
  void open(size_t i);
  void opening();
  void finishing(const std::vector<size_t> &ending);
  void rule_step(Param &p, int64_t t, bool norms_over_tp);
  // Adam grafting: the K-FAC parameters' preconditioned gradients;
  // direction(p, t) is p's for step t.
  KfacDirections<Param, std::vector<float>> direction_;
  float *direction(const Param &p, int64_t t);
};

extern KfacRun kfac;

} // namespace autoddl::rt::harness

// The calls generated code makes.
#include "backends/common/harness/KfacCalls.h"

#endif // AUTODDL_BACKENDS_CPU_HARNESS_KFACRUN_H
