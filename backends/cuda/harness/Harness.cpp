//===- Harness.cpp - what a generated CUDA program builds on -------------===//
#include "backends/cuda/harness/Harness.h"
#include "backends/cuda/harness/KfacRun.h"

#include "backends/common/Metrics.h"
#include "backends/common/Parallel.h"
#include "backends/common/harness/DataOrder.h"
#include "backends/common/harness/RunCheckpoint.h" // add_fp8_scaling_entries
#include "backends/cuda/OpProfile.h"
#include "backends/cuda/StepGraph.h"
#include "backends/cuda/Zero.h"
#include "backends/cuda/kernels/Elementwise.h"
#include "backends/cuda/kernels/Fp8.h"
#include "backends/cuda/kernels/GradClip.h"
#include "backends/cuda/kernels/Init.h"
#include "backends/cuda/kernels/Optimizer.h"
#include "backends/cuda/kernels/Primitive.h" // running_stats_update, primitive_buffer_made
#include "backends/cuda/kernels/Reduce.h"
#include "backends/cuda/kernels/Samples.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>

namespace autoddl::rt::harness {

Grid g;
GpuTrace trace;
Pipe pipe;
GradSync grad_sync;
uint64_t seed = 1234;
bool inputs_preloaded = false;

namespace {

TokenSource tokens;
Csr adjacency;
DeviceBuffer<act_t> graph_x;                      // [nodes / dp, features]
DeviceBuffer<int32_t> graph_y, graph_y_heldout;   // [nodes / dp]
std::map<std::string, std::string> graph_metrics; // graph_info's entries

/// Page-locked host staging for one micro-batch's tokens (which: 0 ids, 1
/// targets), so that its copies run asynchronously on the compute stream
/// while the host prepares the next step; an event says when the last copy
/// out of it is done.
struct Staging {
  int32_t *host = nullptr;
  cudaEvent_t copied = nullptr;
};

Staging &staging(int64_t mb, int which, int64_t elements) {
  const ProgramSpec &s = program_spec();
  static std::vector<Staging> buffers(size_t(2 * s.micro_batches));
  Staging &st = buffers[size_t(2 * mb + which)];
  if (!st.host) { // one size a run: a micro-batch's tokens
    AUTODDL_CUDA_CHECK(
        cudaMallocHost(&st.host, size_t(elements) * sizeof(int32_t)));
    AUTODDL_CUDA_CHECK(
        cudaEventCreateWithFlags(&st.copied, cudaEventDisableTiming));
  }
  AUTODDL_CUDA_CHECK(cudaEventSynchronize(st.copied)); // its previous copy
  return st;
}

/// Copies `bytes` out of `st` to `dst` on the compute stream, asynchronously.
void copy_staged(void *dst, Staging &st, size_t bytes) {
  AUTODDL_CUDA_CHECK(cudaMemcpyAsync(dst, st.host, bytes,
                                     cudaMemcpyHostToDevice, compute_stream()));
  AUTODDL_CUDA_CHECK(cudaEventRecord(st.copied, compute_stream()));
}

/// The CPU program's graph (generated or read from `files`), this dp rank's
/// block on the device.
void load_graph(const ProgramSpec &s, const GraphFileNames &files) {
  const GraphShard shard = graph_shard(s, seed, g.rdp, files);
  graph_info(shard, graph_metrics);
  const int64_t n = shard.rows;
  adjacency = csr_to_device(int32_t(n), int32_t(s.nodes), shard.row_ptr,
                            shard.col_idx, shard.values);
  if (s.graph_columns) { // GATConv's kernels walk the rows' columns
    adjacency.col_idx = DeviceBuffer<int32_t>(adjacency.nnz());
    copy_to_device(adjacency.col_idx.data(), shard.col_idx.data(),
                   adjacency.nnz() * int64_t(sizeof(int32_t)));
  }
  DeviceBuffer<float> x(n * s.features);
  copy_to_device(x.data(), shard.features(), x.size() * int64_t(sizeof(float)));
  graph_x = DeviceBuffer<act_t>(x.size());
  cast_to_act(graph_x.data(), x.data(), x.size());
  graph_y = DeviceBuffer<int32_t>(n);
  copy_to_device(graph_y.data(), shard.train_labels.data() + shard.node0,
                 n * int64_t(sizeof(int32_t)));
  graph_y_heldout = DeviceBuffer<int32_t>(n);
  copy_to_device(graph_y_heldout.data(),
                 shard.heldout_labels.data() + shard.node0,
                 n * int64_t(sizeof(int32_t)));
}

} // namespace

void gather_backward_local(act_t *dshard, const act_t *dfull, const Shape &full,
                           int64_t dim) {
  slice_accumulate(dshard, dfull, full, dim, program_spec().tp, g.rtp);
}

void slice_backward_gather(act_t *dfull, const act_t *dshard,
                           const Shape &shard, int64_t dim) {
  all_gather_accumulate(dfull, dshard, shard, dim, g.tp);
}

void pipe_send(const act_t *buf, int64_t n, int device, int tag) {
  pipe.send(buf, n * int64_t(sizeof(act_t)), device, tag);
}

void pipe_recv(act_t *buf, int64_t n, int device, int tag) {
  pipe.recv(buf, n * int64_t(sizeof(act_t)), device, tag);
}

void pipe_sent_wait(int device, int tag) { pipe.wait_sent(device, tag); }

void pipe_recv_fence() { pipe.fence_receives(); }

void update_running_stats(float *moments, int64_t slots, int64_t C, float *mean,
                          float *var, double momentum) {
  all_reduce_forward(moments, slots * 2 * C, g.dp); // nothing at dp = 1
  running_stats_update(moments, slots, C, mean, var, momentum);
}

void configure_grad_buckets(const std::vector<ParamSpec> &params,
                            const int *bucket_of, const GradBucket *buckets,
                            int count) {
  std::vector<std::vector<std::pair<float *, int64_t>>> grads(
      static_cast<size_t>(count));
  std::vector<int> expected(size_t(count), 0);
  for (int b = 0; b < count; ++b)
    if (holds_stage(buckets[b].stage))
      expected[size_t(b)] = buckets[b].expected;
  for (size_t i = 0; i < params.size(); ++i) {
    const int b = bucket_of[i];
    if (b < 0 || !holds_stage(buckets[b].stage))
      continue;
    Param &p = *params[i].p;
    grads[size_t(b)].push_back({p.grad.data(), p.n});
    p.bucket = b;
  }
  grad_sync.configure(g.dp, std::move(grads), std::move(expected));
  bool over_tp = false;
  for (int b = 0; b < count; ++b)
    over_tp |= buckets[b].over_tp;
  if (!over_tp)
    return;
  // Collective over the world: every rank splits, whatever it holds.
  static const Comm dp_tp = comm_split(int(g.rpp), world().rank);
  for (int b = 0; b < count; ++b)
    if (buckets[b].over_tp)
      grad_sync.set_bucket_comm(b, dp_tp);
}

void load_tokens(int64_t step, int64_t mb, int32_t *ids, int32_t *targets) {
  const ProgramSpec &s = program_spec();
  const int64_t n = s.micro_batch * s.seq;
  Staging &in = staging(mb, 0, n), &out = staging(mb, 1, n);
  tokens.read(s, seed, data_batch(step), g.rdp, mb, in.host, out.host);
  const size_t bytes = size_t(n) * sizeof(int32_t);
  if (ids)
    copy_staged(ids, in, bytes);
  if (targets)
    copy_staged(targets, out, bytes);
}

void load_samples(int64_t step, int64_t mb, act_t *x, int32_t *labels) {
  const ProgramSpec &s = program_spec();
  // Drawn on the device (kernels/Samples.h): on the host, even on 8 threads,
  // ResNet-50's images took longer than PyTorch's whole step.
  synthetic_classes_on_device(
      x, labels, seed, data_batch(step), s.dp * s.micro_batches * s.class_batch,
      s.features, s.classes, kClassNoise, class_block_start(s, g.rdp, mb),
      s.class_batch, s.images_channels_last);
}

const Csr &graph_adjacency() { return adjacency; }
const act_t *graph_features() { return graph_x.data(); }
const int32_t *graph_labels() { return graph_y.data(); }
const int32_t *graph_heldout_labels() { return graph_y_heldout.data(); }

namespace {

/// The NCCL communicator of one mesh axis: the ranks agreeing on every other
/// coordinate (color: the world rank of the group's member at coordinate 0),
/// ordered by their coordinate on the axis.
Comm axis_comm(size_t axis) {
  std::vector<int64_t> c = g.mesh->coords();
  c[axis] = 0;
  return comm_split(g.mesh->rank_of(c), int(g.mesh->coord(axis)));
}

/// Page-locked host floats (cudaMallocHost): a device-to-host copy into them
/// runs asynchronously, at the link's full bandwidth.
class PinnedFloats {
public:
  PinnedFloats() = default;
  PinnedFloats(PinnedFloats &&o) noexcept { *this = std::move(o); }
  PinnedFloats &operator=(PinnedFloats &&o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~PinnedFloats() {
    if (p_)
      cudaFreeHost(p_);
  }
  void resize(size_t n) {
    if (n == n_)
      return;
    if (p_)
      AUTODDL_CUDA_CHECK(cudaFreeHost(p_));
    p_ = nullptr;
    n_ = 0;
    if (n)
      AUTODDL_CUDA_CHECK(cudaMallocHost(&p_, n * sizeof(float)));
    n_ = n;
  }
  float *data() { return p_; }

private:
  float *p_ = nullptr;
  size_t n_ = 0;
};

/// Host copies of the parameters and optimizer state, for checkpoints.
struct HostCopy {
  PinnedFloats value, m, v;
};

class CudaBackend : public Backend {
public:
  explicit CudaBackend(const Program &p) : p_(p), s_(p.spec) {
    rank_in_errors = true;
  }

  void start(int *argc, char ***argv) override { comm_init(argc, argv); }

  std::string own_flags() const override {
    return "--profile\tper-op-kind device time in metrics.json op_kinds\n"
           "--no-cuda-graph\tlaunch every kernel of a step one at a time\n";
  }

  int64_t setup(int argc, char **argv, Options &o) override {
    Timer phase;
    auto lap = [&](const char *name) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s %.2f",
                    setup_seconds_.empty() ? "" : ", ", name, phase.seconds());
      setup_seconds_ += buf;
      phase.reset();
    };
    // --profile (this backend's own flag): per-op-kind device time in
    // metrics.json "op_kinds" (backends/cuda/OpProfile.h).
    // --no-cuda-graph (also AUTODDL_CUDA_GRAPH=0): every step runs its
    // kernels one launch at a time (StepGraph.h).
    if (take_flag(argc, argv, "--profile"))
      op_profile_enable(true);
    no_cuda_graph_ = take_flag(argc, argv, "--no-cuda-graph");
    o = parse_options(argc, argv, s_.zero != 0, p_.kfac != nullptr);
    seed = o.seed;
    MeshAxes axes;
    g.mesh = make_mesh(s_, axes, g.rpp, g.rdp, g.rtp);
    g.pp = axis_comm(0);
    g.dp = axis_comm(axes.dp);
    g.tp = axis_comm(axes.tp);
    check_data_flags(s_, o.data, o.graph);
    if (s_.graph_model()) {
      load_graph(s_, o.graph);
    } else if (!o.data.empty()) {
      tokens.open(o.data, s_.vocab);
    }
    step_graph_.set_counts(&comm_stats()); // replays count their collectives
    factor_graph_.set_counts(&comm_stats());
    lap("mesh and data");
    set_predicted_peak_bytes(s_.predicted_peak_bytes);
    set_allocation_context("the parameters (value, gradient, AdamW state, "
                           "working copy)");
    init_params();
    kfac_on_ = o.optimizer == "kfac";
    if (kfac_on_) {
      set_allocation_context("the K-FAC factors and inverses");
      kfac.setup(*p_.kfac, o, s_);
      // AUTODDL_KFAC_FACTOR_GRAPH=0 (check_environment: 0 or 1): factor
      // steps eager, as before (A/B).
      const char *fg = std::getenv("AUTODDL_KFAC_FACTOR_GRAPH");
      kfac_factor_graph_ = !(fg && std::string(fg) == "0");
    }
    for (const ParamSpec &ps : p_.params)
      if (ps.p->held)
        param_grad_zeros_.add(ps.p->grad.data(),
                              ps.p->device_n * int64_t(sizeof(float)));
    param_grad_zeros_.seal();
    register_fp8_linears();
    lap("parameters");
    set_allocation_context("the stages' buffers (activations and their "
                           "gradients, one set per micro-batch in flight)");
    p_.allocate_stages();
    p_.configure_grad_sync();
    set_allocation_context("a runtime buffer (workspace, pipeline staging, "
                           "step graph)");
    lap("activations");
    // Run the schedule once without compute: every pipeline transfer is
    // noted, the senders' orders exchanged and the links connected.
    pipe.setup(g.mesh->axis(0), int(g.rpp), int(s_.pp),
               int(g.rdp * s_.tp + g.rtp), int(s_.dp * s_.tp));
    pipe.begin_recording();
    p_.run_schedule(0);
    pipe.end_recording();
    lap("schedule recording");
    const int64_t first_step = load_start(o, s_, *this);
    if (!o.resume.empty() || !o.init.empty())
      lap("checkpoint");
    return first_step;
  }

  void begin_run(const Options &o, RunMetrics &m) override {
    trace.set_enabled(o.trace);
    m.info.insert(graph_metrics.begin(), graph_metrics.end());
    m.info["backend"] = "cuda";
#ifdef AUTODDL_FP32
    m.info["precision"] = "fp32";
#else
    m.info["precision"] = "bf16 activations, fp32 master weights";
#endif
    m.info["setup_seconds"] = setup_seconds_;
    graph_off_ = step_graph_off_reason(o);
    if (!o.save.empty()) // pinned now: not in the first save's stall
      checkpoint_entries(true);
  }

  void run_step(int64_t step) override {
    trace.start_step();
    grad_sync.start_step();
    if (kfac_on_)
      kfac.begin_step(step);
    // Zeroing the gradients, forward and backward: the same kernels on the
    // same buffers every step, replayed as one graph when the plan allows.
    // With a graph, `step` only reaches the input loads, which run before
    // it. The pipeline links' streams and the gradient buckets' sync stream
    // fork from the compute stream and join back into it inside the body, so
    // a graph holds their transfers and all-reduces too.
    auto body = [&] {
      pipe.begin_step();
      param_grad_zeros_.zero();
      fp8_begin_step(); // the FP8 weights cast once a step (kernels/Fp8.h)
      p_.run_schedule(step);
      fp8_end_step();
      pipe.finish_step();
      grad_sync.wait();
      if (p_.update_buffers)
        p_.update_buffers();
    };
    // A step with K-FAC items (a refresh step's curvature GEMMs, the items
    // the plan placed in a later step of the cycle) runs them between the
    // stages' calls: eagerly, the graph keeping the other steps (KfacRun.h).
    // A factor step with nothing else (KfacRun::factor_only_step) is the
    // same work each time: a graph of its own, its host bookkeeping (the
    // rows its curvature counted) restored after each call but the first.
    const bool kfac_eager = kfac_on_ && kfac.eager_step();
    const bool factor_graph = graph_off_.empty() && kfac_eager &&
                              kfac_factor_graph_ && kfac.factor_only_step();
    kfac_eager_steps_ += kfac_eager && !factor_graph ? 1 : 0;
    if (graph_off_.empty() && (!kfac_eager || factor_graph)) {
      StepGraph &graph = factor_graph ? factor_graph_ : step_graph_;
      const bool first = graph.calls() == 0;
      p_.preload_inputs(step);
      inputs_preloaded = true;
      graph.run(body);
      inputs_preloaded = false;
      if (factor_graph && first)
        factor_step_rows_ = kfac.step_rows();
      else if (factor_graph) // replayed, or run twice by a failed capture
        kfac.set_step_rows(factor_step_rows_);
    } else {
      body();
    }
  }

  /// On the device. Bucketed gradients were all-reduced during the backward
  /// pass (and joined at its end: the wait() here finds nothing left); the
  /// rest are summed here, every one before --grad-clip's global norm.
  /// Launched eagerly after the step graph's replay, never captured: the
  /// step's scalars (lr, the bias corrections of t) are kernel arguments.
  void optimizer_step(const Options &o, int64_t t, double lr) override {
    grad_sync.wait();
    // A checkpoint's copy of the state (snapshot) runs on its own stream
    // during this step's forward and backward: the update waits for it.
    if (snapshot_pending_) {
      AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(compute_stream(), copied_, 0));
      snapshot_pending_ = false;
    }
    const bool zero = s_.zero && !kfac_on_; // K-FAC shards its rule's state
    for (const ParamSpec &ps : p_.params)
      if (ps.p->held)
        sync_grad(*ps.p, zero);
    if (o.grad_clip > 0)
      clip_grads(float(o.grad_clip), zero);
    if (kfac_on_) {
      kfac.set_lr(lr);
      kfac.step(p_.params, t);
      return;
    }
    AdamWConfig c;
    c.lr = lr;
    c.weight_decay = o.weight_decay;
    for (const ParamSpec &ps : p_.params) {
      Param *p = ps.p;
      if (!p->held)
        continue;
      if (zero)
        zero_adamw_update(p->value.data(), p->gshard.data(), p->m.data(),
                          p->v.data(), p->padded, c, t, g.dp, p->work.data(),
                          p->padded);
      else if (o.optimizer == "sgd")
        sgd_step(p->value.data(), p->grad.data(), p->m.data(), p->n, float(lr),
                 float(o.momentum), float(o.weight_decay), t, p->work.data());
      else
        adamw_step(p->value.data(), p->grad.data(), p->m.data(), p->v.data(),
                   p->n, c, t, p->work.data());
    }
  }

  /// The norm's copy was enqueued after the clip; end_step synchronised.
  double grad_norm() const override { return clip_ ? clip_->last_norm() : 0.0; }

  void end_step(int64_t) override {
    synchronize();
    trace.finish_step();
  }

  void after_step(const Options &o, int64_t step, int64_t first) override {
    op_profile_finish_step(step > first || o.steps - first < 2);
  }

  /// Under --profile, the device time of the kernels so far (the op scopes
  /// but the tensor-parallel collectives', resolved after each step): a
  /// slow GPU's own work, which its peers' step time hides (they wait for it
  /// inside NCCL kernels). Without it the host's CPU time, which finds a slow
  /// host only (docs/checkpoints.md "Anomalies").
  double work_clock() override {
    if (!op_profile_enabled())
      return Backend::work_clock();
    double total = 0;
    for (const auto &[kind, t] : op_profile_totals())
      if (kind.rfind("comm:", 0) != 0)
        total += t.forward_s + t.backward_s;
    return total;
  }

  /// Over the host copies (copy_params moves the device state into them).
  std::vector<CheckpointEntry> checkpoint_entries(bool with_state) override {
    std::vector<CheckpointEntry> e;
    host_copies_.resize(p_.params.size());
    for (size_t i = 0; i < p_.params.size(); ++i) {
      Param *p = p_.params[i].p;
      HostCopy &h = host_copies_[i];
      if (p->held) {
        h.value.resize(size_t(p->device_n));
        h.m.resize(size_t(p->m.size()));
        h.v.resize(size_t(p->v.size()));
      }
      add_checkpoint_entries(e, *p, h.value.data(), h.m.data(), h.v.data(),
                             with_state, s_, g.rtp, g.rdp);
    }
    add_buffer_entries(e, p_.buffers, g.rpp); // their host arrays
    if (kfac_on_ && with_state)               // the inverses in use (KfacRun.h)
      kfac.checkpoint_entries(e);
    if (with_state && !fp8_work_.empty()) // FP8 scaling, this rank's rows
      add_fp8_scaling_entries(e, p_.fp8_weights, fp8_rows_);
    return e;
  }

  /// Calls copy(host, device, bytes) for the value and AdamW state of every
  /// parameter this rank holds, with its host copy, and for every buffer
  /// whose device copy exists.
  template <typename Copy> void for_each_state(Copy copy) {
    for (size_t i = 0; i < p_.params.size(); ++i) {
      Param *p = p_.params[i].p;
      if (!p->held)
        continue;
      HostCopy &h = host_copies_[i];
      std::pair<float *, DeviceBuffer<float> *> parts[] = {
          {h.value.data(), &p->value},
          {h.m.data(), &p->m},
          {h.v.data(), &p->v}};
      for (auto [host, dev] : parts)
        copy(host, dev->data(), dev->size() * int64_t(sizeof(float)));
    }
    // The buffers' device copies, once the first step made them (before,
    // the host arrays are the state).
    for (const BufferSpec &b : p_.buffers)
      if (float *dev = primitive_buffer_made(b.host))
        copy(b.host, dev, b.n * int64_t(sizeof(float)));
  }

  /// Device -> host copies (to_host) or back, refreshing the working copies.
  void copy_params(bool to_host) override {
    for_each_state([&](float *host, float *dev, int64_t bytes) {
      if (to_host)
        copy_to_host(host, dev, bytes);
      else
        copy_to_device(dev, host, bytes);
    });
    if (!to_host)
      for (const ParamSpec &ps : p_.params)
        if (ps.p->held)
          cast_to_act(ps.p->work.data(), ps.p->value.data(), ps.p->device_n);
    if (kfac_on_)
      kfac.copy_state(to_host);
    copy_fp8_state(to_host);
  }

  /// Asynchronously: the device-to-host copies on a stream of their own,
  /// after the step's update (an event on the compute stream), while the
  /// host goes on to the next step; the next update waits for them
  /// (optimizer_step). The writer thread waits for the copies' event.
  /// K-FAC's inverses and the FP8 scaling state (small) are copied
  /// synchronously.
  std::function<void()> snapshot(bool async) override {
    if (!async) {
      copy_params(true);
      return {};
    }
    if (!copy_stream_) {
      AUTODDL_CUDA_CHECK(
          cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
      AUTODDL_CUDA_CHECK(
          cudaEventCreateWithFlags(&updated_, cudaEventDisableTiming));
      AUTODDL_CUDA_CHECK(
          cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    }
    AUTODDL_CUDA_CHECK(cudaEventRecord(updated_, compute_stream()));
    AUTODDL_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, updated_, 0));
    for_each_state([&](float *host, float *dev, int64_t bytes) {
      AUTODDL_CUDA_CHECK(cudaMemcpyAsync(host, dev, size_t(bytes),
                                         cudaMemcpyDeviceToHost, copy_stream_));
    });
    AUTODDL_CUDA_CHECK(cudaEventRecord(copied_, copy_stream_));
    snapshot_pending_ = true;
    if (kfac_on_)
      kfac.copy_state(true);
    copy_fp8_state(true); // small: now, at the step boundary of the weights
    int device = 0;
    AUTODDL_CUDA_CHECK(cudaGetDevice(&device));
    return [device, copied = copied_] {
      AUTODDL_CUDA_CHECK(cudaSetDevice(device)); // the writer's own thread
      AUTODDL_CUDA_CHECK(cudaEventSynchronize(copied));
    };
  }

  bool entries_are_copies() const override { return true; }

  void write_outputs(const Options &o, RunMetrics &m) override {
    // This rank's adjacency in the W8 formats, each built at its first use in
    // the variant the decider picked (kernels/Sparse.h).
    if (s_.graph_model())
      m.info["adjacency_w8"] = describe(adjacency);
    m.info["cuda_graph"] = !graph_off_.empty() ? "off: " + graph_off_
                           : step_graph_.failed()
                               ? std::string("off: the capture failed")
                           : step_graph_.captured()
                               ? "on: " + std::to_string(step_graph_.nodes()) +
                                     " nodes, captured at the run's second "
                                     "step"
                           : factor_graph_.captured()
                               ? "on: the K-FAC factor steps' graph only (" +
                                     std::to_string(factor_graph_.nodes()) +
                                     " nodes); every other step had K-FAC "
                                     "items"
                               : std::string("on, never captured (one step)");
    m.predicted_peak_bytes = s_.predicted_peak_bytes;
    if (kfac_on_) {
      kfac.info(m.info);
      m.info["kfac.eager_steps"] = std::to_string(kfac_eager_steps_);
      m.info["kfac.step_graph"] =
          "steps with K-FAC items run eagerly (a refresh step's curvature "
          "GEMMs, the items the plan placed in later steps of the cycle), "
          "factor steps between refreshes replay a graph of their own, the "
          "others the step graph; the K-FAC step runs after it, the "
          "inversions on a side stream, installed K steps after the refresh";
      const std::string steps =
          std::to_string(factor_graph_.calls()) + " factor steps";
      m.info["kfac.factor_graph"] =
          !kfac_factor_graph_
              ? std::string("off (AUTODDL_KFAC_FACTOR_GRAPH=0)")
          : factor_graph_.failed() ? "off: the capture failed (" + steps + ")"
          : factor_graph_.captured()
              ? "on: " + std::to_string(factor_graph_.nodes()) + " nodes, " +
                    steps
              : "not captured (" + steps + ")";
    }
    write_cuda_run_metrics(m, s_.model_flops_per_step, s_.peak_flops_per_gpu,
                           o.out + "/metrics.json", MPI_COMM_WORLD);
    write_op_profile(o.out + "/metrics.json", MPI_COMM_WORLD);
    if (o.trace)
      write_cuda_run_trace(trace, o.out + "/trace.json", MPI_COMM_WORLD);
  }

  /// Device memory goes back before the communicators and the CUDA context.
  void shutdown(bool started) override {
    if (started) {
      if (copy_stream_) {
        cudaStreamSynchronize(copy_stream_);
        cudaEventDestroy(updated_);
        cudaEventDestroy(copied_);
        cudaStreamDestroy(copy_stream_);
        copy_stream_ = nullptr;
      }
      host_copies_.clear();
      step_graph_.reset();
      factor_graph_.reset();
      clip_.reset();
      param_grad_zeros_ = ZeroSet{};
      kfac.release();
      p_.free_stages();
      p_.free_params();
      adjacency = Csr{};
      graph_x = {};
      graph_y = {};
      graph_y_heldout = {};
      synchronize();
      comm_finalize();
    }
    g = Grid{};
  }

private:
  /// Why the step does not run as a CUDA graph ("" when it does).
  std::string step_graph_off_reason(const Options &o) const {
    if (!s_.step_graphable)
      return "not for this plan";
    if (no_cuda_graph_ || cuda_graph_disabled_by_env())
      return "turned off (--no-cuda-graph or AUTODDL_CUDA_GRAPH=0)";
    if (o.trace || op_profile_enabled())
      return "off under --trace and --profile (they time each op)";
    return "";
  }

  /// An fp8 plan's FP8 linears (Program::fp8_weights): their working copies
  /// registered with kernels/Fp8.h, whose linears then run their GEMMs in
  /// FP8 where the size rule says. Their scaling state is in checkpoints
  /// (copy_fp8_state), so a resumed run casts as the uninterrupted one.
  void register_fp8_linears() {
    if (p_.fp8_weights.empty())
      return;
    std::map<std::string, const ParamSpec *> byName;
    for (const ParamSpec &ps : p_.params)
      byName[ps.name] = &ps;
    for (const char *name : p_.fp8_weights) {
      auto it = byName.find(name);
      if (it == byName.end())
        throw std::runtime_error(std::string("fp8 weight ") + name +
                                 " is not a parameter of the program");
      const Param &p = *it->second->p;
      if (p.held)
        fp8_register_linear(p.work.data());
      fp8_work_.push_back(p.held ? p.work.data() : nullptr);
    }
  }

  /// The FP8 scaling rows of checkpoint_entries from the device (the
  /// compute stream is idle between steps: a synchronous copy) or to it
  /// (the rows a load filled; rows of zeros, as a checkpoint without them
  /// leaves them, keep the fresh state).
  void copy_fp8_state(bool to_host) {
    const int64_t n = int64_t(fp8_work_.size());
    if (n == 0 || int64_t(fp8_rows_.size()) != n * kFp8RowFloats)
      return;
    if (to_host)
      fp8_save_state(fp8_work_.data(), n, fp8_rows_.data());
    else
      fp8_restore_state(fp8_work_.data(), n, fp8_rows_.data());
  }

  void init_params() {
    DeviceGroups<Comm> groups;
    for (const ParamSpec &ps : p_.params) {
      Param &p = *ps.p;
      lay_out(ps, s_, g.rtp, g.rpp);
      p.device_n = std::max(p.padded, p_.device_numel(p));
      // Devices sharing the parameter sum its gradient over theirs: one NCCL
      // communicator per set of devices and (dp, tp) coordinates.
      if (const Comm *c = groups.of(ps.devices, [&](int group) {
            const int color = int((group * s_.dp + g.rdp) * s_.tp + g.rtp);
            return comm_split(p.held ? color : -1, int(g.rpp));
          }))
        p.devices = *c;
      if (!p.held)
        continue;
      // Zero-filled (the padding stays zero); drawn on the device, as the
      // host's init_normal would (kernels/Init.h).
      p.value = DeviceBuffer<float>(p.device_n);
      if (std::strcmp(ps.init, "ones") == 0)
        fill_on_device(p.value.data(), p.n, 1.0f);
      else if (std::strcmp(ps.init, "normal") == 0)
        init_normal_on_device(p.value.data(), p.slice, seed, p.name, 0.0f,
                              float(ps.std));
      p.grad = DeviceBuffer<float>(p.device_n);
      const int64_t state = zero_state_size(p.n, p.padded, s_.zero, s_.dp);
      p.m = DeviceBuffer<float>(state);
      p.v = DeviceBuffer<float>(state);
      if (s_.zero)
        p.gshard = DeviceBuffer<float>(p.padded / s_.dp);
      p.work = DeviceBuffer<act_t>(p.device_n);
      cast_to_act(p.work.data(), p.value.data(), p.device_n);
    }
  }

  /// Sums a held parameter's gradient over the ranks sharing it: its other
  /// pipeline devices (tied, Chimera), tp where split rows left it partial,
  /// dp (under ZeRO reduce-scattered into gshard); bucketed ones are done.
  void sync_grad(Param &p, bool zero) {
    if (p.devices.size > 1)
      all_reduce_forward(p.grad.data(), p.n, p.devices);
    if (s_.tp > 1 && p_.grad_partial_over_tp(p) && p.bucket < 0)
      all_reduce_forward(p.grad.data(), p.n, g.tp);
    if (zero)
      zero_reduce_gradient(p.gshard.data(), p.grad.data(), p.padded, g.dp);
    else if (s_.dp > 1 && p.bucket < 0)
      all_reduce_forward(p.grad.data(), p.n, g.dp);
  }

  /// torch.nn.utils.clip_grad_norm_ over the summed gradients, on the device
  /// (kernels/GradClip.h): each distinct element's square once over the
  /// world (grad_range), summed over the world by NCCL; every rank scales
  /// what it steps (gshard under ZeRO).
  void clip_grads(float max_norm, bool zero) {
    if (!clip_) {
      clip_ = std::make_unique<GradClip>();
      for (const ParamSpec &ps : p_.params) {
        Param &p = *ps.p;
        const GradRange r =
            grad_range(p, ps.devices, s_, g.rpp, g.rtp, g.rdp, zero);
        clip_->add(zero ? p.gshard.data() : p.grad.data() + r.offset, r.n,
                   r.counted);
      }
    }
    clip_->clip(max_norm, [](double *sum) {
      if (world().size > 1)
        AUTODDL_NCCL_CHECK(ncclAllReduce(sum, sum, 1, ncclFloat64, ncclSum,
                                         world().nccl, compute_stream()));
    });
  }

  const Program &p_;
  const ProgramSpec &s_;
  std::unique_ptr<GradClip> clip_; // --grad-clip's table, made at first use
  bool no_cuda_graph_ = false;
  bool kfac_on_ = false;
  int64_t kfac_eager_steps_ = 0; // steps run eagerly for their K-FAC items
  std::string setup_seconds_, graph_off_;
  StepGraph step_graph_;
  // K-FAC's factor steps between refreshes (run_step), and the rows their
  // curvature counts, restored where the graph ran none of its host code.
  bool kfac_factor_graph_ = true;
  StepGraph factor_graph_;
  std::vector<int64_t> factor_step_rows_;
  // Every parameter gradient this rank holds, zeroed at each step's start
  // with one launch.
  ZeroSet param_grad_zeros_;
  std::vector<HostCopy> host_copies_;
  // The FP8 linears' working copies (null where not held) and their
  // checkpoint rows (copy_fp8_state).
  std::vector<const act_t *> fp8_work_;
  std::vector<float> fp8_rows_;
  // A checkpoint's asynchronous copy (snapshot): its stream, the events
  // before and after it, and whether the next update must wait for it.
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t updated_ = nullptr, copied_ = nullptr;
  bool snapshot_pending_ = false;
};

} // namespace

int run_program(int argc, char **argv, const Program &program) {
  CudaBackend backend(program);
  return run_main(argc, argv, program.spec, program.counts, backend);
}

} // namespace autoddl::rt::harness
