//===- StageCalls.h - the harness calls of generated stage code ----------===//
//
// The functions the generated stage code and main() call that both backends
// provide with one signature over their activation type: declared once here,
// defined by each backend's harness (backends/cpu/harness/Harness.cpp on host
// floats, backends/cuda/harness/Harness.cpp on device act_t buffers).
//
// Included by a backend's Harness.h after it declares, in
// autoddl::rt::harness: `Act` (what its activations are made of), `Param`,
// `Csr` (its adjacency format) and `extern Grid g`.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_STAGECALLS_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_STAGECALLS_H

#include "backends/common/Tensor.h"             // Shape
#include "backends/common/harness/Pipeline.h"   // device_runs_stage
#include "backends/common/harness/ProgramRun.h" // ProgramOf

#include <cstdint>

namespace autoddl::rt::harness {

/// Backward of an all-gather S(dim) -> B whose gradient is the same on every
/// tp rank (a replicated consumer): this rank's slice of it.
void gather_backward_local(Act *dshard, const Act *dfull, const Shape &full,
                           int64_t dim);

/// Backward of a local slice B -> S(dim): each tp rank holds the gradient of
/// its slice; all-gather them into the B tensor's gradient.
void slice_backward_gather(Act *dfull, const Act *dshard, const Shape &shard,
                           int64_t dim);

/// Whether this rank's pipeline device runs `stage`.
inline bool holds_stage(int64_t stage) {
  return device_runs_stage(g.rpp, stage);
}

/// Micro-batch mb of this dp rank's block of the step's global batch
/// (DataOrder.h): token ids and targets, either may be null. CUDA: read on
/// the host into page-locked buffers, copied on the compute stream to the
/// device.
void load_tokens(int64_t step, int64_t mb, int32_t *ids, int32_t *targets);
/// The same for a classifier's samples ([class_batch, features]) and labels:
/// DataOrder.h class_samples (CUDA: generated on up to 8 host threads, staged
/// and copied as the tokens are).
void load_samples(int64_t step, int64_t mb, Act *x, int32_t *labels);

/// A graph model's rows on this rank (the planted graph): its adjacency rows
/// (every node a column; CUDA: the W8 formats of A and A^T, kernels/Sparse.h),
/// this dp rank's features, and labels for the loss and for the held-out
/// accuracy.
const Csr &graph_adjacency();
const Act *graph_features();
const int32_t *graph_labels();
const int32_t *graph_heldout_labels();

/// A generated program (common/harness/ProgramRun.h), and its K-FAC layer
/// table (KfacProgram.h).
using Program = ProgramOf<Param>;
template <typename ParamT> struct KfacLayerSpecOf;
using KfacLayerSpec = KfacLayerSpecOf<Param>;
using KfacProgram = KfacProgramOf<Param>;

/// main() of a generated program.
int run_program(int argc, char **argv, const Program &program);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_STAGECALLS_H
