//===- Options.h - the flags every generated program takes ---------------===//
//
// docs/checkpoints.md "Running a generated program" lists them. A backend's own
// flags (the CUDA program's --profile, --no-cuda-graph) are taken out of argv
// before parse_options sees it.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_OPTIONS_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_OPTIONS_H

#include "backends/common/UserGraph.h"          // GraphFileNames
#include "backends/common/harness/LrSchedule.h" // LrSchedule, LrDecay

#include <cstdint>
#include <limits>
#include <string>

namespace autoddl::rt::harness {

struct Options {
  int64_t steps = 10;
  std::string data, out, save, resume, optimizer = "adamw";
  // --graph-*: a graph model's own graph (UserGraph.h); else generated.
  GraphFileNames graph;
  // --init FILE: a model.safetensors whose tensors replace the initial
  // parameters (full tensors under the model's names; optimizer state fresh).
  std::string init;
  int64_t save_every = 0;
  bool save_initial = false, trace = false, quiet = false;
  // --save-sync: checkpoints written before the next step starts (else by a
  // thread while the next steps run). --resume auto: the newest complete
  // checkpoint under --save.
  bool save_sync = false;
  // --overwrite: --out may replace an earlier run's metrics.json/trace.json.
  bool overwrite = false;
  // Anomalies (docs/checkpoints.md "Anomalies"). --straggler-factor F (0: off)
  // and --straggler-window N: a rank whose median work time over N steps is
  // above F x the median rank's is named. --on-nan stop|rollback and
  // --on-nan-retries R: a non-finite loss stops the run, or reloads the
  // newest checkpoint under --save and skips the data since it, at most R
  // times. --data-skip K: K more global batches skipped from the first step.
  double straggler_factor = 1.5;
  int64_t straggler_window = 10;
  bool on_nan_rollback = false;
  int64_t on_nan_retries = 2, data_skip = 0;
  // --checkpoint-compress: saves between full ones (every
  // --checkpoint-full-every M saves) as BitSnap deltas
  // (CompressedCheckpoint.h).
  bool checkpoint_compress = false;
  int64_t checkpoint_full_every = 4;
  double lr = 1e-3, weight_decay = 0.0, momentum = 0.9;
  // The schedule (LrSchedule.h): --warmup N, --lr-decay, --decay-steps N
  // (0: --steps), --min-lr X (NaN: 0.1 lr).
  int64_t warmup = 0, decay_steps = 0;
  LrDecay lr_decay = LrDecay::None;
  double min_lr = std::numeric_limits<double>::quiet_NaN();
  uint64_t seed = 1234; // --seed: initial weights and synthetic data
  // --grad-clip C: the gradients scaled to a global L2 norm of at most C
  // before each update (torch.nn.utils.clip_grad_norm_); 0: off.
  double grad_clip = 0;
  // --optimizer kfac (a program generated from a K-FAC plan): the plan's
  // values unless given; NaN / 0 / "" mean "not given".
  double kfac_damping = std::numeric_limits<double>::quiet_NaN();
  int64_t kfac_refresh = 0;
  std::string kfac_rule;
  // --kfac-factor-every F, --kfac-factor-decay D (KfacConfig's
  // factor_interval and factor_decay); 0 / NaN: not given.
  int64_t kfac_factor_every = 0;
  bool kfac_stagger = false; // --kfac-stagger (KfacConfig::stagger)
  double kfac_factor_decay = std::numeric_limits<double>::quiet_NaN();
  // --kfac-factor-stride S (KfacConfig::factor_stride); 0: not given.
  int64_t kfac_factor_stride = 0;
};

/// Parses argv[1, argc). `zero`: the plan shards AdamW state (then --optimizer
/// sgd is refused). `kfac`: the program was generated from a K-FAC plan (then
/// --optimizer defaults to kfac; elsewhere kfac and the --kfac-* flags are
/// refused). Throws std::invalid_argument with a one-line message
/// naming the flag and the cause.
Options parse_options(int argc, char **argv, bool zero, bool kfac = false);

/// The run's learning-rate schedule: the flags, their defaults filled in.
LrSchedule lr_schedule(const Options &o);

/// Whether argv[1, argc) asks for --help (or -h): answered before MPI starts.
bool wants_help(int argc, char **argv);

/// The --help text: every flag parse_options takes and `backend_flags`, a
/// backend's own ("FLAG\tHELP\n" lines), for the program trained on `model`.
std::string usage(const std::string &program, const std::string &model,
                  const std::string &backend_flags);

/// The known flag nearest to `unknown` in edit distance ("--steps" for
/// "--stpes"), "" when none is within a third of its length (the
/// unknown-flag message names it; listing every flag made that line too long).
std::string nearest_flag(const std::string &unknown);

/// `v` in double quotes, its first 80 bytes only when longer (for messages).
std::string quote_value(const std::string &v);

/// Throws std::invalid_argument naming the variable and the values it takes
/// when an AUTODDL_* variable a program reads is set to anything else
/// (AUTODDL_CUDA_GRAPH=off would otherwise be read as "on" without a word).
void check_environment();

/// Removes every `flag` from argv (keeping argv[0] and the order of the rest)
/// and returns whether there was one; argc is updated.
bool take_flag(int &argc, char **argv, const char *flag);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_OPTIONS_H
