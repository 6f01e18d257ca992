// K-FAC for linear layers on the GPU (docs/kfac.md), the CUDA twin of
// backends/cpu/kfac/Kfac.h with device pointers: factors from act_t operands
// (bf16; fp32 under AUTODDL_FP32) by cuBLASLt GEMMs with fp32 accumulation
// into fp32 factors; their reduction over NCCL communicators; damped inverses
// by cuSOLVER Cholesky (potrf, then potrs on an identity) in fp32, retried in
// fp64, else the previous inverse kept (the rules of
// backends/common/KfacRules.h); preconditioning in the bf16 build by bf16
// tensor-core GEMMs with fp32 accumulation on bf16 copies of the inverses
// (made once per install: kfac_inverses_installed) and the gradient rounded
// to bf16 (AUTODDL_KFAC_PRECOND=fp32: fp32 GEMMs on TF32 operands instead),
// under AUTODDL_FP32 by exact fp32 GEMMs (CUBLAS_COMPUTE_32F); the
// first-order rules on the preconditioned gradient. Everything runs on
// compute_stream() but kfac_inverse_launch's inversions, on a side stream.
//
// Communicators are plain ncclComm_t (null: this rank alone), so this code
// needs neither MPI nor Comm.h; a generated program passes its Comm's .nccl.
#ifndef AUTODDL_BACKENDS_CUDA_KFAC_KFAC_H
#define AUTODDL_BACKENDS_CUDA_KFAC_KFAC_H

#include "backends/common/KfacLayerOps.h" // inversions, kfac_refresh
#include "backends/common/KfacRules.h"
#include "backends/cuda/Runtime.h"

#include <cstdint>
#include <nccl.h>
#include <vector>

namespace autoddl::rt {

/// Whether preconditioning runs bf16 GEMMs: the bf16 build's default, off
/// with AUTODDL_KFAC_PRECOND=fp32 (read once; the harness checks its value);
/// never under AUTODDL_FP32.
bool kfac_precondition_bf16();
/// "bf16", "tf32" (the bf16 build with AUTODDL_KFAC_PRECOND=fp32) or "fp32"
/// (AUTODDL_FP32): what the GEMMs of kfac_precondition_bf16()'s layers read.
const char *kfac_precondition_name();

/// One linear layer's K-FAC state on the device, of the unsplit layer (as
/// the CPU's KfacLayer).
struct KfacLayer {
  /// `bf16`: its preconditioning runs bf16 GEMMs (ignored under
  /// AUTODDL_FP32).
  KfacLayer(int64_t in, int64_t out, bool bf16 = kfac_precondition_bf16());
  int64_t in, out;
  DeviceBuffer<float> A, G;         // [in,in], [out,out]: this refresh's sums
  DeviceBuffer<float> A_inv, G_inv; // the damped inverses in use
  // bf16 preconditioning: A_inv and G_inv rounded to bf16, written where
  // they change (kfac_inverses_installed); empty otherwise.
  DeviceBuffer<__nv_bfloat16> A_inv_bf16, G_inv_bf16;
  bool precondition_bf16() const { return A_inv_bf16.size() > 0; }
  bool a_valid = false, g_valid = false;
  // The inverses a refresh computes (kfac_inverse_launch), valid once
  // kfac_inverse_finish says so; installed later by swapping.
  DeviceBuffer<float> A_next, G_next;
  bool a_next_valid = false, g_next_valid = false;
  KfacDamping damping{1.0, 0.0, 0.0};
  bool has_inverse() const { return a_valid && g_valid; }
  /// No tp group: the whole layer on this rank (kfac_precondition).
  static ncclComm_t no_group() { return nullptr; }
};

/// F[d,d] += scale X^T X for X[S,d] act_t (one cuBLASLt GEMM, fp32 accumulate).
void kfac_accumulate(float *F, const act_t *X, int64_t S, int64_t d,
                     float scale);
/// The same for X split by columns over `tp` (X_shard [S, d_shard]): the
/// shards are all-gathered (NCCL) and the full factor accumulated block by
/// block, identical on every rank. `tp` null: kfac_accumulate.
void kfac_accumulate_gathered(float *F, const act_t *X_shard, int64_t S,
                              int64_t d_shard, float scale, ncclComm_t tp);
/// X [rows, d]'s rows that a factor stride selects (r: kfac_row_stride),
/// copied together into a workspace [r.rows(), d] on compute_stream(), which
/// the next call overwrites. The workspace grows (a stream synchronize) only
/// the first time an operand this size is selected: in an eager step (a
/// refresh step precedes every factor step, and a StepGraph's first call
/// runs eagerly), never inside a capture.
const act_t *kfac_select_rows(const act_t *X, int64_t d,
                              const KfacRowStride &r);
/// F[n] = the mean of F over `comm` (ncclAllReduce sum, then 1/p).
void kfac_factor_all_reduce_mean(float *F, int64_t n, ncclComm_t comm);
/// y[n] = a y + b x (the running average of the factors, KfacCycle.h).
void kfac_axpby(float *y, float a, const float *x, float b, int64_t n);

// The inversions (kfac_cholesky_inverse[_fp64], kfac_invert_factor),
// kfac_set_damping, kfac_zero_factors, kfac_inverses_installed (here: the
// bf16 copies cast on the compute stream, so a preconditioning queued
// before reads the old ones), kfac_refresh and kfac_precondition:
// KfacLayerOps.h.

/// The refresh off the critical path (docs/kfac.md "Overlap on the GPU"):
/// each factor's inversion is queued on a low-priority side stream where the
/// program reaches it (the plan's inv_A / inv_G item, or the refresh cycle's
/// end), after the compute stream's work so far (the factor's reduction),
/// and nothing waits for the host: the side stream runs beside the steps
/// that follow, until kfac_inverse_finish reads its outcome.
///
/// Sizes the side stream's buffers for layers [0, n) (slot i: layer i; the
/// work area for the largest factor); waits for the side stream. Before the
/// first launch.
void kfac_inverse_reserve(const KfacLayer *layers, int64_t n);
/// Queues the damped fp32 Cholesky inverse of factor f (0: A, 1: G) of
/// layer `slot` into its A_next / G_next, its status words (potrf's and
/// potrs's info, a non-finite count) staying on the device. `damp`: first
/// the layer's damping from both factors' traces (computed on the device,
/// the same double operations as kfac_damping): the layer's first factor of
/// a refresh, once both are reduced. The factors must stay unchanged until
/// kfac_inverse_finish. With `timed`, the inversion's start and end are
/// recorded against an anchor on the compute stream at this call.
void kfac_inverse_launch(KfacLayer &layer, int64_t slot, int f, double damping,
                         bool damp, bool timed = false);
/// One inversion of a timed launch: its start, in ms after the launch's
/// anchor on the compute stream, and its duration.
struct KfacSpan {
  float start_ms = 0, dur_ms = 0;
};
/// Waits (the compute stream too) for both launched inversions of each
/// layers[i] (slot slots[i]; on the host only until their tasks are queued,
/// not the other layers'; a task's exception is rethrown), reads their status
/// words and dampings back, retries in fp64 (synchronously, on the compute
/// stream) each factor fp32 failed on, and sets layer.damping and a_next_valid
/// / g_next_valid. outcomes[2i], [2i+1]: layer i's A and G outcome
/// (KfacRules.h, against a_valid / g_valid); spans (or null) the same factors'
/// timings (zeros where not timed; the fp64 retries are not in them).
void kfac_inverse_finish(KfacLayer *const *layers, const int64_t *slots,
                         int64_t n, KfacInverseOutcome *outcomes,
                         KfacSpan *spans);
/// Waits for the side stream (before its buffers are freed).
void kfac_refresh_drain();

/// kfac_precondition (KfacLayerOps.h) runs here, for a layer with bf16
/// copies (precondition_bf16()), two bf16 GEMMs with fp32 accumulation per
/// sandwich: the gradient rounded to bf16, the first GEMM writing its
/// intermediate in bf16, the second the fp32 result (the bias: one, into
/// fp32); else fp32 GEMMs (TF32 operands in the bf16 build). The split form:
/// this rank's block of the unsplit layer's preconditioned gradient from its
/// gradient shard (split Out: rows of the output dimension and of the bias; In:
/// columns of the input dimension, the bias whole); the shards are all-gathered
/// over `tp` first. dW_out may alias dW_shard only where nothing is gathered
/// (split None or one rank), as kfac_precondition.
void kfac_precondition_split(float *dW_out, const float *dW_shard,
                             float *db_out, const float *db_shard,
                             const KfacLayer &layer, bool transpose_weight,
                             KfacSplit split, ncclComm_t tp);

/// Momentum SGD with decoupled weight decay (as the CPU's kfac_sgd_step);
/// writes work[n] = act_t(p) when work is not null.
void kfac_sgd_step(float *p, const float *d, float *buf, int64_t n,
                   const KfacConfig &c, int64_t step, act_t *work);
/// LAMB (as the CPU's kfac_lamb_step): the squared norms are reduced on the
/// device in a fixed order and, over `shard_comm` (dp under ZeRO-1) and
/// `norm_comm` (tp) when not null, summed with ncclAllReduce; the trust ratio
/// never leaves the device.
void kfac_lamb_step(float *p, const float *d, float *m, float *v, int64_t n,
                    const KfacConfig &c, int64_t t, ncclComm_t norm_comm,
                    act_t *work, ncclComm_t shard_comm = nullptr);
/// Adam grafting (as the CPU's kfac_adam_graft_step; d null: AdamW): the
/// norms as kfac_lamb_step's, the scale never leaving the device.
void kfac_adam_graft_step(float *p, const float *g, const float *d, float *m,
                          float *v, int64_t n, const KfacConfig &c, int64_t t,
                          ncclComm_t norm_comm, act_t *work,
                          ncclComm_t shard_comm = nullptr);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KFAC_KFAC_H
