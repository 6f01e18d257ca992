// Cross-entropy loss over logits, whole-vocabulary or vocab-split (Megatron's
// vocab-parallel cross-entropy). Conventions: see Embedding.h.
//
// The loss of a step is the mean over all N_global positions of the global
// batch; since a rank sees only its micro-batch (and its data-parallel shard),
// forward returns per-position losses and backward takes grad_scale =
// dL/dloss_n = 1 / N_global.
//
// A negative target marks a position outside the loss (a graph model's held-
// out nodes; PyTorch's ignore_index): its loss is 0 and its logits get no
// gradient. The caller's N_global counts only the positions inside.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_CROSSENTROPY_H
#define AUTODDL_BACKENDS_CPU_KERNELS_CROSSENTROPY_H

#include <cmath>
#include <cstdint>

namespace autoddl::rt {

/// losses[N] = logsumexp(logits[n,:]) - logits[n, targets[n]] for logits [N,V];
/// saves lse[N].
inline void crossentropy_forward(float *losses, float *lse, const float *logits,
                                 const int32_t *targets, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const float *row = logits + n * V;
    float mx = -INFINITY;
    for (int64_t v = 0; v < V; ++v)
      mx = std::fmax(mx, row[v]);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v)
      sum += std::exp(row[v] - mx); // fp32 exp, double sum
    lse[n] = float(mx + std::log(sum));
    losses[n] = targets[n] < 0 ? 0.0f : lse[n] - row[targets[n]];
  }
}

/// dlogits[N,V] += grad_scale * (softmax(logits) - onehot(targets)).
inline void crossentropy_backward(float *dlogits, const float *logits,
                                  const float *lse, const int32_t *targets,
                                  int64_t N, int64_t V, float grad_scale) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < V && targets[n] >= 0; ++v) {
      const float p = std::exp(logits[n * V + v] - lse[n]);
      dlogits[n * V + v] += grad_scale * (p - (v == targets[n] ? 1.0f : 0.0f));
    }
}

// Squared error against the one-hot of an integer class label (Hui & Belkin
// 2021; PyTorch F.mse_loss(scores, F.one_hot(targets, C).float())): a row's
// loss is its mean over the C classes, so the mean over N_global rows
// (grad_scale, as above) is the mean over all N_global * C elements.

/// losses[N] = (1/C) sum_c (scores[n,c] - [c == targets[n]])^2 for scores
/// [N,C]; 0 where the target is negative.
inline void squared_error_forward(float *losses, const float *scores,
                                  const int32_t *targets, int64_t N,
                                  int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    double sum = 0;
    for (int64_t c = 0; c < C && targets[n] >= 0; ++c) {
      const double d = double(scores[n * C + c]) - (c == targets[n] ? 1 : 0);
      sum += d * d;
    }
    losses[n] = float(sum / double(C));
  }
}

/// dscores[N,C] += grad_scale * (2/C) * (scores - onehot(targets)).
inline void squared_error_backward(float *dscores, const float *scores,
                                   const int32_t *targets, int64_t N, int64_t C,
                                   float grad_scale) {
  const float k = grad_scale * 2.0f / float(C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C && targets[n] >= 0; ++c)
      dscores[n * C + c] +=
          k * (scores[n * C + c] - (c == targets[n] ? 1.0f : 0.0f));
}

// Vocab-split cross-entropy. Rank r of a tensor-parallel group holds logits
// [N, Vl] for the vocabulary columns [v0, v0 + Vl). Three local steps with two
// all-reduces between them:
//   1. local_max[N] = row max of the local logits
//      -> all_reduce(MAX) -> gmax[N]
//   2. sums[0:N] = sum exp(l - gmax); sums[N:2N] = target logit if local, or 0
//      -> all_reduce(SUM) -> sums[2N]
//   3. losses[N] = log(sums[n]) + gmax[n] - sums[N + n] (same on every rank)
// Backward is local:
//   dlogits += grad_scale * (exp(l - gmax) / sumexp - [v0 + j == target]).
// Collectives.h's crossentropy_vocab_parallel_forward runs the three steps
// with the all-reduces. With ld > Vl the local logits are rows ld apart whose
// first Vl columns are the vocabulary (a padded vocabulary's last rank holds
// fewer real columns than the others); ld = 0 means Vl.

/// Step 1: local_max[N].
inline void crossentropy_vocab_parallel_max(float *local_max,
                                            const float *logits, int64_t N,
                                            int64_t Vl, int64_t ld = 0) {
  ld = ld ? ld : Vl;
  for (int64_t n = 0; n < N; ++n) {
    float mx = -INFINITY;
    for (int64_t v = 0; v < Vl; ++v)
      mx = std::fmax(mx, logits[n * ld + v]);
    local_max[n] = mx;
  }
}

/// Step 2: sums[0:N] = local sum of exp(l - gmax), sums[N:2N] = local target
/// logit or 0.
inline void crossentropy_vocab_parallel_sums(float *sums, const float *logits,
                                             const int32_t *targets,
                                             const float *gmax, int64_t N,
                                             int64_t Vl, int64_t v0,
                                             int64_t ld = 0) {
  ld = ld ? ld : Vl;
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t v = 0; v < Vl; ++v)
      s += std::exp(logits[n * ld + v] - gmax[n]);
    sums[n] = float(s);
    const int64_t local = int64_t(targets[n]) - v0;
    sums[N + n] = (local >= 0 && local < Vl) ? logits[n * ld + local] : 0.0f;
  }
}

/// Step 3: losses[N] from the reduced gmax[N] and sums[2N] (0 where the
/// target is negative).
inline void crossentropy_vocab_parallel_loss(float *losses, const float *gmax,
                                             const float *sums,
                                             const int32_t *targets,
                                             int64_t N) {
  for (int64_t n = 0; n < N; ++n)
    losses[n] =
        targets[n] < 0 ? 0.0f : std::log(sums[n]) + gmax[n] - sums[N + n];
}

/// dlogits[N,Vl] += grad_scale * (softmax - onehot) on the local columns (the
/// padding columns up to ld untouched).
inline void crossentropy_vocab_parallel_backward(
    float *dlogits, const float *logits, const int32_t *targets,
    const float *gmax, const float *sums, int64_t N, int64_t Vl, int64_t v0,
    float grad_scale, int64_t ld = 0) {
  ld = ld ? ld : Vl;
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0)
      continue;
    const float inv = 1.0f / sums[n];
    for (int64_t v = 0; v < Vl; ++v) {
      const float p = std::exp(logits[n * ld + v] - gmax[n]) * inv;
      const float onehot = (v0 + v == targets[n]) ? 1.0f : 0.0f;
      dlogits[n * ld + v] += grad_scale * (p - onehot);
    }
  }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_CROSSENTROPY_H
