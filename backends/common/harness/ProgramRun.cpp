//===- ProgramRun.cpp - the run of a generated program, for both backends -===//
#include "backends/common/harness/ProgramRun.h"

#include "backends/common/FileIo.h"
#include "backends/cpu/MpiCheck.h"

#include <cstdio>
#include <stdexcept>

#include <mpi.h>

namespace autoddl::rt::harness {

namespace {

/// The sum over the world of this rank's `count`.
double world_sum(double count) {
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_DOUBLE, MPI_SUM,
                         MPI_COMM_WORLD));
  return count;
}

/// The steps: each runs the schedule and the optimizer, prints its loss (and
/// accuracy) on rank 0 and saves a checkpoint every --save-every steps.
void train(const ProgramSpec &s, const StepCounts &counts, const Options &o,
           int64_t first_step, Backend &b) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool root = rank == 0;
  RunMetrics metrics;
  metrics.items_per_step = double(s.loss_count);
  metrics.items_name = s.data == DataKind::Tokens ? "tokens" : "samples";
  metrics.info["model"] = s.model_name;
  metrics.info["first_step"] = std::to_string(first_step);
  metrics.info["ranks"] = std::to_string(s.ranks());
  b.begin_run(o, metrics);
  if (o.save_initial && first_step == 0)
    save_checkpoint(o, 0, s, b);
  double accuracy = 0, heldout_accuracy = 0; // of the last step
  for (int64_t step = first_step; step < o.steps; ++step) {
    Timer timer;
    b.run_step(step);
    // The update is queued before the host waits for the loss (a device
    // then does not idle while the host launches it); it does not touch the
    // loss the forward passes wrote.
    b.optimizer_step(o, step + 1);
    const double loss = world_sum(counts.loss_sum()) / double(s.loss_count);
    if (counts.correct)
      accuracy = world_sum(counts.correct()) / double(s.loss_count);
    if (counts.heldout_correct)
      heldout_accuracy =
          world_sum(counts.heldout_correct()) / double(s.held_out_count);
    b.end_step(step);
    const double seconds = timer.seconds();
    b.after_step(o, step, first_step);
    metrics.loss.push_back(loss);
    metrics.step_seconds.push_back(seconds);
    if (root && !o.quiet) {
      if (counts.heldout_correct)
        std::printf("step %4lld/%lld: loss %.6f accuracy %.4f held-out %.4f "
                    "(%.1f ms)\n",
                    (long long)step + 1, (long long)o.steps, loss, accuracy,
                    heldout_accuracy, seconds * 1e3);
      else if (counts.correct)
        std::printf("step %4lld/%lld: loss %.6f accuracy %.4f (%.1f ms)\n",
                    (long long)step + 1, (long long)o.steps, loss, accuracy,
                    seconds * 1e3);
      else
        std::printf("step %4lld/%lld: loss %.6f (%.1f ms)\n",
                    (long long)step + 1, (long long)o.steps, loss,
                    seconds * 1e3);
    }
    std::fflush(stdout);
    if (o.save_every > 0 && (step + 1) % o.save_every == 0)
      save_checkpoint(o, step + 1, s, b);
  }
  if (counts.correct)
    metrics.info["accuracy"] = std::to_string(accuracy);
  if (counts.heldout_correct)
    metrics.info["heldout_accuracy"] = std::to_string(heldout_accuracy);
  if (!o.out.empty()) {
    if (root)
      make_directories(o.out);
    b.write_outputs(o, metrics);
  }
}

} // namespace

MeshAxes mesh_axes(const ProgramSpec &s) {
  MeshAxes m;
  m.shape = s.tensor_inner ? std::vector<int64_t>{s.pp, s.dp, s.tp}
                           : std::vector<int64_t>{s.pp, s.tp, s.dp};
  m.dp = s.tensor_inner ? 1 : 2;
  m.tp = s.tensor_inner ? 2 : 1;
  return m;
}

std::unique_ptr<Mesh> make_mesh(const ProgramSpec &s, MeshAxes &axes,
                                int64_t &rpp, int64_t &rdp, int64_t &rtp) {
  axes = mesh_axes(s);
  auto mesh = std::make_unique<Mesh>(axes.shape, MPI_COMM_WORLD);
  rpp = mesh->coord(0);
  rdp = mesh->coord(axes.dp);
  rtp = mesh->coord(axes.tp);
  return mesh;
}

void add_checkpoint_entries(std::vector<CheckpointEntry> &e,
                            const ParamBlock &p, float *value, float *m,
                            float *v, bool with_state, const ProgramSpec &s,
                            int64_t rtp, int64_t rdp) {
  e.push_back({p.name, p.slice, p.held ? value : nullptr, p.full});
  if (!with_state)
    return;
  Slice state = p.slice;
  Shape state_shape = p.full; // the file's shape (slice.full may be a view)
  std::string suffix;
  if (s.zero) {
    state =
        Slice::whole({s.tp * p.padded}).split(0, s.tp, rtp).split(0, s.dp, rdp);
    state_shape = state.full;
    suffix = ".zero";
  }
  e.push_back(
      {p.name + ".exp_avg" + suffix, state, p.held ? m : nullptr, state_shape});
  e.push_back({p.name + ".exp_avg_sq" + suffix, state, p.held ? v : nullptr,
               state_shape});
}

void save_checkpoint(const Options &o, int64_t steps_done, const ProgramSpec &s,
                     Backend &b) {
  const std::string dir = o.save + "/step-" + std::to_string(steps_done);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    make_directories(dir);
  const std::vector<CheckpointEntry> entries = b.checkpoint_entries(true);
  b.copy_params(true);
  checkpoint_save(dir + "/model.safetensors", entries,
                  {{"format", "autoddl"},
                   {"model", s.model_name},
                   {"step", std::to_string(steps_done)},
                   {"optimizer", o.optimizer}},
                  MPI_COMM_WORLD);
}

int64_t load_checkpoint(const std::string &dir, const ProgramSpec &s,
                        Backend &b) {
  auto meta =
      checkpoint_load(dir + "/model.safetensors", b.checkpoint_entries(true));
  auto it = meta.find("step");
  if (it == meta.end())
    throw std::runtime_error(dir + "/model.safetensors: no step in metadata");
  if (meta["model"] != s.model_name)
    throw std::runtime_error(dir +
                             "/model.safetensors: a checkpoint of model " +
                             meta["model"] + ", not " + s.model_name);
  b.copy_params(false);
  return std::stoll(it->second);
}

bool report_setup_error(bool bad, const std::string &message) {
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

int run_main(int argc, char **argv, const ProgramSpec &spec,
             const StepCounts &counts, Backend &backend) {
  set_program_spec(spec);
  Options o;
  int64_t first_step = 0;
  bool bad = false, started = false;
  std::string message;
  try {
    backend.start(&argc, &argv);
    started = true;
    first_step = backend.setup(argc, argv, o);
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
    backend.shutdown(started);
    MPI_Finalize();
    return 1;
  }
  try {
    train(spec, counts, o, first_step, backend);
  } catch (const std::exception &e) {
    if (backend.rank_in_errors)
      std::fprintf(stderr, "autoddl: rank %d: error: %s\n", rank, e.what());
    else
      std::fprintf(stderr, "error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  backend.shutdown(true);
  MPI_Finalize();
  return 0;
}

} // namespace autoddl::rt::harness
