//===- ProgramRun.cpp - the run of a generated program, for both backends -===//
#include "backends/common/harness/ProgramRun.h"

#include "backends/common/FileIo.h"
#include "backends/common/harness/Anomalies.h"
#include "backends/common/harness/DataOrder.h"
#include "backends/common/harness/LrSchedule.h"
#include "backends/common/harness/RunCheckpoint.h"
#include "backends/host/CommStats.h"
#include "backends/host/MpiCheck.h"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <sys/stat.h>

#include <mpi.h>

namespace autoddl::rt::harness {

double Backend::world_sum(double count, int) {
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_DOUBLE, MPI_SUM,
                         MPI_COMM_WORLD));
  return count;
}

double Backend::work_clock() {
  return thread_cpu_seconds() - comm_cpu_seconds();
}

namespace {

/// AUTODDL_TEST_KILL_RANK=R:S (tests only): rank R kills itself (SIGKILL)
/// before step S (0-based) of a run that started at step 0 (not of the run
/// resumed after it), as a lost node would. -1: not here.
int64_t test_kill_step(int rank, int64_t first_step) {
  const char *v = std::getenv("AUTODDL_TEST_KILL_RANK");
  long long r = -1, step = -1;
  if (!v || std::sscanf(v, "%lld:%lld", &r, &step) != 2 || r != rank ||
      first_step != 0)
    return -1;
  return step;
}

/// Why a run stops at step `step` (0-based) whose loss is not finite.
std::string diverged_line(int64_t step, double loss) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "step %lld: the loss is %s: training diverged (try a "
                "lower --lr); no outputs or checkpoint written",
                (long long)step + 1, std::isnan(loss) ? "nan" : "inf");
  return buf;
}

/// --on-nan rollback after step `step` (0-based) gave a non-finite loss (on
/// every rank alike: the loss is summed over the world): waits for the write
/// in flight, reloads the newest complete checkpoint under --save (step C)
/// and skips the global data batches read since it, the bad one included, so
/// step C reads the batch after the bad one. Said in one line on rank 0 and
/// noted in `log`. Returns C, or -1 with `why` set when it cannot (no
/// rollbacks left, no complete checkpoint).
int64_t roll_back(const Options &o, const ProgramSpec &s, Backend &b,
                  int64_t step, double loss, Checkpointer &saver,
                  RollbackLog &log, std::string &why) {
  why = diverged_line(step, loss);
  if (log.count >= o.on_nan_retries) {
    why += "; --on-nan rollback: the " + std::to_string(o.on_nan_retries) +
           " rollbacks of --on-nan-retries are spent";
    return -1;
  }
  saver.finish();
  // Rank 0 picks the checkpoint for every rank: another rank's writer may
  // be done before rank 0 renamed the folder of the last save.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string dir, error;
  if (rank == 0) {
    std::vector<std::string> incomplete;
    try {
      dir = newest_checkpoint(o.save, incomplete);
      if (dir.empty())
        error = "no checkpoint under " + o.save +
                " to reload (save one with --save-every)";
    } catch (const std::runtime_error &e) {
      error = e.what();
    }
  }
  std::string picked = error.empty() ? "+" + dir : "-" + error;
  int64_t size = int64_t(picked.size());
  mpiCheck(MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  picked.resize(size_t(size));
  mpiCheck(MPI_Bcast(picked.data(), int(size), MPI_CHAR, 0, MPI_COMM_WORLD));
  if (picked[0] == '-') {
    why += "; --on-nan rollback: " + picked.substr(1);
    return -1;
  }
  dir = picked.substr(1);
  const int64_t bad = data_batch(step);
  const int64_t c = load_checkpoint(dir, s, b, o.optimizer);
  const int64_t from = data_batch(c); // the checkpoint's skip, now loaded
  set_data_skip(bad + 1 - c);
  char entry[512];
  std::snprintf(entry, sizeof entry,
                "step %lld: loss %s; reloaded %s (step %lld); data batches "
                "%lld-%lld skipped",
                (long long)step + 1, std::isnan(loss) ? "nan" : "inf",
                dir.c_str(), (long long)c, (long long)from, (long long)bad);
  log.add(entry);
  if (rank == 0) {
    std::printf("--on-nan rollback %lld of %lld: %s\n", (long long)log.count,
                (long long)o.on_nan_retries, entry);
    std::fflush(stdout);
  }
  return c;
}

/// Step `step`'s line on rank 0 (the loss, the accuracies the model has, the
/// gradient norm under --grad-clip, the time).
void print_step(const Options &o, const StepCounts &counts, int64_t step,
                double loss, double accuracy, double heldout_accuracy,
                double grad_norm, double seconds) {
  std::printf("step %4lld/%lld: loss %.6f", (long long)step + 1,
              (long long)o.steps, loss);
  if (counts.correct || counts.heldout_correct)
    std::printf(" accuracy %.4f", accuracy);
  if (counts.heldout_correct)
    std::printf(" held-out %.4f", heldout_accuracy);
  if (o.grad_clip > 0)
    std::printf(" norm %.4f", grad_norm);
  std::printf(" (%.1f ms)\n", seconds * 1e3);
}

/// The steps: each runs the schedule and the optimizer, prints its loss (and
/// accuracy) on rank 0 and saves a checkpoint every --save-every steps (and
/// after the last step under --save). Returns "" or, when the loss stops
/// being finite (and --on-nan rollback cannot go back), why the run stopped
/// (every rank sees the same summed loss, so every rank stops at the same
/// step).
std::string train(const ProgramSpec &s, const StepCounts &counts,
                  const Options &o, int64_t first_step, Backend &b) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool root = rank == 0;
  RunMetrics metrics;
  metrics.items_per_step = double(s.loss_count);
  metrics.items_name = s.data == DataKind::Tokens ? "tokens" : "samples";
  metrics.info["model"] = s.model_name;
  metrics.info["first_step"] = std::to_string(first_step);
  metrics.info["ranks"] = std::to_string(s.ranks());
  if (o.grad_clip > 0) {
    char clip[32];
    std::snprintf(clip, sizeof clip, "%g", o.grad_clip);
    metrics.info["grad_clip"] = clip;
  }
  b.begin_run(o, metrics);
  Checkpointer saver(o, s, b, metrics);
  if (o.save_initial && first_step == 0)
    saver.save(0);
  const int64_t kill_at = test_kill_step(rank, first_step);
  const int64_t slow_ms = test_slow_milliseconds(rank);
  const int64_t nan_batch = test_nan_data_batch();
  StragglerWatch stragglers(o.straggler_factor, o.straggler_window);
  RollbackLog rollbacks;
  const LrSchedule schedule = lr_schedule(o);
  double accuracy = 0, heldout_accuracy = 0; // of the last step
  for (int64_t step = first_step; step < o.steps; ++step) {
    if (step == kill_at) // tests only: a rank lost mid-run
      std::raise(SIGKILL);
    Timer timer;
    const double work_before = b.work_clock();
    if (slow_ms > 0) // tests only: a slow rank
      spin_for_test(slow_ms);
    b.run_step(step);
    // The update is queued before the host waits for the loss (a device
    // then does not idle while the host launches it); it does not touch the
    // loss the forward passes wrote.
    const double lr = lr_at(schedule, step);
    b.optimizer_step(o, step + 1, lr);
    double loss = b.world_sum(counts.loss_sum(), 0) / double(s.loss_count);
    if (data_batch(step) == nan_batch) // tests only: a bad batch
      loss = std::numeric_limits<double>::quiet_NaN();
    if (!std::isfinite(loss)) {
      if (!o.on_nan_rollback)
        return diverged_line(step, loss);
      std::string why;
      const int64_t c = roll_back(o, s, b, step, loss, saver, rollbacks, why);
      if (c < 0)
        return why;
      // metrics.json's losses are those of the steps the final state went
      // through: the rolled-back steps' are dropped (rollback_log names
      // them).
      if (c < first_step) {
        first_step = c;
        metrics.info["first_step"] = std::to_string(c);
      }
      saver.restart_compression();
      metrics.loss.resize(size_t(c - first_step));
      metrics.lr.resize(size_t(c - first_step));
      if (o.grad_clip > 0)
        metrics.grad_norm.resize(size_t(c - first_step));
      metrics.step_seconds.resize(size_t(c - first_step));
      step = c - 1;
      continue;
    }
    if (counts.correct)
      accuracy = b.world_sum(counts.correct(), 1) / double(s.loss_count);
    if (counts.heldout_correct)
      heldout_accuracy =
          b.world_sum(counts.heldout_correct(), 2) / double(s.held_out_count);
    b.end_step(step);
    const double seconds = timer.seconds();
    b.after_step(o, step, first_step);
    stragglers.add(step, b.work_clock() - work_before);
    metrics.loss.push_back(loss);
    metrics.lr.push_back(lr);
    if (o.grad_clip > 0)
      metrics.grad_norm.push_back(b.grad_norm());
    metrics.step_seconds.push_back(seconds);
    if (root && !o.quiet)
      print_step(o, counts, step, loss, accuracy, heldout_accuracy,
                 o.grad_clip > 0 ? metrics.grad_norm.back() : 0, seconds);
    std::fflush(stdout);
    if (o.save_every > 0 && (step + 1) % o.save_every == 0)
      saver.save(step + 1);
  }
  // --save alone keeps the last step (docs/checkpoints.md).
  const bool saved_last = o.save_every > 0 && o.steps % o.save_every == 0;
  if (!o.save.empty() && o.steps > first_step && !saved_last)
    saver.save(o.steps);
  saver.finish(); // the last write ends before the run reports
  if (o.checkpoint_compress)
    metrics.info["checkpoint_compress"] =
        saver.compressed().empty() ? "no compressed save" : saver.compressed();
  stragglers.finish(metrics.info);
  if (o.on_nan_rollback)
    rollbacks.fill(metrics.info);
  if (data_skip() > 0)
    metrics.info["data_skipped"] = std::to_string(data_skip());
  if (counts.correct)
    metrics.info["accuracy"] = std::to_string(accuracy);
  if (counts.heldout_correct)
    metrics.info["heldout_accuracy"] = std::to_string(heldout_accuracy);
  if (!o.out.empty()) {
    if (root)
      make_directories(o.out);
    b.write_outputs(o, metrics);
  }
  return "";
}

/// --out DIR holding an earlier run's results: refused unless --overwrite,
/// and a FIFO, device or link to one at their names is refused even then
/// (the run would write into it or replace it).
void check_earlier_outputs(const Options &o) {
  for (const char *name : {"metrics.json", "trace.json"}) {
    const std::string path = o.out + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0)
      continue;
    if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0)
      throw std::runtime_error("--out " + quote_value(o.out) + ": " + path +
                               " is a link to a missing file; refusing to "
                               "replace it");
    if (!S_ISREG(st.st_mode))
      throw std::runtime_error("--out " + quote_value(o.out) + ": " + path +
                               " is not a regular file (a FIFO, device or "
                               "folder); refusing to write there");
    if (!o.overwrite)
      throw std::runtime_error("--out " + quote_value(o.out) + ": " + path +
                               " exists (an earlier run's); refusing to "
                               "replace it (give --overwrite or a new "
                               "folder)");
  }
}

/// What setup leaves to the harness: a resumed step beyond --steps, and the
/// output folders, which rank 0 writes: an unusable one is found before the
/// first step, not after the last.
void check_run(const Options &o, int64_t first_step) {
  if (first_step > o.steps)
    throw std::invalid_argument("--resume " + quote_value(o.resume) +
                                ": the checkpoint is of step " +
                                std::to_string(first_step) +
                                ", beyond --steps " + std::to_string(o.steps));
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0)
    return;
  if (!o.out.empty()) {
    check_output_dir(o.out, "--out");
    check_earlier_outputs(o);
  }
  if (!o.save.empty())
    check_output_dir(o.save, "--save");
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
  // Before MPI: --help needs no launcher and no ranks.
  if (wants_help(argc, argv)) {
    std::fputs(usage(argc > 0 ? argv[0] : "train", quote_value(spec.model_name),
                     backend.own_flags())
                   .c_str(),
               stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  Options o;
  int64_t first_step = 0;
  bool bad = false, started = false;
  std::string message;
  try {
    check_environment(); // before MPI: every rank finds it alike, alone
    backend.start(&argc, &argv);
    started = true;
    first_step = backend.setup(argc, argv, o);
    check_run(o, first_step);
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
  std::string diverged;
  try {
    diverged = train(spec, counts, o, first_step, backend);
  } catch (const std::exception &e) {
    if (backend.rank_in_errors)
      std::fprintf(stderr, "autoddl: rank %d: error: %s\n", rank, e.what());
    else
      std::fprintf(stderr, "error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (!diverged.empty() && rank == 0)
    std::fprintf(stderr, "error: %s\n", diverged.c_str());
  backend.shutdown(true);
  MPI_Finalize();
  return diverged.empty() ? 0 : 1;
}

} // namespace autoddl::rt::harness
