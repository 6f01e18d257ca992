// Plan-invariant parameter initialisation (DESIGN §6).
//
// Element i (row-major index in the FULL, unsharded parameter) of the parameter
// named `name` is a pure function of (seed, fnv1a64(name), i): Philox-4x32-10
// with key = seed and counter = (i, fnv1a64(name)); see Philox.h. A rank
// holding any shard of the parameter, under any nd-SBP, initialises exactly the
// slice of the full tensor it holds, so every plan starts from the same weights
// as the single-rank run.
#ifndef AUTODDL_BACKENDS_COMMON_INIT_H
#define AUTODDL_BACKENDS_COMMON_INIT_H

#include "backends/common/Tensor.h"

#include <cstdint>
#include <string_view>

namespace autoddl::rt {

/// A rectangular block of a full tensor: `local` sizes starting at `offset`,
/// inside `full`.
struct Slice {
  Shape full;
  Shape offset; // same rank as full
  Shape local;  // same rank as full

  /// The whole tensor.
  static Slice whole(const Shape &full);
  /// Splits this block's dimension `dim` into `parts` equal parts (SBP S(dim):
  /// part k on the k-th rank of the mesh axis) and returns part `index`.
  /// Applying it once per mesh axis, in mesh-axis order, gives the block an
  /// nd-SBP puts on a rank. Throws when the size does not divide.
  Slice split(int64_t dim, int64_t parts, int64_t index) const;
  /// As split, for a size `parts` need not divide (Megatron's padded
  /// vocabulary): parts of ceil(size / parts), part `index` at offset
  /// index * ceil(size / parts) and holding what is left of the size there
  /// (the last parts shorter, possibly empty). Equal to split where it divides.
  Slice split_padded(int64_t dim, int64_t parts, int64_t index) const;
  /// ceil(size / parts): the extent every part of split_padded is stored in.
  static int64_t padded_part(int64_t size, int64_t parts) {
    return (size + parts - 1) / parts;
  }
  int64_t numel() const { return autoddl::rt::numel(local); }
};

/// Fills `out` (slice.numel() floats, the block in row-major order) with mean +
/// std * N(0, 1).
void init_normal(float *out, const Slice &slice, uint64_t seed,
                 std::string_view name, float mean, float std);
/// Fills `out` with values uniform in [lo, hi).
void init_uniform(float *out, const Slice &slice, uint64_t seed,
                  std::string_view name, float lo, float hi);
/// One element of the normal stream (what init_normal writes for full index
/// `index`).
float init_normal_at(uint64_t seed, std::string_view name, uint64_t index,
                     float mean, float std);

/// Row-major index in `slice.full` of the element at row-major position `k` of
/// the block.
uint64_t slice_global_index(const Slice &slice, int64_t k);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_INIT_H
