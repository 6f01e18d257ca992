//===- RunCheckpoint.h - a run's checkpoints: saved, compressed, loaded
//----===//
//
// The checkpoint side of a generated program's run (ProgramRun.h declares the
// loads and saves both backends call): the saves of a run (Checkpointer:
// snapshot, the asynchronous parallel writer, --checkpoint-compress), and
// the loads of --resume, --resume auto, --init and --on-nan rollback
// (docs/checkpoints.md).
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_RUNCHECKPOINT_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_RUNCHECKPOINT_H

#include "backends/common/Metrics.h"
#include "backends/common/harness/CompressedCheckpoint.h"
#include "backends/common/harness/ProgramRun.h"
#include "backends/host/Checkpoint.h"

#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// --save's checkpoints during a run: each snapshotted at its step and
/// written by every rank's CheckpointWriter (its part; rank 0 renames the
/// folder), on its thread unless --save-sync. A save finding the previous
/// write in flight waits for it (said on stdout); finish() waits for the
/// last. Their timings go to metrics.json.
class Checkpointer {
public:
  Checkpointer(const Options &o, const ProgramSpec &s, Backend &b,
               RunMetrics &m);
  /// Collective: the checkpoint after `steps_done` steps.
  void save(int64_t steps_done);
  /// After a rollback: the next save is a full one (the base in memory may
  /// be newer than the state reloaded, and a later save could replace its
  /// folder).
  void restart_compression() { compress_ = CompressState(); }
  /// Waits for the write in flight (the last one at the run's end, or before
  /// a rollback reads the newest checkpoint) and notes the write times.
  void finish();
  /// The compressed saves: "step-N: ratio (stored of raw MB)", over all
  /// ranks' parts (metrics.json info.checkpoint_compress).
  const std::string &compressed() const { return compressed_; }

private:
  const Options &o_;
  const ProgramSpec &s_;
  Backend &b_;
  RunMetrics &m_;
  bool root_ = false;
  CheckpointWriter writer_;
  CompressState compress_;
  std::string compressed_;
  std::vector<std::string> compressed_dirs_; // written since finish()
};

/// The FP8 linears' scaling state (backends/common/Fp8State.h;
/// docs/checkpoints.md "FP8 scaling"), optimizer state: an entry a weight of
/// `weights` (the program's FP8 linears, in its order) named
/// "<weight>.fp8_scaling", F32 [world ranks, kFp8RowFloats], this rank's row
/// in `rows` (sized and zeroed here: a load fills the rows it reads, a
/// snapshot all of them).
void add_fp8_scaling_entries(std::vector<CheckpointEntry> &e,
                             const std::vector<const char *> &weights,
                             std::vector<float> &rows);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_RUNCHECKPOINT_H
