//===- KfacCycle.h - the refresh cycle of K-FAC, either backend ----------===//
//
// One refresh cycle per K-FAC layer (docs/kfac.md "Generated programs"),
// the same protocol for the CPU and the CUDA program: a refresh step s of
// the layer (s % K == 0, K its own) opens the cycle; its micro-batches
// accumulate the factors; each factor is reduced over every rank holding the
// layer (dp replicas, tp on split rows, Chimera's mirrored devices), then
// inverted (after both reductions: π reads both), in the bubbles where the
// plan placed the items or, for what is left, at the end of step s+K-1 in
// layer-table order (or at the end of the earlier step where the plan put
// that tail: finish_tail); the inverses are installed at the start of step
// s+K.
//
//   open -> reduced (A, G) -> inverted (A, G) -> waiting -> installed
//
// begin_step runs in one order: finish the cycles ending now (a save may
// have done it), install the inverses due, mark the layers refreshing this
// step, then open their cycles.
//
// The backend (CRTP: Derived, its KfacRun; OperandT: what its activations
// are made of) supplies the work on its memory:
//   void curvature(int layer, const OperandT *v, int64_t rows, bool g)
//                                  one micro-batch's operand into A (g: G)
//   void keep(int mb, int layer, const OperandT *v, int64_t rows, bool g)
//                                  a copy of it for a later step's item
//   void add_kept(int layer, int mb, bool g)
//                                  that copy into the factor
//   int device_replicas(size_t i)  pipeline devices holding layer i (1: one)
//   void flush_saved(size_t i)     accumulate its saved operands not added yet
//   void reduce(size_t i, int f, float scale)
//                                  scale factor f (0 A, 1 G) to the mean and
//                                  all-reduce it over dp / tp / the devices
//   void invert(size_t i, int f, bool first)
//                                  invert it into the inverse-to-be (first:
//                                  the cycle's first inversion, which damps)
//   void inverted(size_t i)        both are: what follows on this backend
//   void install(const std::vector<size_t> &due)
//                                  the waiting inverses of these layers in use
//   void open(size_t i)            a cycle opens: keep a copy of the inverses
//   void opening()                 before the cycles of a step open
//   void finishing(const std::vector<size_t> &ending)
//                                  before the cycles of these layers close
//   void rule_step(ParamT &p, int64_t t, bool norms_over_tp)
//                                  the rule on one parameter (apply_rule)
// and may call reduce_factor / invert_factor (an item in a bubble) and
// finish_cycle (the step's end; -1: every open cycle, a save).
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_KFACCYCLE_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_KFACCYCLE_H

#include "backends/common/harness/KfacProgram.h" // KfacRunBase
#include "backends/common/harness/ParamTable.h"  // ParamSpecOf

#include <cstdint>
#include <vector>

namespace autoddl::rt::harness {

template <typename Derived, typename ParamT, typename LayerT, typename OperandT>
class KfacCycleRun : public KfacRunBase<ParamT, LayerT> {
  using Base = KfacRunBase<ParamT, LayerT>;

public:
  /// One micro-batch of layer `layer` on its refresh step: its input x
  /// [rows, in] into A (after the forward), its output gradient dy
  /// [rows, out] into G (after the backward); the calls sit where the plan
  /// placed the items (codegen/emit/KfacEmitter.cpp). A no-op on other steps.
  void curvature_A(int layer, const OperandT *x, int64_t rows) {
    if (this->due(size_t(layer)))
      self().curvature(layer, x, rows, false);
  }
  void curvature_G(int layer, const OperandT *dy, int64_t rows) {
    if (this->due(size_t(layer)))
      self().curvature(layer, dy, rows, true);
  }
  /// A micro-batch's input (A) or output gradient (G, g_side) whose
  /// curvature the plan put in a later step of the cycle (the micro-batch's
  /// buffers are overwritten by the next step): copied on the refresh step,
  /// accumulated by curvature_saved where the plan placed the item, and at
  /// the latest when the layer's factor is reduced (in layer, factor,
  /// micro-batch order).
  void save(int mb, int layer, const OperandT *v, int64_t rows, bool g_side) {
    if (this->due(size_t(layer)))
      self().keep(mb, layer, v, rows, g_side);
  }
  void curvature_saved(int layer, int mb, bool g_side) {
    if (is_open(size_t(layer))) // else finished early (a save): none left
      self().add_kept(layer, mb, g_side);
  }
  /// The base's setup; no cycle open, nothing waiting.
  void setup(const KfacProgramOf<ParamT> &p, const Options &o,
             const ProgramSpec &s) {
    Base::setup(p, o, s);
    cycle_.assign(this->specs_.size(), Cycle{});
  }
  /// Before the step's schedule (see the file comment for the order).
  void begin_step(int64_t step) {
    step_ = step;
    finish_cycle(step); // done at the previous step's end, or by a save
    std::vector<size_t> due;
    for (size_t i = 0; i < cycle_.size(); ++i)
      if (cycle_[i].waiting && this->specs_[i].weight->held &&
          kfac_install_due(step, this->refresh_[i]))
        due.push_back(i);
    if (!due.empty())
      self().install(due);
    for (size_t i : due)
      cycle_[i].waiting = false;
    Base::begin_step(step);
    self().opening();
    for (size_t i = 0; i < cycle_.size(); ++i)
      if (this->specs_[i].weight->held && this->due(i)) {
        cycle_[i] = Cycle{};
        cycle_[i].open = true;
        this->rows_[i] = 0;
        self().open(i);
      }
  }
  /// The step's place in this rank's refresh cycle, 0..K-1 (kfac_phase();
  /// K: rank_refresh(), the cycle the plan placed the device's items in);
  /// -1 on a rank whose layers have different K (no placed item runs at its
  /// place: each at its layer's cycle end).
  int64_t phase() const {
    return this->rank_refresh_ > 0 ? step_ % this->rank_refresh_ : -1;
  }

protected:
  struct Cycle {
    bool open = false; // from its refresh step to its end
    bool reduced[2] = {false, false}, inverted[2] = {false, false};
    bool waiting = false; // inverses computed (or loaded), not installed
  };
  std::vector<Cycle> cycle_; // per layer
  int64_t step_ = 0;

  bool is_open(size_t i) const { return cycle_[i].open; }
  /// Whether layer i's reductions involve a collective.
  bool collective(size_t i) const {
    const KfacLayerSpecOf<ParamT> &s = this->specs_[i];
    return this->dp_ > 1 || (s.rows_over_tp && this->tp_ > 1) ||
           self().device_replicas(i) > 1;
  }
  /// Factor f's reduction (true: done, or nothing to do). In a bubble, one
  /// over Chimera's pipeline devices waits for the step end (false): the two
  /// devices run different lists, one canonical order only there. The
  /// layer's curvature on this rank precedes it (the emitter's order); its
  /// saved operands are added first.
  bool reduce_factor(size_t i, int f, bool bubble) {
    const KfacLayerSpecOf<ParamT> &s = this->specs_[i];
    Cycle &c = cycle_[i];
    if (!c.open || !s.weight->held || c.reduced[f])
      return true;
    const int devices = self().device_replicas(i);
    if (bubble && devices > 1)
      return false;
    self().flush_saved(i);
    // Raw sums -> the mean over every rank holding the layer (G scaled back
    // from the loss's mean: each of them saw rows_ rows of the loss).
    int replicas = devices;
    if (s.rows_over_tp)
      replicas *= int(this->tp_);
    const int64_t rows = this->rows_[i];
    const KfacScales sc =
        kfac_factor_scales(rows, double(rows) * double(replicas * this->dp_));
    self().reduce(i, f, f ? sc.g : sc.a);
    c.reduced[f] = true;
    return true;
  }
  /// Factor f's inversion, after both reductions; in a bubble a collective
  /// reduction runs only at its own item (or the cycle's end), never here.
  void invert_factor(size_t i, int f, bool bubble) {
    Cycle &c = cycle_[i];
    if (!c.open || !this->specs_[i].weight->held || c.inverted[f])
      return;
    for (int h : {0, 1})
      if (!c.reduced[h] && bubble && collective(i))
        return;
    for (int h : {0, 1})
      if (!reduce_factor(i, h, bubble))
        return;
    self().invert(i, f, !c.inverted[0] && !c.inverted[1]);
    c.inverted[f] = true;
    if (c.inverted[0] && c.inverted[1]) {
      c.waiting = true;
      self().inverted(i);
    }
  }
  /// Reduces and inverts both factors of layer i and closes its cycle.
  void close_cycle(size_t i) {
    for (int f : {0, 1})
      reduce_factor(i, f, false);
    for (int f : {0, 1})
      invert_factor(i, f, false);
    cycle_[i].open = false;
  }
  /// What the bubbles left of the cycles whose next one starts at step
  /// `next` (next % K == 0; -1: every open one, a save): in layer-table order
  /// on every rank holding a layer, so the dp, tp and device communicators
  /// see one order (the layers ending at a step are the same on every rank:
  /// K is the layer's).
  void finish_cycle(int64_t next) {
    close_cycles([&](size_t i) {
      return next < 0 || next % this->refresh_[i] == 0;
    });
  }
  /// At the end of the step of its cycle where the plan put the tail
  /// (KfacProgramOf::tail_phase) when that is before the cycle's last step:
  /// the cycles of this rank's layers closed now, in layer-table order, not
  /// at s+K-1 (the same sums: no number changes). Layers held by several
  /// pipeline devices (Chimera's mirrored copies) keep their cycle's end, the
  /// one step both devices share.
  void finish_tail() {
    if (!this->tail_phase_ || phase() < 0 ||
        phase() != this->tail_phase_() || phase() >= this->rank_refresh_ - 1)
      return;
    close_cycles([&](size_t i) {
      return this->specs_[i].weight->held && self().device_replicas(i) == 1;
    });
  }
  /// Closes the open cycles of the layers `pick` names, in layer-table order,
  /// after the backend's finishing(ending).
  template <typename Pick> void close_cycles(Pick pick) {
    std::vector<size_t> ending;
    for (size_t i = 0; i < cycle_.size(); ++i)
      if (cycle_[i].open && pick(i))
        ending.push_back(i);
    if (ending.empty())
      return;
    self().finishing(ending);
    for (size_t i : ending)
      close_cycle(i);
  }
  /// The rule (momentum SGD or LAMB) on every parameter this rank holds, the
  /// K-FAC layers' gradients preconditioned already, the rest first-order
  /// (as PipeFisher); the backend's rule_step(p, t, norms_over_tp) runs it.
  /// LAMB's trust ratio is of the whole parameter: a tp-split one sums its
  /// norms over tp. Under ZeRO-1 the backend's rule updates this dp rank's
  /// shard of the padded parameter (common/Zero.h) with its shard of the
  /// state, LAMB's norms summed over dp, and all-gathers the parameter.
  void apply_rule(const std::vector<ParamSpecOf<ParamT>> &params, int64_t t) {
    for (const ParamSpecOf<ParamT> &ps : params)
      if (ps.p->held)
        self().rule_step(*ps.p, t, this->tp_ > 1 && ps.p->split_dim >= 0);
  }
  /// After a checkpoint load: no cycle open; `waiting` says whether layer i
  /// has loaded inverses to install at its next s+K.
  void loaded(size_t i, bool waiting) {
    cycle_[i].open = false;
    cycle_[i].waiting = waiting;
  }

private:
  Derived &self() { return static_cast<Derived &>(*this); }
  const Derived &self() const { return static_cast<const Derived &>(*this); }
};

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_KFACCYCLE_H
