// The backend-neutral rules of K-FAC (docs/kfac.md): its configuration, the
// pi-corrected factored Tikhonov damping, the refresh bookkeeping, the policy
// when a damped factor is not positive definite, which layers stay
// first-order, and the counters metrics report. The CPU (backends/cpu/kfac)
// and CUDA (backends/cuda/kfac) runtimes both follow this one copy.
// Header-only, plain C++17, so codegen copies it with backends/common.
#ifndef AUTODDL_BACKENDS_COMMON_KFACRULES_H
#define AUTODDL_BACKENDS_COMMON_KFACRULES_H

#include "backends/common/KfacWidth.h" // kKfacMaxFactorDim

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace autoddl::rt {

/// The first-order rule applied to the preconditioned gradient.
enum class KfacRule {
  Sgd,      // momentum SGD with decoupled weight decay (PipeFisher's BertAdam
            // b2=-1)
  Lamb,     // LAMB (PipeFisher's --ngd_with_lamb)
  AdamGraft // the preconditioned direction at AdamW's step size per parameter
            // (Distributed Shampoo's Adam grafting; docs/kfac.md "Rules")
};

/// The rules' names (--kfac-rule, plan.json kfac.rule), in KfacRule's order.
inline constexpr const char *kKfacRuleNames[] = {"sgd", "lamb", "adam-graft"};
inline const char *kfac_rule_name(KfacRule r) { return kKfacRuleNames[int(r)]; }
/// The rule called `name`; false where none is.
inline bool kfac_rule_named(const std::string &name, KfacRule &r) {
  for (int i = 0; i < 3; ++i)
    if (name == kKfacRuleNames[i]) {
      r = KfacRule(i);
      return true;
    }
  return false;
}
/// "sgd, lamb or adam-graft" (`quote`: each in double quotes), for messages.
inline std::string kfac_rule_choices(bool quote = false) {
  const std::string q = quote ? "\"" : "";
  return q + kKfacRuleNames[0] + q + ", " + q + kKfacRuleNames[1] + q + " or " +
         q + kKfacRuleNames[2] + q;
}

/// Everything a K-FAC run is parameterised by; the plan and the binary's flags
/// fill it. Defaults are PipeFisher's convergence settings where it has one
/// (damping 1e-3, refresh interval 10; pipelines.md §4.8).
struct KfacConfig {
  double damping = 1e-3; // lambda of (A (x) G + lambda I), > 0
  int64_t refresh_interval =
      10; // K: factors and inverses renewed every K steps
  // F: with a decay, the curvature of every step t % F == 0 (and of every
  // refresh step) is folded into a running average of the factors, which
  // the refreshes invert (kfac_factor_due); 0: the refresh steps only.
  int64_t factor_interval = 0;
  // d of A <- d A + (1 - d) A_step (kfac-pytorch's factor_decay); 0: no
  // average, each refresh inverts its own step's factors (PipeFisher's
  // ema_decay = -1), today's default.
  double factor_decay = 0;
  // S: the factors read every S-th sample of each micro-batch (samples
  // b % S == 0; kfac_row_stride); 1: every sample, today's default.
  int64_t factor_stride = 1;
  KfacRule rule = KfacRule::Sgd;
  double lr = 1e-2;
  double momentum = 0.9;     // Sgd
  double weight_decay = 0.0; // decoupled: p <- p (1 - lr wd) (every rule)
  // Lamb's and AdamGraft's moments; eps is Lamb's (kfac_rule_eps).
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6;
  // A layer whose unsplit input or output dimension exceeds this stays
  // first-order (docs/kfac.md "Wide layers").
  int64_t max_factor_dim = kKfacMaxFactorDim;
  // --kfac-stagger: where a refresh's reductions and inversions all run at
  // one step's end (the plan's tail, one GPU or dp only), each layer's run at
  // the end of its own step of the cycle instead, spread over the steps up to
  // K-2: no step carries the whole refresh. The same numbers (the factors a
  // cycle inverts do not change during it), another timing.
  bool stagger = false;
};

/// The eps a rule's moments run with: AdamGraft's is AdamW's (1e-8, the
/// programs' AdamWConfig), so that its steps without a direction are the
/// first-order program's AdamW; LAMB's is PipeFisher's 1e-6. (On the CPU
/// GPT of bench/results/pipefisher/2026-12-07-cpu-kfac-adam-graft, 1e-6 alone
/// moves AdamW's loss by up to 0.15.)
inline double kfac_rule_eps(KfacRule r) {
  return r == KfacRule::AdamGraft ? 1e-8 : 1e-6;
}

/// Throws std::invalid_argument unless the factor interval F fits a layer's
/// refresh interval K: F <= K, and F < K only with a decay (without an
/// average the factors of the steps between refreshes would be unused).
inline void kfac_check_factor_interval(const KfacConfig &c, int64_t k) {
  if (c.factor_interval > k)
    throw std::invalid_argument(
        "kfac: factor interval " + std::to_string(c.factor_interval) +
        " is longer than the refresh interval " + std::to_string(k));
  if (c.factor_interval > 0 && c.factor_interval < k && !(c.factor_decay > 0))
    throw std::invalid_argument(
        "kfac: a factor interval below the refresh interval needs a factor "
        "decay > 0 (without an average its factors are unused)");
}

/// Throws std::invalid_argument naming the field when the config cannot run.
inline void kfac_check_config(const KfacConfig &c) {
  if (!(c.damping > 0) || !std::isfinite(c.damping))
    throw std::invalid_argument(
        "kfac: damping must be a finite value > 0 (got " +
        std::to_string(c.damping) + ")");
  if (c.refresh_interval < 1)
    throw std::invalid_argument(
        "kfac: refresh interval must be >= 1 step (got " +
        std::to_string(c.refresh_interval) + ")");
  if (!(c.lr > 0))
    throw std::invalid_argument("kfac: learning rate must be > 0 (got " +
                                std::to_string(c.lr) + ")");
  if (c.momentum < 0 || c.momentum >= 1)
    throw std::invalid_argument("kfac: momentum must be in [0, 1) (got " +
                                std::to_string(c.momentum) + ")");
  if (c.weight_decay < 0)
    throw std::invalid_argument("kfac: weight decay must be >= 0 (got " +
                                std::to_string(c.weight_decay) + ")");
  if (c.rule != KfacRule::Sgd && (c.beta1 < 0 || c.beta1 >= 1 || c.beta2 < 0 ||
                                  c.beta2 >= 1 || !(c.eps > 0)))
    throw std::invalid_argument(std::string("kfac: ") + kfac_rule_name(c.rule) +
                                " needs beta1, beta2 in [0, 1) and eps > 0");
  if (c.max_factor_dim < 1)
    throw std::invalid_argument("kfac: max factor dimension must be >= 1");
  if (!(c.factor_decay >= 0 && c.factor_decay < 1))
    throw std::invalid_argument("kfac: factor decay must be in [0, 1) (got " +
                                std::to_string(c.factor_decay) + ")");
  if (c.factor_interval < 0)
    throw std::invalid_argument("kfac: factor interval must be >= 0 (got " +
                                std::to_string(c.factor_interval) + ")");
  if (c.factor_stride < 1)
    throw std::invalid_argument("kfac: factor stride must be >= 1 (got " +
                                std::to_string(c.factor_stride) + ")");
  kfac_check_factor_interval(c, c.refresh_interval);
}

/// The rows of a micro-batch's operand [rows, d] the factors read with a
/// factor stride S (docs/kfac.md "Factor stride"): of its `samples` samples,
/// rows/samples rows each, those b % S == 0: `count` blocks of `block` rows,
/// the first at row 0, each `step` rows after the last. S dividing every
/// micro-batch's samples makes every micro-batch and dp rank select the
/// same share, and the global sample indices selected those of one device.
/// Throws std::invalid_argument when the rows are not whole samples or S does
/// not divide them.
struct KfacRowStride {
  int64_t block, step, count;
  int64_t rows() const { return block * count; }
};
inline KfacRowStride kfac_row_stride(int64_t rows, int64_t samples,
                                     int64_t stride) {
  if (samples < 1 || rows % samples != 0 || samples % stride != 0)
    throw std::invalid_argument(
        "kfac: factor stride " + std::to_string(stride) + " over " +
        std::to_string(rows) + " rows of " + std::to_string(samples) +
        " samples: expected whole samples, their count divisible by the "
        "stride");
  const int64_t block = rows / samples;
  return {block, block * stride, samples / stride};
}

/// The damping added to each factor's diagonal (ASDL Kron.update_inv,
/// pipelines.md §5.2): pi = sqrt((tr(A)/dim A) / (tr(G)/dim G)),
/// A + max(sqrt(lambda) pi, 1e-7) I and G + max(sqrt(lambda) / pi, 1e-7) I.
/// pi balances the two factors so that their Kronecker product is damped by
/// about lambda whatever the scale of each. A factor with a zero or
/// non-finite mean eigenvalue gives pi = 1 (plain sqrt(lambda) on both).
struct KfacDamping {
  double pi, a, g; // pi and the values added to A's and G's diagonal
};
inline KfacDamping kfac_damping(double traceA, int64_t dimA, double traceG,
                                int64_t dimG, double damping) {
  const double meanA = traceA / double(dimA), meanG = traceG / double(dimG);
  double pi = 1.0;
  if (meanA > 0 && meanG > 0 && std::isfinite(meanA) && std::isfinite(meanG))
    pi = std::sqrt(meanA / meanG);
  const double root = std::sqrt(damping);
  return {pi, std::max(root * pi, 1e-7), std::max(root / pi, 1e-7)};
}

/// PipeFisher's refresh (pipelines.md §4.5): the curvature of step s is
/// estimated when s % K == 0 (from that step's micro-batches, a fresh estimate:
/// no running average), then reduced and inverted during the cycle's K steps
/// and installed at step s+K (kfac_install_due).
inline bool kfac_refresh_due(int64_t step, int64_t refresh_interval) {
  return step % refresh_interval == 0;
}

/// The refresh cycle of step s (kfac_refresh_due) reduces and inverts its
/// factors anywhere in steps s..s+K-1 (where the plan placed the items, the
/// rest at the end of step s+K-1); its inverses are installed at the start of
/// step s+K, before that step's preconditioning. Until the first install
/// (steps < K) the rule runs on the raw gradient. So a pipeline can spread a
/// refresh over the bubbles of K steps and every plan still computes what
/// one rank does (docs/kfac.md "Generated programs").
inline bool kfac_install_due(int64_t step, int64_t refresh_interval) {
  return step > 0 && step % refresh_interval == 0;
}

/// Whether step `step` is a factor step between refreshes: with a running
/// average (factor_decay > 0), its curvature is folded into the average at
/// the step's end (docs/kfac.md "Factor interval and running average").
/// Every refresh step is a factor step too (kfac_refresh_due), so any F <= K
/// works; with F dividing K the factor steps are evenly spaced.
inline bool kfac_factor_due(int64_t step, int64_t refresh_interval,
                            const KfacConfig &c) {
  return c.factor_decay > 0 && c.factor_interval > 0 &&
         !kfac_refresh_due(step, refresh_interval) &&
         step % c.factor_interval == 0;
}

/// The factor steps strictly between the refresh step before `step` and
/// `step` (step >= 1): what a run resumed at `step` has folded since its
/// last refresh (kfac_factor_due).
inline int64_t kfac_factor_steps_since_refresh(int64_t step,
                                               int64_t refresh_interval,
                                               const KfacConfig &c) {
  if (step < 1 || !(c.factor_decay > 0) || c.factor_interval < 1)
    return 0;
  const int64_t last = (step - 1) / refresh_interval * refresh_interval;
  return (step - 1) / c.factor_interval - last / c.factor_interval;
}

/// Throws std::invalid_argument unless a linear layer's unsplit dimensions
/// are both >= 1 (the KfacLayer constructors of both runtimes).
inline void kfac_check_layer(int64_t in, int64_t out) {
  if (in < 1 || out < 1)
    throw std::invalid_argument(
        "kfac: a linear layer needs in, out >= 1 (got " + std::to_string(in) +
        ", " + std::to_string(out) + ")");
}

/// Whether a linear layer of unsplit dimensions [out, in] stays first-order
/// (its gradient goes to the rule unpreconditioned): either factor would be
/// wider than max_factor_dim. The vocabulary head, embeddings and norms stay
/// first-order by kind (the caller's choice, as PipeFisher's ignore_modules),
/// whatever their size.
inline bool kfac_layer_is_wide(int64_t in, int64_t out, const KfacConfig &c) {
  return in > c.max_factor_dim || out > c.max_factor_dim;
}

/// How one factor's inverse was obtained at a refresh (the fallback policy):
/// fp32 Cholesky; else the same in fp64 (rounded back to fp32); else the
/// previous inverse is kept; else, at the first refresh, the layer has no
/// inverse and its gradient stays first-order until a refresh succeeds.
enum class KfacInverseOutcome { Fp32, Fp64, KeptPrevious, NoInverse };

inline KfacInverseOutcome kfac_inverse_outcome(bool fp32_ok, bool fp64_ok,
                                               bool has_previous) {
  if (fp32_ok)
    return KfacInverseOutcome::Fp32;
  if (fp64_ok)
    return KfacInverseOutcome::Fp64;
  return has_previous ? KfacInverseOutcome::KeptPrevious
                      : KfacInverseOutcome::NoInverse;
}

/// Counters over a run (per rank), for metrics.json's "info".
struct KfacStats {
  int64_t refreshes = 0;     // layer refreshes (each inverts two factors)
  int64_t inverses_fp32 = 0; // factor inverses by fp32 Cholesky
  int64_t inverses_fp64 = 0; // ... by the fp64 retry
  int64_t kept_previous = 0; // factors whose previous inverse was kept
  int64_t no_inverse = 0;    // factors left without one (layer first-order)

  void count(KfacInverseOutcome o);
};

/// KfacStats' counters by name: the refreshes, then one per
/// KfacInverseOutcome in its order.
struct KfacCounter {
  const char *name;
  int64_t KfacStats::*value;
};
inline constexpr KfacCounter kKfacCounters[] = {
    {"refreshes", &KfacStats::refreshes},
    {"inverses_fp32", &KfacStats::inverses_fp32},
    {"inverses_fp64", &KfacStats::inverses_fp64},
    {"kept_previous", &KfacStats::kept_previous},
    {"no_inverse", &KfacStats::no_inverse}};

inline void KfacStats::count(KfacInverseOutcome o) {
  ++(this->*kKfacCounters[1 + int(o)].value);
}

/// Adds the counters to a metrics "info" map as "kfac.<counter>".
inline void kfac_stats_info(const KfacStats &s,
                            std::map<std::string, std::string> &info) {
  for (const KfacCounter &c : kKfacCounters)
    info[std::string("kfac.") + c.name] = std::to_string(s.*c.value);
}

/// The scales the factor accumulation multiplies by, so that after summing
/// over micro-batches and averaging over replicas A = (1/S) sum_t a_t a_t^T
/// and G = (1/S) sum_t g_t g_t^T with g_t the gradient of the per-sample loss
/// (pipelines.md §5.1). `samples` S: the rows (tokens) this rank contributes
/// over the refresh step's micro-batches (every replica the same count).
/// `loss_scale`: the factor between the per-sample loss and the loss the
/// backward differentiates (a mean over N rows: N), since dY = g / N.
struct KfacScales {
  float a, g;
};
inline KfacScales kfac_factor_scales(int64_t samples, double loss_scale) {
  if (samples < 1)
    throw std::invalid_argument("kfac: a factor needs at least one sample row");
  return {float(1.0 / double(samples)),
          float(loss_scale * loss_scale / double(samples))};
}

/// LAMB's trust ratio ||p|| / ||u|| (1 when either norm is 0, as in LAMB and
/// apex FusedLAMB).
inline double kfac_trust_ratio(double param_norm, double update_norm) {
  return param_norm > 0 && update_norm > 0 ? param_norm / update_norm : 1.0;
}

/// Adam grafting's scale ||u|| / ||d||: the preconditioned direction d at
/// the norm of the Adam update u (0 when d is 0: no direction to take).
inline double kfac_graft_scale(double adam_norm, double direction_norm) {
  return direction_norm > 0 ? adam_norm / direction_norm : 0.0;
}

/// How a linear layer's weight is split over its tensor-parallel group
/// (docs/kfac.md "Tensor parallelism"): None (whole, or the group is one
/// rank), Out (column-parallel: W's output rows split, input X replicated,
/// dY split by columns), In (row-parallel: W's input columns split, X split by
/// columns, dY replicated).
enum class KfacSplit { None, Out, In };

/// The block of the unsplit layer's weight a rank holds: output rows
/// [o0, o0+Ol) and input columns [k0, k0+Kl). Throws std::invalid_argument
/// when the split dimension does not divide over the p ranks.
struct KfacBlock {
  int64_t o0, Ol, k0, Kl;
};
inline KfacBlock kfac_split_block(int64_t in, int64_t out, KfacSplit split,
                                  int p, int r) {
  if (split == KfacSplit::None || p == 1)
    return {0, out, 0, in};
  const int64_t dim = split == KfacSplit::Out ? out : in;
  if (dim % p)
    throw std::invalid_argument("kfac: a split dimension of " +
                                std::to_string(dim) + " does not divide over " +
                                std::to_string(p) + " ranks");
  const int64_t part = dim / p;
  if (split == KfacSplit::Out)
    return {r * part, part, 0, in};
  return {0, out, r * part, part};
}

/// Records a layer refresh's two outcomes: which inverses now exist (a kept
/// previous inverse still counts) and the counters.
inline void kfac_record_refresh(KfacInverseOutcome a, KfacInverseOutcome g,
                                bool &a_valid, bool &g_valid,
                                KfacStats &stats) {
  a_valid = a != KfacInverseOutcome::NoInverse;
  g_valid = g != KfacInverseOutcome::NoInverse;
  stats.count(a);
  stats.count(g);
  ++stats.refreshes;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_KFACRULES_H
