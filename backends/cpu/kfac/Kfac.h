// K-FAC for linear layers on the CPU (docs/kfac.md): Kronecker factors from a
// layer's inputs and output gradients (cblas_sgemm), their reduction over the
// ranks holding the layer (MPI), damped inverses by Cholesky (LAPACK spotrf /
// spotri from OpenBLAS, fp64 retry), preconditioning, and the first-order
// rules applied to the preconditioned gradient. The rules shared with the CUDA
// runtime (damping, refresh, fallback, wide layers) are in
// backends/common/KfacRules.h.
//
// Layouts: row-major fp32. A layer computes Y[S,out] = X[S,in] W^T (+ b) with
// W [out,in] (transpose_weight, torch) or Y = X W with W [in,out] (GPT-2
// Conv1D); S is every token of the micro-batch (leading dimensions
// flattened). A communicator argument of MPI_COMM_NULL means this rank
// alone. Bias: ASDL/PipeFisher's convention, A has no ones column and the
// bias gradient is preconditioned by G^-1 alone (pipelines.md §5.1).
#ifndef AUTODDL_BACKENDS_CPU_KFAC_KFAC_H
#define AUTODDL_BACKENDS_CPU_KFAC_KFAC_H

#include "backends/common/KfacLayerOps.h" // inversions, kfac_refresh
#include "backends/common/KfacRules.h"

#include <cstdint>
#include <mpi.h>
#include <vector>

namespace autoddl::rt {

/// The K-FAC state of one linear layer: the factors being accumulated for the
/// current refresh and the damped inverses in use, both of the unsplit layer
/// (every rank of a tensor-parallel group holds the same copies).
struct KfacLayer {
  KfacLayer(int64_t in, int64_t out);
  int64_t in, out;
  std::vector<float> A, G;         // [in,in], [out,out]: sums of this refresh
  std::vector<float> A_inv, G_inv; // (A + damping.a I)^-1, (G + damping.g I)^-1
  bool a_valid = false, g_valid = false; // an inverse was ever obtained
  KfacDamping damping{1.0, 0.0, 0.0};    // of the last refresh
  /// Both inverses exist: the layer is preconditioned; else its gradient goes
  /// to the rule unchanged (first-order).
  bool has_inverse() const { return a_valid && g_valid; }
  /// No tp group: the whole layer on this rank (kfac_precondition).
  static MPI_Comm no_group() { return MPI_COMM_NULL; }
};

/// F[d,d] += scale X^T X for X[S,d] (one micro-batch's contribution to A with
/// X the layer input, or to G with X = dY; scale from kfac_factor_scales).
/// `upper`: only F's upper triangle (row-major, j >= i), by SYRK at half
/// GEMM's FLOPs; kfac_symmetrize completes F once its sum is.
void kfac_accumulate(float *F, const float *X, int64_t S, int64_t d,
                     float scale, bool upper = false);
/// The same for an operand split by columns over `tp` (X_shard [S, d_shard],
/// rank r holding columns [r d_shard, (r+1) d_shard)): all-gathers X and
/// accumulates the full [d,d] factor, d = d_shard p, identical on every rank
/// (column-parallel dY, row-parallel X).
void kfac_accumulate_gathered(float *F, const float *X_shard, int64_t S,
                              int64_t d_shard, float scale, MPI_Comm tp,
                              bool upper = false);
/// F's lower triangle from its upper one (after kfac_accumulate's `upper`).
void kfac_symmetrize(float *F, int64_t d);
/// F[n] = the mean of F over `comm` (data-parallel replicas, Chimera's mirrored
/// pipelines, a sequence split: every rank that saw other rows of the layer).
void kfac_factor_all_reduce_mean(float *F, int64_t n, MPI_Comm comm);

// The inversions (kfac_cholesky_inverse[_fp64], kfac_invert_factor),
// kfac_set_damping, kfac_zero_factors, kfac_refresh and kfac_precondition:
// KfacLayerOps.h.

/// kfac_precondition for a layer split over `tp` (split Out: this rank's rows
/// of W's output dimension, and of the bias; split In: its columns of the input
/// dimension, the bias whole): gathers the gradient shards and computes this
/// rank's block of the unsplit layer's preconditioned gradient, so every plan
/// gets the one-device result. dW_out / db_out have the shard's shapes.
void kfac_precondition_split(float *dW_out, const float *dW_shard,
                             float *db_out, const float *db_shard,
                             const KfacLayer &layer, bool transpose_weight,
                             KfacSplit split, MPI_Comm tp);

/// Momentum SGD with decoupled weight decay on the preconditioned gradient d:
/// p <- p (1 - lr wd); buf = d on step 1, else momentum buf + d; p -= lr buf.
/// buf may be null when momentum is 0.
void kfac_sgd_step(float *p, const float *d, float *buf, int64_t n,
                   const KfacConfig &c, int64_t step);
/// LAMB (You et al. 2020) on d, step t = 1, 2, ...: m, v as Adam with bias
/// correction; u = m^ / (sqrt(v^) + eps) + wd p; p -= lr (||p|| / ||u||) u.
/// The norms are of the whole parameter: `norm_comm` (tp) and `shard_comm`
/// (dp under ZeRO-1) sum the squares over the ranks holding its shards
/// (MPI_COMM_NULL: none).
void kfac_lamb_step(float *p, const float *d, float *m, float *v, int64_t n,
                    const KfacConfig &c, int64_t t, MPI_Comm norm_comm,
                    MPI_Comm shard_comm = MPI_COMM_NULL);

/// Adam grafting (docs/kfac.md "Rules"), step t = 1, 2, ...: Adam's moments
/// m, v of the raw gradient g with bias correction, u = m^ / (sqrt(v^) + eps);
/// with a preconditioned direction d, p <- p (1 - lr wd) - lr (||u|| / ||d||)
/// d, the norms of the whole parameter (summed over `shard_comm`, then
/// `norm_comm`, as kfac_lamb_step); without one (null: a layer K-FAC does not
/// precondition, or before its first inverse) AdamW, p <- p (1 - lr wd) - lr u.
void kfac_adam_graft_step(float *p, const float *g, const float *d, float *m,
                          float *v, int64_t n, const KfacConfig &c, int64_t t,
                          MPI_Comm norm_comm,
                          MPI_Comm shard_comm = MPI_COMM_NULL);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KFAC_KFAC_H
