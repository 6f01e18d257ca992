//===- KfacRun.cpp - K-FAC in a generated CUDA program -------------------===//
#include "backends/cuda/harness/KfacRun.h"

#include "backends/cuda/kernels/Elementwise.h" // scale_inplace

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace autoddl::rt::harness {

KfacRun kfac;

namespace {

/// A communicator's NCCL handle, null where it has one rank or none (the
/// K-FAC kernels treat null as this rank alone).
ncclComm_t nccl_of(const Comm &c) { return c.size > 1 ? c.nccl : nullptr; }

/// dst[n] = src[n], device to device on compute_stream().
void copy_floats(float *dst, const float *src, int64_t n) {
  AUTODDL_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float),
                                     cudaMemcpyDeviceToDevice,
                                     compute_stream()));
}

/// A device buffer of at least n floats (grown, never shrunk; the old one
/// may still be read by queued work).
float *grown(DeviceBuffer<float> &b, int64_t n) {
  if (b.size() < n) {
    synchronize();
    b = DeviceBuffer<float>(n);
  }
  return b.data();
}

} // namespace

// A split operand (row-parallel X, column-parallel dY) is all-gathered: every
// tp rank accumulates the unsplit layer's factor.
void KfacRun::curvature_A(int layer, const act_t *x, int64_t rows) {
  if (!due_)
    return;
  KfacLayer &l = layers_[size_t(layer)];
  const int t0 = trace.begin();
  if (tp_ > 1 && specs_[size_t(layer)].split == KfacSplit::In)
    kfac_accumulate_gathered(l.A.data(), x, rows, l.in / tp_, 1.0f,
                             nccl_of(g.tp));
  else
    kfac_accumulate(l.A.data(), x, rows, l.in, 1.0f);
  trace.end(std::string("curv_A ") + specs_[size_t(layer)].name, 0, t0);
  rows_[size_t(layer)] += rows;
}

void KfacRun::curvature_G(int layer, const act_t *dy, int64_t rows) {
  if (!due_)
    return;
  KfacLayer &l = layers_[size_t(layer)];
  const int t0 = trace.begin();
  if (tp_ > 1 && specs_[size_t(layer)].split == KfacSplit::Out)
    kfac_accumulate_gathered(l.G.data(), dy, rows, l.out / tp_, 1.0f,
                             nccl_of(g.tp));
  else
    kfac_accumulate(l.G.data(), dy, rows, l.out, 1.0f);
  trace.end(std::string("curv_G ") + specs_[size_t(layer)].name, 0, t0);
}

void KfacRun::step(const std::vector<ParamSpec> &params, int64_t t) {
  // The refresh: in layer-table order on every rank holding a layer, so the
  // dp, tp and device communicators see one order.
  for (size_t i = 0; due_ && i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held)
      continue;
    KfacLayer &l = layers_[i];
    // Raw sums -> this rank's mean over its rows (G scaled back from the
    // loss's mean: every rank holding the layer saw rows_ rows of the loss).
    int replicas = std::max(1, s.weight->devices.size);
    if (s.rows_over_tp)
      replicas *= int(tp_);
    const int64_t rows = rows_[i];
    const KfacScales sc =
        kfac_factor_scales(rows, double(rows) * double(replicas * dp_));
    scale_inplace(l.A.data(), sc.a, l.A.size());
    scale_inplace(l.G.data(), sc.g, l.G.size());
    // Each factor's reduction, then its inverse, traced under the names of
    // the plan's items (reduce_A, inv_A, ...; inspect --trace).
    auto reduce = [&](DeviceBuffer<float> &F, const char *item) {
      const int t0 = trace.begin();
      if (dp_ > 1)
        kfac_factor_all_reduce_mean(F.data(), F.size(), nccl_of(g.dp));
      if (s.rows_over_tp && tp_ > 1)
        kfac_factor_all_reduce_mean(F.data(), F.size(), nccl_of(g.tp));
      if (s.weight->devices.size > 1)
        kfac_factor_all_reduce_mean(F.data(), F.size(), s.weight->devices.nccl);
      trace.end(std::string(item) + " " + s.name, 1, t0);
    };
    reduce(l.A, "reduce_A");
    reduce(l.G, "reduce_G");
    // kfac_refresh's steps, apart so that each inverse is traced.
    kfac_set_damping(l, c_.damping);
    int t0 = trace.begin();
    const KfacInverseOutcome oa = kfac_invert_factor(
        l.A_inv.data(), l.A.data(), l.in, l.damping.a, l.a_valid);
    trace.end(std::string("inv_A ") + s.name, 0, t0);
    t0 = trace.begin();
    const KfacInverseOutcome og = kfac_invert_factor(
        l.G_inv.data(), l.G.data(), l.out, l.damping.g, l.g_valid);
    trace.end(std::string("inv_G ") + s.name, 0, t0);
    kfac_record_refresh(oa, og, l.a_valid, l.g_valid, stats_);
    zero(l.A.data(), l.A.size() * int64_t(sizeof(float)));
    zero(l.G.data(), l.G.size() * int64_t(sizeof(float)));
    rows_[i] = 0;
  }
  // Preconditioning of the K-FAC layers' gradients, in place.
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held)
      continue;
    const int t0 = trace.begin();
    Param &w = *s.weight;
    float *dw = grown(dw_, w.n);
    float *db = s.bias ? grown(db_, s.bias->n) : nullptr;
    kfac_precondition_split(dw, w.grad.data(), db,
                            s.bias ? s.bias->grad.data() : nullptr, layers_[i],
                            s.transpose_weight,
                            tp_ > 1 ? s.split : KfacSplit::None, nccl_of(g.tp));
    copy_floats(w.grad.data(), dw, w.n);
    if (s.bias)
      copy_floats(s.bias->grad.data(), db, s.bias->n);
    trace.end(std::string("precond ") + s.name, 0, t0);
  }
  // The rule on every parameter (the rest first-order, as PipeFisher); both
  // refresh the act_t working copy the kernels read.
  for (const ParamSpec &ps : params) {
    Param &p = *ps.p;
    if (!p.held)
      continue;
    // LAMB's trust ratio is of the whole parameter: a tp-split one sums its
    // norms over tp.
    if (c_.rule == KfacRule::Lamb)
      kfac_lamb_step(
          p.value.data(), p.grad.data(), p.m.data(), p.v.data(), p.n, c_, t,
          tp_ > 1 && p.split_dim >= 0 ? nccl_of(g.tp) : nullptr, p.work.data());
    else
      kfac_sgd_step(p.value.data(), p.grad.data(), p.m.data(), p.n, c_, t,
                    p.work.data());
  }
}

void KfacRun::info(std::map<std::string, std::string> &m) const {
  kfac_run_info(stats_, c_, m);
}

void KfacRun::checkpoint_entries(std::vector<CheckpointEntry> &e) {
  host_inv_.resize(2 * specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    const bool held = s.weight->held;
    std::vector<float> &a = host_inv_[2 * i], &g = host_inv_[2 * i + 1];
    if (held) {
      a.resize(size_t(s.in * s.in));
      g.resize(size_t(s.out * s.out));
    }
    e.push_back({kfac_inverse_entry(s.name, 'A'), Slice::whole({s.in, s.in}),
                 held ? a.data() : nullptr});
    e.push_back({kfac_inverse_entry(s.name, 'G'), Slice::whole({s.out, s.out}),
                 held ? g.data() : nullptr});
  }
}

void KfacRun::copy_state(bool to_host) {
  for (size_t i = 0; i < specs_.size() && i < host_inv_.size() / 2; ++i) {
    if (!specs_[i].weight->held)
      continue;
    KfacLayer &l = layers_[i];
    std::vector<float> &a = host_inv_[2 * i], &g = host_inv_[2 * i + 1];
    if (to_host) {
      // A layer without an inverse is saved as zeros (no inverse is zero).
      std::fill(a.begin(), a.end(), 0.0f);
      std::fill(g.begin(), g.end(), 0.0f);
      if (l.a_valid)
        copy_to_host(a.data(), l.A_inv.data(),
                     int64_t(a.size() * sizeof(float)));
      if (l.g_valid)
        copy_to_host(g.data(), l.G_inv.data(),
                     int64_t(g.size() * sizeof(float)));
      continue;
    }
    auto nonzero = [](const std::vector<float> &v) {
      return std::any_of(v.begin(), v.end(), [](float x) { return x != 0; });
    };
    l.a_valid = nonzero(a);
    l.g_valid = nonzero(g);
    copy_to_device(l.A_inv.data(), a.data(), int64_t(a.size() * sizeof(float)));
    copy_to_device(l.G_inv.data(), g.data(), int64_t(g.size() * sizeof(float)));
  }
}

void KfacRun::release() {
  layers_.clear();
  dw_ = {};
  db_ = {};
}

} // namespace autoddl::rt::harness
