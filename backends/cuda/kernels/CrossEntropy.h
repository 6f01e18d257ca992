// Cross-entropy over act_t logits on the GPU, whole-vocabulary or vocab-split
// (Megatron's vocab-parallel cross-entropy). One block per row; losses, lse and
// the vocab-parallel statistics are fp32. Conventions and the vocab-parallel
// protocol as backends/cpu/kernels/CrossEntropy.h.
//
// Row stride: every function taking logits also takes `ld`, the distance
// between rows of logits and dlogits (0: the row length V or Vl). The CUDA
// program holds the logits of a padded vocabulary as [N, Vp] (Vp = V rounded
// up to 64, for aligned lm_head GEMMs) and passes ld = Vp: only the first V
// columns are read or written, so dlogits' padding columns stay as they are
// (zero).
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_CROSSENTROPY_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_CROSSENTROPY_H

#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// losses[N] = logsumexp(logits[n,:]) - logits[n, targets[n]]; saves lse[N].
/// One pass over each row (online max and sum).
void crossentropy_forward(float *losses, float *lse, const act_t *logits,
                          const int32_t *targets, int64_t N, int64_t V,
                          int64_t ld = 0);
/// dlogits[N,V] += grad_scale * (softmax(logits) - onehot(targets)); with
/// accumulate = false stored (=) instead, rows outside the loss and the
/// padding columns up to ld as zeros, so the buffer needs no zeroing.
void crossentropy_backward(act_t *dlogits, const act_t *logits,
                           const float *lse, const int32_t *targets, int64_t N,
                           int64_t V, float grad_scale, int64_t ld = 0,
                           bool accumulate = true);

/// Squared error against the one-hot label (backends/cpu/kernels/
/// CrossEntropy.h): losses[N] = (1/C) sum_c (scores - onehot)^2, fp32.
void squared_error_forward(float *losses, const act_t *scores,
                           const int32_t *targets, int64_t N, int64_t C);
/// dscores[N,C] += grad_scale * (2/C) * (scores - onehot(targets)).
void squared_error_backward(act_t *dscores, const act_t *scores,
                            const int32_t *targets, int64_t N, int64_t C,
                            float grad_scale);

/// Rows of logits [N,V] whose first largest element is at labels[n] (the
/// CPU program's count_correct: std::max_element); rows with a negative label
/// are not counted; rows ld apart when ld > V (a padded vocabulary). The
/// count goes to the device counter *count (set, not added to), enqueued on
/// the compute stream: the accuracy of classifiers and graph models, read
/// after the step (counter_to_host), so a step graph can capture it.
void count_correct(unsigned long long *count, const act_t *logits,
                   const int32_t *labels, int64_t N, int64_t V,
                   int64_t ld = 0);

/// A device counter's value (synchronises the compute stream).
int64_t counter_to_host(const unsigned long long *count);

/// Vocab-parallel step 1: local_max[N] = row max of the local logits [N,Vl].
void crossentropy_vocab_parallel_max(float *local_max, const act_t *logits,
                                     int64_t N, int64_t Vl, int64_t ld = 0);
/// Step 2: sums[0:N] = local sum of exp(l - gmax); sums[N:2N] = the local
/// target logit or 0.
void crossentropy_vocab_parallel_sums(float *sums, const act_t *logits,
                                      const int32_t *targets, const float *gmax,
                                      int64_t N, int64_t Vl, int64_t v0,
                                      int64_t ld = 0);
/// Step 3: losses[N] = log(sums[n]) + gmax[n] - sums[N + n] (0 where the
/// target is negative).
void crossentropy_vocab_parallel_loss(float *losses, const float *gmax,
                                      const float *sums, const int32_t *targets,
                                      int64_t N);
/// dlogits[N,Vl] += grad_scale * (softmax - onehot) on the local columns
/// (accumulate = false: stored, as crossentropy_backward).
void crossentropy_vocab_parallel_backward(act_t *dlogits, const act_t *logits,
                                          const int32_t *targets,
                                          const float *gmax, const float *sums,
                                          int64_t N, int64_t Vl, int64_t v0,
                                          float grad_scale, int64_t ld = 0,
                                          bool accumulate = true);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_CROSSENTROPY_H
