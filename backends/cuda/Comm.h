// Communication of generated CUDA programs (docs/codegen.md "CUDA backend"):
// MPI bootstrap, NCCL communicators (one per mesh-axis group, made with
// ncclCommSplit from a world communicator whose ncclUniqueId is broadcast over
// MPI), the boxing collectives of backends/cpu/Collectives.h with device
// pointers, the data-parallel gradient sync, pipeline send/recv that cannot
// deadlock, and fault handling.
//
// Streams. Tensor-parallel collectives sit on the critical path: they run on
// compute_stream(), simply ordered with the kernels. The data-parallel gradient
// sync runs on its own stream, fenced by events, so it overlaps the rest of the
// backward pass. Pipeline transfers run on one stream per link (ordered pair of
// pipeline devices) over a two-rank communicator per link: a link carries data
// one way only, so a send never waits behind a receive of the same rank.
//
// Launch. Under mpirun (or alone) the world is MPI's; under torchrun (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT, no MPI launcher) it is the TCP world of
// Bootstrap.h, which carries the program's MPI calls (MpiRoute.cpp) and the
// ncclUniqueId.
//
// Faults. Every NCCL call is checked (AUTODDL_NCCL_CHECK); a CUDA or NCCL
// error, or an asynchronous NCCL error seen by the watchdog thread, prints
// "autoddl: rank R: ... in <call> at file:line", aborts every communicator
// (ncclCommAbort) and MPI_Aborts the job (without MPI: tells every rank over
// the TCP world), so that no rank hangs. The watchdog also stops the job when
// this rank made no progress (a host collective, a step starting) for
// AUTODDL_WATCHDOG_TIMEOUT seconds (default 600; 0: never): a hung rank leaves
// the others waiting inside NCCL kernels. AUTODDL_FAULT_INJECT="rank:step:kind"
// makes rank `rank` fail at the start of step `step` (counted from 0 in this
// run) for tests (tests/gpu/fault_gpu.sh): kind cuda (a failing cudaMalloc),
// illegal (a kernel writing to an invalid address), nccl (ncclAllReduce of
// an invalid datatype), hang (the host stops), exit (the process ends
// silently).
#ifndef AUTODDL_BACKENDS_CUDA_COMM_H
#define AUTODDL_BACKENDS_CUDA_COMM_H

#include "backends/common/Tensor.h"
#include "backends/cuda/NcclCheck.h"
#include "backends/cuda/Runtime.h"
#include "backends/cuda/kernels/CrossEntropy.h" // the vocab-parallel steps
#include "backends/host/CommStats.h" // comm_stats: counted as enqueued

#include <cstdint>
#include <map>
#include <mpi.h>
#include <nccl.h>
#include <vector>

namespace autoddl::rt {

[[noreturn]] void nccl_fail(ncclResult_t r, const char *call, const char *file,
                            int line);
#define AUTODDL_NCCL_CHECK(x)                                                  \
  AUTODDL_NCCL_CHECK_WITH(::autoddl::rt::nccl_fail, x)

/// One NCCL communicator and this rank's place in it. size 1 (no nccl) when
/// the group is this rank alone: collectives over it do nothing.
struct Comm {
  ncclComm_t nccl = nullptr;
  int size = 1, rank = 0;
};

/// MPI_Init (mpi_init of backends/host/Mesh.h), the local rank from
/// OMPI_COMM_WORLD_LOCAL_RANK / LOCAL_RANK / SLURM_LOCALID, select_device,
/// NCCL_NVLS_ENABLE=0 unless set, the world communicator, the fault hook and
/// the watchdog. Throws std::runtime_error when there is no CUDA device.
void comm_init(int *argc, char ***argv);
/// The world communicator (every rank).
const Comm &world();
/// ncclCommSplit of the world: ranks with the same color >= 0 form a
/// communicator, ordered by key; color < 0: this rank joins none (returns a
/// size-0 Comm). Collective over the world.
Comm comm_split(int color, int key);
/// Destroys every communicator and stops the watchdog (before MPI_Finalize).
void comm_finalize();
/// Fails this rank here when AUTODDL_FAULT_INJECT names it and this step
/// (GradSync::start_step calls it at every step's start).
void comm_inject_fault();

// ---- boxing collectives over tensor-parallel groups (compute_stream) ----

void all_reduce_forward(float *buf, int64_t n, const Comm &c);
void all_reduce_forward(__nv_bfloat16 *buf, int64_t n, const Comm &c);
void all_reduce_max(float *buf, int64_t n, const Comm &c);
/// S(dim) -> B: full = the shards of every rank along `dim`.
void all_gather_forward(float *full, const float *shard,
                        const Shape &shard_shape, int64_t dim, const Comm &c);
void all_gather_forward(__nv_bfloat16 *full, const __nv_bfloat16 *shard,
                        const Shape &shard_shape, int64_t dim, const Comm &c);
/// P -> S(dim): shard[full_shape with dim / p] = this rank's part of the sum
/// of full[full_shape] over the group (Megatron's sequence-parallel row-linear
/// output).
void reduce_scatter_forward(float *shard, const float *full,
                            const Shape &full_shape, int64_t dim,
                            const Comm &c);
void reduce_scatter_forward(__nv_bfloat16 *shard, const __nv_bfloat16 *full,
                            const Shape &full_shape, int64_t dim,
                            const Comm &c);
/// S(in_dim) -> S(out_dim): `in` is the local shard of shape in_shape (in_dim
/// split, out_dim whole); `out` is in_shape with in_dim * p and out_dim / p.
void all_to_all_forward(float *out, const float *in, const Shape &in_shape,
                        int64_t in_dim, int64_t out_dim, const Comm &c);
void all_to_all_forward(__nv_bfloat16 *out, const __nv_bfloat16 *in,
                        const Shape &in_shape, int64_t in_dim, int64_t out_dim,
                        const Comm &c);
/// din[in_shape] += all_to_all S(out_dim) -> S(in_dim) of dout.
void all_to_all_backward(float *din, const float *dout, const Shape &in_shape,
                         int64_t in_dim, int64_t out_dim, const Comm &c);
void all_to_all_backward(__nv_bfloat16 *din, const __nv_bfloat16 *dout,
                         const Shape &in_shape, int64_t in_dim, int64_t out_dim,
                         const Comm &c);
/// dshard += this rank's part of the reduce-scatter of dfull (the backward of
/// all_gather_forward when the gathered copy's gradient is partial, P).
void all_gather_backward(float *dshard, const float *dfull,
                         const Shape &shard_shape, int64_t dim, const Comm &c);
void all_gather_backward(__nv_bfloat16 *dshard, const __nv_bfloat16 *dfull,
                         const Shape &shard_shape, int64_t dim, const Comm &c);
/// full += the all-gather (the backward of a local slice B -> S(dim)).
void all_gather_accumulate(float *full, const float *shard,
                           const Shape &shard_shape, int64_t dim,
                           const Comm &c);
void all_gather_accumulate(__nv_bfloat16 *full, const __nv_bfloat16 *shard,
                           const Shape &shard_shape, int64_t dim,
                           const Comm &c);
/// out = the r-th of p S(dim) shards of x (local, no communication).
void slice_forward(float *out, const float *x, const Shape &shape, int64_t dim,
                   int64_t p, int64_t r);
void slice_forward(__nv_bfloat16 *out, const __nv_bfloat16 *x,
                   const Shape &shape, int64_t dim, int64_t p, int64_t r);
/// The same for token ids and labels (an input split by batch or sequence).
void slice_forward(int32_t *out, const int32_t *x, const Shape &shape,
                   int64_t dim, int64_t p, int64_t r);
/// out += the r-th shard (the backward of an all-gather whose gradient is
/// replicated).
void slice_accumulate(float *out, const float *x, const Shape &shape,
                      int64_t dim, int64_t p, int64_t r);
void slice_accumulate(__nv_bfloat16 *out, const __nv_bfloat16 *x,
                      const Shape &shape, int64_t dim, int64_t p, int64_t r);
/// Flat fp32 P -> S(0) and S(0) -> B of `shard` floats per rank (ZeRO).
void reduce_scatter_flat(float *shard, const float *full, int64_t shard_n,
                         const Comm &c);
void all_gather_flat(float *full, const float *shard, int64_t shard_n,
                     const Comm &c);
// Megatron's vocab-parallel cross-entropy forward over a Comm:
// common/VocabParallelLoss.h (included at the end).

// ---- data-parallel gradient sync (its own stream) ----

/// Gradients grouped into buckets (~25 MiB of fp32, in the order backward
/// produces them). When the backward of the last micro-batch has written a
/// bucket's gradients, ready() all-reduces them on the sync stream, overlapping
/// the rest of the backward pass; wait() makes compute_stream() wait for every
/// bucket of the step (the join of the sync stream back into compute_stream():
/// inside a step graph's capture it closes the fork; a second call in the
/// same step does nothing).
class GradSync {
public:
  /// `comm` is the data-parallel group; bucket b holds `bucket_grads[b]`
  /// (pointer, floats) and completes after `expected[b]` ready() calls.
  void configure(const Comm &comm,
                 std::vector<std::vector<std::pair<float *, int64_t>>> buckets,
                 std::vector<int> expected);
  /// Bucket b all-reduces over `comm` instead (after configure): gradients
  /// partial over tp as well as dp are summed over both groups at once. Every
  /// bucket stays on the one sync stream, launched in program order, so
  /// collectives of different groups never wait on each other.
  void set_bucket_comm(int bucket, const Comm &comm);
  void ready(int bucket);
  void wait();
  void start_step();

private:
  std::vector<Comm> bucket_comms_; // the group each bucket sums over
  std::vector<std::vector<std::pair<float *, int64_t>>> buckets_;
  std::vector<int> expected_, seen_;
  std::vector<cudaEvent_t> ready_events_;
  cudaEvent_t done_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool launched_any_ = false;
};

// ---- pipeline send/recv ----

/// Transfers between pipeline devices. Each (micro-batch, boundary, kind,
/// tensor) message has a tag. The program first runs its schedule once in
/// recording mode (no kernels): every send and recv is noted with its peer, tag
/// and buffer; the senders' orders are exchanged; a communicator is made per
/// used link. Executing, a receive posts, on the link's stream, every message
/// the sender sends before the one wanted (into its recorded buffer), so the
/// receives follow the sender's order and no schedule can deadlock; compute
/// waits on an event of the wanted message only.
class Pipe {
public:
  /// `pp_comm`: the MPI communicator of the pipeline axis (rank = device);
  /// `color_base`: distinct per group of ranks agreeing on the other mesh
  /// coordinates (their index), `groups`: how many such groups.
  void setup(MPI_Comm pp_comm, int device, int devices, int color_base,
             int groups);
  void begin_recording() { recording_ = true; }
  /// Exchanges the orders and creates the link communicators. Collective over
  /// the world. Throws std::runtime_error when the two ends of a link disagree
  /// on the messages.
  void end_recording();
  bool recording() const { return recording_; }
  void send(const void *buf, int64_t bytes, int peer, int tag);
  void recv(void *buf, int64_t bytes, int peer, int tag);
  /// The compute stream waits for this step's send of `tag` to `peer` (if
  /// sent): before the buffer it was sent from is written again.
  void wait_sent(int peer, int tag);
  /// Receives posted from now on wait for the compute stream's work so far:
  /// before a receive may post into buffers that work still reads (an
  /// activation set taken by another micro-batch).
  void fence_receives();
  /// At a step's start: every link stream waits for the compute stream (the
  /// fork of a step graph's capture).
  void begin_step();
  /// At the step's end: the compute stream waits for this step's transfers
  /// (before the buffers are reused; the join of the capture). Throws
  /// std::logic_error when a recorded transfer did not happen.
  void finish_step();

private:
  struct Message {
    int tag = 0;
    void *buf = nullptr;
    int64_t bytes = 0;
  };
  struct Link {
    Comm comm;
    cudaStream_t stream = nullptr;
    std::vector<Message> order;  // sends: ours; receives: the sender's order
    std::map<int, size_t> index; // tag -> position in order
    std::vector<cudaEvent_t> events;
    cudaEvent_t done = nullptr; // the step's last transfer on the link
    size_t next = 0;            // next message to send / post
  };
  MPI_Comm pp_ = MPI_COMM_NULL;
  int device_ = 0, devices_ = 1, color_base_ = 0, groups_ = 1;
  bool recording_ = false;
  std::map<int, Link> out_, in_;                        // by peer device
  std::map<int, std::map<int, Message>> recorded_recv_; // peer -> tag -> buf
  cudaEvent_t fence_ = nullptr;
};

} // namespace autoddl::rt

#include "backends/common/VocabParallelLoss.h" // over the collectives above

#endif // AUTODDL_BACKENDS_CUDA_COMM_H
