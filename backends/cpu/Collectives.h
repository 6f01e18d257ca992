// Boxing collectives over MPI communicators (one per mesh-axis group, Mesh.h),
// each with its backward transpose, plus send/recv between pipeline stages.
// fp32, sum reductions.
//
// Layouts follow SBP: on a group of p ranks, S(i) means dimension i of the full
// tensor is split into p equal contiguous parts and the rank with index r in
// the communicator holds part r; B is a full copy on every rank; P holds
// full-shape partial sums. Tensors are contiguous row-major, so a shard of a
// dimension other than 0 is not a contiguous range of the full tensor: the
// wrappers pack and unpack so that callers only ever see whole local shards.
//
// forward        collective       backward (transpose applied to the gradient)
//   P -> B       all_reduce       identity (the gradient of B is replicated)
//   S(i) -> B    all_gather       reduce_scatter (the gradient arrives as P)
//   P -> S(i)    reduce_scatter   all_gather
//   S(i) -> S(j) all_to_all       all_to_all S(j) -> S(i)
//   B -> S(i)    slice (local)    all_gather
//   stage k->k+1 send / recv      recv / send of the gradient
// Backward functions ADD into the gradient they are given, as the kernels do.
// Every call adds its time and buffer bytes to comm_stats() under its kind, and
// to the trace when one is set.
#ifndef AUTODDL_BACKENDS_CPU_COLLECTIVES_H
#define AUTODDL_BACKENDS_CPU_COLLECTIVES_H

#include "backends/common/Metrics.h"
#include "backends/common/Tensor.h"
#include "backends/common/Trace.h"
#include "backends/cpu/kernels/CrossEntropy.h" // the vocab-parallel steps
#include "backends/host/CommStats.h"           // comm_stats, set_comm_trace
#include "backends/host/MpiCheck.h"            // comm_size, comm_rank

#include <cstdint>
#include <mpi.h>
#include <vector>

namespace autoddl::rt {


// ---- local packing (no communication) ----

/// blocks[p][outer][chunk] from x viewed as [outer][p][chunk] where shape[dim]
/// = p * part: block r is the r-th S(dim) shard of x, contiguous. `shape` is
/// x's shape.
void split_blocks(float *blocks, const float *x, const Shape &shape,
                  int64_t dim, int64_t p);
/// The inverse: x[outer][p][chunk] (+)= blocks[p][outer][chunk]; `shape` is x's
/// (full) shape.
void concat_blocks(float *x, const float *blocks, const Shape &shape,
                   int64_t dim, int64_t p, bool accumulate);
/// out = the r-th of p S(dim) shards of x (B -> S(dim), free: no
/// communication).
void slice_forward(float *out, const float *x, const Shape &shape, int64_t dim,
                   int64_t p, int64_t r);
/// The same for token ids and labels (an input split by batch or sequence).
void slice_forward(int32_t *out, const int32_t *x, const Shape &shape,
                   int64_t dim, int64_t p, int64_t r);

// ---- collectives ----

/// P -> B: buf[n] = sum over the group, in place.
void all_reduce_forward(float *buf, int64_t n, MPI_Comm comm);
/// The transpose of P -> B is the identity on a replicated gradient: nothing to
/// do (kept so that generated code names every transpose it applies).
inline void all_reduce_backward(float * /*dbuf*/, int64_t /*n*/,
                                MPI_Comm /*comm*/) {}
/// Element-wise max over the group, in place (vocab-parallel cross-entropy).
void all_reduce_max(float *buf, int64_t n, MPI_Comm comm);

/// S(dim) -> B: full[shard_shape with dim * p] from each rank's
/// shard[shard_shape].
void all_gather_forward(float *full, const float *shard,
                        const Shape &shard_shape, int64_t dim, MPI_Comm comm);
/// dshard[shard_shape] += reduce_scatter of dfull (the gradient of the gathered
/// tensor, as P).
void all_gather_backward(float *dshard, const float *dfull,
                         const Shape &shard_shape, int64_t dim, MPI_Comm comm);

/// P -> S(dim): shard[full_shape with dim / p] = this rank's part of the sum of
/// full[full_shape].
void reduce_scatter_forward(float *shard, const float *full,
                            const Shape &full_shape, int64_t dim,
                            MPI_Comm comm);
/// dfull[full_shape] += all_gather of dshard.
void reduce_scatter_backward(float *dfull, const float *dshard,
                             const Shape &full_shape, int64_t dim,
                             MPI_Comm comm);

/// S(in_dim) -> S(out_dim): `in` is the local shard of shape in_shape (in_dim
/// split, out_dim whole); `out` is in_shape with in_dim * p and out_dim / p.
/// in_dim != out_dim.
void all_to_all_forward(float *out, const float *in, const Shape &in_shape,
                        int64_t in_dim, int64_t out_dim, MPI_Comm comm);
/// din[in_shape] += all_to_all S(out_dim) -> S(in_dim) of dout.
void all_to_all_backward(float *din, const float *dout, const Shape &in_shape,
                         int64_t in_dim, int64_t out_dim, MPI_Comm comm);

/// Point-to-point between pipeline stages (world ranks of `comm`); blocking.
void send(const float *buf, int64_t n, int dest, int tag, MPI_Comm comm);
void recv(float *buf, int64_t n, int source, int tag, MPI_Comm comm);
/// Work recv may do while its message has not arrived: the hook runs one
/// piece (RecvWaitWork::Ran: compute, not receive time), or naps while
/// another thread works (Napped: receive time), or returns None when it has
/// nothing that fits (recv then blocks). `budget_s` is how much longer the message is expected to
/// take: the wait of the same receive (source, tag, communicator) last time,
/// less the time waited so far; +inf the first time. A wait that ended while
/// the hook worked is remembered by its lower bound (the last test that found
/// nothing), so an overrun makes the next budget smaller, not larger. Null
/// (the default): recv blocks at once. K-FAC's filling sets it
/// (harness/KfacRun.h, AUTODDL_KFAC_FILL=waits or thread).
enum class RecvWaitWork { None, Ran, Napped };
using RecvWaitHook = RecvWaitWork (*)(double budget_s);
void set_recv_wait_hook(RecvWaitHook hook);
/// The waits between steps where a rank idles for others, run like recv's
/// (the hook's work or naps while the result has not come, in pieces of at
/// most 400 us: the peers progress only when this rank tests; blocking where
/// no hook is set): wait_all (the step's sends), a tied or mirrored
/// parameter's gradient sum (all_reduce_forward), and a sum over the world
/// (MPI_COMM_WORLD, a double). The sums are posted non-blocking with or
/// without a hook, so ranks in different filling modes match. `site` tells
/// apart the waits of one communicator in a step (each keeps its own last
/// wait, the next step's budget). Naps count as "<kind>_napped".
void all_reduce_forward_filling(float *buf, int64_t n, MPI_Comm comm,
                                int site);
double world_sum_filling(double x, int site);
/// Non-blocking forms; complete them with wait_all (which records their time as
/// "send"/"recv").
MPI_Request isend(const float *buf, int64_t n, int dest, int tag,
                  MPI_Comm comm);
MPI_Request irecv(float *buf, int64_t n, int source, int tag, MPI_Comm comm);
void wait_all(std::vector<MPI_Request> &requests);

} // namespace autoddl::rt

// crossentropy_vocab_parallel_forward: kernels/CrossEntropy.h's steps with the
// all-reduces above.
#include "backends/common/VocabParallelLoss.h"

#endif // AUTODDL_BACKENDS_CPU_COLLECTIVES_H
