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
//                                  one micro-batch's operand into A (g: G),
//                                  now (accumulate) or queued
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
// and, for the running average of the factors (a factor decay > 0):
//   float *average(size_t i, int kind, int f)
//                                  factor f's kAverage, kRecent or kStepSum
//                                  buffer (allocated, zeroed, in setup)
//   void accumulate_into(float *F, int layer, const OperandT *v,
//                        int64_t rows, bool g)
//                                  one micro-batch's operand into F (its
//                                  rows row_stride(rows) selects, strided())
//   void axpby(float *y, float a, const float *x, float b, int64_t n)
//                                  y = a y + b x; copy(y, x, n); zero(y, n)
//   void symmetrize(float *F, int64_t d)
//                                  F's upper triangle mirrored (a CPU sum)
// and may call reduce_factor / invert_factor (an item in a bubble),
// finish_cycle (the step's end; -1: every open cycle, a save),
// fold_average (in reduce, between the scaling and the reduction) and
// fold_factor_steps (the step's end).
//
// The running average (docs/kfac.md "Factor interval and running average"):
// each rank folds its own scaled factors, A_avg <- d A_avg + (1 - d) A_t,
// and only a refresh's folded factor is reduced. The fold and the mean over
// ranks are both linear, so the mean of the ranks' averages is the average
// of the means, the one-device factor (to rounding), at the cost of one
// reduction per refresh as without the average. The refresh step s's fold
// needs its curvature complete, which the plan may spread over s..s+K-1,
// while the factor steps after s fold at their step's end; so these go into
// kRecent (R <- d R + (1 - d) A_t, n of them), added when the next cycle
// opens (A_avg <- d^n A_avg + R): every rank folds in one order wherever
// the plan placed the items.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_KFACCYCLE_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_KFACCYCLE_H

#include "backends/common/harness/KfacProgram.h" // KfacRunBase
#include "backends/common/harness/ParamTable.h"  // ParamSpecOf

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace autoddl::rt::harness {

/// Adam grafting's directions: per K-FAC parameter, its preconditioned
/// gradient and the step t it is of (BufferT: the backend's float buffer,
/// which its KfacRun sizes as the parameter's and zeroes once).
template <typename ParamT, typename BufferT> struct KfacDirections {
  struct Entry {
    BufferT d;
    int64_t t = 0;
  };
  std::map<const ParamT *, Entry> of;
  /// Null unless step t preconditioned p.
  const float *at(const ParamT &p, int64_t t) const {
    const auto it = of.find(&p);
    return it != of.end() && it->second.t == t ? it->second.d.data() : nullptr;
  }
};

template <typename Derived, typename ParamT, typename LayerT, typename OperandT>
class KfacCycleRun : public KfacRunBase<ParamT, LayerT> {
  using Base = KfacRunBase<ParamT, LayerT>;

public:
  /// One micro-batch of layer `layer` on its refresh step: its input x
  /// [rows, in] into A (after the forward), its output gradient dy
  /// [rows, out] into G (after the backward); the calls sit where the plan
  /// placed the items (codegen/emit/KfacEmitter.cpp). A no-op on other steps.
  /// On a factor step between refreshes both go into the step's sums.
  void curvature_A(int layer, const OperandT *x, int64_t rows) {
    if (this->due(size_t(layer)))
      self().curvature(layer, x, rows, false);
    else if (this->factor_due(size_t(layer)))
      step_curvature(layer, x, rows, false);
  }
  void curvature_G(int layer, const OperandT *dy, int64_t rows) {
    if (this->due(size_t(layer)))
      self().curvature(layer, dy, rows, true);
    else if (this->factor_due(size_t(layer)))
      step_curvature(layer, dy, rows, true);
  }
  /// A micro-batch's input (A) or output gradient (G, g_side) whose
  /// curvature the plan put in a later step of the cycle (the micro-batch's
  /// buffers are overwritten by the next step): copied on the refresh step,
  /// accumulated by curvature_saved where the plan placed the item, and at
  /// the latest when the layer's factor is reduced (in layer, factor,
  /// micro-batch order).
  /// On a factor step between refreshes the operand, live here, goes into
  /// the step's sums at once: nothing of it is left for a later step.
  void save(int mb, int layer, const OperandT *v, int64_t rows, bool g_side) {
    if (this->due(size_t(layer)))
      self().keep(mb, layer, v, rows, g_side);
    else if (this->factor_due(size_t(layer)))
      step_curvature(layer, v, rows, g_side);
  }
  /// The rows each layer's step sums hold so far this step, and setting
  /// them: a CUDA factor step replayed from a graph ran none of its host
  /// code, so the harness restores what its first run counted.
  std::vector<int64_t> step_rows() const {
    std::vector<int64_t> rows;
    for (const Average &a : average_)
      rows.push_back(a.rows);
    return rows;
  }
  void set_step_rows(const std::vector<int64_t> &rows) {
    for (size_t i = 0; i < average_.size() && i < rows.size(); ++i)
      average_[i].rows = rows[i];
  }
  /// Under --kfac-stagger, where the plan put every item of the refresh at
  /// its step's end (tail 0: one GPU, dp only), whether layer i's items wait
  /// for its own step of the cycle (stagger_phases), which finish_tail
  /// closes it at: the placed reduce/invert items skip it until then.
  bool staggered_later(size_t i) {
    if (!this->c_.stagger || !this->tail_phase_ || phase() != 0 ||
        this->tail_phase_() != 0 || this->rank_refresh_ < 3)
      return false;
    return stagger_phases(0)[i] > 0;
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
    average_.assign(this->specs_.size(), Average{});
    recount_ = false;
    stagger_phase_.clear();
  }
  /// Before the step's schedule (see the file comment for the order).
  void begin_step(int64_t step) {
    step_ = step;
    if (recount_) // resumed: the factor steps folded since each refresh
      for (size_t i = 0; i < average_.size(); ++i)
        average_[i].recent =
            kfac_factor_steps_since_refresh(step, this->refresh_[i], this->c_);
    recount_ = false;
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
        fold_recent(i);
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
    const KfacScales sc = scales(i, this->rows_[i]);
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
  /// One micro-batch's operand into the open cycle's factor A (g: G), rows
  /// counted once, on A's side.
  void accumulate(int layer, const OperandT *v, int64_t rows, bool g) {
    LayerT &l = this->layers_[size_t(layer)];
    self().accumulate_into(g ? l.G.data() : l.A.data(), layer, v, rows, g);
    if (!g)
      this->rows_[size_t(layer)] += rows;
  }
  /// Between the backend's scaling of factor f (F, n floats: this rank's mean)
  /// and its reduction: with a running average, F <- d A_avg + (1 - d) F
  /// (F alone at the first refresh) and A_avg <- F, still this rank's.
  void fold_average(size_t i, int f, float *F, int64_t n) {
    const double d = this->c_.factor_decay;
    if (!(d > 0))
      return;
    float *avg = self().average(i, kAverage, f);
    if (average_[i].valid[f])
      self().axpby(F, float(1 - d), avg, float(d), n);
    self().copy(avg, F, n);
    average_[i].valid[f] = true;
  }
  /// At the step's end (before the cycles finish): the factor steps' sums,
  /// scaled to this rank's mean, folded into kRecent and zeroed. Local: no
  /// collective (the fold is reduced with the next refresh's).
  void fold_factor_steps() {
    const double d = this->c_.factor_decay;
    for (size_t i = 0; i < average_.size(); ++i) {
      if (!this->factor_due(i) || !this->specs_[i].weight->held)
        continue;
      const KfacScales sc = scales(i, average_[i].rows);
      for (int f : {0, 1}) {
        const int64_t dim = f ? this->specs_[i].out : this->specs_[i].in;
        float *sum = self().average(i, kStepSum, f);
        self().symmetrize(sum, dim);
        self().axpby(self().average(i, kRecent, f), float(d), sum,
                     float((1 - d) * (f ? sc.g : sc.a)), dim * dim);
        self().zero(sum, dim * dim);
      }
      average_[i].rows = 0;
      ++average_[i].recent;
    }
  }
  /// After a checkpoint load: whether factor f's average was there (not all
  /// zeros); the factor steps since the last refresh are counted at the
  /// next begin_step.
  void loaded_average(size_t i, bool a_valid, bool g_valid) {
    average_[i].valid[0] = a_valid;
    average_[i].valid[1] = g_valid;
    recount_ = true;
  }
  /// The buffers of the running average (Derived::average).
  enum AverageKind { kAverage, kRecent, kStepSum };

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
  /// With --kfac-stagger (KfacConfig::stagger) each of those layers at its
  /// own step from the tail to K-2 instead (stagger_phase).
  void finish_tail() {
    if (!this->tail_phase_ || phase() < 0 || phase() >= this->rank_refresh_ - 1)
      return;
    const int64_t tail = this->tail_phase_();
    const bool stagger = this->c_.stagger && tail == 0;
    if (tail < 0 || phase() < tail || (!stagger && phase() != tail))
      return;
    const std::vector<int64_t> &at = stagger_phases(tail);
    close_cycles([&](size_t i) { return at[i] == phase(); });
  }
  /// Per layer, the step of the cycle whose end finish_tail closes it at: the
  /// tail for this rank's layers held by one pipeline device, shared out over
  /// steps tail..K-2 in layer-table order under --kfac-stagger (every rank
  /// holding a layer holds the same ones: one step for it on all); -1 for
  /// the others. Computed once (K and the tail are the plan's).
  const std::vector<int64_t> &stagger_phases(int64_t tail) {
    if (stagger_phase_.size() == this->specs_.size())
      return stagger_phase_;
    std::vector<size_t> mine;
    for (size_t i = 0; i < this->specs_.size(); ++i)
      if (this->specs_[i].weight->held && self().device_replicas(i) == 1)
        mine.push_back(i);
    stagger_phase_.assign(this->specs_.size(), -1);
    const int64_t span = this->rank_refresh_ - 1 - tail;
    const int64_t n = int64_t(mine.size());
    for (int64_t r = 0; r < n; ++r)
      stagger_phase_[mine[size_t(r)]] =
          this->c_.stagger && tail == 0 ? r * span / n : tail;
    return stagger_phase_;
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
  /// The rule (momentum SGD, LAMB or Adam grafting) on every parameter this
  /// rank holds, the K-FAC layers' gradients preconditioned already (Adam
  /// grafting: into their directions), the rest first-order (as PipeFisher);
  /// the backend's rule_step(p, t, norms_over_tp) runs it. LAMB's trust ratio
  /// and Adam grafting's scale are of the whole parameter: a tp-split one
  /// sums its norms over tp. Under ZeRO-1 the backend's rule updates this dp
  /// rank's shard of the padded parameter (common/Zero.h) with its shard of the
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
  // Raw sums over `rows` rows -> this rank's mean, which the reduction means
  // over every rank holding the layer (G scaled back from the loss's mean:
  // each of them saw `rows` rows of the loss).
  KfacScales scales(size_t i, int64_t rows) const {
    const KfacLayerSpecOf<ParamT> &s = this->specs_[i];
    int replicas = self().device_replicas(i);
    if (s.rows_over_tp)
      replicas *= int(this->tp_);
    // A factor stride S reads rows / S of them (every micro-batch the same
    // share), the loss still the mean over all.
    return kfac_factor_scales(rows / this->c_.factor_stride,
                              double(rows) * double(replicas * this->dp_));
  }
  // A factor step's micro-batch into its sums (rows counted on A's side).
  void step_curvature(int layer, const OperandT *v, int64_t rows, bool g) {
    self().accumulate_into(self().average(size_t(layer), kStepSum, g ? 1 : 0),
                           layer, v, rows, g);
    if (!g)
      average_[size_t(layer)].rows += rows;
  }
  // A cycle opens: the factor steps since the last refresh into the
  // average, A_avg <- d^n A_avg + R, and R zeroed.
  void fold_recent(size_t i) {
    Average &a = average_[i];
    if (a.recent > 0)
      for (int f : {0, 1}) {
        const int64_t n = f ? this->specs_[i].out * this->specs_[i].out
                            : this->specs_[i].in * this->specs_[i].in;
        float *recent = self().average(i, kRecent, f);
        if (a.valid[f])
          self().axpby(self().average(i, kAverage, f),
                       float(std::pow(this->c_.factor_decay, double(a.recent))),
                       recent, 1.0f, n);
        self().zero(recent, n);
      }
    a.recent = 0;
  }
  std::vector<int64_t> stagger_phase_; // stagger_phases's, once computed
  struct Average {
    bool valid[2] = {false, false}; // kAverage holds a factor (A, G)
    int64_t recent = 0;             // factor steps in kRecent
    int64_t rows = 0;               // rows in this step's kStepSum
  };
  std::vector<Average> average_; // per layer
  bool recount_ = false;         // after a load: Average::recent unknown

  Derived &self() { return static_cast<Derived &>(*this); }
  const Derived &self() const { return static_cast<const Derived &>(*this); }
};

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_KFACCYCLE_H
