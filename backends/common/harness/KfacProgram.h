//===- KfacProgram.h - a generated program's K-FAC table, either backend -===//
//
// What a program generated from a K-FAC plan hands its backend's KfacRun
// (backends/cpu/harness/KfacRun.h, backends/cuda/harness/KfacRun.h): the
// layer table over the backend's Param, the plan's damping, refresh interval
// and rule, and the KfacConfig the flags make of them. Header-only.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_KFACPROGRAM_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_KFACPROGRAM_H

#include "backends/common/KfacRules.h"
#include "backends/common/harness/Options.h"
#include "backends/common/harness/Spec.h" // ProgramSpec

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// One row of the generated K-FAC layer table: the linear's weight (and bias,
/// or null), its unsplit dimensions and W's layout. ParamT: the backend's
/// Param.
template <typename ParamT> struct KfacLayerSpecOf {
  const char *name;
  ParamT *weight, *bias;
  int64_t in, out;
  bool transpose_weight; // W [out,in]; else [in,out]
  // Under tp: how W is split (KfacRules.h: None, Out column-parallel, In
  // row-parallel), and whether the linear runs on split rows with W whole
  // (tp splits the batch or sequence: the factors are also means over tp).
  KfacSplit split = KfacSplit::None;
  bool rows_over_tp = false;
  int64_t refresh = 0; // this layer's K (0: the program's refresh)
};

/// What the plan recorded (docs/plan-format.md "kfac"): the defaults of
/// --kfac-damping, --kfac-refresh and --kfac-rule. `refresh` is the plan's
/// longest K; each layer refreshes on its own device's K (its row's
/// `refresh`), which --kfac-refresh replaces for every layer.
template <typename ParamT> struct KfacProgramOf {
  double damping = 1e-3;
  int64_t refresh = 1;
  const char *rule = "sgd";
  // The defaults of --kfac-factor-every and --kfac-factor-decay (KfacConfig:
  // 0, 0 is no running average).
  int64_t factor_every = 0;
  double factor_decay = 0;
  // The default of --kfac-factor-stride (KfacConfig::factor_stride).
  int64_t factor_stride = 1;
  std::vector<KfacLayerSpecOf<ParamT>> layers;
  // Whether this rank's pipeline device has K-FAC items in step `phase`
  // (1..K-1) of its refresh cycle (null: none there). The CUDA program runs
  // those steps eagerly, outside its step graph.
  bool (*items_at)(int64_t phase) = nullptr;
  // Whether some pipeline device keeps operands of layer `layer`'s
  // curvature for a later step of its cycle (kfac_save_A / _G; null:
  // unknown). The CUDA program finishes a cycle early only where no placed
  // item of the layer is left on any device holding it.
  bool (*saves)(int layer) = nullptr;
  // The step (0..K-1) of this rank's pipeline device's refresh cycle whose
  // end runs what the bubbles leave of a cycle: the plan's last placing step
  // (plan.json kfac.devices[].steps - 1), where the plan prices that tail
  // (null: the cycle's last step, K-1). Where it comes before K-1 (one GPU,
  // dp only: step 0), the inversions launched there overlap the cycle's
  // remaining steps until the install at s+K.
  int64_t (*tail_phase)() = nullptr;
};

/// The run's K-FAC configuration: the flags over the plan's values. Throws
/// std::invalid_argument naming the cause (no layer, a bad value).
template <typename ParamT>
KfacConfig kfac_run_config(const KfacProgramOf<ParamT> &p, const Options &o) {
  if (p.layers.empty())
    throw std::invalid_argument("--optimizer kfac: the model has no linear "
                                "layer K-FAC can precondition");
  KfacConfig c;
  c.damping = std::isnan(o.kfac_damping) ? p.damping : o.kfac_damping;
  c.refresh_interval = o.kfac_refresh > 0 ? o.kfac_refresh : p.refresh;
  const std::string rule = o.kfac_rule.empty() ? p.rule : o.kfac_rule;
  if (!kfac_rule_named(rule, c.rule))
    throw std::invalid_argument("kfac: the plan's rule is not one of " +
                                kfac_rule_choices());
  c.eps = kfac_rule_eps(c.rule);
  c.factor_interval =
      o.kfac_factor_every > 0 ? o.kfac_factor_every : p.factor_every;
  c.factor_decay =
      std::isnan(o.kfac_factor_decay) ? p.factor_decay : o.kfac_factor_decay;
  if (!(c.factor_decay > 0) && o.kfac_factor_every == 0)
    c.factor_interval = 0; // --kfac-factor-decay 0 turns a plan's average off
  c.factor_stride =
      o.kfac_factor_stride > 0 ? o.kfac_factor_stride : p.factor_stride;
  c.stagger = o.kfac_stagger;
  c.momentum = o.momentum;
  c.weight_decay = o.weight_decay;
  c.lr = 1.0; // checked apart: --lr 0 (an evaluation run) is allowed
  kfac_check_config(c);
  if (!(o.lr >= 0))
    throw std::invalid_argument("--lr: K-FAC needs a learning rate >= 0");
  c.lr = o.lr;
  return c;
}

/// metrics.json's K-FAC info: the counters and the configuration in use.
/// `refresh`: every layer's K (kfac.refresh: the longest; kfac.refresh_layers
/// lists them, comma-separated, where they differ).
inline void kfac_run_info(const KfacStats &s, const KfacConfig &c,
                          const std::vector<int64_t> &refresh,
                          std::map<std::string, std::string> &m) {
  kfac_stats_info(s, m);
  m["kfac.damping"] = std::to_string(c.damping);
  int64_t longest = refresh.empty() ? c.refresh_interval : 0;
  std::string each;
  bool differ = false;
  for (int64_t k : refresh) {
    longest = std::max(longest, k);
    differ = differ || k != refresh.front();
    each += (each.empty() ? "" : ",") + std::to_string(k);
  }
  m["kfac.refresh"] = std::to_string(longest);
  if (differ)
    m["kfac.refresh_layers"] = each;
  m["kfac.rule"] = kfac_rule_name(c.rule);
  // F (the refresh steps alone: the longest K) and d (0: no average).
  m["kfac.factor_every"] =
      std::to_string(c.factor_interval > 0 ? c.factor_interval : longest);
  m["kfac.factor_decay"] = std::to_string(c.factor_decay);
  m["kfac.stagger"] = c.stagger ? "on" : "off";
  if (c.factor_stride > 1) // absent: every sample
    m["kfac.factor_stride"] = std::to_string(c.factor_stride);
}

/// The samples of one micro-batch of this rank, whose rows the factor stride
/// S selects from (kfac_row_stride). Throws std::invalid_argument (naming
/// the flag) where S > 1 cannot select whole samples the same on every rank:
/// a graph model (its rows are nodes), a layer whose rows are split over tp
/// (sequence parallelism splits a sample's rows), or S not dividing the
/// micro-batch.
template <typename ParamT>
int64_t kfac_stride_samples(const KfacConfig &c, const ProgramSpec &s,
                            const std::vector<KfacLayerSpecOf<ParamT>> &l) {
  const int64_t samples =
      s.data == DataKind::Classes ? s.class_batch : s.micro_batch;
  const int64_t S = c.factor_stride;
  if (S == 1)
    return samples;
  const std::string flag = "--kfac-factor-stride " + std::to_string(S) + ": ";
  if (s.graph_model())
    throw std::invalid_argument(flag + "a graph model's rows are nodes, not "
                                       "samples (only 1 there)");
  for (const KfacLayerSpecOf<ParamT> &x : l)
    if (x.rows_over_tp && s.tp > 1)
      throw std::invalid_argument(
          flag + "layer " + x.name +
          " splits its rows over tp (a sample's rows on several ranks; only "
          "1 there)");
  if (samples % S != 0)
    throw std::invalid_argument(flag + "does not divide the micro-batch of " +
                                std::to_string(samples) + " samples");
  return samples;
}

/// What both backends' KfacRun hold and how they set up and start a step.
/// LayerT: the backend's KfacLayer (factors and inverses), made of (in, out);
/// a layer this rank does not hold gets 1x1 factors.
template <typename ParamT, typename LayerT> class KfacRunBase {
public:
  /// Throws std::invalid_argument on a configuration that cannot run.
  void setup(const KfacProgramOf<ParamT> &p, const Options &o,
             const ProgramSpec &s) {
    c_ = kfac_run_config(p, o);
    specs_ = p.layers;
    stride_samples_ = kfac_stride_samples(c_, s, specs_);
    layers_.clear();
    for (const KfacLayerSpecOf<ParamT> &l : specs_)
      layers_.emplace_back(l.weight->held ? l.in : 1,
                           l.weight->held ? l.out : 1);
    rows_.assign(specs_.size(), 0);
    refresh_.clear();
    rank_refresh_ = -1; // none held yet
    for (const KfacLayerSpecOf<ParamT> &l : specs_) {
      const int64_t k = o.kfac_refresh > 0 ? o.kfac_refresh
                        : l.refresh > 0    ? l.refresh
                                           : c_.refresh_interval;
      if (k < 1)
        throw std::invalid_argument(
            std::string("kfac: layer ") + l.name +
            ": refresh interval must be >= 1 step (got " + std::to_string(k) +
            ")");
      kfac_check_factor_interval(c_, k);
      refresh_.push_back(k);
      if (l.weight->held)
        rank_refresh_ = rank_refresh_ < 0 || rank_refresh_ == k ? k : 0;
    }
    if (rank_refresh_ < 0)
      rank_refresh_ = c_.refresh_interval;
    dp_ = s.dp;
    tp_ = s.tp;
    zero_ = s.zero;
    tail_phase_ = p.tail_phase;
  }
  /// Before the step's schedule: which layers accumulate factors this step
  /// (each on its own K: a refresh step, or a factor step between refreshes
  /// with a running average), and whether any held layer does.
  void begin_step(int64_t step) {
    due_ = refreshing_ = false;
    layer_due_.assign(specs_.size(), false);
    factor_due_.assign(specs_.size(), false);
    for (size_t i = 0; i < specs_.size(); ++i) {
      layer_due_[i] = kfac_refresh_due(step, refresh_[i]);
      factor_due_[i] = kfac_factor_due(step, refresh_[i], c_);
      const bool held = specs_[i].weight->held;
      refreshing_ = refreshing_ || (layer_due_[i] && held);
      due_ = due_ || ((layer_due_[i] || factor_due_[i]) && held);
    }
  }
  /// Whether the schedule's curvature calls run this step (kfac_due()).
  bool due() const { return due_; }
  /// The rule's learning rate from this step on (lr_at, LrSchedule.h).
  void set_lr(double lr) { c_.lr = lr; }
  /// Whether layer `layer` refreshes this step (opens a cycle).
  bool due(size_t layer) const { return layer_due_[layer]; }
  /// Whether it is on a factor step between refreshes (kfac_factor_due).
  bool factor_due(size_t layer) const { return factor_due_[layer]; }
  /// Layer i's refresh interval K.
  int64_t refresh(size_t layer) const { return refresh_[layer]; }
  /// The K of the layers this rank holds: the cycle the plan placed this
  /// device's items in (a plan gives a device's layers one K, Chimera's
  /// mirrored devices too); 0 where they differ (the one-rank reference of a
  /// plan with a K per device), whose placed items then all run at their
  /// cycles' ends.
  int64_t rank_refresh() const { return rank_refresh_; }
  /// Whether the factors read a subset of each micro-batch's rows, and which
  /// (kfac_row_stride): with a factor stride S > 1.
  bool strided() const { return c_.factor_stride > 1; }
  KfacRowStride row_stride(int64_t rows) const {
    return kfac_row_stride(rows, stride_samples_, c_.factor_stride);
  }

protected:
  KfacConfig c_;
  std::vector<KfacLayerSpecOf<ParamT>> specs_;
  std::vector<LayerT> layers_;   // one per spec
  std::vector<int64_t> rows_;    // rows accumulated this refresh, per layer
  std::vector<int64_t> refresh_; // per layer: its K
  std::vector<bool> layer_due_;  // per layer: a refresh step of it
  std::vector<bool> factor_due_; // per layer: a factor step between them
  int64_t rank_refresh_ = 1;
  int64_t stride_samples_ = 1; // a micro-batch's samples (kfac_stride_samples)
  int64_t (*tail_phase_)() = nullptr; // KfacProgramOf::tail_phase
  KfacStats stats_;
  bool due_ = false;        // a held layer's curvature runs this step
  bool refreshing_ = false; // a held layer's cycle opens this step
  int64_t dp_ = 1, tp_ = 1;
  int zero_ = 0; // ZeRO-1: the rule updates this dp rank's shard (Zero.h)
};

/// The checkpoint names of a layer's damped inverses (optimizer state).
inline std::string kfac_inverse_entry(const char *layer, char factor) {
  return std::string(layer) + ".kfac_" + factor + "_inv";
}

/// The checkpoint names of a layer's running-average factors (with a factor
/// decay): the average as of its last refresh ("<layer>.kfac_A_avg") and
/// what the factor steps since then add ("<layer>.kfac_A_avg_recent").
inline std::string kfac_average_entry(const char *layer, char factor,
                                      bool recent) {
  return std::string(layer) + ".kfac_" + factor + "_avg" +
         (recent ? "_recent" : "");
}

/// The checkpoint names of the open cycle's inverses, installed at its
/// step s+K (kfac_install_due; saved mid-cycle).
inline std::string kfac_pending_inverse_entry(const char *layer, char factor) {
  return kfac_inverse_entry(layer, factor) + "_pending";
}

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_KFACPROGRAM_H
