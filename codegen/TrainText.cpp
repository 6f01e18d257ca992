//===- TrainText.cpp - the fixed parts of a generated train.cpp ----------===//
//
// Text that every generated program carries unchanged (TrainProgram.cpp puts
// the plan-specific parts between them): includes and the parameter record;
// the run's grid, conversions, pipeline tags and data; and main() with
// argument parsing, the optimizer, checkpoints and metrics. Kept as C++ here
// so it is reviewed as code; docs/codegen.md describes the program's flags.
//
//===----------------------------------------------------------------------===//
namespace autoddl::codegen {

extern const char *const kTrainPreludeText = R"cpp(
#include "backends/common/Data.h"         // TokenData, synthetic_tokens, planted_graph
#include "backends/common/FileIo.h"       // make_directories
#include "backends/common/Init.h"         // Slice, init_normal (keyed by global index)
#include "backends/common/Metrics.h"      // Timer, RunMetrics
#include "backends/common/Trace.h"        // TraceRecorder
#include "backends/cpu/Checkpoint.h"      // checkpoint_save / checkpoint_load
#include "backends/cpu/Collectives.h"     // all_reduce/all_gather/slice, send/recv
#include "backends/cpu/Mesh.h"            // mpi_init, Mesh
#include "backends/cpu/MpiCheck.h"        // mpiCheck: MPI errors with file:line
#include "backends/cpu/Optimizer.h"       // adamw_step, sgd_step
#include "backends/cpu/RunReport.h"       // write_run_metrics, write_run_trace
#include "backends/cpu/Zero.h"            // zero_adamw_step (ZeRO-sharded state)
#include "backends/cpu/kernels/Attention.h"    // attention_forward/_backward
#include "backends/cpu/kernels/CrossEntropy.h" // crossentropy_forward/_backward
#include "backends/cpu/kernels/Elementwise.h"  // add, mul, gelu, relu, silu, swiglu
#include "backends/cpu/kernels/Embedding.h"    // embedding, positional, rotary
#include "backends/cpu/kernels/Linear.h"       // linear, matmul, bias_add
#include "backends/cpu/kernels/Norm.h"         // layernorm, rmsnorm
#include "backends/cpu/kernels/Softmax.h"      // softmax
#include "backends/cpu/kernels/Sparse.h"       // spmm

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <mpi.h>

namespace {

using namespace autoddl::rt;

/// A parameter as this rank holds it: its tp block of the full tensor
/// (value, gradient, optimizer state). Buffers are padded to a multiple of dp
/// for ZeRO; the padding stays zero.
struct Param {
  std::string name;
  Shape full;
  int split_dim = -1; // S(split_dim) over tp, -1: B
  bool held = false;  // this rank runs a stage that uses it
  Slice slice;        // the block held
  int64_t n = 0, padded = 0;
  std::vector<float> value, grad, m, v;
  MPI_Comm devices = MPI_COMM_NULL; // pipeline devices sharing it (tied, Chimera)
};

)cpp";

// Shared by both backends: the parameter table's record and the pipeline's
// directions.
extern const char *const kTrainSpecText = R"cpp(struct ParamSpec {
  Param *p;
  const char *name;
  Shape full;
  int split_dim;
  const char *init;
  double std;
  uint64_t devices; // bit d: pipeline device d holds it
  int segments = 1; // > 1: split_dim is equal parts (q|k|v), each split over tp
};

/// The block of the full parameter tp rank `rank` holds: S(split_dim) (parts
/// of ceil(size / tp) where tp does not divide: a padded vocabulary, whose
/// last blocks are shorter), or with segments > 1 part `rank` of every
/// segment (the full shape viewed with split_dim as [segments, size /
/// segments]; the same row-major elements).
static Slice param_slice(const ParamSpec &s, int64_t tp, int64_t rank) {
  if (s.split_dim < 0)
    return Slice::whole(s.full);
  if (s.segments <= 1)
    return Slice::whole(s.full).split_padded(s.split_dim, tp, rank);
  Shape view = s.full;
  view[size_t(s.split_dim)] /= s.segments;
  view.insert(view.begin() + s.split_dim, int64_t(s.segments));
  return Slice::whole(view).split(s.split_dim + 1, tp, rank);
}

/// Chimera's second pipeline runs up the devices.
enum Direction { kDown, kUp };

)cpp";

extern const char *const kTrainSupportText = R"cpp(// ---- the grid ----

/// This rank's place: mesh coordinates and one communicator per axis.
struct Grid {
  std::unique_ptr<Mesh> mesh;
  MPI_Comm pp = MPI_COMM_NULL, dp = MPI_COMM_NULL, tp = MPI_COMM_NULL;
  int64_t rpp = 0, rdp = 0, rtp = 0;
};
static Grid g;
static TraceRecorder trace;
static std::vector<MPI_Request> pending; // pipeline sends of this step
static uint64_t seed = 1234;

static void add_into(float *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}

/// Backward of an all-gather S(dim) -> B whose gradient is the same on every tp
/// rank (a replicated consumer): this rank's slice of it.
[[maybe_unused]] static void gather_backward_local(float *dshard, const float *dfull,
                                  const Shape &full, int64_t dim) {
  std::vector<float> part(size_t(numel(full) / kTP));
  slice_forward(part.data(), dfull, full, dim, kTP, g.rtp);
  add_into(dshard, part.data(), int64_t(part.size()));
}

/// Backward of a local slice B -> S(dim): each tp rank holds the gradient of
/// its slice; all-gather them into the B tensor's gradient.
[[maybe_unused]] static void slice_backward_gather(float *dfull, const float *dshard,
                                  const Shape &shard, int64_t dim) {
  std::vector<float> whole(size_t(numel(shard) * kTP));
  all_gather_forward(whole.data(), dshard, shard, dim, g.tp);
  add_into(dfull, whole.data(), int64_t(whole.size()));
}

)cpp";

// Shared by both backends: which pipeline device runs a stage, and message tags.
extern const char *const kTrainSharedPipelineText = R"cpp(/// The pipeline device running `stage` in direction `dir` (Schedule::deviceOf).
static int device_of(int64_t stage, Direction dir) {
  return int(dir == kUp ? kPP - 1 - stage : stage % kPP);
}

static bool holds_stage(int64_t stage) {
  return device_of(stage, kDown) == g.rpp ||
         (kChimera && device_of(stage, kUp) == g.rpp);
}

enum TagKind { kActivation, kGradient };
/// A unique tag per (micro-batch, boundary, direction of data, tensor).
[[maybe_unused]] static int tag(int64_t mb, int64_t boundary, TagKind kind, int64_t k) {
  return int(((mb * kStages + boundary) * 2 + kind) * kMaxBoundary + k);
}

)cpp";

extern const char *const kTrainDataText = R"cpp(// ---- data ----

static std::unique_ptr<TokenData> tokens; // null: synthetic tokens
static PlantedGraph graph;
static Csr adjacency;

/// Samples [b0, b0 + kMicroBatch) of the step's global batch: this dp rank's
/// block, then micro-batch mb inside it (docs/runtime.md "Data order").
[[maybe_unused]] static void load_tokens(int64_t step, int64_t mb, int32_t *ids,
                        int32_t *targets) {
  const int64_t b0 = g.rdp * (kMicroBatches * kMicroBatch) + mb * kMicroBatch;
  std::vector<int32_t> in(size_t(kMicroBatch * kSeq)), out(in.size());
  if (tokens)
    tokens->batch(step, kGlobalBatch, kSeq, b0, kMicroBatch, in.data(),
                  out.data());
  else
    synthetic_tokens(seed, step, kGlobalBatch, kSeq, kVocab, b0, kMicroBatch,
                     in.data(), out.data());
  if (ids)
    std::copy(in.begin(), in.end(), ids);
  if (targets)
    std::copy(out.begin(), out.end(), targets);
}

// A graph model's rows on this rank: nodes [node0, node0 + kNodes / kDP).
static int64_t node0 = 0;
[[maybe_unused]] static const Csr &graph_adjacency() { return adjacency; }
[[maybe_unused]] static const float *graph_features() {
  return graph.x.data() + node0 * kFeatures;
}
// Labels for the loss (-1 at held-out nodes) and for the held-out accuracy
// (-1 at training nodes): planted_graph_split_labels.
static std::vector<int32_t> train_labels, heldout_labels;
[[maybe_unused]] static const int32_t *graph_labels() {
  return train_labels.data() + node0;
}
[[maybe_unused]] static const int32_t *graph_heldout_labels() {
  return heldout_labels.data() + node0;
}

)cpp";

// Shared by both backends: the program's flags.
extern const char *const kTrainOptionsText = R"cpp(
// ---- parameters, optimizer, checkpoints ----

struct Options {
  int64_t steps = 10;
  std::string data, out, save, resume, optimizer = "adamw";
  int64_t save_every = 0;
  bool save_initial = false, trace = false, quiet = false;
  double lr = 1e-3, weight_decay = 0.0, momentum = 0.9;
};

)cpp";

extern const char *const kTrainParamsText = R"cpp(static void init_params() {
  int64_t devices_seen[64] = {};
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
    // Devices sharing the parameter sum its gradient: one communicator per
    // set of devices, created in parameter order on every rank (collective).
    if (__builtin_popcountll(s.devices) > 1) {
      int found = -1;
      for (int k = 0; k < groups; ++k)
        if (uint64_t(devices_seen[k]) == s.devices)
          found = k;
      static MPI_Comm comms[64];
      if (found < 0) {
        if (groups == 64)
          throw std::runtime_error("too many shared-parameter groups");
        devices_seen[groups] = int64_t(s.devices);
        mpiCheck(MPI_Comm_split(g.pp, p.held ? 0 : MPI_UNDEFINED, int(g.rpp),
                                &comms[groups]));
        found = groups++;
      }
      p.devices = comms[found];
    }
    if (!p.held)
      continue;
    p.value.assign(size_t(p.padded), 0.0f);
    p.grad.assign(size_t(p.padded), 0.0f);
    const int64_t state = kZero ? p.padded / kDP : p.n;
    p.m.assign(size_t(state), 0.0f);
    p.v.assign(size_t(state), 0.0f);
    if (std::strcmp(s.init, "ones") == 0)
      std::fill(p.value.begin(), p.value.begin() + p.n, 1.0f);
    else if (std::strcmp(s.init, "normal") == 0)
      init_normal(p.value.data(), p.slice, seed, p.name, 0.0f, float(s.std));
  }
}

)cpp";

// Shared by both backends.
extern const char *const kTrainAllParamsText = R"cpp(static std::vector<Param *> all_params() {
  std::vector<Param *> ps;
  for (const ParamSpec &s : param_specs())
    ps.push_back(s.p);
  return ps;
}

)cpp";

extern const char *const kTrainOptimizerText = R"cpp(/// Gradient synchronisation and the optimizer step (t = 1, 2, ...).
static void optimizer_step(const Options &o, int64_t t) {
  AdamWConfig c;
  c.lr = o.lr;
  c.weight_decay = o.weight_decay;
  for (Param *p : all_params()) {
    if (!p->held)
      continue;
    if (p->devices != MPI_COMM_NULL) // tied / Chimera copies on other devices
      all_reduce_forward(p->grad.data(), p->n, p->devices);
    if (kTP > 1 && grad_partial_over_tp(*p)) // read whole on split rows
      all_reduce_forward(p->grad.data(), p->n, g.tp);
    if (kZero) {
      zero_adamw_step(p->value.data(), p->grad.data(), p->m.data(),
                      p->v.data(), p->padded, c, t, g.dp);
      continue;
    }
    if (kDP > 1)
      all_reduce_forward(p->grad.data(), p->n, g.dp);
    if (o.optimizer == "sgd")
      sgd_step(p->value.data(), p->grad.data(), p->m.data(), p->n,
               float(o.lr), float(o.momentum), float(o.weight_decay), t);
    else
      adamw_step(p->value.data(), p->grad.data(), p->m.data(), p->v.data(),
                 p->n, c, t);
  }
}

/// Parameters and optimizer state as checkpoint entries (every rank lists
/// every tensor). ZeRO state is saved flat: [tp * padded], block (tp, dp).
static std::vector<CheckpointEntry> checkpoint_entries(bool with_state) {
  std::vector<CheckpointEntry> e;
  for (Param *p : all_params()) {
    e.push_back(
        {p->name, p->slice, p->held ? p->value.data() : nullptr, p->full});
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
                 p->held ? p->m.data() : nullptr, state_shape});
    e.push_back({p->name + ".exp_avg_sq" + suffix, state,
                 p->held ? p->v.data() : nullptr, state_shape});
  }
  return e;
}

/// The CPU program's parameters and optimizer state are host memory already:
/// the checkpoint entries point at them.
static void copy_params(bool) {}

)cpp";

// Shared by both backends: checkpoints (after each backend's
// checkpoint_entries and copy_params, which moves the CUDA program's state
// between the device and the host copies the entries point at).
extern const char *const kTrainCheckpointText = R"cpp(static void save_checkpoint(const Options &o, int64_t steps_done) {
  const std::string dir = o.save + "/step-" + std::to_string(steps_done);
  if (g.mesh->rank() == 0)
    make_directories(dir);
  const std::vector<CheckpointEntry> entries = checkpoint_entries(true);
  copy_params(true);
  checkpoint_save(dir + "/model.safetensors", entries,
                  {{"format", "autoddl"},
                   {"model", kModelName},
                   {"step", std::to_string(steps_done)},
                   {"optimizer", o.optimizer}},
                  MPI_COMM_WORLD);
}

static int64_t load_checkpoint(const std::string &dir) {
  auto meta = checkpoint_load(dir + "/model.safetensors",
                              checkpoint_entries(true));
  auto it = meta.find("step");
  if (it == meta.end())
    throw std::runtime_error(dir + "/model.safetensors: no step in metadata");
  if (meta["model"] != kModelName)
    throw std::runtime_error(dir + "/model.safetensors: a checkpoint of model " +
                             meta["model"] + ", not " + kModelName);
  copy_params(false);
  return std::stoll(it->second);
}

/// Bad input is found the same way on every rank; the lowest rank that found
/// it reports it. Whether any rank did.
static bool report_setup_error(bool bad, const std::string &message) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int mine = bad ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!any)
    return false;
  int first = bad ? rank : 1 << 30, who = 0;
  MPI_Allreduce(&first, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == who)
    std::fprintf(stderr, "error: %s\n", message.c_str());
  return true;
}

)cpp";

// Shared by both backends.
extern const char *const kTrainParseText = R"cpp(// ---- main ----

static Options parse_options(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(a + ": missing value");
      return argv[++i];
    };
    auto integer = [&]() {
      std::string v = next();
      char *end = nullptr;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 0)
        throw std::invalid_argument(a + ": expected a non-negative integer, "
                                        "got \"" + v + "\"");
      return int64_t(x);
    };
    auto real = [&]() {
      std::string v = next();
      char *end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end)
        throw std::invalid_argument(a + ": expected a number, got \"" + v + "\"");
      return x;
    };
    if (a == "--steps") o.steps = integer();
    else if (a == "--data") o.data = next();
    else if (a == "--out") o.out = next();
    else if (a == "--trace") o.trace = true;
    else if (a == "--save") o.save = next();
    else if (a == "--save-every") o.save_every = integer();
    else if (a == "--save-initial") o.save_initial = true;
    else if (a == "--resume") o.resume = next();
    else if (a == "--lr") o.lr = real();
    else if (a == "--weight-decay") o.weight_decay = real();
    else if (a == "--optimizer") o.optimizer = next();
    else if (a == "--seed") seed = uint64_t(integer());
    else if (a == "--quiet") o.quiet = true;
    else throw std::invalid_argument("unknown flag " + a +
        " (flags: --steps N --data FILE --out DIR --trace --save DIR "
        "--save-every K --save-initial --resume DIR/step-N --lr X "
        "--weight-decay X --optimizer adamw|sgd --seed S --quiet)");
  }
  if (o.optimizer != "adamw" && o.optimizer != "sgd")
    throw std::invalid_argument("--optimizer: expected adamw or sgd, got " +
                                o.optimizer);
  if (kZero && o.optimizer != "adamw")
    throw std::invalid_argument("--optimizer sgd: the plan shards AdamW state "
                                "(ZeRO); use adamw");
  if ((o.save_every || o.save_initial) && o.save.empty())
    throw std::invalid_argument("--save-every/--save-initial need --save DIR");
  return o;
}

)cpp";

extern const char *const kTrainMainText = R"cpp(/// Everything before the first step; throws on bad input (the same on every
/// rank).
static void setup(int argc, char **argv, Options &o, int64_t &first_step) {
  o = parse_options(argc, argv);
  std::vector<int64_t> shape = kTensorInner
                                   ? std::vector<int64_t>{kPP, kDP, kTP}
                                   : std::vector<int64_t>{kPP, kTP, kDP};
  g.mesh = std::make_unique<Mesh>(shape, MPI_COMM_WORLD);
  const size_t dpAxis = kTensorInner ? 1 : 2, tpAxis = kTensorInner ? 2 : 1;
  g.pp = g.mesh->axis(0);
  g.dp = g.mesh->axis(dpAxis);
  g.tp = g.mesh->axis(tpAxis);
  g.rpp = g.mesh->coord(0);
  g.rdp = g.mesh->coord(dpAxis);
  g.rtp = g.mesh->coord(tpAxis);
  if (kGraphModel) {
    if (!o.data.empty())
      throw std::invalid_argument("--data: a graph model trains on a planted-"
                                  "community graph generated from --seed");
    // Average degree about 10 inside a community, 1 across.
    const double pin = std::min(1.0, 10.0 * kClasses / double(kNodes));
    const double pout = std::min(1.0, 1.0 / double(kNodes));
    graph = planted_graph(seed, kNodes, kFeatures, kClasses, pin, pout, 1.0);
    train_labels = planted_graph_split_labels(graph, false);
    heldout_labels = planted_graph_split_labels(graph, true);
    // dp splits the nodes: this rank's block of rows (all of them when dp is
    // 1), its adjacency the CSR of those rows with every node as a column.
    const int64_t rows = kNodes / kDP;
    node0 = g.rdp * rows;
    const int32_t e0 = graph.row_ptr[size_t(node0)],
                  e1 = graph.row_ptr[size_t(node0 + rows)];
    adjacency.rows = int32_t(rows);
    adjacency.cols = int32_t(kNodes);
    adjacency.rowPtr.assign(graph.row_ptr.begin() + node0,
                            graph.row_ptr.begin() + node0 + rows + 1);
    for (int32_t &p : adjacency.rowPtr)
      p -= e0;
    adjacency.colIdx.assign(graph.col_idx.begin() + e0,
                            graph.col_idx.begin() + e1);
    adjacency.values.assign(graph.values.begin() + e0,
                            graph.values.begin() + e1);
  } else if (!o.data.empty()) {
    tokens = std::make_unique<TokenData>(TokenData::open(o.data, kVocab));
  }
  init_params();
  allocate_stages();
  first_step = o.resume.empty() ? 0 : load_checkpoint(o.resume);
}

static int train(const Options &o, int64_t first_step) {
  const bool root = g.mesh->rank() == 0;
  trace.set_enabled(o.trace);
  if (o.trace)
    set_comm_trace(&trace);
  RunMetrics metrics;
  metrics.items_per_step = double(kLossCount);
  metrics.items_name = kGraphModel ? "samples" : "tokens";
  metrics.info["model"] = kModelName;
  metrics.info["backend"] = "cpu";
  metrics.info["first_step"] = std::to_string(first_step);
  metrics.info["ranks"] = std::to_string(kPP * kDP * kTP);
  if (o.save_initial && first_step == 0)
    save_checkpoint(o, 0);
  for (int64_t step = first_step; step < o.steps; ++step) {
    Timer timer;
    for (Param *p : all_params())
      std::fill(p->grad.begin(), p->grad.end(), 0.0f);
    run_schedule(step);
    wait_all(pending);
    double loss = local_loss_sum();
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM,
                           MPI_COMM_WORLD));
    loss /= double(kLossCount);
    optimizer_step(o, step + 1);
    const double seconds = timer.seconds();
    metrics.loss.push_back(loss);
    metrics.step_seconds.push_back(seconds);
    if (root && !o.quiet)
      std::printf("step %4lld/%lld: loss %.6f (%.1f ms)\n", (long long)step + 1,
                  (long long)o.steps, loss, seconds * 1e3);
    std::fflush(stdout);
    if (o.save_every > 0 && (step + 1) % o.save_every == 0)
      save_checkpoint(o, step + 1);
  }
  if (!o.out.empty()) {
    if (root)
      make_directories(o.out);
    write_run_metrics(metrics, o.out + "/metrics.json", MPI_COMM_WORLD);
    if (o.trace)
      write_run_trace(trace, o.out + "/trace.json", MPI_COMM_WORLD);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  mpi_init(&argc, &argv);
  Options o;
  int64_t first_step = 0;
  bool bad = false;
  std::string message;
  try {
    setup(argc, argv, o, first_step);
  } catch (const std::exception &e) {
    bad = true;
    message = e.what();
  }
  if (report_setup_error(bad, message)) {
    g = Grid{};
    MPI_Finalize();
    return 1;
  }
  try {
    train(o, first_step);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  g = Grid{};
  MPI_Finalize();
  return 0;
}
)cpp";

// Classification models (mlp, vgg) only: the image kernels, after the other
// kernel includes of the prelude.
extern const char *const kTrainClassIncludesText = R"cpp(#include "backends/cpu/kernels/Conv.h"         // conv2d, pool2d
#include "backends/cpu/kernels/Shape.h"        // transpose
)cpp";

// Classification models only: samples and the accuracy, after the data.
extern const char *const kTrainClassDataText = R"cpp(// Per-feature noise of a sample around its class prototype (the prototypes'
// features are N(0, 1)): docs/runtime.md "Classification samples".
constexpr double kClassNoise = 4.0;

/// Samples [b0, b0 + kClassBatch) of the step's kDP * kMicroBatches *
/// kClassBatch, keyed by (seed, global sample index): this dp rank's block,
/// then micro-batch mb inside it (docs/runtime.md "Data order"). x is
/// [kClassBatch, kFeatures], labels [kClassBatch]; either may be null.
static void load_samples(int64_t step, int64_t mb, float *x, int32_t *labels) {
  const int64_t b0 = (g.rdp * kMicroBatches + mb) * kClassBatch;
  std::vector<float> xs(size_t(kClassBatch * kFeatures));
  std::vector<int32_t> ys(static_cast<size_t>(kClassBatch));
  synthetic_classes(seed, step, kDP * kMicroBatches * kClassBatch, kFeatures,
                    kClasses, kClassNoise, b0, kClassBatch, xs.data(),
                    ys.data());
  if (x)
    std::copy(xs.begin(), xs.end(), x);
  if (labels)
    std::copy(ys.begin(), ys.end(), labels);
}

)cpp";

// Classifiers and graph models: the accuracy of a step.
extern const char *const kTrainAccuracyText = R"cpp(/// Rows of logits[N, V] whose largest logit (the first on ties) is the label;
/// rows ld apart when ld > V (a padded vocabulary, the padding skipped).
static int64_t count_correct(const float *logits, const int32_t *labels,
                             int64_t N, int64_t V, int64_t ld = 0) {
  ld = ld ? ld : V;
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    const float *row = logits + i * ld;
    correct += labels[i] >= 0 && std::max_element(row, row + V) - row == labels[i];
  }
  return correct;
}

)cpp";

} // namespace autoddl::codegen
