//===- VocabParallelLoss.h - Megatron's vocab-parallel cross-entropy -----===//
//
// The forward of the vocab-parallel cross-entropy across a tensor-parallel
// group, the same three steps with their all-reduces on both backends.
// Included at the end of a backend's collectives header
// (backends/cpu/Collectives.h, backends/cuda/Comm.h), after the steps
// (crossentropy_vocab_parallel_max, _sums, _loss of its kernels/CrossEntropy.h)
// and its all_reduce_max / all_reduce_forward over `Group` (MPI_Comm, Comm)
// are declared.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_VOCABPARALLELLOSS_H
#define AUTODDL_BACKENDS_COMMON_VOCABPARALLELLOSS_H

#include <cstdint>

namespace autoddl::rt {

/// losses[N] of the local logits [N,Vl] (columns [v0, v0+Vl) of the
/// vocabulary): the row max all-reduced (MAX) into gmax[N], the local sum of
/// exp and target logit all-reduced (SUM) into sums[2N]; gmax and sums are
/// saved for crossentropy_vocab_parallel_backward.
template <class Logit, class Group>
void crossentropy_vocab_parallel_forward(float *losses, float *gmax,
                                         float *sums, const Logit *logits,
                                         const int32_t *targets, int64_t N,
                                         int64_t Vl, int64_t v0,
                                         const Group &group) {
  crossentropy_vocab_parallel_max(gmax, logits, N, Vl);
  all_reduce_max(gmax, N, group);
  crossentropy_vocab_parallel_sums(sums, logits, targets, gmax, N, Vl, v0);
  all_reduce_forward(sums, 2 * N, group);
  crossentropy_vocab_parallel_loss(losses, gmax, sums, targets, N);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_VOCABPARALLELLOSS_H
