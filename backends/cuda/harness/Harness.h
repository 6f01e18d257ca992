//===- Harness.h - what a generated CUDA program builds on ---------------===//
//
// The fixed part of every generated CUDA + NCCL training program, compiled
// into the runtime library: the device parameter record, the grid of NCCL
// communicators, the pipeline links and gradient buckets, the helpers the
// generated stage code calls (conversions, pipeline transfers, data on the
// device), and run_program(), which runs the program the generated code
// describes with the host parts both backends share
// (backends/common/harness). docs/runtime.md "Harness".
//
// The generated code refers to these by their plain names (`g.tp`, `trace`,
// `grad_sync`, `Param`, ...): it says `using namespace autoddl::rt::harness`
// (and `using harness::pipe`, which POSIX pipe() would otherwise hide).
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_CUDA_HARNESS_HARNESS_H
#define AUTODDL_BACKENDS_CUDA_HARNESS_HARNESS_H

#include "backends/common/Data.h" // planted_graph_training_nodes
#include "backends/common/Tensor.h"
#include "backends/common/harness/ParamTable.h"
#include "backends/common/harness/Pipeline.h"
#include "backends/common/harness/ProgramRun.h"
#include "backends/common/harness/Spec.h"
#include "backends/common/harness/StageSets.h"
#include "backends/cuda/Comm.h"           // Comm, Pipe, GradSync
#include "backends/cuda/RunReport.h"      // GpuTrace
#include "backends/cuda/Runtime.h"        // act_t, DeviceBuffer
#include "backends/cuda/kernels/Sparse.h" // Csr
#include "backends/host/Mesh.h"

#include <memory>
#include <vector>

namespace autoddl::rt::harness {

/// A stage's activation sets, their shared gradients in device blocks
/// (StageSets.h).
template <class Set>
using StageSets = StageSetsOn<Set, DeviceBuffer<unsigned char>>;

/// What activations are made of (StageCalls.h).
using Act = act_t;

/// A parameter as this rank holds it: its tp block of the full tensor, on the
/// device: fp32 master value, gradient and AdamW state, and the act_t working
/// copy the kernels read. Buffers are padded to a multiple of dp for ZeRO, and
/// to device_n elements for a padded vocabulary (Program::device_numel); the
/// padding stays zero. The real elements come first (the padding rows last).
struct Param : ParamBlock {
  int64_t device_n = 0; // elements of value, grad, work
  DeviceBuffer<float> value, grad, m, v, gshard; // gshard: ZeRO's grad shard
  DeviceBuffer<act_t> work;
  Comm devices;    // pipeline devices sharing it (tied, Chimera); size 1: none
  int bucket = -1; // its gradient bucket (-1: synced at the optimizer step)
};
using ParamSpec = ParamSpecOf<Param>;

/// This rank's place: mesh coordinates (and MPI communicators) from the Mesh,
/// and one NCCL communicator per mesh axis.
struct Grid {
  std::unique_ptr<Mesh> mesh;
  Comm pp, dp, tp;
  int64_t rpp = 0, rdp = 0, rtp = 0;
};
extern Grid g;
extern GpuTrace trace;     // F/B/W timed by CUDA events
extern Pipe pipe;          // pipeline transfers (NCCL, one stream per link)
extern GradSync grad_sync; // data-parallel gradient buckets
extern uint64_t seed;      // --seed
// True while the step runs with its inputs already loaded (preload_inputs,
// ahead of the step graph): forward passes then skip their loads.
extern bool inputs_preloaded;

/// Activations and their gradients between pipeline devices.
void pipe_send(const act_t *buf, int64_t n, int device, int tag);
void pipe_recv(act_t *buf, int64_t n, int device, int tag);
/// Before a micro-batch takes an activation set another used: compute waits
/// for that one's send of `tag` to `device`; later receives wait for compute.
void pipe_sent_wait(int device, int tag);
void pipe_recv_fence();

/// After a step, a batch norm's running mean and var [C] (device) take each
/// micro-batch's moments (`slots` of 2C floats in the global micro-batch
/// order, dp rank-major; this rank filled its own, the others are zero),
/// summed over dp by NCCL (one nonzero term each: exact, so every dp rank
/// applies the same values), in that order; then zeroes them. On
/// compute_stream(): inside the step graph (docs/checkpoints.md "Buffers").
void update_running_stats(float *moments, int64_t slots, int64_t C, float *mean,
                          float *var, double momentum);

/// One data-parallel gradient bucket of a generated program: the model stage
/// whose backward fills it, the backward passes (micro-batches) that complete
/// it, and whether its gradients are partial over tp as well (summed over the
/// stage's dp x tp ranks at once).
struct GradBucket {
  int stage, expected;
  bool over_tp;
};

/// Configures grad_sync from a generated program's tables: `bucket_of[i]` is
/// the bucket of params[i]'s gradient (-1: none), `buckets` the `count`
/// buckets. A rank fills the buckets of the stages it runs, each with its
/// gradients in table order (each tensor is its own all-reduce). Collective
/// over the world when any bucket is over tp.
void configure_grad_buckets(const std::vector<ParamSpec> &params,
                            const int *bucket_of, const GradBucket *buckets,
                            int count);

} // namespace autoddl::rt::harness

#include "backends/common/harness/StageCalls.h" // over Act, Param, Csr, g

#endif // AUTODDL_BACKENDS_CUDA_HARNESS_HARNESS_H
