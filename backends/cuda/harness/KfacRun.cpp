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
void KfacRun::curvature(int layer, const act_t *v, int64_t rows, bool g_side) {
  if (!due(size_t(layer)))
    return;
  KfacLayer &l = layers_[size_t(layer)];
  const int t0 = trace.begin();
  float *f = g_side ? l.G.data() : l.A.data();
  const int64_t dim = g_side ? l.out : l.in;
  if (tp_ > 1 &&
      specs_[size_t(layer)].split == (g_side ? KfacSplit::Out : KfacSplit::In))
    kfac_accumulate_gathered(f, v, rows, dim / tp_, 1.0f, nccl_of(g.tp));
  else
    kfac_accumulate(f, v, rows, dim, 1.0f);
  trace.end(std::string(g_side ? "curv_G " : "curv_A ") +
                specs_[size_t(layer)].name,
            0, t0);
  if (!g_side) // one count per row, not per factor
    rows_[size_t(layer)] += rows;
}

// Each layer on its own K (docs/kfac.md "Refresh"; the CPU KfacRun keeps the
// same rule): step s + K installs the inverses of its refresh at step s.
void KfacRun::begin_step(int64_t step) {
  install(step);
  KfacRunBase::begin_step(step);
}

std::vector<KfacLayer *> KfacRun::layers_of(const std::vector<size_t> &index) {
  std::vector<KfacLayer *> out;
  for (size_t i : index)
    out.push_back(&layers_[i]);
  return out;
}

void KfacRun::resolve() {
  outcomes_.resize(2 * specs_.size());
  std::vector<KfacLayer *> held = layers_of(launched_);
  std::vector<KfacInverseOutcome> o(2 * held.size());
  if (!kfac_refresh_finish(held.data(), int64_t(held.size()), o.data()))
    return;
  // The side stream's inversions, traced under the plan's item names.
  const std::vector<KfacSpan> spans = kfac_refresh_spans();
  const std::vector<size_t> launched = std::move(launched_);
  launched_.clear();
  for (size_t h = 0; h < launched.size(); ++h) {
    const size_t i = launched[h];
    outcomes_[2 * i] = o[2 * h];
    outcomes_[2 * i + 1] = o[2 * h + 1];
    for (size_t f = 0; f < 2 && 2 * h + f < spans.size(); ++f)
      trace.add_after_mark(std::string(f ? "inv_G " : "inv_A ") +
                               specs_[i].name,
                           kSideStreamTid, launch_mark_,
                           spans[2 * h + f].start_ms, spans[2 * h + f].dur_ms);
    // The factors were kept for the fp64 retry; the next refresh sums anew.
    KfacLayer &l = layers_[i];
    zero(l.A.data(), l.A.size() * int64_t(sizeof(float)));
    zero(l.G.data(), l.G.size() * int64_t(sizeof(float)));
  }
}

void KfacRun::install(int64_t step) {
  bool any = false;
  for (size_t i = 0; i < specs_.size(); ++i)
    any = any || (pending_[i] && kfac_install_due(step, refresh_[i]));
  if (!any)
    return;
  resolve(); // a no-op when that refresh was resolved before
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!pending_[i] || !kfac_install_due(step, refresh_[i]))
      continue;
    pending_[i] = false;
    KfacLayer &l = layers_[i];
    kfac_record_refresh(outcomes_[2 * i], outcomes_[2 * i + 1], l.a_valid,
                        l.g_valid, stats_);
    // A failed factor keeps its previous inverse (KfacRules.h's policy).
    if (l.a_next_valid)
      std::swap(l.A_inv, l.A_next);
    if (l.g_next_valid)
      std::swap(l.G_inv, l.G_next);
    l.a_next_valid = l.g_next_valid = false;
  }
}

void KfacRun::step(const std::vector<ParamSpec> &params, int64_t t) {
  // The refresh: in layer-table order on every rank holding a layer, so the
  // dp, tp and device communicators see one order. The reductions run here,
  // on the compute stream (collectives stay on one stream in one order); the
  // inversions are queued on the side stream and installed K steps later.
  // A layer refreshing now has nothing pending (install() ran at this step's
  // start); another layer's refresh still on the side stream (a shorter or
  // longer K) is resolved first: one launch at a time.
  std::vector<size_t> launching;
  for (size_t i = 0; due_ && i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held || !due(i))
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
    // Each factor's reduction, traced under the names of the plan's items
    // (reduce_A, reduce_G; inspect --trace).
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
    launching.push_back(i);
    rows_[i] = 0;
  }
  if (!launching.empty()) {
    resolve();
    launch_mark_ = trace.mark();
    std::vector<KfacLayer *> launch = layers_of(launching);
    kfac_refresh_launch(launch.data(), int64_t(launch.size()), c_.damping,
                        launch_mark_ >= 0);
    launched_ = std::move(launching);
    for (size_t i : launched_)
      pending_[i] = true;
  }
  // Preconditioning of the K-FAC layers' gradients, in place.
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held)
      continue;
    const KfacLayer &l = layers_[i];
    if (!l.has_inverse()) // first-order until its first install
      continue;
    const int t0 = trace.begin();
    Param &w = *s.weight;
    float *db = s.bias ? grown(db_, s.bias->n) : nullptr;
    if (tp_ == 1 || s.split == KfacSplit::None) {
      // In place (Kfac.h: dW_out may alias dW when nothing is gathered).
      kfac_precondition(w.grad.data(), w.grad.data(), db,
                        s.bias ? s.bias->grad.data() : nullptr, l,
                        s.transpose_weight);
    } else {
      float *dw = grown(dw_, w.n);
      kfac_precondition_split(dw, w.grad.data(), db,
                              s.bias ? s.bias->grad.data() : nullptr, l,
                              s.transpose_weight, s.split, nccl_of(g.tp));
      copy_floats(w.grad.data(), dw, w.n);
    }
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
  kfac_run_info(stats_, c_, refresh_, m);
}

void KfacRun::checkpoint_entries(std::vector<CheckpointEntry> &e) {
  host_inv_.resize(4 * specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    const bool held = s.weight->held;
    for (int k = 0; k < 4; ++k) {
      const bool isA = k % 2 == 0, next = k >= 2;
      const int64_t d = isA ? s.in : s.out;
      std::vector<float> &h = host_inv_[4 * i + size_t(k)];
      if (held)
        h.resize(size_t(d * d));
      std::string name = kfac_inverse_entry(s.name, isA ? 'A' : 'G');
      if (next)
        name += "_pending";
      e.push_back(
          {std::move(name), Slice::whole({d, d}), held ? h.data() : nullptr});
    }
  }
}

// Saved: the inverses in use and the ones a refresh computed but has not
// installed yet (zeros: none), so that a run resumed mid-cycle installs them
// at the same step as the uninterrupted run.
void KfacRun::copy_state(bool to_host) {
  if (to_host)
    resolve(); // the pending work done, its fp64 retries decided
  outcomes_.resize(2 * specs_.size());
  pending_.resize(specs_.size(), false);
  for (size_t i = 0; i < specs_.size() && i < host_inv_.size() / 4; ++i) {
    if (!specs_[i].weight->held)
      continue;
    KfacLayer &l = layers_[i];
    struct Slot {
      DeviceBuffer<float> &dev;
      bool &valid;
    } slots[4] = {{l.A_inv, l.a_valid},
                  {l.G_inv, l.g_valid},
                  {l.A_next, l.a_next_valid},
                  {l.G_next, l.g_next_valid}};
    for (int k = 0; k < 4; ++k) {
      std::vector<float> &h = host_inv_[4 * i + size_t(k)];
      const int64_t bytes = int64_t(h.size() * sizeof(float));
      if (to_host) {
        // A missing inverse is saved as zeros (no inverse is zero).
        std::fill(h.begin(), h.end(), 0.0f);
        if (slots[k].valid && (k < 2 || pending_[i]))
          copy_to_host(h.data(), slots[k].dev.data(), bytes);
        continue;
      }
      slots[k].valid =
          std::any_of(h.begin(), h.end(), [](float x) { return x != 0; });
      copy_to_device(slots[k].dev.data(), h.data(), bytes);
    }
    if (to_host)
      continue;
    pending_[i] = l.a_next_valid || l.g_next_valid;
    // The outcome counters of a loaded refresh: fp32 where it has an inverse.
    outcomes_[2 * i] = kfac_inverse_outcome(l.a_next_valid, false, l.a_valid);
    outcomes_[2 * i + 1] =
        kfac_inverse_outcome(l.g_next_valid, false, l.g_valid);
  }
}

void KfacRun::release() {
  kfac_refresh_drain(); // its buffers are the layers'
  layers_.clear();
  dw_ = {};
  db_ = {};
}

} // namespace autoddl::rt::harness
