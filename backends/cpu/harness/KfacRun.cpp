//===- KfacRun.cpp - K-FAC in a generated CPU program --------------------===//
#include "backends/cpu/harness/KfacRun.h"

#include "backends/cpu/Collectives.h" // set_recv_wait_hook

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace autoddl::rt::harness {

KfacRun kfac;

// A split operand (row-parallel X, column-parallel dY) is all-gathered: every
// tp rank accumulates the unsplit layer's factor.
void KfacRun::curvature(int layer, const float *v, int64_t rows, bool g_side) {
  if (!due_)
    return;
  if (fill_waits_ && local_curvature(layer, g_side)) {
    Queued q(Queued::Curvature, layer, g_side);
    q.v = v;
    q.rows = rows;
    queue_.push_back(std::move(q));
    return;
  }
  drain();
  accumulate(layer, v, rows, g_side);
}

bool KfacRun::local_curvature(int layer, bool g_side) const {
  return !(tp_ > 1 && specs_[size_t(layer)].split ==
                          (g_side ? KfacSplit::Out : KfacSplit::In));
}

// A tp-split layer's reduction may accumulate saved curvature of its split
// side (an all-gather over tp): never local, as queued items run at times
// that differ between ranks.
bool KfacRun::local_refresh(size_t i) const {
  const KfacLayerSpec &s = specs_[i];
  return !(dp_ > 1 || (tp_ > 1 && (s.rows_over_tp || s.split != KfacSplit::None)) ||
           s.weight->devices != MPI_COMM_NULL);
}

void KfacRun::run_item(Queued &q) {
  const double t0 = trace.now_us();
  switch (q.kind) {
  case Queued::Curvature:
    accumulate(q.layer, q.copy.empty() ? q.v : q.copy.data(), q.rows, q.g);
    break;
  case Queued::CurvatureSaved:
    curvature_saved_now(q.layer, q.mb, q.g);
    break;
  case Queued::Reduce:
    reduce_factor(size_t(q.layer), q.g ? 1 : 0, true);
    break;
  case Queued::Invert:
    invert_factor(size_t(q.layer), q.g ? 1 : 0, true);
    break;
  }
  seconds_[{int(q.kind == Queued::CurvatureSaved ? Queued::Curvature : q.kind),
            q.layer, q.g}] = (trace.now_us() - t0) * 1e-6;
}

// The first item, in queue order, whose layer has no earlier item queued and
// whose last duration (+5 %, PipeFisher's margin) fits the budget; an item
// never timed yet fits (it is timed now).
bool KfacRun::run_queued(double budget_s) {
  std::vector<int> blocked;
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (std::find(blocked.begin(), blocked.end(), it->layer) != blocked.end())
      continue;
    auto t = seconds_.find(
        {int(it->kind == Queued::CurvatureSaved ? Queued::Curvature : it->kind),
         it->layer, it->g});
    if (t != seconds_.end() && t->second * 1.05 > budget_s) {
      blocked.push_back(it->layer);
      continue;
    }
    Queued q = std::move(*it);
    queue_.erase(it);
    run_item(q);
    return true;
  }
  return false;
}

void KfacRun::drain() {
  while (!queue_.empty()) {
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    run_item(q);
  }
}

void KfacRun::end_schedule() {
  for (Queued &q : queue_)
    if (q.kind == Queued::Curvature && q.copy.empty()) {
      const KfacLayer &l = layers_[size_t(q.layer)];
      q.copy.assign(q.v, q.v + q.rows * (q.g ? l.out : l.in));
      q.v = nullptr;
    }
}

namespace {
bool run_queued_kfac_item(double budget_s) {
  return kfac.run_queued(budget_s);
}
} // namespace

void KfacRun::save(int mb, int layer, const float *v, int64_t rows,
                   bool g_side) {
  if (!due_)
    return;
  const KfacLayer &l = layers_[size_t(layer)];
  int64_t width = g_side ? l.out : l.in;
  if (tp_ > 1 &&
      specs_[size_t(layer)].split == (g_side ? KfacSplit::Out : KfacSplit::In))
    width /= tp_; // this rank's columns; accumulate gathers them
  Saved &s = saved_[{layer, g_side, mb}];
  s.v.assign(v, v + rows * width);
  s.rows = rows;
}

void KfacRun::curvature_saved(int layer, int mb, bool g_side) {
  if (fill_waits_ && local_curvature(layer, g_side)) {
    Queued q(Queued::CurvatureSaved, layer, g_side);
    q.mb = mb;
    queue_.push_back(std::move(q));
    return;
  }
  drain();
  curvature_saved_now(layer, mb, g_side);
}

void KfacRun::curvature_saved_now(int layer, int mb, bool g_side) {
  auto it = saved_.find({layer, g_side, mb});
  if (!open_ || it == saved_.end())
    return;
  accumulate(layer, it->second.v.data(), it->second.rows, g_side);
  saved_.erase(it);
}

void KfacRun::flush_saved() {
  for (auto &[key, s] : saved_)
    accumulate(std::get<0>(key), s.v.data(), s.rows, std::get<1>(key));
  saved_.clear();
}

void KfacRun::accumulate(int layer, const float *v, int64_t rows,
                         bool g_side) {
  KfacLayer &l = layers_[size_t(layer)];
  const double t0 = trace.now_us();
  float *f = g_side ? l.G.data() : l.A.data();
  const int64_t dim = g_side ? l.out : l.in;
  if (!local_curvature(layer, g_side)) // a split operand: gathered over tp
    kfac_accumulate_gathered(f, v, rows, dim / tp_, 1.0f, g.tp);
  else
    kfac_accumulate(f, v, rows, dim, 1.0f);
  trace.end(std::string(g_side ? "curv_G " : "curv_A ") +
                specs_[size_t(layer)].name,
            0, t0);
  if (!g_side) // one count per row, not per factor
    rows_[size_t(layer)] += rows;
}

void KfacRun::setup(const KfacProgram &p, const Options &o,
                    const ProgramSpec &s) {
  KfacRunBase::setup(p, o, s);
  const char *fill = std::getenv("AUTODDL_KFAC_FILL");
  // waits by default: measured, the fixed places stall the pipeline where the
  // run's bubbles differ from the plan's (docs/kfac.md "Wait filling").
  const std::string mode = fill ? fill : "waits";
  if (mode != "placed" && mode != "waits")
    throw std::invalid_argument(
        "AUTODDL_KFAC_FILL: expected placed or waits, got \"" + mode + "\"");
  fill_waits_ = mode == "waits";
  queue_.clear();
  set_recv_wait_hook(fill_waits_ ? &run_queued_kfac_item : nullptr);
  pending_.assign(specs_.size(), Pending{});
  for (size_t i = 0; i < specs_.size(); ++i) {
    pending_[i].A_inv.assign(layers_[i].A_inv.size(), 0.0f);
    pending_[i].G_inv.assign(layers_[i].G_inv.size(), 0.0f);
  }
  open_ = false;
}

void KfacRun::begin_step(int64_t step) {
  step_ = step;
  KfacRunBase::begin_step(step);
  if (kfac_install_due(step, c_.refresh_interval)) {
    finish_cycle(); // already done at the previous step's end, or by a save
    for (size_t i = 0; i < specs_.size(); ++i) {
      Pending &p = pending_[i];
      KfacLayer &l = layers_[i];
      if (!specs_[i].weight->held || !p.present)
        continue;
      std::swap(l.A_inv, p.A_inv);
      std::swap(l.G_inv, p.G_inv);
      l.a_valid = p.a_valid;
      l.g_valid = p.g_valid;
      p.present = false;
    }
  }
  if (!due_)
    return;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!specs_[i].weight->held)
      continue;
    Pending &p = pending_[i];
    const KfacLayer &l = layers_[i];
    p.A_inv = l.A_inv;
    p.G_inv = l.G_inv;
    p.a_valid = l.a_valid;
    p.g_valid = l.g_valid;
    p.present = true;
    p.reduced[0] = p.reduced[1] = p.inverted[0] = p.inverted[1] = false;
    p.damped = false;
  }
  open_ = true;
}

// Raw sums -> this rank's mean over its rows (G scaled back from the loss's
// mean: every rank holding the layer saw rows_ rows of the loss), then the
// mean over every rank holding the layer. Assumes the layer's curvature of
// the cycle has run on this rank (codegen places the items after it).
bool KfacRun::reduce_factor(size_t i, int f, bool bubble) {
  const KfacLayerSpec &s = specs_[i];
  Pending &p = pending_[i];
  if (!open_ || !s.weight->held || p.reduced[f])
    return true;
  // Chimera's copies live on two pipeline devices with different lists: one
  // canonical order only at the step end.
  if (bubble && s.weight->devices != MPI_COMM_NULL)
    return false;
  // Saved curvature of this layer not accumulated yet (an item the placement
  // put after this one): now, in the canonical order, before rows_ is read.
  for (auto it = saved_.begin(); it != saved_.end();)
    if (std::get<0>(it->first) == int(i)) {
      accumulate(int(i), it->second.v.data(), it->second.rows,
                 std::get<1>(it->first));
      it = saved_.erase(it);
    } else {
      ++it;
    }
  KfacLayer &l = layers_[i];
  int replicas = 1;
  if (s.weight->devices != MPI_COMM_NULL)
    MPI_Comm_size(s.weight->devices, &replicas);
  if (s.rows_over_tp)
    replicas *= int(tp_);
  const int64_t rows = rows_[i];
  const KfacScales sc =
      kfac_factor_scales(rows, double(rows) * double(replicas * dp_));
  std::vector<float> &F = f ? l.G : l.A;
  for (float &v : F)
    v *= f ? sc.g : sc.a;
  // Traced under the plan's item names (reduce_A, ...; inspect --trace).
  const double t0 = trace.now_us();
  const int64_t n = int64_t(F.size());
  if (dp_ > 1)
    kfac_factor_all_reduce_mean(F.data(), n, g.dp);
  if (s.rows_over_tp && tp_ > 1)
    kfac_factor_all_reduce_mean(F.data(), n, g.tp);
  if (s.weight->devices != MPI_COMM_NULL)
    kfac_factor_all_reduce_mean(F.data(), n, s.weight->devices);
  trace.end(std::string(f ? "reduce_G " : "reduce_A ") + s.name, 1, t0);
  p.reduced[f] = true;
  return true;
}

// Into the pending inverse, so the installed one stays in use until s+K.
void KfacRun::invert_factor(size_t i, int f, bool bubble) {
  const KfacLayerSpec &s = specs_[i];
  Pending &p = pending_[i];
  if (!open_ || !s.weight->held || p.inverted[f])
    return;
  // π needs both factors reduced; a reduction that is a collective runs only
  // where its own item (or the step end) puts it.
  const bool collective = dp_ > 1 || (s.rows_over_tp && tp_ > 1) ||
                          s.weight->devices != MPI_COMM_NULL;
  for (int h : {0, 1})
    if (!p.reduced[h] && (bubble && collective))
      return;
  for (int h : {0, 1})
    if (!reduce_factor(i, h, bubble))
      return;
  KfacLayer &l = layers_[i];
  if (!p.damped) {
    kfac_set_damping(l, c_.damping);
    p.damped = true;
  }
  const double t0 = trace.now_us();
  p.outcome[f] = f ? kfac_invert_factor(p.G_inv.data(), l.G.data(), l.out,
                                        l.damping.g, p.g_valid)
                   : kfac_invert_factor(p.A_inv.data(), l.A.data(), l.in,
                                        l.damping.a, p.a_valid);
  trace.end(std::string(f ? "inv_G " : "inv_A ") + s.name, 0, t0);
  p.inverted[f] = true;
  if (p.inverted[0] && p.inverted[1]) {
    kfac_record_refresh(p.outcome[0], p.outcome[1], p.a_valid, p.g_valid,
                        stats_);
    std::fill(l.A.begin(), l.A.end(), 0.0f);
    std::fill(l.G.begin(), l.G.end(), 0.0f);
    rows_[i] = 0;
  }
}

void KfacRun::reduce_item(int layer, bool g) {
  if (fill_waits_ && local_refresh(size_t(layer))) {
    queue_.push_back(Queued(Queued::Reduce, layer, g));
    return;
  }
  drain();
  reduce_factor(size_t(layer), g ? 1 : 0, true);
}

void KfacRun::invert_item(int layer, bool g) {
  if (fill_waits_ && local_refresh(size_t(layer))) {
    queue_.push_back(Queued(Queued::Invert, layer, g));
    return;
  }
  drain();
  invert_factor(size_t(layer), g ? 1 : 0, true);
}

// What the bubbles left: in layer-table order on every rank holding a layer,
// so the dp, tp and device communicators see one order.
void KfacRun::finish_cycle() {
  drain();
  if (!open_)
    return;
  flush_saved();
  for (size_t i = 0; i < specs_.size(); ++i) {
    reduce_factor(i, 0, false);
    reduce_factor(i, 1, false);
    invert_factor(i, 0, false);
    invert_factor(i, 1, false);
  }
  open_ = false;
}

void KfacRun::step(const std::vector<ParamSpec> &params, int64_t t) {
  // The cycle's last step (t = step + 1): what is left of it, so that its
  // inverses are ready to install at the next step.
  if (t % c_.refresh_interval == 0)
    finish_cycle();
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
    kfac_precondition_split(
        dw.data(), w.grad.data(), s.bias ? db.data() : nullptr,
        s.bias ? s.bias->grad.data() : nullptr, layers_[i], s.transpose_weight,
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
      kfac_lamb_step(p.value.data(), p.grad.data(), p.m.data(), p.v.data(), p.n,
                     c_, t, tp_ > 1 && p.split_dim >= 0 ? g.tp : MPI_COMM_NULL);
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
  finish_cycle(); // a save mid-cycle: what resuming needs is its inverses
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    KfacLayer &l = layers_[i];
    Pending &p = pending_[i];
    const bool held = s.weight->held;
    e.push_back({kfac_inverse_entry(s.name, 'A'), Slice::whole({s.in, s.in}),
                 held ? l.A_inv.data() : nullptr});
    e.push_back({kfac_inverse_entry(s.name, 'G'), Slice::whole({s.out, s.out}),
                 held ? l.G_inv.data() : nullptr});
    e.push_back({kfac_pending_inverse_entry(s.name, 'A'),
                 Slice::whole({s.in, s.in}), held ? p.A_inv.data() : nullptr});
    e.push_back({kfac_pending_inverse_entry(s.name, 'G'),
                 Slice::whole({s.out, s.out}),
                 held ? p.G_inv.data() : nullptr});
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
      Pending &p = pending_[i];
      p.a_valid = nonzero(p.A_inv);
      p.g_valid = nonzero(p.G_inv);
      p.present = p.a_valid || p.g_valid; // installed at the next s+K
    }
  open_ = false;
}

} // namespace autoddl::rt::harness
