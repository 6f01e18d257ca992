//===- KfacRun.cpp - K-FAC in a generated CPU program --------------------===//
#include "backends/cpu/harness/KfacRun.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace autoddl::rt::harness {

KfacRun kfac;

// A split operand (row-parallel X, column-parallel dY) is all-gathered: every
// tp rank accumulates the unsplit layer's factor.
void KfacRun::curvature_A(int layer, const float *x, int64_t rows) {
  if (!due_)
    return;
  KfacLayer &l = layers_[size_t(layer)];
  const double t0 = trace.now_us();
  if (tp_ > 1 && specs_[size_t(layer)].split == KfacSplit::In)
    kfac_accumulate_gathered(l.A.data(), x, rows, l.in / tp_, 1.0f, g.tp);
  else
    kfac_accumulate(l.A.data(), x, rows, l.in, 1.0f);
  trace.end(std::string("curv_A ") + specs_[size_t(layer)].name, 0, t0);
  rows_[size_t(layer)] += rows;
}

void KfacRun::curvature_G(int layer, const float *dy, int64_t rows) {
  if (!due_)
    return;
  KfacLayer &l = layers_[size_t(layer)];
  const double t0 = trace.now_us();
  if (tp_ > 1 && specs_[size_t(layer)].split == KfacSplit::Out)
    kfac_accumulate_gathered(l.G.data(), dy, rows, l.out / tp_, 1.0f, g.tp);
  else
    kfac_accumulate(l.G.data(), dy, rows, l.out, 1.0f);
  trace.end(std::string("curv_G ") + specs_[size_t(layer)].name, 0, t0);
}

void KfacRun::step(const std::vector<ParamSpec> &params, int64_t t) {
  // The refresh: in layer-table order on every rank holding a layer, so the
  // dp and device communicators see one order.
  for (size_t i = 0; due_ && i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held)
      continue;
    KfacLayer &l = layers_[i];
    // Raw sums -> this rank's mean over its rows (G scaled back from the
    // loss's mean: every rank holding the layer saw rows_ rows of the loss).
    int replicas = 1;
    if (s.weight->devices != MPI_COMM_NULL) {
      int n = 1;
      MPI_Comm_size(s.weight->devices, &n);
      replicas = n;
    }
    if (s.rows_over_tp)
      replicas *= int(tp_);
    const int64_t rows = rows_[i];
    const KfacScales sc =
        kfac_factor_scales(rows, double(rows) * double(replicas * dp_));
    for (float &v : l.A)
      v *= sc.a;
    for (float &v : l.G)
      v *= sc.g;
    // Each factor's reduction, then its inverse, traced under the names of
    // the plan's items (reduce_A, inv_A, ...; inspect --trace).
    auto reduce = [&](std::vector<float> &F, const char *item) {
      const double t0 = trace.now_us();
      const int64_t n = int64_t(F.size());
      if (dp_ > 1)
        kfac_factor_all_reduce_mean(F.data(), n, g.dp);
      if (s.rows_over_tp && tp_ > 1)
        kfac_factor_all_reduce_mean(F.data(), n, g.tp);
      if (s.weight->devices != MPI_COMM_NULL)
        kfac_factor_all_reduce_mean(F.data(), n, s.weight->devices);
      trace.end(std::string(item) + " " + s.name, 1, t0);
    };
    reduce(l.A, "reduce_A");
    reduce(l.G, "reduce_G");
    // kfac_refresh's steps, apart so that each inverse is traced.
    kfac_set_damping(l, c_.damping);
    double t0 = trace.now_us();
    const KfacInverseOutcome oa = kfac_invert_factor(
        l.A_inv.data(), l.A.data(), l.in, l.damping.a, l.a_valid);
    trace.end(std::string("inv_A ") + s.name, 0, t0);
    t0 = trace.now_us();
    const KfacInverseOutcome og = kfac_invert_factor(
        l.G_inv.data(), l.G.data(), l.out, l.damping.g, l.g_valid);
    trace.end(std::string("inv_G ") + s.name, 0, t0);
    kfac_record_refresh(oa, og, l.a_valid, l.g_valid, stats_);
    std::fill(l.A.begin(), l.A.end(), 0.0f);
    std::fill(l.G.begin(), l.G.end(), 0.0f);
    rows_[i] = 0;
  }
  // Preconditioning of the K-FAC layers' gradients, in place.
  std::vector<float> dw, db;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held)
      continue;
    const double t0 = trace.now_us();
    Param &w = *s.weight;
    dw.resize(size_t(w.n));
    db.resize(s.bias ? size_t(s.bias->n) : 0);
    kfac_precondition_split(dw.data(), w.grad.data(),
                            s.bias ? db.data() : nullptr,
                            s.bias ? s.bias->grad.data() : nullptr, layers_[i],
                            s.transpose_weight,
                            tp_ > 1 ? s.split : KfacSplit::None, g.tp);
    std::memcpy(w.grad.data(), dw.data(), dw.size() * sizeof(float));
    if (s.bias)
      std::memcpy(s.bias->grad.data(), db.data(), db.size() * sizeof(float));
    trace.end(std::string("precond ") + s.name, 0, t0);
  }
  // The rule on every parameter (the rest first-order, as PipeFisher).
  for (const ParamSpec &ps : params) {
    Param &p = *ps.p;
    if (!p.held)
      continue;
    // LAMB's trust ratio is of the whole parameter: a tp-split one sums its
    // norms over tp.
    if (c_.rule == KfacRule::Lamb)
      kfac_lamb_step(p.value.data(), p.grad.data(), p.m.data(), p.v.data(),
                     p.n, c_, t,
                     tp_ > 1 && p.split_dim >= 0 ? g.tp : MPI_COMM_NULL);
    else
      kfac_sgd_step(p.value.data(), p.grad.data(), p.m.data(), p.n, c_, t);
  }
}

void KfacRun::info(std::map<std::string, std::string> &m) const {
  kfac_run_info(stats_, c_, m);
}

// An inverse that was never obtained is all zeros (the vectors start zeroed
// and a failed inversion leaves them untouched): saved as such, and a loaded
// one that is not zero is in use.
void KfacRun::checkpoint_entries(std::vector<CheckpointEntry> &e) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    KfacLayer &l = layers_[i];
    const bool held = s.weight->held;
    e.push_back({kfac_inverse_entry(s.name, 'A'), Slice::whole({s.in, s.in}),
                 held ? l.A_inv.data() : nullptr});
    e.push_back({kfac_inverse_entry(s.name, 'G'), Slice::whole({s.out, s.out}),
                 held ? l.G_inv.data() : nullptr});
  }
}

void KfacRun::restored() {
  auto nonzero = [](const std::vector<float> &v) {
    return std::any_of(v.begin(), v.end(), [](float x) { return x != 0; });
  };
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].weight->held) {
      layers_[i].a_valid = nonzero(layers_[i].A_inv);
      layers_[i].g_valid = nonzero(layers_[i].G_inv);
    }
}

} // namespace autoddl::rt::harness
