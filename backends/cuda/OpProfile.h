// Per-op-kind device time of a generated CUDA program (`--profile`; issue 6
// part 6, `autoddl validate`). The generated forward/backward compute
// functions wrap each op's kernel calls in an OpScope naming the op kind; the
// scope records a pair of pooled CUDA events on compute_stream(). Once per
// step, after the step's synchronisation, op_profile_finish_step() resolves
// the pairs (cudaEventElapsedTime) into per-kind totals: calls and seconds,
// forward and backward apart. Off by default: when off a scope records
// nothing. The tensor-parallel collectives, which run on compute_stream()
// between the kernels, are scopes of kind "comm:<collective>"; the data-
// parallel gradient sync (its own stream) and pipeline transfers are not
// timed here (metrics.json "collectives" counts their calls and bytes).
#ifndef AUTODDL_BACKENDS_CUDA_OPPROFILE_H
#define AUTODDL_BACKENDS_CUDA_OPPROFILE_H

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>

namespace autoddl::rt {

enum OpPhase : int { kOpForward = 0, kOpBackward = 1 };

void op_profile_enable(bool on);
bool op_profile_enabled();

/// Records the begin event of a scope of `kind` (a string literal); returns
/// the scope's index, -1 when profiling is off.
int op_profile_begin(const char *kind, OpPhase phase);
/// Records the end event of the scope `index` (ignored when negative).
void op_profile_end(int index);

/// Each op's scope opening (kernels/Fp8Linear.cu): an op other than a linear
/// ends what FP8 casts the linears before it hold for the next (fp8_note_op).
void fp8_note_op(const char *kind);

/// RAII form of begin/end, one per op's kernel calls in generated code.
class OpScope {
public:
  OpScope(const char *kind, OpPhase phase)
      : index_(op_profile_enabled() ? op_profile_begin(kind, phase) : -1) {
    fp8_note_op(kind);
  }
  ~OpScope() { op_profile_end(index_); }
  OpScope(const OpScope &) = delete;
  OpScope &operator=(const OpScope &) = delete;

private:
  int index_;
};

/// After the step's work is done (the device synchronised): resolves the
/// step's scopes and, when `count`, adds them to the totals (false for the
/// warm-up step). Reuses the events for the next step.
void op_profile_finish_step(bool count);

struct OpKindTime {
  int64_t forward_calls = 0, backward_calls = 0;
  double forward_s = 0, backward_s = 0;
};
/// The totals so far, by kind, and the number of counted steps.
const std::map<std::string, OpKindTime> &op_profile_totals();
int64_t op_profile_steps();

/// The "op_kinds" object of metrics.json (collectives false): per op kind
/// {"forward_s", "backward_s", "calls"}, seconds and calls per counted step;
/// with collectives true the "tp_collectives" object: the same for the
/// "comm:<kind>" scopes (the tensor-parallel collectives and layout slices on
/// compute_stream()), keyed by <kind>.
std::string op_profile_json(const std::map<std::string, OpKindTime> &totals,
                            int64_t steps, bool collectives);

/// Collective over `comm`: picks the busiest rank (the largest op time per
/// step; ties: the lowest rank) and rank 0 adds its "op_kinds",
/// "tp_collectives", "op_profile_rank" and "op_profile_steps" in front of the
/// members of the metrics.json at `metrics_path` (written before by
/// write_cuda_run_metrics), rewriting it atomically. Does nothing when
/// profiling is off.
void write_op_profile(const std::string &metrics_path, MPI_Comm comm);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_OPPROFILE_H
