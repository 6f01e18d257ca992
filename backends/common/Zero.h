// ZeRO-style sharded optimizer state over a data-parallel group (Rajbhandari et
// al., SC'20, stage 1-2), the layout both backends keep: a parameter and its
// gradient live in one flat fp32 buffer padded to a multiple of the group size
// p (the padding stays zero); rank r owns the contiguous range
// [r*n/p, (r+1)*n/p) of it (S(0) of the flat buffer) and keeps AdamW's m and v
// for that range only. A step (backends/cpu/Zero.h, backends/cuda/Zero.h):
// reduce-scatter the gradients (P -> S(0)), AdamW on the owned range,
// all-gather the updated parameters (S(0) -> B).
#ifndef AUTODDL_BACKENDS_COMMON_ZERO_H
#define AUTODDL_BACKENDS_COMMON_ZERO_H

#include <cstdint>

namespace autoddl::rt {

/// `n` rounded up to a multiple of `p`: the flat buffers' size, so every shard
/// is n/p floats.
inline int64_t zero_padded_size(int64_t n, int64_t p) {
  return (n + p - 1) / p * p;
}

/// Rank r's range of a flat buffer of `padded` floats over p ranks.
struct ZeroShard {
  int64_t offset, size;
};
inline ZeroShard zero_shard(int64_t padded, int64_t p, int64_t r) {
  const int64_t size = padded / p;
  return {r * size, size};
}

/// The floats of AdamW's m (and of v) a rank keeps for a parameter of n
/// elements padded to `padded`: its shard under ZeRO (zero != 0), else all.
inline int64_t zero_state_size(int64_t n, int64_t padded, int zero,
                               int64_t dp) {
  return zero ? padded / dp : n;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_ZERO_H
