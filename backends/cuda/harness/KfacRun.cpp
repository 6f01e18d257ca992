//===- KfacRun.cpp - K-FAC in a generated CUDA program -------------------===//
#include "backends/cuda/harness/KfacRun.h"

#include "backends/common/Zero.h"              // zero_shard
#include "backends/cuda/kernels/Elementwise.h" // scale_inplace
#include "backends/cuda/kernels/Reduce.h"      // cast_to_act

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

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

void KfacRun::setup(const KfacProgram &p, const Options &o,
                    const ProgramSpec &s) {
  // A queued inversion of a previous setup may still read the layers the
  // base frees (as the CPU twin stops its worker first).
  kfac_refresh_drain();
  KfacCycleRun::setup(p, o, s);
  kfac_inverse_reserve(layers_.data(), int64_t(layers_.size()));
  mark_.assign(specs_.size(), {-1, -1});
  unresolved_.assign(specs_.size(), false);
  outcomes_.assign(2 * specs_.size(), KfacInverseOutcome::NoInverse);
  items_at_ = p.items_at;
  saves_ = p.saves;
  saved_.clear();
  // The running average's buffers (A: kAverage, kRecent, kStepSum; then G),
  // zeroed, only with a decay: without one the memory is as before.
  average_buf_.clear();
  average_buf_.resize(specs_.size());
  for (size_t i = 0; c_.factor_decay > 0 && i < specs_.size(); ++i)
    for (int k = 0; k < 6; ++k) {
      const int64_t n = (k < 3 ? layers_[i].A : layers_[i].G).size();
      average_buf_[i][size_t(k)] = DeviceBuffer<float>(n);
      zero(average_buf_[i][size_t(k)].data(), n);
    }
}

bool KfacRun::split_operand(int layer, bool g_side) const {
  return tp_ > 1 && specs_[size_t(layer)].split ==
                        (g_side ? KfacSplit::Out : KfacSplit::In);
}

void KfacRun::curvature(int layer, const act_t *v, int64_t rows, bool g_side) {
  accumulate(layer, v, rows, g_side);
}

// A split operand (row-parallel X, column-parallel dY) is all-gathered: every
// tp rank accumulates the unsplit layer's factor.
void KfacRun::accumulate_into(float *f, int layer, const act_t *v, int64_t rows,
                              bool g_side) {
  const KfacLayer &l = layers_[size_t(layer)];
  const int t0 = trace.begin();
  const int64_t dim = g_side ? l.out : l.in;
  const bool split = split_operand(layer, g_side);
  if (strided()) { // a factor stride: the selected samples' rows only
    const KfacRowStride r = row_stride(rows);
    v = kfac_select_rows(v, split ? dim / tp_ : dim, r);
    rows = r.rows();
  }
  if (split)
    kfac_accumulate_gathered(f, v, rows, dim / tp_, 1.0f, nccl_of(g.tp));
  else
    kfac_accumulate(f, v, rows, dim, 1.0f);
  trace.end(std::string(g_side ? "curv_G " : "curv_A ") +
                specs_[size_t(layer)].name,
            0, t0);
}

float *KfacRun::average(size_t i, int kind, int f) {
  return average_buf_[i][size_t(3 * f + kind)].data();
}

void KfacRun::copy(float *y, const float *x, int64_t n) {
  copy_floats(y, x, n);
}

void KfacRun::zero(float *y, int64_t n) {
  AUTODDL_CUDA_CHECK(
      cudaMemsetAsync(y, 0, size_t(n) * sizeof(float), compute_stream()));
}

void KfacRun::keep(int mb, int layer, const act_t *v, int64_t rows,
                   bool g_side) {
  const KfacLayer &l = layers_[size_t(layer)];
  int64_t width = g_side ? l.out : l.in;
  if (split_operand(layer, g_side))
    width /= tp_; // this rank's columns; accumulate gathers them
  Saved &sv = saved_[{layer, g_side, mb}];
  if (sv.v.size() < rows * width) {
    synchronize(); // the old copy may still be read by queued work
    // Allocated inside the first refresh step: an out-of-memory names them.
    const char *context = allocation_context();
    set_allocation_context("K-FAC's saved operands (curvature items the plan "
                           "put in a later step of the refresh cycle)");
    sv.v = DeviceBuffer<act_t>(rows * width);
    set_allocation_context(context);
  }
  AUTODDL_CUDA_CHECK(
      cudaMemcpyAsync(sv.v.data(), v, size_t(rows * width) * sizeof(act_t),
                      cudaMemcpyDeviceToDevice, compute_stream()));
  sv.rows = rows;
  sv.live = true;
}

void KfacRun::add_kept(int layer, int mb, bool g_side) {
  auto it = saved_.find({layer, g_side, mb});
  if (it == saved_.end() || !it->second.live)
    return;
  it->second.live = false;
  accumulate(layer, it->second.v.data(), it->second.rows, g_side);
}

void KfacRun::flush_saved(size_t layer) {
  for (auto &[key, sv] : saved_)
    if (std::get<0>(key) == int(layer) && sv.live) {
      sv.live = false;
      accumulate(int(layer), sv.v.data(), sv.rows, std::get<1>(key));
    }
}

int KfacRun::device_replicas(size_t i) const {
  return std::max(1, specs_[i].weight->devices.size);
}

void KfacRun::reduce(size_t i, int f, float scale) {
  const KfacLayerSpec &s = specs_[i];
  KfacLayer &l = layers_[i];
  DeviceBuffer<float> &F = f ? l.G : l.A;
  scale_inplace(F.data(), scale, F.size());
  fold_average(i, f, F.data(), F.size());
  // Traced under the names of the plan's items (reduce_A, reduce_G; inspect
  // --trace).
  const int t0 = trace.begin();
  if (dp_ > 1)
    kfac_factor_all_reduce_mean(F.data(), F.size(), nccl_of(g.dp));
  if (s.rows_over_tp && tp_ > 1)
    kfac_factor_all_reduce_mean(F.data(), F.size(), nccl_of(g.tp));
  if (s.weight->devices.size > 1)
    kfac_factor_all_reduce_mean(F.data(), F.size(), s.weight->devices.nccl);
  trace.end(std::string(f ? "reduce_G " : "reduce_A ") + s.name, 1, t0);
}

void KfacRun::invert(size_t i, int f, bool first) {
  // Untimed outside a step (a save): a mark after the step's trace was
  // finished would never resolve.
  mark_[i][size_t(f)] = untimed_ ? -1 : trace.mark();
  kfac_inverse_launch(layers_[i], int64_t(i), f, c_.damping, first,
                      mark_[i][size_t(f)] >= 0);
}

void KfacRun::reduce_item(int layer, bool g) {
  if (!staggered_later(size_t(layer)))
    reduce_factor(size_t(layer), g ? 1 : 0, true);
}

void KfacRun::invert_item(int layer, bool g) {
  if (!staggered_later(size_t(layer)))
    invert_factor(size_t(layer), g ? 1 : 0, true);
}

bool KfacRun::live_saved(size_t layer) const {
  return std::any_of(saved_.begin(), saved_.end(), [&](const auto &e) {
    return std::get<0>(e.first) == int(layer) && e.second.live;
  });
}

// Where no placed item of a layer can do anything after its refresh step,
// its cycle is finished at that step's end (as before the placement), not
// at the end of step s+K-1, where the install at s+K would wait for the
// inversions. The same sums in the same order: no number changes. In
// layer-table order on every rank holding a layer, after finish_cycle's.
void KfacRun::finish_unplaced() {
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!is_open(i) || !due(i) || !s.weight->held)
      continue;
    // Chimera's mirrored copies: the runtime leaves their reductions (and
    // the inversions after them) to the cycle's end; else a rank without
    // a phase (its layers' K differ) runs no item of a later step.
    const bool mirrored = s.weight->devices.size > 1;
    if (!mirrored && phase() >= 0)
      continue;
    // A saved operand is accumulated at its item (the CPU program's order).
    // A mirrored layer is reduced over both its devices, so both decide
    // alike: neither keeps operands of it (the program's table).
    if (mirrored ? !saves_ || saves_(int(i)) : live_saved(i))
      continue;
    close_cycle(i);
  }
}

void KfacRun::resolve(const std::vector<size_t> &index) {
  // The layers of `index` with launched inversions, and their slots.
  std::vector<KfacLayer *> held;
  std::vector<int64_t> slots;
  for (size_t i : index)
    if (unresolved_[i]) {
      held.push_back(&layers_[i]);
      slots.push_back(int64_t(i));
    }
  if (slots.empty())
    return;
  std::vector<KfacInverseOutcome> o(2 * slots.size());
  std::vector<KfacSpan> spans(2 * slots.size());
  kfac_inverse_finish(held.data(), slots.data(), int64_t(slots.size()),
                      o.data(), spans.data());
  for (size_t h = 0; h < slots.size(); ++h) {
    const size_t i = size_t(slots[h]);
    outcomes_[2 * i] = o[2 * h];
    outcomes_[2 * i + 1] = o[2 * h + 1];
    // The side stream's inversions, traced under the plan's item names.
    for (int f = 0; f < 2; ++f)
      trace.add_after_mark(
          std::string(f ? "inv_G " : "inv_A ") + specs_[i].name, kSideStreamTid,
          mark_[i][size_t(f)], spans[2 * h + size_t(f)].start_ms,
          spans[2 * h + size_t(f)].dur_ms);
    // The factors were kept for the fp64 retry; the next refresh sums anew.
    KfacLayer &l = layers_[i];
    kfac_zero_factors(l);
    unresolved_[i] = false;
  }
}

void KfacRun::install(const std::vector<size_t> &due) {
  resolve(due); // those resolved before (a save) are skipped
  for (size_t i : due) {
    KfacLayer &l = layers_[i];
    kfac_record_refresh(outcomes_[2 * i], outcomes_[2 * i + 1], l.a_valid,
                        l.g_valid, stats_);
    // A failed factor keeps its previous inverse (KfacRules.h's policy).
    if (l.a_next_valid)
      std::swap(l.A_inv, l.A_next);
    if (l.g_next_valid)
      std::swap(l.G_inv, l.G_next);
    // Their bf16 copies follow in stream order: this step's preconditioning
    // reads the new inverses, every earlier one the old.
    if (l.a_next_valid || l.g_next_valid)
      kfac_inverses_installed(l);
    l.a_next_valid = l.g_next_valid = false;
  }
}

void KfacRun::step(const std::vector<ParamSpec> &params, int64_t t) {
  fold_factor_steps(); // a factor step between refreshes: its sums folded
  // What is left of the cycles whose next refresh is step t: their
  // reductions on the compute stream (collectives stay on one stream in one
  // order) and their inversions queued on the side stream, installed at t.
  finish_cycle(t);
  finish_unplaced();
  finish_tail();
  // Preconditioning of the K-FAC layers' gradients, in place; Adam grafting
  // keeps the raw gradient (its moments' input) and preconditions into the
  // parameter's direction.
  const bool graft = c_.rule == KfacRule::AdamGraft;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held)
      continue;
    const KfacLayer &l = layers_[i];
    if (!l.has_inverse()) // first-order until its first install
      continue;
    const int t0 = trace.begin();
    Param &w = *s.weight;
    const bool whole = tp_ == 1 || s.split == KfacSplit::None;
    float *db = !s.bias ? nullptr
                : graft ? direction(*s.bias, t)
                        : grown(db_, s.bias->n);
    // In place where nothing is gathered (Kfac.h: dW_out may alias dW then).
    float *dw = graft   ? direction(w, t)
                : whole ? w.grad.data()
                        : grown(dw_, w.n);
    if (whole)
      kfac_precondition(dw, w.grad.data(), db,
                        s.bias ? s.bias->grad.data() : nullptr, l,
                        s.transpose_weight);
    else
      kfac_precondition_split(dw, w.grad.data(), db,
                              s.bias ? s.bias->grad.data() : nullptr, l,
                              s.transpose_weight, s.split, nccl_of(g.tp));
    if (!graft && !whole)
      copy_floats(w.grad.data(), dw, w.n);
    if (!graft && s.bias)
      copy_floats(s.bias->grad.data(), db, s.bias->n);
    trace.end(std::string("precond ") + s.name, 0, t0);
  }
  apply_rule(params, t);
}

// Every rule refreshes the act_t working copy the kernels read.
void KfacRun::rule_step(Param &p, int64_t t, bool norms_over_tp) {
  // ZeRO-1: this dp rank's shard of the padded parameter (its gradient is
  // whole, preconditioned), then the parameter all-gathered in place and its
  // act_t working copy refreshed (as zero_adamw_update); else all of it.
  const ZeroShard s =
      zero_ ? zero_shard(p.padded, g.dp.size, g.dp.rank) : ZeroShard{0, p.n};
  float *value = p.value.data() + s.offset;
  const float *grad = p.grad.data() + s.offset;
  act_t *work = zero_ ? nullptr : p.work.data();
  ncclComm_t norms = norms_over_tp ? nccl_of(g.tp) : nullptr;
  if (c_.rule == KfacRule::Lamb)
    kfac_lamb_step(value, grad, p.m.data(), p.v.data(), s.size, c_, t, norms,
                   work, zero_ ? nccl_of(g.dp) : nullptr);
  else if (c_.rule == KfacRule::AdamGraft) {
    const float *d = direction_.at(p, t);
    kfac_adam_graft_step(value, grad, d ? d + s.offset : nullptr, p.m.data(),
                         p.v.data(), s.size, c_, t, norms, work,
                         zero_ ? nccl_of(g.dp) : nullptr);
  } else
    kfac_sgd_step(value, grad, p.m.data(), s.size, c_, t, work);
  if (zero_) {
    all_gather_flat(p.value.data(), value, s.size, g.dp);
    if (p.work.data())
      cast_to_act(p.work.data(), p.value.data(), p.padded);
  }
}

void KfacRun::info(std::map<std::string, std::string> &m) const {
  kfac_run_info(stats_, c_, refresh_, m);
  m["kfac.precondition"] = kfac_precondition_name(); // bf16, tf32 or fp32
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
  // With a decay: the running averages and their factor steps since the
  // last refresh (A's kAverage, kRecent, then G's), as the CPU program.
  host_avg_.assign(c_.factor_decay > 0 ? 4 * specs_.size() : 0, {});
  for (size_t j = 0; j < host_avg_.size(); ++j) {
    const KfacLayerSpec &s = specs_[j / 4];
    const int f = int(j % 4) / 2;
    const int64_t d = f ? s.out : s.in;
    if (s.weight->held)
      host_avg_[j].resize(size_t(d * d));
    e.push_back({kfac_average_entry(s.name, f ? 'G' : 'A', j % 2 == 1),
                 Slice::whole({d, d}),
                 s.weight->held ? host_avg_[j].data() : nullptr});
  }
}

// Saved: the inverses in use and the ones a refresh computed but has not
// installed yet (zeros: none), so that a run resumed mid-cycle installs them
// at the same step as the uninterrupted run.
void KfacRun::copy_state(bool to_host) {
  if (to_host) {
    // A save mid-cycle: the open cycles finished (collectives on every
    // rank) and their inversions waited for, fp64 retries decided; their
    // launches untimed (the step's trace is finished).
    untimed_ = true;
    finish_cycle(-1);
    untimed_ = false;
    std::vector<size_t> all(specs_.size());
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = i;
    resolve(all);
  }
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
        if (slots[k].valid && (k < 2 || cycle_[i].waiting))
          copy_to_host(h.data(), slots[k].dev.data(), bytes);
        continue;
      }
      slots[k].valid =
          std::any_of(h.begin(), h.end(), [](float x) { return x != 0; });
      copy_to_device(slots[k].dev.data(), h.data(), bytes);
    }
    for (size_t j = 4 * i; j < 4 * i + 4 && j < host_avg_.size(); ++j) {
      float *dev = average(i, j % 2 == 1 ? kRecent : kAverage, int(j % 4) / 2);
      const int64_t bytes = int64_t(host_avg_[j].size() * sizeof(float));
      if (to_host)
        copy_to_host(host_avg_[j].data(), dev, bytes);
      else
        copy_to_device(dev, host_avg_[j].data(), bytes);
    }
    if (to_host)
      continue;
    kfac_inverses_installed(l); // the loaded inverses in use
    loaded(i, l.a_next_valid || l.g_next_valid);
    if (i < host_avg_.size() / 4) {
      auto nonzero = [](const std::vector<float> &v) {
        return std::any_of(v.begin(), v.end(), [](float x) { return x != 0; });
      };
      loaded_average(i, nonzero(host_avg_[4 * i]),
                     nonzero(host_avg_[4 * i + 2]));
    }
    unresolved_[i] = false;
    // The outcome counters of a loaded refresh: fp32 where it has an inverse.
    outcomes_[2 * i] = kfac_inverse_outcome(l.a_next_valid, false, l.a_valid);
    outcomes_[2 * i + 1] =
        kfac_inverse_outcome(l.g_next_valid, false, l.g_valid);
  }
}

void KfacRun::release() {
  kfac_refresh_drain(); // its buffers are the layers'
  layers_.clear();
  saved_.clear();
  direction_.of.clear();
  dw_ = {};
  db_ = {};
}

// Sized as the parameter's buffers and zeroed once, so a ZeRO shard of the
// padded parameter reads the padding's zeros.
float *KfacRun::direction(const Param &p, int64_t t) {
  auto &d = direction_.of[&p];
  if (d.d.size() < p.device_n) {
    d.d = DeviceBuffer<float>(p.device_n);
    zero(d.d.data(), p.device_n);
  }
  d.t = t;
  return d.d.data();
}

} // namespace autoddl::rt::harness
