//===- ProgramRun.h - the run of a generated program, for both backends ---===//
//
// main() of every generated program: start, set up (flags, mesh, data,
// parameters, stages, resume), report bad input once, run the steps (the
// schedule, the optimizer, the loss and accuracy lines, checkpoints), write
// metrics.json and the trace, shut down. What differs between the CPU and the
// CUDA program is a Backend (backends/cpu/harness, backends/cuda/harness);
// what differs between plans is the generated code the backend calls.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_PROGRAMRUN_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_PROGRAMRUN_H

#include "backends/common/Metrics.h"
#include "backends/common/harness/Options.h"
#include "backends/common/harness/ParamTable.h"
#include "backends/common/harness/Spec.h"
#include "backends/host/Checkpoint.h"
#include "backends/host/Mesh.h"

#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// The step's sums over this rank's share of the loss (and of the correctly
/// classified samples, and of the held-out nodes), from the generated code:
/// the harness sums them over the world. Null where the model has none.
struct StepCounts {
  double (*loss_sum)() = nullptr;
  double (*correct)() = nullptr;
  double (*heldout_correct)() = nullptr;
};

template <typename ParamT> struct KfacProgramOf; // KfacProgram.h

/// A generated program, either backend's (ParamT: its Param): its plan's
/// constants, its parameter table, and the functions generated for its plan.
/// The CUDA program also frees its device buffers, configures its gradient
/// buckets, preloads a step graph's inputs and pads a vocabulary; the CPU
/// program leaves those null.
template <typename ParamT> struct ProgramOf {
  ProgramSpec spec;
  // A K-FAC plan's layers (else null).
  const KfacProgramOf<ParamT> *kfac = nullptr;
  std::vector<ParamSpecOf<ParamT>> params;
  void (*allocate_stages)() = nullptr;          // the stages this rank runs
  void (*run_schedule)(int64_t step) = nullptr; // this device's instructions
  bool (*grad_partial_over_tp)(const ParamT &) = nullptr; // summed over tp
  StepCounts counts;
  // Module buffers (a batch norm's running statistics), and their update
  // after each step's schedule, before the optimizer (docs/checkpoints.md
  // "Buffers"); none and null for most models.
  std::vector<BufferSpec> buffers;
  void (*update_buffers)() = nullptr;
  // The CUDA program's.
  void (*free_stages)() = nullptr;                   // their device buffers
  void (*free_params)() = nullptr;                   // the parameters' buffers
  void (*configure_grad_sync)() = nullptr;           // the gradient buckets
  void (*preload_inputs)(int64_t step) = nullptr;    // ahead of a step graph
  int64_t (*device_numel)(const ParamT &) = nullptr; // a padded vocabulary
  // An fp8 plan's FP8 linears (planner/ProgramDecisions.h fp8Linear), by
  // their weight's name: the CUDA harness registers their working copies
  // (kernels/Fp8.h), whose GEMMs then run in FP8 where the size rule says.
  std::vector<const char *> fp8_weights;
};

/// One backend's part of a run. Every call is made on every rank.
class Backend {
public:
  virtual ~Backend() = default;
  /// Starts MPI (and the devices); may throw.
  virtual void start(int *argc, char ***argv) = 0;
  /// Everything before the first step; throws on bad input (found the same
  /// way on every rank). Returns the first step (> 0 when resuming).
  virtual int64_t setup(int argc, char **argv, Options &o) = 0;
  /// metrics.json's info before the first step.
  virtual void begin_run(const Options &o, RunMetrics &m) = 0;
  /// Zeroes the gradients and runs the step's schedule (forward, backward,
  /// pipeline transfers) until its work is joined.
  virtual void run_step(int64_t step) = 0;
  /// Gradient synchronisation and the optimizer step t (1, 2, ...) at
  /// learning rate `lr` (lr_at of the step, LrSchedule.h), in place of o.lr.
  virtual void optimizer_step(const Options &o, int64_t t, double lr) = 0;
  /// The sum over the world of this rank's count (the step's loss, its
  /// accuracy counts; `site` tells them apart): a blocking MPI_Allreduce
  /// unless the backend waits otherwise (the CPU program runs K-FAC's
  /// filling while it waits).
  virtual double world_sum(double count, int site);
  /// After the loss is known, before the step's time is read.
  virtual void end_step(int64_t) {}
  /// Under --grad-clip, after end_step: the global gradient norm the last
  /// optimizer_step clipped (before clipping), the same on every rank.
  virtual double grad_norm() const {
    return std::numeric_limits<double>::quiet_NaN();
  }
  /// After the step's time is read.
  virtual void after_step(const Options &, int64_t, int64_t) {}
  /// Seconds of this rank's own work so far, for the straggler check
  /// (Anomalies.h), which takes its growth over each step: by default the
  /// CPU time of the thread running the steps less its time in the
  /// collectives (MPI polls while it waits for a slow peer; a rank the OS
  /// descheduled has no CPU time to show for it; the checkpoint writer's and
  /// K-FAC's filling threads are not counted), right for the CPU program; a
  /// device backend may count its device's work instead.
  virtual double work_clock();
  /// The parameters (and optimizer state) as checkpoint entries, and the
  /// copies between them and the buffers the program trains (to_host:
  /// before a save; else after a load).
  virtual std::vector<CheckpointEntry> checkpoint_entries(bool with_state) = 0;
  virtual void copy_params(bool) {}
  /// A save's snapshot: copies the state into the buffers checkpoint_entries
  /// points at. `async`: the copy may still run when it returns; the function
  /// returned (else empty) waits for it, before the buffers are read (on the
  /// writer thread). Training may go on meanwhile; the backend keeps the
  /// state it copies unchanged until the copy ends.
  virtual std::function<void()> snapshot(bool /*async*/) {
    copy_params(true);
    return {};
  }
  /// Whether checkpoint_entries' buffers are copies of the state that only
  /// snapshot() changes (a device's host buffers), so a write in flight may
  /// read them while training goes on; else (the CPU program's state itself)
  /// a save copies them first.
  virtual bool entries_are_copies() const { return false; }
  /// Writes metrics.json (and the trace under --trace) into o.out, which
  /// exists.
  virtual void write_outputs(const Options &o, RunMetrics &m) = 0;
  /// This backend's own flags for --help ("FLAG\tHELP\n" lines), taken out
  /// of argv by setup before parse_options.
  virtual std::string own_flags() const { return ""; }
  /// Frees what the run holds before MPI goes (`started`: start() returned).
  virtual void shutdown(bool started) = 0;
  /// Whether an error during the steps names the rank ("autoddl: rank R:
  /// error: ..." rather than "error: ...").
  bool rank_in_errors = false;
};

/// main(): runs the program and returns its exit status (1: bad input).
int run_main(int argc, char **argv, const ProgramSpec &spec,
             const StepCounts &counts, Backend &backend);

/// The program's mesh: (pp, dp, tp) or (pp, tp, dp), and where dp and tp are.
struct MeshAxes {
  std::vector<int64_t> shape;
  size_t dp = 1, tp = 2;
};
MeshAxes mesh_axes(const ProgramSpec &s);

/// The program's mesh over MPI_COMM_WORLD, and this rank's coordinates on it.
std::unique_ptr<Mesh> make_mesh(const ProgramSpec &s, MeshAxes &axes,
                                int64_t &rpp, int64_t &rdp, int64_t &rtp);

/// Appends the buffers' checkpoint entries: whole tensors, over their host
/// values where pipeline device `rpp` holds them (else null), marked as
/// buffers (--init keeps a buffer the file lacks).
void add_buffer_entries(std::vector<CheckpointEntry> &e,
                        const std::vector<BufferSpec> &buffers, int64_t rpp);

/// Appends a parameter's checkpoint entries (its value and, with_state, its
/// AdamW moments) over host buffers (null where not held): the same names
/// and layout for both backends, so either resumes the other's checkpoints.
/// The moments are full tensors of the parameter's shape under every plan
/// (a ZeRO shard: the flat range of the tp block this dp rank owns), so any
/// plan of the model resumes them.
void add_checkpoint_entries(std::vector<CheckpointEntry> &e,
                            const ParamBlock &p, float *value, float *m,
                            float *v, bool with_state, const ProgramSpec &s,
                            int64_t rtp, int64_t rdp);

/// Saves the backend's checkpoint entries after `steps_done` steps into
/// o.save/step-N, synchronously and atomically (write_checkpoint_folder): the
/// parameters in model.safetensors (transformers' layout), the optimizer
/// state in optimizer.safetensors, and config.json for a model imported from
/// a Hugging Face config. (A run saves through its asynchronous writer unless
/// --save-sync; the files are the same.)
void save_checkpoint(const Options &o, int64_t steps_done, const ProgramSpec &s,
                     Backend &b);

/// Resumes from `dir` (a step-N directory of --save): loads the parameters
/// and the optimizer state and returns the step. Throws std::runtime_error
/// naming the file and the cause; a checkpoint of another optimizer than
/// `optimizer` (its state means something else) is refused naming both.
int64_t load_checkpoint(const std::string &dir, const ProgramSpec &s,
                        Backend &b, const std::string &optimizer);

/// Where setup starts the run: --resume's checkpoint (its step), or --init's
/// parameters (step 0, fresh optimizer state), or the counter-based
/// initialisation (step 0). --resume auto becomes the newest complete
/// checkpoint under --save (o.resume is set to it; "" when there is none).
/// Throws std::runtime_error naming the file and the cause.
int64_t load_start(Options &o, const ProgramSpec &s, Backend &b);

/// Bad input is found the same way on every rank; the lowest rank that found
/// it reports it. Whether any rank did.
bool report_setup_error(bool bad, const std::string &message);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_PROGRAMRUN_H
