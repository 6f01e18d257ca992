//===- KfacRun.cpp - K-FAC in a generated CPU program --------------------===//
#include "backends/cpu/harness/KfacRun.h"

#include "backends/common/Zero.h"     // zero_shard
#include "backends/cpu/Collectives.h" // set_recv_wait_hook, all_gather_forward

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sched.h>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

// OpenBLAS's thread count, where OpenBLAS is the BLAS (weak: another BLAS
// leaves it null).
extern "C" int openblas_get_num_threads(void) __attribute__((weak));
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace autoddl::rt::harness {

KfacRun kfac;

// A split operand (row-parallel X, column-parallel dY) is all-gathered: every
// tp rank accumulates the unsplit layer's factor.
void KfacRun::curvature(int layer, const float *v, int64_t rows, bool g_side) {
  if (fill_waits_ && local_curvature(layer, g_side)) {
    Queued q(Queued::Curvature, layer, g_side);
    q.v = v;
    q.rows = rows;
    enqueue(std::move(q));
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
  return !(dp_ > 1 ||
           (tp_ > 1 && (s.rows_over_tp || s.split != KfacSplit::None)) ||
           s.weight->devices != MPI_COMM_NULL);
}

namespace {
const char *itemName(int kind, bool g) {
  static const char *names[3][2] = {
      {"curv_A ", "curv_G "}, {"reduce_A ", "reduce_G "}, {"inv_A ", "inv_G "}};
  return names[kind][g ? 1 : 0];
}

double threadCpuUs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
}
} // namespace

void KfacRun::run_item(Queued &q) {
  const double t0 = trace.now_us();
  const double cpu0 = fill_thread_ ? threadCpuUs() : 0;
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
  const int kind = q.group();
  if (fill_thread_) // its own trace.end calls are muted: one event, tid 2
    trace.end_with_cpu(std::string(itemName(kind, q.g)) +
                           specs_[size_t(q.layer)].name,
                       2, t0, threadCpuUs() - cpu0);
  else
    seconds_[{kind, q.layer, q.g}] = (trace.now_us() - t0) * 1e-6;
}

void KfacRun::enqueue(Queued q) {
  if (!fill_thread_) {
    queue_.push_back(std::move(q));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(q));
  }
  cv_.notify_all();
}

// The first item, in queue order, whose layer has no earlier item queued and
// whose last duration (+5 %, PipeFisher's margin) fits the budget; an item
// never timed yet fits (it is timed now). Thread filling: a nap while the
// thread has work (recv tests again after it), an eighth of the wait still
// expected (20 us .. 500 us; 20 us with no estimate): a long wait wakes the
// rank, and so preempts the thread, a few times instead of every 20 us, and
// its message is late by at most an eighth of that wait.
RecvWaitWork KfacRun::run_queued(double budget_s) {
  if (fill_thread_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty() && !running_)
        return RecvWaitWork::None;
    }
    const double nap = std::isfinite(budget_s) && budget_s > 0
                           ? std::clamp(budget_s / 8, 20e-6, 500e-6)
                           : 20e-6;
    std::this_thread::sleep_for(std::chrono::duration<double>(nap));
    return RecvWaitWork::Napped;
  }
  std::vector<int> blocked;
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (std::find(blocked.begin(), blocked.end(), it->layer) != blocked.end())
      continue;
    auto t = seconds_.find({it->group(), it->layer, it->g});
    if (t != seconds_.end() && t->second * 1.05 > budget_s) {
      blocked.push_back(it->layer);
      continue;
    }
    Queued q = std::move(*it);
    queue_.erase(it);
    run_item(q);
    return RecvWaitWork::Ran;
  }
  return RecvWaitWork::None;
}

// While the rank's thread waits for the filling thread, that one runs at the
// normal priority: at SCHED_IDLE, ranks spinning in MPI on an oversubscribed
// core would starve it, and the rank (and the pipeline) with it.
void KfacRun::set_worker_idle(bool idle) {
  if (!worker_.joinable())
    return;
  sched_param none{}; // raising it back needs CAP_SYS_NICE or RLIMIT_NICE
  pthread_setschedparam(worker_.native_handle(),
                        idle ? SCHED_IDLE : SCHED_OTHER, &none);
}

void KfacRun::drain() {
  if (fill_thread_) {
    std::unique_lock<std::mutex> lock(mu_);
    if (queue_.empty() && !running_)
      return;
    await_filler(lock, [&] { return queue_.empty() && !running_; });
    return;
  }
  while (!queue_.empty()) {
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    run_item(q);
    progress_sends();
  }
}

// The pipeline sends of the step move only while this thread is in MPI
// (progress_sends), so it tests them while it waits.
void KfacRun::await_filler(std::unique_lock<std::mutex> &lock,
                           const std::function<bool()> &done) {
  set_worker_idle(false);
  while (!cv_.wait_for(lock, std::chrono::microseconds(200), done)) {
    lock.unlock();
    progress_sends();
    lock.lock();
  }
  set_worker_idle(true);
}

// After the refresh step every operand of the cycle is queued or saved, so
// the local reductions and inversions are queued then too (in layer-table
// order, finish_cycle's), to use the idle time of every step of the cycle;
// their places in later steps find them done. A reduction accumulates its
// layer's saved operands first, in (factor, micro-batch) order, the order the
// plan's later curvature items have, so the sums are those of `placed`.
void KfacRun::end_schedule() {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (fill_thread_)
    lock.lock();
  copy_live();
  for (size_t i = 0; fill_waits_ && i < specs_.size(); ++i)
    if (specs_[i].weight->held && due(i) && is_open(i) && local_refresh(i))
      for (Queued::Kind k : {Queued::Reduce, Queued::Invert})
        for (bool g : {false, true})
          queue_.push_back(Queued(k, int(i), g));
  // The item running may read a buffer the next step overwrites.
  if (fill_thread_) {
    cv_.notify_all();
    if (running_live_)
      await_filler(lock, [&] { return !running_live_; });
  }
}

void KfacRun::release_live() {
  if (!fill_waits_)
    return; // nothing queued: every item ran at its place
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (fill_thread_)
    lock.lock();
  copy_live();
  if (fill_thread_ && running_live_)
    await_filler(lock, [&] { return !running_live_; });
}

// (mu_ held where a thread fills.)
void KfacRun::copy_live() {
  for (Queued &q : queue_)
    if (q.kind == Queued::Curvature && q.copy.empty()) {
      const KfacLayer &l = layers_[size_t(q.layer)];
      q.copy.assign(q.v, q.v + q.rows * (q.g ? l.out : l.in));
      q.v = nullptr;
    }
}

// Strict queue order: the calls of `placed`, in its order.
void KfacRun::worker_loop() {
  sched_param none{};
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &none) != 0)
    setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 19);
  TraceRecorder::mute_this_thread();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty())
      return; // stop_
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    running_live_ = q.kind == Queued::Curvature && q.copy.empty();
    lock.unlock();
    run_item(q);
    lock.lock();
    running_ = running_live_ = false;
    cv_.notify_all();
  }
}

void KfacRun::stop_worker() {
  if (!worker_.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear(); // after the run: nothing left is needed
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join(); // after the item it is running, if any
  stop_ = false;
}

KfacRun::~KfacRun() { stop_worker(); }

namespace {
RecvWaitWork run_queued_kfac_item(double budget_s) {
  return kfac.run_queued(budget_s);
}
} // namespace

void KfacRun::keep(int mb, int layer, const float *v, int64_t rows,
                   bool g_side) {
  const KfacLayer &l = layers_[size_t(layer)];
  int64_t width = g_side ? l.out : l.in;
  if (tp_ > 1 &&
      specs_[size_t(layer)].split == (g_side ? KfacSplit::Out : KfacSplit::In))
    width /= tp_; // this rank's columns; accumulate gathers them
  std::lock_guard<std::mutex> lock(saved_mu_);
  Saved &s = saved_[{layer, g_side, mb}];
  s.v.assign(v, v + rows * width);
  s.rows = rows;
}

void KfacRun::add_kept(int layer, int mb, bool g_side) {
  if (fill_waits_ && local_curvature(layer, g_side)) {
    Queued q(Queued::CurvatureSaved, layer, g_side);
    q.mb = mb;
    enqueue(std::move(q));
    return;
  }
  drain();
  curvature_saved_now(layer, mb, g_side);
}

void KfacRun::curvature_saved_now(int layer, int mb, bool g_side) {
  Saved s;
  {
    std::lock_guard<std::mutex> lock(saved_mu_);
    auto it = saved_.find({layer, g_side, mb});
    if (!is_open(size_t(layer)) || it == saved_.end())
      return;
    s = std::move(it->second);
    saved_.erase(it);
  }
  accumulate(layer, s.v.data(), s.rows, g_side);
}

// Before the cycles of `ending` close (in layer-table order): what is queued,
// then their saved operands in (layer, factor, micro-batch) order.
void KfacRun::finishing(const std::vector<size_t> &ending) {
  drain();
  std::lock_guard<std::mutex> lock(saved_mu_); // after drain: for the record
  for (auto it = saved_.begin(); it != saved_.end();) {
    const int layer = std::get<0>(it->first);
    if (std::find(ending.begin(), ending.end(), size_t(layer)) ==
        ending.end()) {
      ++it;
      continue;
    }
    accumulate(layer, it->second.v.data(), it->second.rows,
               std::get<1>(it->first));
    it = saved_.erase(it);
  }
}

void KfacRun::accumulate_into(float *f, int layer, const float *v, int64_t rows,
                              bool g_side) {
  const KfacLayer &l = layers_[size_t(layer)];
  const double t0 = trace.now_us();
  const int64_t dim = g_side ? l.out : l.in;
  const bool split = !local_curvature(layer, g_side); // gathered over tp
  const int64_t width = split ? dim / tp_ : dim;
  // A factor stride: the selected samples' rows copied together first (a
  // local copy: the filling thread may run this too), then one product.
  std::vector<float> picked;
  if (strided()) {
    const KfacRowStride r = row_stride(rows);
    picked.resize(size_t(r.rows() * width));
    for (int64_t b = 0; b < r.count; ++b)
      std::copy(v + b * r.step * width, v + (b * r.step + r.block) * width,
                picked.begin() + b * r.block * width);
    v = picked.data();
    rows = r.rows();
  }
  // The upper triangle only (SYRK: half the FLOPs); reduce_factor (or the
  // fold of a factor step) completes the factor.
  if (split)
    kfac_accumulate_gathered(f, v, rows, width, 1.0f, g.tp, true);
  else
    kfac_accumulate(f, v, rows, dim, 1.0f, true);
  trace.end(std::string(g_side ? "curv_G " : "curv_A ") +
                specs_[size_t(layer)].name,
            0, t0);
}

float *KfacRun::average(size_t i, int kind, int f) {
  return average_buf_[i][size_t(3 * f + kind)].data();
}

void KfacRun::axpby(float *y, float a, const float *x, float b, int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    y[k] = a * y[k] + b * x[k];
}

void KfacRun::copy(float *y, const float *x, int64_t n) {
  std::memcpy(y, x, size_t(n) * sizeof(float));
}

void KfacRun::zero(float *y, int64_t n) { std::fill(y, y + n, 0.0f); }

void KfacRun::symmetrize(float *F, int64_t d) { kfac_symmetrize(F, d); }

void KfacRun::setup(const KfacProgram &p, const Options &o,
                    const ProgramSpec &s) {
  stop_worker(); // a thread of an earlier setup, before the state it reads
  KfacCycleRun::setup(p, o, s);
  const char *fill = std::getenv("AUTODDL_KFAC_FILL");
  // thread by default: measured, the fixed places stall the pipeline where
  // the run's bubbles differ from the plan's, and whole items fill the waits
  // less than a preemptible thread does (docs/kfac.md "Wait filling").
  const std::string mode = fill ? fill : "thread";
  if (mode != "placed" && mode != "waits" && mode != "thread")
    throw std::invalid_argument(
        "AUTODDL_KFAC_FILL: expected placed, waits or thread, got \"" + mode +
        "\"");
  fill_waits_ = mode != "placed";
  // The filling thread makes no MPI call. It needs OpenBLAS on one thread:
  // a GEMM of it would otherwise run on OpenBLAS's pool at the normal
  // priority, beside the rank's work; else waits (the same results).
  // A rank bound to one core (mpirun --bind-to core) gains nothing from
  // OpenBLAS's pool: it runs on one thread there.
  cpu_set_t cores;
  if (mode == "thread" && openblas_set_num_threads &&
      sched_getaffinity(0, sizeof cores, &cores) == 0 && CPU_COUNT(&cores) == 1)
    openblas_set_num_threads(1);
  const int blas = openblas_get_num_threads ? openblas_get_num_threads() : 1;
  fill_thread_ = mode == "thread" && blas == 1;
  fill_mode_ = fill_thread_ ? "thread" : fill_waits_ ? "waits" : "placed";
  queue_.clear();
  if (fill_thread_)
    worker_ = std::thread([this] { worker_loop(); });
  set_recv_wait_hook(fill_waits_ ? &run_queued_kfac_item : nullptr);
  pending_.assign(specs_.size(), Pending{});
  for (size_t i = 0; i < specs_.size(); ++i) {
    pending_[i].A_inv.assign(layers_[i].A_inv.size(), 0.0f);
    pending_[i].G_inv.assign(layers_[i].G_inv.size(), 0.0f);
  }
  // The running average's buffers (A: kAverage, kRecent, kStepSum; then G),
  // only with a decay: without one the memory is as before.
  average_buf_.assign(specs_.size(), {});
  for (size_t i = 0; c_.factor_decay > 0 && i < specs_.size(); ++i)
    for (int k = 0; k < 6; ++k)
      average_buf_[i][size_t(k)].assign(
          (k < 3 ? layers_[i].A : layers_[i].G).size(), 0.0f);
}

// Nothing queued runs into a cycle opened now (the filling thread reads the
// Pending that open() writes).
void KfacRun::opening() {
  if (refreshing_)
    drain();
}

// The installed inverses, the fallback of a failed inversion.
void KfacRun::open(size_t i) {
  Pending &p = pending_[i];
  const KfacLayer &l = layers_[i];
  p.A_inv = l.A_inv;
  p.G_inv = l.G_inv;
  p.a_valid = l.a_valid;
  p.g_valid = l.g_valid;
}

void KfacRun::install(const std::vector<size_t> &due) {
  for (size_t i : due) {
    Pending &p = pending_[i];
    KfacLayer &l = layers_[i];
    std::swap(l.A_inv, p.A_inv);
    std::swap(l.G_inv, p.G_inv);
    l.a_valid = p.a_valid;
    l.g_valid = p.g_valid;
  }
}

int KfacRun::device_replicas(size_t i) const {
  const MPI_Comm devices = specs_[i].weight->devices;
  return devices == MPI_COMM_NULL ? 1 : comm_size(devices);
}

// Saved curvature of this layer not accumulated yet (an item the placement
// put after the reduction): now, in the canonical order, before rows_ is
// read.
void KfacRun::flush_saved(size_t i) {
  std::vector<std::pair<bool, Saved>> mine; // (G, operand), in map order
  {
    std::lock_guard<std::mutex> lock(saved_mu_);
    for (auto it = saved_.begin(); it != saved_.end();)
      if (std::get<0>(it->first) == int(i)) {
        mine.emplace_back(std::get<1>(it->first), std::move(it->second));
        it = saved_.erase(it);
      } else {
        ++it;
      }
  }
  for (auto &[g_side, sv] : mine)
    accumulate(int(i), sv.v.data(), sv.rows, g_side);
}

// The sum is complete: the upper triangle mirrored, scaled to this rank's
// mean, then the mean over every rank holding the layer.
void KfacRun::reduce(size_t i, int f, float scale) {
  const KfacLayerSpec &s = specs_[i];
  KfacLayer &l = layers_[i];
  std::vector<float> &F = f ? l.G : l.A;
  kfac_symmetrize(F.data(), f ? l.out : l.in);
  for (float &v : F)
    v *= scale;
  const int64_t n = int64_t(F.size());
  fold_average(i, f, F.data(), n);
  // Traced under the plan's item names (reduce_A, ...; inspect --trace).
  const double t0 = trace.now_us();
  if (dp_ > 1)
    kfac_factor_all_reduce_mean(F.data(), n, g.dp);
  if (s.rows_over_tp && tp_ > 1)
    kfac_factor_all_reduce_mean(F.data(), n, g.tp);
  if (s.weight->devices != MPI_COMM_NULL)
    kfac_factor_all_reduce_mean(F.data(), n, s.weight->devices);
  trace.end(std::string(f ? "reduce_G " : "reduce_A ") + s.name, 1, t0);
}

// Into the pending inverse, so the installed one stays in use until s+K.
void KfacRun::invert(size_t i, int f, bool first) {
  KfacLayer &l = layers_[i];
  Pending &p = pending_[i];
  if (first)
    kfac_set_damping(l, c_.damping);
  const double t0 = trace.now_us();
  p.outcome[f] = f ? kfac_invert_factor(p.G_inv.data(), l.G.data(), l.out,
                                        l.damping.g, p.g_valid)
                   : kfac_invert_factor(p.A_inv.data(), l.A.data(), l.in,
                                        l.damping.a, p.a_valid);
  trace.end(std::string(f ? "inv_G " : "inv_A ") + specs_[i].name, 0, t0);
}

// Counted when computed; the next refresh sums anew.
void KfacRun::inverted(size_t i) {
  Pending &p = pending_[i];
  KfacLayer &l = layers_[i];
  kfac_record_refresh(p.outcome[0], p.outcome[1], p.a_valid, p.g_valid, stats_);
  kfac_zero_factors(l);
  rows_[i] = 0;
}

void KfacRun::reduce_item(int layer, bool g) {
  if (!is_open(size_t(layer)) || staggered_later(size_t(layer)))
    return; // done, its cycle finished early (a save), or --kfac-stagger's
  if (fill_waits_ && local_refresh(size_t(layer))) {
    enqueue(Queued(Queued::Reduce, layer, g));
    return;
  }
  drain();
  reduce_factor(size_t(layer), g ? 1 : 0, true);
}

void KfacRun::invert_item(int layer, bool g) {
  if (!is_open(size_t(layer)) || staggered_later(size_t(layer)))
    return;
  if (fill_waits_ && local_refresh(size_t(layer))) {
    enqueue(Queued(Queued::Invert, layer, g));
    return;
  }
  drain();
  invert_factor(size_t(layer), g ? 1 : 0, true);
}

void KfacRun::step(const std::vector<ParamSpec> &params, int64_t t) {
  fold_factor_steps(); // a factor step between refreshes: its sums folded
  // The cycle's last step (t = step + 1): what is left of it, so that its
  // inverses are ready to install at the next step; or the earlier step
  // where the plan put that tail.
  finish_cycle(t);
  finish_tail();
  // Preconditioning of the K-FAC layers' gradients, in place; Adam grafting
  // keeps the raw gradient (its moments' input) and preconditions into the
  // parameter's direction, from the layer's first install on.
  const bool graft = c_.rule == KfacRule::AdamGraft;
  std::vector<float> dw, db;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const KfacLayerSpec &s = specs_[i];
    if (!s.weight->held || (graft && !layers_[i].has_inverse()))
      continue;
    const double t0 = trace.now_us();
    Param &w = *s.weight;
    dw.resize(size_t(w.n));
    db.resize(s.bias ? size_t(s.bias->n) : 0);
    kfac_precondition_split(
        dw.data(), w.grad.data(), s.bias ? db.data() : nullptr,
        s.bias ? s.bias->grad.data() : nullptr, layers_[i], s.transpose_weight,
        tp_ > 1 ? s.split : KfacSplit::None, g.tp);
    std::memcpy(graft ? direction(w, t) : w.grad.data(), dw.data(),
                dw.size() * sizeof(float));
    if (s.bias)
      std::memcpy(graft ? direction(*s.bias, t) : s.bias->grad.data(),
                  db.data(), db.size() * sizeof(float));
    trace.end(std::string("precond ") + s.name, 0, t0);
  }
  apply_rule(params, t);
}

// Sized as the gradient, so a ZeRO shard of the padded parameter reads the
// padding's zeros.
float *KfacRun::direction(const Param &p, int64_t t) {
  auto &d = direction_.of[&p];
  d.d.resize(p.grad.size());
  d.t = t;
  return d.d.data();
}

void KfacRun::rule_step(Param &p, int64_t t, bool norms_over_tp) {
  // ZeRO-1: this dp rank's shard of the padded parameter (its gradient is
  // whole, preconditioned), then the parameter all-gathered; else all of it.
  const ZeroShard s =
      zero_ ? zero_shard(p.padded, dp_, g.rdp) : ZeroShard{0, p.n};
  float *value = p.value.data() + s.offset;
  const float *grad = p.grad.data() + s.offset;
  const MPI_Comm norms = norms_over_tp ? g.tp : MPI_COMM_NULL;
  if (c_.rule == KfacRule::Lamb)
    kfac_lamb_step(value, grad, p.m.data(), p.v.data(), s.size, c_, t, norms,
                   zero_ ? g.dp : MPI_COMM_NULL);
  else if (c_.rule == KfacRule::AdamGraft) {
    const float *d = direction_.at(p, t);
    kfac_adam_graft_step(value, grad, d ? d + s.offset : nullptr, p.m.data(),
                         p.v.data(), s.size, c_, t, norms,
                         zero_ ? g.dp : MPI_COMM_NULL);
  } else
    kfac_sgd_step(value, grad, p.m.data(), s.size, c_, t);
  if (zero_) {
    std::vector<float> mine(value, value + s.size);
    all_gather_forward(p.value.data(), mine.data(), {s.size}, 0, g.dp);
  }
}

void KfacRun::info(std::map<std::string, std::string> &m) const {
  kfac_run_info(stats_, c_, refresh_, m);
  m["kfac.fill"] = fill_mode_; // what ran (thread may fall back to waits)
}

// An inverse that was never obtained is all zeros (the vectors start zeroed
// and a failed inversion leaves them untouched): saved as such, and a loaded
// one that is not zero is in use.
void KfacRun::checkpoint_entries(std::vector<CheckpointEntry> &e) {
  finish_cycle(-1); // a save mid-cycle: what resuming needs is its inverses
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
    // With a decay: the running average and its factor steps since the last
    // refresh (the step's sums are folded at each step's end: none left).
    for (int f = 0; c_.factor_decay > 0 && f < 2; ++f)
      for (int kind : {kAverage, kRecent}) {
        const int64_t d = f ? s.out : s.in;
        e.push_back({kfac_average_entry(s.name, f ? 'G' : 'A', kind == kRecent),
                     Slice::whole({d, d}),
                     held ? average(i, kind, f) : nullptr});
      }
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
      loaded(i, p.a_valid || p.g_valid); // installed at the next s+K
      if (c_.factor_decay > 0)
        loaded_average(i, nonzero(average_buf_[i][0]),
                       nonzero(average_buf_[i][3]));
    }
}

} // namespace autoddl::rt::harness
