// FP8 GEMMs for the linears of a plan whose precision is fp8 (Hopper and
// Ada; docs/codegen.md "FP8"): Transformer Engine's delayed scaling.
//
// - Formats: E4M3 (max 448) for weights and activations in the forward, E5M2
//   (max 57344) for output gradients in the backward.
// - Scaling: per tensor. Each tensor role (a linear's input, weight, output
//   gradient) has an Fp8Meta on the device: the scale its casts multiply by,
//   the amax history of its last kFp8AmaxHistory recorded casts, and the
//   amax of the cast now running. A recording cast computes the amax of the
//   tensor it casts; its last block then pushes that amax into the history
//   and sets scale = fmax / max(history) for the next cast (delayed: a cast
//   uses the scale of the tensors before it, so it needs no second pass).
//   The first cast of a meta is primed: an amax pass records the tensor's
//   amax and sets the scale from it before it is cast (a host decision, so
//   it runs in the program's first, eager step, never in a captured one).
// - cuBLASLt's FP8 kernels take the "TN" form only (both operands with the
//   reduced dimension contiguous): row-major D[M,N] = a[M,K] b[N,K]^T. The
//   backward's GEMMs reduce over the other dimension of x, W and dY, so the
//   cast kernel writes a transposed copy in the same pass (as TE does).
// - The product is descaled in the GEMM: D = (1/sa)(1/sb) a b^T (+ bias)
//   + beta D, through CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER, the 1/scale
//   each cast wrote next to its output. D is act_t (bf16) or fp32 (weight
//   gradients, accumulated with beta = 1).
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_FP8_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_FP8_H

#include "backends/common/Fp8State.h" // Fp8Meta, its checkpoint row
#include "backends/cuda/Runtime.h"

#include <cstdint>

namespace autoddl::rt {

enum class Fp8Format : int32_t { E4M3 = 0, E5M2 = 1 };
/// The largest finite value of a format (448, 57344).
float fp8_max(Fp8Format f);

/// Sets `count` metas on the device to scale 1, an empty history.
void fp8_meta_init(Fp8Meta *metas, int64_t count);
/// Marks a meta primed (`on`: its next cast runs no amax pass first) or not
/// (an amax pass first, as after fp8_meta_init). A meta restored from a
/// checkpoint is primed where it recorded an amax (host bookkeeping; the
/// caller wrote the meta).
void fp8_meta_set_primed(const Fp8Meta *meta, bool on);

/// Casts src[R,C] (act_t, row-major) to `f` at meta's scale: out[R,C] and/or
/// outT[C,R] (either may be null), and writes the 1/scale it used to
/// *scaleInvOut (a device float the GEMM reads). record: the cast's amax
/// enters meta's history and the scale is updated (Fp8Meta).
void fp8_cast(void *out, void *outT, float *scaleInvOut, const act_t *src,
              int64_t R, int64_t C, Fp8Format f, Fp8Meta *meta, bool record);

/// What an FP8 GEMM's epilogue adds beyond a bias: none, GELU with the
/// pre-activation written to aux (act_t, aux row stride auxLd), or the
/// product times gelu'(aux).
enum class Fp8Epi : int32_t { None = 0, GeluAux = 1, DGelu = 2 };

/// Row-major D[M,N] = (*sa)(*sb) a[M,K] b[N,K]^T (+ bias[N]) (+ beta C);
/// a, b fp8 of formats fa, fb (not both E5M2), their rows K apart; C is D
/// unless `c` (act_t, D's layout) is given; D is act_t, or fp32 when dFloat.
/// fastAccum: Hopper's faster, less exact accumulation (TE's forward).
/// Returns false, having done nothing, where cuBLASLt has no FP8 algorithm;
/// `probe`: only says so (the operands need not hold data yet).
bool fp8_gemm(int64_t M, int64_t N, int64_t K, const void *a, Fp8Format fa,
              const float *sa, const void *b, Fp8Format fb, const float *sb,
              float beta, void *d, bool dFloat, const act_t *bias = nullptr,
              const act_t *c = nullptr, Fp8Epi epi = Fp8Epi::None,
              const void *aux = nullptr, int64_t auxLd = 0,
              bool fastAccum = false, bool probe = false);

/// Number of distinct FP8 GEMM plans cached (tests).
int64_t fp8_gemm_plan_cache_size();

// ---- the linears (Linear.cu dispatches here) ----

/// Whether the linear of weight `w` runs in FP8: registered
/// (fp8_register_linear), on a device with FP8 tensor cores (compute
/// capability >= 8.9), in the bf16 build, and the shape passes the one rule
/// of backends/common/Fp8Rule.h (fp8RunsLinear: sizes multiples of 16, the
/// GEMMs large enough to pay for the casts). AUTODDL_FP8=0 turns FP8 off,
/// AUTODDL_FP8=all runs every aligned registered linear in FP8.
bool fp8_linear_eligible(const act_t *w, int64_t N, int64_t K, int64_t O);

/// Marks the linear whose weight (the act_t working copy) is `w` as an FP8
/// linear and gives it three metas (input, weight, output gradient); a
/// weight registered before has its scaling restarted. Call before the
/// first step (allocates).
void fp8_register_linear(const act_t *w);
/// Forgets every registered linear (tests: a freed weight's address may
/// come back as another tensor's).
void fp8_clear_linears();
/// Registered linears (tests, the program's report).
int64_t fp8_registered_linears();
/// The metas of w's linear ([input, weight, output gradient]), or null.
Fp8Meta *fp8_linear_metas(const act_t *w);

/// Checkpoints (docs/checkpoints.md "FP8 scaling"): the state deciding the
/// next casts of the linears of weights `ws` (nullptr: a linear this rank
/// does not hold, a row of zeros) as rows of kFp8RowFloats
/// (backends/common/Fp8State.h): their metas and their weight copies'
/// layouts. Save: as the work enqueued so far leaves them (waits for the
/// compute stream). Restore: every non-empty row, checked by fp8_row_error
/// (primed where it recorded an amax); a linear with no copy yet takes the
/// row's layouts, so its first step casts them in one recording pass as the
/// writing run's later steps did (not one layout at a time, as a first step
/// learns them). Between steps only, never under a step graph's capture.
void fp8_save_state(const act_t *const *ws, int64_t n, float *rows);
void fp8_restore_state(const act_t *const *ws, int64_t n, const float *rows);

/// A training step's bounds for the weights' FP8 copies: between them each
/// FP8 linear's first FP8 GEMM casts its weight once (every layout its
/// GEMMs read, one recorded amax) into a copy on the device that the step's
/// later GEMMs read; outside them, and under AUTODDL_FP8_CAST_ONCE=0,
/// every GEMM casts its weight itself. Host calls around the step's body
/// (captured with it): assumes the weights change only between steps. The
/// first step learns which layouts a linear reads and allocates the copies,
/// so it must run eagerly (a step graph captures a later one).
void fp8_begin_step();
void fp8_end_step();
/// Bytes of the weights' FP8 copies allocated (tests, the program's peak).
int64_t fp8_weight_copy_bytes();
/// Within a step, an input that several FP8 linears read in turn is cast
/// once too: x by the first of consecutive forwards of the same x (LLaMA's
/// q, k, v; gate, up), x^T by the first of their weight-gradient calls
/// (input-gradient calls between them), read by the others at the caster's
/// scale. Held only across linear calls in a row of one direction reading
/// that x: Linear.h's entry points tell each call (fp8_note_linear, FP8 or
/// not), and the generated program's op scopes every other op (OpScope:
/// fp8_note_op), which may write a buffer a later linear reads (a recomputed
/// layer's scratch, a micro-batch's refilled set). AUTODDL_FP8_CAST_ONCE: 0
/// nothing cast once, weights the weights only, all (unset) both.
void fp8_note_linear(const act_t *x, bool backward);
/// An op of `kind` begins (OpProfile.h's OpScope): any but "linear" drops
/// the held inputs.
void fp8_note_op(const char *kind);

/// The FP8 counterparts of Linear.h's functions, same arguments and
/// conventions, for an eligible linear; each returns false, having done
/// nothing, where cuBLASLt has no FP8 algorithm for one of its GEMMs (the
/// caller then runs the bf16 one).
bool fp8_linear_forward(act_t *out, const act_t *x, const act_t *w,
                        const act_t *bias, int64_t N, int64_t K, int64_t O,
                        bool transpose_weight, Fp8Epi epi = Fp8Epi::None,
                        act_t *pre = nullptr, const act_t *residual = nullptr);
bool fp8_linear_backward_dx(act_t *dx, const act_t *dout, const act_t *w,
                            int64_t N, int64_t K, int64_t O,
                            bool transpose_weight, bool accumulate,
                            const act_t *gelu_pre = nullptr);
bool fp8_linear_backward_dw(float *dw, const act_t *dout, const act_t *x,
                            const act_t *w, int64_t N, int64_t K, int64_t O,
                            bool transpose_weight);
/// Both gradients, dY cast once into both of their layouts (one read of dY
/// where the two calls above read it twice). Says which it did: neither
/// where either GEMM has no FP8 algorithm; dx alone where cuBLASLt refused
/// the weight gradient's at run time (the caller runs what is not done).
struct Fp8Done {
  bool dx = false, dw = false;
};
Fp8Done fp8_linear_backward(act_t *dx, float *dw, const act_t *dout,
                            const act_t *x, const act_t *w, int64_t N,
                            int64_t K, int64_t O, bool transpose_weight,
                            bool accumulate_dx);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_FP8_H
