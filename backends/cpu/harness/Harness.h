//===- Harness.h - what a generated CPU program builds on ----------------===//
//
// The fixed part of every generated CPU + MPI training program, compiled into
// the runtime library: the parameter record, the grid of communicators, the
// helpers the generated stage code calls (conversions, pipeline tags, data),
// and run_program(), which runs the program the generated code describes (its
// spec, parameter table, stages and schedule). docs/runtime.md "Harness".
//
// The generated code refers to these by their plain names (`g.tp`, `trace`,
// `pending`, `add_into`, `Param`, ...): it says `using namespace
// autoddl::rt::harness`.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_CPU_HARNESS_HARNESS_H
#define AUTODDL_BACKENDS_CPU_HARNESS_HARNESS_H

#include "backends/common/Tensor.h"
#include "backends/common/Trace.h"
#include "backends/common/harness/DataOrder.h"
#include "backends/common/harness/ParamTable.h"
#include "backends/common/harness/Pipeline.h"
#include "backends/common/harness/ProgramRun.h"
#include "backends/common/harness/Spec.h"
#include "backends/common/harness/StageSets.h"
#include "backends/cpu/kernels/Sparse.h" // Csr
#include "backends/host/Mesh.h"

#include <memory>
#include <vector>

#include <mpi.h>

namespace autoddl::rt::harness {

/// A stage's activation sets, their shared gradients in host blocks
/// (StageSets.h).
template <class Set>
using StageSets = StageSetsOn<Set, std::vector<unsigned char>>;

/// What activations are made of (StageCalls.h).
using Act = float;

/// A parameter as this rank holds it: its tp block of the full tensor
/// (value, gradient, optimizer state). Buffers are padded to a multiple of dp
/// for ZeRO; the padding stays zero.
struct Param : ParamBlock {
  std::vector<float> value, grad, m, v;
  MPI_Comm devices =
      MPI_COMM_NULL; // pipeline devices sharing it (tied, Chimera)
};
using ParamSpec = ParamSpecOf<Param>;

/// This rank's place: mesh coordinates and one communicator per axis.
struct Grid {
  std::unique_ptr<Mesh> mesh;
  MPI_Comm pp = MPI_COMM_NULL, dp = MPI_COMM_NULL, tp = MPI_COMM_NULL;
  int64_t rpp = 0, rdp = 0, rtp = 0;
};
extern Grid g;
extern TraceRecorder trace;
extern std::vector<MPI_Request> pending; // pipeline sends of this step
/// Lets MPI move the pending sends (called between a stage's ops): without a
/// single-copy transport a send past the eager limit moves only while its
/// sender is inside MPI (docs/codegen.md, "The schedule spelled out").
void progress_sends();
/// A pipeline send (isend on g.pp, kept in `pending` until the step's end).
void pipe_isend(const float *buf, int64_t n, int device, int tag);
/// Waits for this step's send of `tag` to `device`, if any is pending: before
/// a micro-batch overwrites the activation set it was sent from.
void pipe_sent_wait(int device, int tag);
/// Nothing on the CPU: its receives are posted when wanted, in host order
/// (the CUDA program's fence for receives posted ahead, backends/cuda/Comm.h).
inline void pipe_recv_fence() {}
extern uint64_t seed; // --seed

/// dst[i] += src[i].
void add_into(float *dst, const float *src, int64_t n);
/// After a step, a batch norm's running mean and var [C] take each
/// micro-batch's moments (onnx_kernels::batchnorm_moments: 2C floats a slot,
/// `slots` of them in the global micro-batch order, dp rank-major; this rank
/// filled its own, the others are zero), summed over dp (one nonzero term
/// each: exact, so every dp rank applies the same values), in that order;
/// then zeroes them (docs/checkpoints.md "Buffers").
void update_running_stats(float *moments, int64_t slots, int64_t C, float *mean,
                          float *var, double momentum);

} // namespace autoddl::rt::harness

#include "backends/common/harness/StageCalls.h" // over Act, Param, Csr, g

#endif // AUTODDL_BACKENDS_CPU_HARNESS_HARNESS_H
