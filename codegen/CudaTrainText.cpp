//===- CudaTrainText.cpp - the fixed parts of a generated CUDA train.cpp --===//
//
// The CUDA program's counterparts of TrainText.cpp's backend-specific pieces
// (the shared ones, pipeline tags and the program's flags, come from there):
// includes and the device parameter record; the grid of NCCL communicators,
// the pipeline transfer wrappers and the data copied to the device; the
// parameters, optimizer and checkpoints (device -> host -> the common
// safetensors writer); and main(). docs/codegen.md "CUDA backend".
//
//===----------------------------------------------------------------------===//
namespace autoddl::codegen {

extern const char *const kCudaTrainPreludeText = R"cpp(
#include "backends/common/Data.h"         // TokenData, synthetic_tokens, planted_graph
#include "backends/common/FileIo.h"       // make_directories
#include "backends/common/Init.h"         // Slice (the block of a parameter a rank holds)
#include "backends/common/Metrics.h"      // Timer, RunMetrics
#include "backends/cpu/Checkpoint.h"      // checkpoint_save / _load (of host copies)
#include "backends/cpu/Mesh.h"            // Mesh: mesh coordinates over MPI
#include "backends/cpu/MpiCheck.h"        // mpiCheck: MPI errors with file:line
#include "backends/cuda/Comm.h"           // NCCL communicators, collectives, GradSync, Pipe
#include "backends/cuda/OpProfile.h"      // OpScope: per-op-kind device time (--profile)
#include "backends/cuda/StepGraph.h"      // StepGraph: the step's device work as one CUDA graph
#include "backends/cuda/RunReport.h"      // GpuTrace, write_cuda_run_metrics/_trace
#include "backends/cuda/Runtime.h"        // act_t, DeviceBuffer, zero, copies
#include "backends/cuda/Zero.h"           // zero_adamw_step (ZeRO-sharded state)
#include "backends/cuda/kernels/Attention.h"    // flash attention forward/backward
#include "backends/cuda/kernels/CrossEntropy.h" // crossentropy_forward/_backward
#include "backends/cuda/kernels/Elementwise.h"  // add, mul, gelu, relu, silu, swiglu, add_into
#include "backends/cuda/kernels/Embedding.h"    // embedding, positional, rotary
#include "backends/cuda/kernels/Init.h"         // init_normal_on_device (keyed by global index)
#include "backends/cuda/kernels/Linear.h"       // linear, matmul, bias_add (cuBLASLt)
#include "backends/cuda/kernels/Norm.h"         // layernorm, rmsnorm
#include "backends/cuda/kernels/Optimizer.h"    // adamw_step, sgd_step
#include "backends/cuda/kernels/Reduce.h"       // sum_to_host, cast_to_act
#include "backends/cuda/kernels/Softmax.h"      // softmax
#include "backends/cuda/kernels/Sparse.h"       // spmm, sddmm (W8 tensor-core kernels)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

namespace {

using namespace autoddl::rt;

/// A parameter as this rank holds it: its tp block of the full tensor, on the
/// device: fp32 master value, gradient and AdamW state, and the act_t working
/// copy the kernels read. Buffers are padded to a multiple of dp for ZeRO, and
/// to device_n elements for a padded vocabulary (device_numel()); the padding
/// stays zero. The real elements come first (the padding rows are the last).
struct Param {
  std::string name;
  Shape full;
  int split_dim = -1; // S(split_dim) over tp, -1: B
  bool held = false;  // this rank runs a stage that uses it
  Slice slice;        // the block held
  int64_t n = 0, padded = 0, device_n = 0; // device_n: value, grad, work
  DeviceBuffer<float> value, grad, m, v, gshard; // gshard: ZeRO's gradient shard
  DeviceBuffer<act_t> work;
  Comm devices;    // pipeline devices sharing it (tied, Chimera); size 1: none
  int bucket = -1; // its gradient bucket (-1: synced at the optimizer step)
};

)cpp";

extern const char *const kCudaTrainSupportText = R"cpp(// ---- the grid ----

/// This rank's place: mesh coordinates (and MPI communicators) from the Mesh,
/// and one NCCL communicator per mesh axis.
struct Grid {
  std::unique_ptr<Mesh> mesh;
  Comm pp, dp, tp;
  int64_t rpp = 0, rdp = 0, rtp = 0;
};
static Grid g;
static GpuTrace trace;     // F/B/W timed by CUDA events
static Pipe pipe;          // pipeline transfers (NCCL, one stream per link)
static GradSync grad_sync; // data-parallel gradient buckets
static uint64_t seed = 1234;

/// Backward of an all-gather S(dim) -> B whose gradient is the same on every tp
/// rank (a replicated consumer): this rank's slice of it.
[[maybe_unused]] static void gather_backward_local(act_t *dshard, const act_t *dfull,
                                  const Shape &full, int64_t dim) {
  slice_accumulate(dshard, dfull, full, dim, kTP, g.rtp);
}

/// Backward of a local slice B -> S(dim): each tp rank holds the gradient of
/// its slice; all-gather them into the B tensor's gradient.
[[maybe_unused]] static void slice_backward_gather(act_t *dfull, const act_t *dshard,
                                  const Shape &shard, int64_t dim) {
  all_gather_accumulate(dfull, dshard, shard, dim, g.tp);
}

/// Activations and their gradients between pipeline devices.
[[maybe_unused]] static void pipe_send(const act_t *buf, int64_t n, int device, int tag) {
  pipe.send(buf, n * int64_t(sizeof(act_t)), device, tag);
}
[[maybe_unused]] static void pipe_recv(act_t *buf, int64_t n, int device, int tag) {
  pipe.recv(buf, n * int64_t(sizeof(act_t)), device, tag);
}

)cpp";

extern const char *const kCudaTrainDataText = R"cpp(// ---- data ----

static std::unique_ptr<TokenData> tokens; // null: synthetic tokens
// True while the step runs with its inputs already loaded (preload_inputs,
// ahead of the step graph): forward passes then skip their loads.
static bool inputs_preloaded = false;

/// Page-locked host staging for one micro-batch's tokens (which: 0 ids, 1
/// targets), so that their copies run asynchronously on the compute stream; an
/// event says when the last copy out of it is done.
struct Staging {
  int32_t *host = nullptr;
  cudaEvent_t copied = nullptr;
};
static Staging &staging(int64_t mb, int which) {
  static std::vector<Staging> buffers(size_t(2 * kMicroBatches));
  Staging &s = buffers[size_t(2 * mb + which)];
  if (!s.host) {
    AUTODDL_CUDA_CHECK(cudaMallocHost(&s.host, size_t(kMicroBatch * kSeq) * sizeof(int32_t)));
    AUTODDL_CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
  }
  AUTODDL_CUDA_CHECK(cudaEventSynchronize(s.copied)); // its previous copy
  return s;
}

/// Samples [b0, b0 + kMicroBatch) of the step's global batch: this dp rank's
/// block, then micro-batch mb inside it (docs/runtime.md "Data order"); read
/// on the host into page-locked buffers, copied on the compute stream.
[[maybe_unused]] static void load_tokens(int64_t step, int64_t mb, int32_t *ids,
                        int32_t *targets) {
  const int64_t b0 = g.rdp * (kMicroBatches * kMicroBatch) + mb * kMicroBatch;
  Staging &in = staging(mb, 0), &out = staging(mb, 1);
  if (tokens)
    tokens->batch(step, kGlobalBatch, kSeq, b0, kMicroBatch, in.host, out.host);
  else
    synthetic_tokens(seed, step, kGlobalBatch, kSeq, kVocab, b0, kMicroBatch,
                     in.host, out.host);
  const size_t bytes = size_t(kMicroBatch * kSeq) * sizeof(int32_t);
  for (auto [dst, src] : {std::pair<int32_t *, Staging *>{ids, &in}, {targets, &out}}) {
    if (!dst)
      continue;
    AUTODDL_CUDA_CHECK(cudaMemcpyAsync(dst, src->host, bytes, cudaMemcpyHostToDevice,
                                       compute_stream()));
    AUTODDL_CUDA_CHECK(cudaEventRecord(src->copied, compute_stream()));
  }
}

// Graph models (gcn, gat): the CPU program's planted-community graph, on the
// device; the adjacency as the W8 formats of A and A^T (kernels/Sparse.h).
// dp splits the nodes: each dp rank holds its block of kNodes / kDP
// consecutive nodes (rows of the adjacency with every column, features,
// labels); spmm/sddmm read every node's rows, all-gathered over dp.
static Csr adjacency;
static DeviceBuffer<act_t> graph_x;   // [kNodes / kDP, kFeatures]
// Labels for the loss (-1 at held-out nodes) and for the held-out accuracy
// (-1 at training nodes): planted_graph_split_labels.
static DeviceBuffer<int32_t> graph_y, graph_y_heldout; // [kNodes / kDP]
[[maybe_unused]] static const Csr &graph_adjacency() { return adjacency; }
[[maybe_unused]] static const act_t *graph_features() { return graph_x.data(); }
[[maybe_unused]] static const int32_t *graph_labels() { return graph_y.data(); }
[[maybe_unused]] static const int32_t *graph_heldout_labels() {
  return graph_y_heldout.data();
}

static void load_graph() {
  // As the CPU program: average degree about 10 inside a community, 1 across.
  const double pin = std::min(1.0, 10.0 * kClasses / double(kNodes));
  const double pout = std::min(1.0, 1.0 / double(kNodes));
  const PlantedGraph graph =
      planted_graph(seed, kNodes, kFeatures, kClasses, pin, pout, 1.0);
  const int64_t n = kNodes / kDP, r0 = g.rdp * n; // this rank's nodes
  const int32_t e0 = graph.row_ptr[size_t(r0)], e1 = graph.row_ptr[size_t(r0 + n)];
  std::vector<int32_t> rowPtr(graph.row_ptr.begin() + r0,
                              graph.row_ptr.begin() + r0 + n + 1);
  for (int32_t &e : rowPtr)
    e -= e0;
  adjacency = csr_to_device(
      int32_t(n), int32_t(kNodes), rowPtr,
      std::vector<int32_t>(graph.col_idx.begin() + e0, graph.col_idx.begin() + e1),
      std::vector<float>(graph.values.begin() + e0, graph.values.begin() + e1));
  DeviceBuffer<float> x(n * kFeatures);
  copy_to_device(x.data(), graph.x.data() + r0 * kFeatures,
                 x.size() * int64_t(sizeof(float)));
  graph_x = DeviceBuffer<act_t>(x.size());
  cast_to_act(graph_x.data(), x.data(), x.size());
  const std::vector<int32_t> train = planted_graph_split_labels(graph, false),
                             heldout = planted_graph_split_labels(graph, true);
  graph_y = DeviceBuffer<int32_t>(n);
  copy_to_device(graph_y.data(), train.data() + r0, n * int64_t(sizeof(int32_t)));
  graph_y_heldout = DeviceBuffer<int32_t>(n);
  copy_to_device(graph_y_heldout.data(), heldout.data() + r0,
                 n * int64_t(sizeof(int32_t)));
}

)cpp";

extern const char *const kCudaTrainInitText = R"cpp(static void init_params() {
  uint64_t devices_seen[64] = {};
  Comm comms[64];
  int groups = 0;
  for (const ParamSpec &s : param_specs()) {
    Param &p = *s.p;
    p.name = s.name;
    p.full = s.full;
    p.split_dim = s.split_dim;
    p.held = (s.devices >> g.rpp) & 1;
    p.slice = param_slice(s, kTP, g.rtp);
    p.n = p.slice.numel();
    // Sized by tp rank 0's block, the largest (a padded vocabulary's last
    // blocks are shorter): every tp rank's buffers and ZeRO shards alike.
    p.padded = zero_padded_size(param_slice(s, kTP, 0).numel(), kDP);
    p.device_n = std::max(p.padded, device_numel(p));
    // Devices sharing the parameter sum its gradient: one communicator per
    // set of devices and (dp, tp) coordinates, made in parameter order on
    // every rank (ncclCommSplit is collective).
    if (__builtin_popcountll(s.devices) > 1) {
      int found = -1;
      for (int k = 0; k < groups; ++k)
        if (devices_seen[k] == s.devices)
          found = k;
      if (found < 0) {
        if (groups == 64)
          throw std::runtime_error("too many shared-parameter groups");
        devices_seen[groups] = s.devices;
        const int color = int((groups * kDP + g.rdp) * kTP + g.rtp);
        comms[groups] = comm_split(p.held ? color : -1, int(g.rpp));
        found = groups++;
      }
      p.devices = comms[found];
    }
    if (!p.held)
      continue;
    // Zero-filled (the padding stays zero); drawn on the device, as the
    // host's init_normal would (kernels/Init.h).
    p.value = DeviceBuffer<float>(p.device_n);
    if (std::strcmp(s.init, "ones") == 0)
      fill_on_device(p.value.data(), p.n, 1.0f);
    else if (std::strcmp(s.init, "normal") == 0)
      init_normal_on_device(p.value.data(), p.slice, seed, p.name, 0.0f,
                            float(s.std));
    p.grad = DeviceBuffer<float>(p.device_n);
    const int64_t state = kZero ? p.padded / kDP : p.n;
    p.m = DeviceBuffer<float>(state);
    p.v = DeviceBuffer<float>(state);
    if (kZero)
      p.gshard = DeviceBuffer<float>(p.padded / kDP);
    p.work = DeviceBuffer<act_t>(p.device_n);
    cast_to_act(p.work.data(), p.value.data(), p.device_n);
  }
}

)cpp";

extern const char *const kCudaTrainParamsText =
    R"cpp(/// Gradient synchronisation and the optimizer step (t = 1, 2, ...), on the
/// device. Bucketed gradients were all-reduced during the backward pass (and
/// joined at its end: the wait() here finds nothing left).
static void optimizer_step(const Options &o, int64_t t) {
  AdamWConfig c;
  c.lr = o.lr;
  c.weight_decay = o.weight_decay;
  grad_sync.wait();
  for (Param *p : all_params()) {
    if (!p->held)
      continue;
    if (p->devices.size > 1) // tied / Chimera copies on other devices
      all_reduce_forward(p->grad.data(), p->n, p->devices);
    // Read whole on split rows: summed over tp here, or with dp in its bucket.
    if (kTP > 1 && grad_partial_over_tp(*p) && p->bucket < 0)
      all_reduce_forward(p->grad.data(), p->n, g.tp);
    if (kZero) {
      zero_adamw_step(p->value.data(), p->grad.data(), p->m.data(),
                      p->v.data(), p->gshard.data(), p->padded, c, t, g.dp,
                      p->work.data(), p->padded);
      continue;
    }
    if (kDP > 1 && p->bucket < 0)
      all_reduce_forward(p->grad.data(), p->n, g.dp);
    if (o.optimizer == "sgd")
      sgd_step(p->value.data(), p->grad.data(), p->m.data(), p->n,
               float(o.lr), float(o.momentum), float(o.weight_decay), t,
               p->work.data());
    else
      adamw_step(p->value.data(), p->grad.data(), p->m.data(), p->v.data(),
                 p->n, c, t, p->work.data());
  }
}

/// Host copies of the parameters and optimizer state, for checkpoints.
struct HostCopy {
  std::vector<float> value, m, v;
};
static std::vector<HostCopy> host_copies;

/// Parameters and optimizer state as checkpoint entries over the host copies
/// (every rank lists every tensor; the same names and layout as the CPU
/// program, so either backend resumes the other's checkpoints). ZeRO state is
/// saved flat: [tp * padded], block (tp, dp).
static std::vector<CheckpointEntry> checkpoint_entries(bool with_state) {
  std::vector<CheckpointEntry> e;
  std::vector<Param *> ps = all_params();
  host_copies.resize(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    Param *p = ps[i];
    HostCopy &h = host_copies[i];
    if (p->held) {
      h.value.resize(size_t(p->device_n));
      h.m.resize(size_t(p->m.size()));
      h.v.resize(size_t(p->v.size()));
    }
    e.push_back(
        {p->name, p->slice, p->held ? h.value.data() : nullptr, p->full});
    if (!with_state)
      continue;
    Slice state = p->slice;
    Shape state_shape = p->full; // the file's shape (slice.full may be a view)
    std::string suffix;
    if (kZero) {
      state = Slice::whole({kTP * p->padded})
                  .split(0, kTP, g.rtp)
                  .split(0, kDP, g.rdp);
      state_shape = state.full;
      suffix = ".zero";
    }
    e.push_back({p->name + ".exp_avg" + suffix, state,
                 p->held ? h.m.data() : nullptr, state_shape});
    e.push_back({p->name + ".exp_avg_sq" + suffix, state,
                 p->held ? h.v.data() : nullptr, state_shape});
  }
  return e;
}

/// Copies the held parameters and optimizer state device -> host copies
/// (to_host) or back, refreshing the working copies.
static void copy_params(bool to_host) {
  std::vector<Param *> ps = all_params();
  for (size_t i = 0; i < ps.size(); ++i) {
    Param *p = ps[i];
    if (!p->held)
      continue;
    HostCopy &h = host_copies[i];
    std::pair<float *, DeviceBuffer<float> *> parts[] = {
        {h.value.data(), &p->value}, {h.m.data(), &p->m}, {h.v.data(), &p->v}};
    for (auto [host, dev] : parts) {
      const int64_t bytes = dev->size() * int64_t(sizeof(float));
      if (to_host)
        copy_to_host(host, dev->data(), bytes);
      else
        copy_to_device(dev->data(), host, bytes);
    }
    if (!to_host)
      cast_to_act(p->work.data(), p->value.data(), p->device_n);
  }
}

)cpp";

extern const char *const kCudaTrainMainText =
    R"cpp(/// The NCCL communicator of one mesh axis: the ranks agreeing on every other
/// coordinate (color: the world rank of the group's member at coordinate 0),
/// ordered by their coordinate on the axis.
static Comm axis_comm(size_t axis) {
  std::vector<int64_t> c = g.mesh->coords();
  c[axis] = 0;
  return comm_split(g.mesh->rank_of(c), int(g.mesh->coord(axis)));
}

static bool no_cuda_graph = false; // --no-cuda-graph
static StepGraph step_graph;
// Every parameter gradient this rank holds, zeroed at each step's start with
// one launch.
static ZeroSet param_grad_zeros;

/// Why the step does not run as a CUDA graph ("" when it does).
static std::string step_graph_off_reason(const Options &o) {
  if (!kStepGraphable)
    return "not for this plan";
  if (no_cuda_graph || cuda_graph_disabled_by_env())
    return "turned off (--no-cuda-graph or AUTODDL_CUDA_GRAPH=0)";
  if (o.trace || op_profile_enabled())
    return "off under --trace and --profile (they time each op)";
  return "";
}

/// Seconds each phase of setup() took on this rank, for metrics.json
/// info.setup_seconds (a large model's start-up is most of a short run).
static std::string setup_seconds;

/// Everything before the first step; throws on bad input (the same on every
/// rank).
static void setup(int argc, char **argv, Options &o, int64_t &first_step) {
  Timer phase;
  auto lap = [&](const char *name) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.2f", setup_seconds.empty() ? "" : ", ",
                  name, phase.seconds());
    setup_seconds += buf;
    phase.reset();
  };
  // --profile (this backend's own flag): per-op-kind device time in
  // metrics.json "op_kinds" (backends/cuda/OpProfile.h).
  // --no-cuda-graph (also AUTODDL_CUDA_GRAPH=0): every step runs its kernels
  // one launch at a time (StepGraph.h).
  int kept = 1;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--profile") == 0)
      op_profile_enable(true);
    else if (std::strcmp(argv[i], "--no-cuda-graph") == 0)
      no_cuda_graph = true;
    else
      argv[kept++] = argv[i];
  o = parse_options(kept, argv);
  std::vector<int64_t> shape = kTensorInner
                                   ? std::vector<int64_t>{kPP, kDP, kTP}
                                   : std::vector<int64_t>{kPP, kTP, kDP};
  g.mesh = std::make_unique<Mesh>(shape, MPI_COMM_WORLD);
  const size_t dpAxis = kTensorInner ? 1 : 2, tpAxis = kTensorInner ? 2 : 1;
  g.rpp = g.mesh->coord(0);
  g.rdp = g.mesh->coord(dpAxis);
  g.rtp = g.mesh->coord(tpAxis);
  g.pp = axis_comm(0);
  g.dp = axis_comm(dpAxis);
  g.tp = axis_comm(tpAxis);
  if (kGraphModel) {
    if (!o.data.empty())
      throw std::invalid_argument("--data: a graph model trains on a planted-"
                                  "community graph generated from --seed");
    load_graph();
  } else if (!o.data.empty()) {
    tokens = std::make_unique<TokenData>(TokenData::open(o.data, kVocab));
  }
  step_graph.set_counts(&comm_stats()); // replays count their collectives
  lap("mesh and data");
  init_params();
  for (Param *p : all_params())
    if (p->held)
      param_grad_zeros.add(p->grad.data(), p->device_n * int64_t(sizeof(float)));
  param_grad_zeros.seal();
  lap("parameters");
  allocate_stages();
  configure_grad_sync();
  lap("activations");
  // Run the schedule once without compute: every pipeline transfer is noted,
  // the senders' orders exchanged and the links connected.
  pipe.setup(g.mesh->axis(0), int(g.rpp), int(kPP), int(g.rdp * kTP + g.rtp),
             int(kDP * kTP));
  pipe.begin_recording();
  run_schedule(0);
  pipe.end_recording();
  lap("schedule recording");
  first_step = o.resume.empty() ? 0 : load_checkpoint(o.resume);
  if (!o.resume.empty())
    lap("checkpoint");
}

static int train(const Options &o, int64_t first_step) {
  const bool root = g.mesh->rank() == 0;
  trace.set_enabled(o.trace);
  RunMetrics metrics;
  metrics.items_per_step = double(kLossCount);
  metrics.items_name = kGraphModel ? "samples" : "tokens";
  if (kGraphModel) // this rank's adjacency in the W8 format (kernels/Sparse.h)
    metrics.info["adjacency_w8"] = describe(adjacency);
  metrics.info["model"] = kModelName;
  metrics.info["backend"] = "cuda";
#ifdef AUTODDL_FP32
  metrics.info["precision"] = "fp32";
#else
  metrics.info["precision"] = "bf16 activations, fp32 master weights";
#endif
  metrics.info["first_step"] = std::to_string(first_step);
  metrics.info["ranks"] = std::to_string(kPP * kDP * kTP);
  metrics.info["setup_seconds"] = setup_seconds;
  const std::string graphOff = step_graph_off_reason(o);
  if (o.save_initial && first_step == 0)
    save_checkpoint(o, 0);
  for (int64_t step = first_step; step < o.steps; ++step) {
    Timer timer;
    trace.start_step();
    grad_sync.start_step();
    // Zeroing the gradients, forward and backward: the same kernels on the
    // same buffers every step, replayed as one graph when the plan allows.
    // With a graph, `step` only reaches the input loads, which run before it.
    // The pipeline links' streams and the gradient buckets' sync stream fork
    // from the compute stream and join back into it inside the body, so a
    // graph holds their transfers and all-reduces too.
    auto body = [&] {
      pipe.begin_step();
      param_grad_zeros.zero();
      run_schedule(step);
      pipe.finish_step();
      grad_sync.wait();
    };
    if (graphOff.empty()) {
      preload_inputs(step);
      inputs_preloaded = true;
      step_graph.run(body);
      inputs_preloaded = false;
    } else {
      body();
    }
    // The update is queued before the host waits for the loss (the losses
    // buffers were written by the forward passes; the update does not touch
    // them), so the device does not idle while the host launches it.
    optimizer_step(o, step + 1);
    double loss = local_loss_sum();
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM,
                           MPI_COMM_WORLD));
    loss /= double(kLossCount);
    synchronize();
    trace.finish_step();
    const double seconds = timer.seconds();
    op_profile_finish_step(step > first_step || o.steps - first_step < 2);
    metrics.loss.push_back(loss);
    metrics.step_seconds.push_back(seconds);
    if (root && !o.quiet)
      std::printf("step %4lld/%lld: loss %.6f (%.1f ms)\n", (long long)step + 1,
                  (long long)o.steps, loss, seconds * 1e3);
    std::fflush(stdout);
    if (o.save_every > 0 && (step + 1) % o.save_every == 0)
      save_checkpoint(o, step + 1);
  }
  metrics.info["cuda_graph"] =
      !graphOff.empty()      ? "off: " + graphOff
      : step_graph.failed()  ? std::string("off: the capture failed")
      : step_graph.captured() ? "on: " + std::to_string(step_graph.nodes()) +
                                    " nodes, captured at the run's second step"
                              : std::string("on, never captured (one step)");
  if (!o.out.empty()) {
    if (root)
      make_directories(o.out);
    write_cuda_run_metrics(metrics, kModelFlopsPerStep, kPeakFlopsPerGpu,
                           o.out + "/metrics.json", MPI_COMM_WORLD);
    write_op_profile(o.out + "/metrics.json", MPI_COMM_WORLD);
    if (o.trace)
      write_cuda_run_trace(trace, o.out + "/trace.json", MPI_COMM_WORLD);
  }
  return 0;
}

/// Device memory goes back before the communicators and the CUDA context.
static void release_all() {
  step_graph.reset();
  param_grad_zeros = ZeroSet{};
  free_stages();
  P = Params{};
  adjacency = Csr{};
  graph_x = {};
  graph_y = {};
  graph_y_heldout = {};
  synchronize();
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int64_t first_step = 0;
  bool bad = false, devices_up = false;
  std::string message;
  try {
    comm_init(&argc, &argv);
    devices_up = true;
    setup(argc, argv, o, first_step);
  } catch (const std::exception &e) {
    bad = true;
    message = e.what();
  }
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) { // MPI itself did not start
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (report_setup_error(bad, message)) {
    if (devices_up) {
      release_all();
      comm_finalize();
    }
    g = Grid{};
    MPI_Finalize();
    return 1;
  }
  try {
    train(o, first_step);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "autoddl: rank %d: error: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  release_all();
  comm_finalize();
  g = Grid{};
  MPI_Finalize();
  return 0;
}
)cpp";

} // namespace autoddl::codegen
