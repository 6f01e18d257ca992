//===- Harness.cpp - what a generated CPU program builds on --------------===//
#include "backends/cpu/harness/Harness.h"

#include "backends/common/Init.h"
#include "backends/common/OnnxImage.h" // batchnorm_running_update
#include "backends/cpu/Collectives.h"
#include "backends/cpu/Optimizer.h"
#include "backends/cpu/Zero.h"
#include "backends/cpu/harness/KfacRun.h"
#include "backends/host/Checkpoint.h"
#include "backends/host/MpiCheck.h"
#include "backends/host/RunReport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>
#include <utility>

namespace autoddl::rt::harness {

Grid g;
TraceRecorder trace;
std::vector<MPI_Request> pending;
uint64_t seed = 1234;
namespace {
// (device, tag) -> its request's index in `pending` (cleared with it).
std::map<std::pair<int, int>, size_t> pendingByTag;
} // namespace

void progress_sends() {
  if (pending.empty())
    return;
  int done = 0;
  mpiCheck(MPI_Testall(int(pending.size()), pending.data(), &done,
                       MPI_STATUSES_IGNORE));
  if (done) {
    pending.clear();
    pendingByTag.clear();
  }
}

void pipe_isend(const float *buf, int64_t n, int device, int tag) {
  pendingByTag[{device, tag}] = pending.size();
  pending.push_back(isend(buf, n, device, tag, g.pp));
}

void pipe_sent_wait(int device, int tag) {
  auto it = pendingByTag.find({device, tag});
  if (it == pendingByTag.end() || it->second >= pending.size())
    return; // completed with the others, or never sent this step
  mpiCheck(MPI_Wait(&pending[it->second], MPI_STATUS_IGNORE));
}

namespace {
// What an out-of-memory message names (set in setup()).
int gOomRank = -1;
double gOomPredicted = 0;
const char *gOomWhat = "a buffer";

/// operator new failed: say so at once with the rank, what was being
/// allocated and the plan's predicted host peak, and abort every rank (no
/// rank waits on this one; nothing is checkpointed).
void out_of_host_memory() {
  char line[512];
  std::snprintf(line, sizeof line,
                "autoddl: rank %d: out of host memory allocating %s; %.2f GiB "
                "resident at the peak so far; the plan predicted a host peak "
                "of %.2f GiB",
                gOomRank, gOomWhat,
                double(peak_resident_bytes()) / double(1 << 30),
                gOomPredicted / double(1 << 30));
  std::fputs(line, stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

// world_sum_filling's site of the gradient norm (ProgramRun's sums are 0-2).
constexpr int kGradNormSite = 3;

TokenSource tokens;
// Labels and features; this rank's rows of the adjacency move to `adjacency`.
GraphShard graph;
Csr adjacency;

} // namespace

void update_running_stats(float *moments, int64_t slots, int64_t C, float *mean,
                          float *var, double momentum) {
  int dp = 1;
  MPI_Comm_size(g.dp, &dp);
  if (dp > 1)
    all_reduce_forward(moments, slots * 2 * C, g.dp);
  for (int64_t k = 0; k < slots; ++k)
    onnx_kernels::batchnorm_running_update(mean, var, moments + k * 2 * C, C,
                                           momentum);
  std::fill(moments, moments + slots * 2 * C, 0.0f);
}

void add_into(float *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}

void gather_backward_local(float *dshard, const float *dfull, const Shape &full,
                           int64_t dim) {
  const int64_t tp = program_spec().tp;
  std::vector<float> part(size_t(numel(full) / tp));
  slice_forward(part.data(), dfull, full, dim, tp, g.rtp);
  add_into(dshard, part.data(), int64_t(part.size()));
}

void slice_backward_gather(float *dfull, const float *dshard,
                           const Shape &shard, int64_t dim) {
  std::vector<float> whole(size_t(numel(shard) * program_spec().tp));
  all_gather_forward(whole.data(), dshard, shard, dim, g.tp);
  add_into(dfull, whole.data(), int64_t(whole.size()));
}

void load_tokens(int64_t step, int64_t mb, int32_t *ids, int32_t *targets) {
  tokens.read(program_spec(), seed, data_batch(step), g.rdp, mb, ids, targets);
}

void load_samples(int64_t step, int64_t mb, float *x, int32_t *labels) {
  class_samples(program_spec(), seed, data_batch(step), g.rdp, mb, x, labels);
}

const Csr &graph_adjacency() { return adjacency; }
const float *graph_features() { return graph.features(); }
const int32_t *graph_labels() {
  return graph.train_labels.data() + graph.node0;
}
const int32_t *graph_heldout_labels() {
  return graph.heldout_labels.data() + graph.node0;
}

namespace {

class CpuBackend : public Backend {
public:
  explicit CpuBackend(const Program &p) : p_(p), s_(p.spec) {}

  void start(int *argc, char ***argv) override { mpi_init(argc, argv); }

  int64_t setup(int argc, char **argv, Options &o) override {
    o = parse_options(argc, argv, s_.zero != 0, p_.kfac != nullptr);
    seed = o.seed;
    MeshAxes axes;
    g.mesh = make_mesh(s_, axes, g.rpp, g.rdp, g.rtp);
    g.pp = g.mesh->axis(0);
    g.dp = g.mesh->axis(axes.dp);
    g.tp = g.mesh->axis(axes.tp);
    if (s_.data == DataKind::Classes && !o.data.empty())
      throw std::invalid_argument("--data: a classification model trains on "
                                  "synthetic class prototypes generated from "
                                  "--seed");
    check_data_flags(s_, o.data, o.graph);
    if (s_.graph_model()) {
      graph = graph_shard(s_, seed, g.rdp, o.graph);
      adjacency.rows = int32_t(graph.rows);
      adjacency.cols = int32_t(s_.nodes);
      // Moved, not copied: a Reddit-sized adjacency is about 1 GB.
      adjacency.rowPtr = std::move(graph.row_ptr);
      adjacency.colIdx = std::move(graph.col_idx);
      adjacency.values = std::move(graph.values);
    } else if (!o.data.empty()) {
      tokens.open(o.data, s_.vocab);
    }
    gOomRank = int(g.mesh->rank());
    gOomPredicted = s_.predicted_peak_bytes;
    std::set_new_handler(out_of_host_memory);
    gOomWhat = "the parameters (value, gradient, AdamW m and v)";
    init_params();
    kfac_on_ = o.optimizer == "kfac";
    if (kfac_on_) {
      gOomWhat = "the K-FAC factors and inverses";
      kfac.setup(*p_.kfac, o, s_);
    }
    gOomWhat = "the stages' buffers (activations and their gradients, one set "
               "per micro-batch in flight)";
    p_.allocate_stages();
    gOomWhat = "a runtime buffer";
    return load_start(o, s_, *this);
  }

  double world_sum(double count, int site) override {
    return world_sum_filling(count, site);
  }

  void begin_run(const Options &o, RunMetrics &m) override {
    trace.set_enabled(o.trace);
    if (o.trace)
      set_comm_trace(&trace);
    m.info["backend"] = "cpu";
    if (s_.graph_model())
      graph_info(graph, m.info);
  }

  void run_step(int64_t step) override {
    for (const ParamSpec &ps : p_.params)
      std::fill(ps.p->grad.begin(), ps.p->grad.end(), 0.0f);
    if (kfac_on_)
      kfac.begin_step(step);
    p_.run_schedule(step);
    if (kfac_on_) // the items wait filling left wait for later steps
      kfac.end_schedule();
    wait_all(pending);
    pendingByTag.clear();
    if (p_.update_buffers)
      p_.update_buffers();
  }

  /// The gradients summed over the ranks sharing them, clipped under
  /// --grad-clip, then the update: every parameter's gradient is complete
  /// before the global norm is taken.
  void optimizer_step(const Options &o, int64_t t, double lr) override {
    const bool zero = s_.zero && !kfac_on_; // K-FAC shards its rule's state
    for (const ParamSpec &ps : p_.params)
      if (ps.p->held)
        sync_grad(ps, zero);
    if (o.grad_clip > 0)
      grad_norm_ = clip_grads(float(o.grad_clip), zero);
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
        zero_adamw_update(p->value.data(), p->grad.data(), p->m.data(),
                          p->v.data(), p->padded, c, t, g.dp);
      else if (o.optimizer == "sgd")
        sgd_step(p->value.data(), p->grad.data(), p->m.data(), p->n, float(lr),
                 float(o.momentum), float(o.weight_decay), t);
      else
        adamw_step(p->value.data(), p->grad.data(), p->m.data(), p->v.data(),
                   p->n, c, t);
    }
  }

  double grad_norm() const override { return grad_norm_; }

  /// The CPU program's parameters and optimizer state are host memory
  /// already: the entries point at them (copy_params has nothing to do).
  std::vector<CheckpointEntry> checkpoint_entries(bool with_state) override {
    std::vector<CheckpointEntry> e;
    for (const ParamSpec &ps : p_.params) {
      Param *p = ps.p;
      add_checkpoint_entries(e, *p, p->value.data(), p->m.data(), p->v.data(),
                             with_state, s_, g.rtp, g.rdp);
    }
    add_buffer_entries(e, p_.buffers, g.rpp);
    if (kfac_on_ && with_state) // the inverses in use (KfacRun.h)
      kfac.checkpoint_entries(e);
    return e;
  }

  void copy_params(bool to_host) override {
    if (kfac_on_ && !to_host)
      kfac.restored();
  }

  void write_outputs(const Options &o, RunMetrics &m) override {
    m.predicted_peak_bytes = s_.predicted_peak_bytes;
    if (kfac_on_) {
      kfac.drain(); // the filling thread's last items, before its counts
      kfac.info(m.info);
    }
    write_run_metrics(m, o.out + "/metrics.json", MPI_COMM_WORLD);
    if (o.trace)
      write_run_trace(trace, o.out + "/trace.json", MPI_COMM_WORLD);
  }

  void shutdown(bool) override {
    kfac.stop_worker(); // no K-FAC work after the run, whatever ended it
    g = Grid{};
  }

private:
  bool kfac_on_ = false;
  double grad_norm_ = 0; // the last step's, before clipping

  /// Sums a held parameter's gradient over the ranks sharing it: its other
  /// pipeline devices (tied, Chimera: the rank often waits here for the other
  /// copy's stage, K-FAC's filling runs meanwhile), tp where split rows left
  /// it partial, and dp (under ZeRO reduce-scattered to this rank's shard).
  void sync_grad(const ParamSpec &ps, bool zero) {
    Param *p = ps.p;
    if (p->devices != MPI_COMM_NULL)
      all_reduce_forward_filling(p->grad.data(), p->n, p->devices,
                                 int(&ps - p_.params.data()));
    if (s_.tp > 1 && p_.grad_partial_over_tp(*p))
      all_reduce_forward(p->grad.data(), p->n, g.tp);
    if (zero)
      zero_reduce_gradient(p->grad.data(), p->padded, g.dp);
    else if (s_.dp > 1)
      all_reduce_forward(p->grad.data(), p->n, g.dp);
  }

  /// torch.nn.utils.clip_grad_norm_ over the summed gradients: the squares of
  /// each distinct element once over the world (grad_range), in parameter
  /// order, then summed over the world; every rank scales what it steps by
  /// clip_factor. Returns the norm before clipping.
  double clip_grads(float max_norm, bool zero) {
    std::vector<GradRange> ranges(p_.params.size());
    double local = 0;
    for (size_t i = 0; i < p_.params.size(); ++i) {
      const ParamSpec &ps = p_.params[i];
      ranges[i] = grad_range(*ps.p, ps.devices, s_, g.rpp, g.rtp, g.rdp, zero);
      if (ranges[i].counted)
        local += grad_norm_squared(ps.p->grad.data() + ranges[i].offset,
                                   ranges[i].n);
    }
    const double norm = std::sqrt(world_sum_filling(local, kGradNormSite));
    const float f = clip_factor(norm, max_norm);
    if (f < 1.0f)
      for (size_t i = 0; i < p_.params.size(); ++i) {
        float *grad = p_.params[i].p->grad.data() + ranges[i].offset;
        for (int64_t k = 0; k < ranges[i].n; ++k)
          grad[k] *= f;
      }
    return norm;
  }

  void init_params() {
    DeviceGroups<MPI_Comm> groups;
    for (const ParamSpec &ps : p_.params) {
      Param &p = *ps.p;
      lay_out(ps, s_, g.rtp, g.rpp);
      // Devices sharing the parameter sum its gradient over theirs.
      if (const MPI_Comm *c = groups.of(ps.devices, [&](int) {
            MPI_Comm made = MPI_COMM_NULL;
            mpiCheck(MPI_Comm_split(g.pp, p.held ? 0 : MPI_UNDEFINED,
                                    int(g.rpp), &made));
            return made;
          }))
        p.devices = *c;
      if (!p.held)
        continue;
      p.value.assign(size_t(p.padded), 0.0f);
      p.grad.assign(size_t(p.padded), 0.0f);
      const int64_t state = zero_state_size(p.n, p.padded, s_.zero, s_.dp);
      p.m.assign(size_t(state), 0.0f);
      p.v.assign(size_t(state), 0.0f);
      if (std::strcmp(ps.init, "ones") == 0)
        std::fill(p.value.begin(), p.value.begin() + p.n, 1.0f);
      else if (std::strcmp(ps.init, "normal") == 0)
        init_normal(p.value.data(), p.slice, seed, p.name, 0.0f, float(ps.std));
    }
  }

  const Program &p_;
  const ProgramSpec &s_;
};

} // namespace

int run_program(int argc, char **argv, const Program &program) {
  CpuBackend backend(program);
  return run_main(argc, argv, program.spec, program.counts, backend);
}

} // namespace autoddl::rt::harness
