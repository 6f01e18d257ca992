// Plan-invariant parameter initialisation (see Init.h).
#include "backends/common/Init.h"

#include "backends/common/Parallel.h" // for_chunks
#include "backends/common/Philox.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace autoddl::rt {

Slice Slice::whole(const Shape &full) {
  return Slice{full, Shape(full.size(), 0), full};
}

Slice Slice::split(int64_t dim, int64_t parts, int64_t index) const {
  if (dim < 0 || dim >= int64_t(full.size()))
    throw std::invalid_argument("split dimension " + std::to_string(dim) +
                                " out of range for " + shape_str(full));
  if (parts <= 0 || index < 0 || index >= parts || local[dim] % parts != 0)
    throw std::invalid_argument(
        "cannot split size " + std::to_string(local[dim]) + " of dimension " +
        std::to_string(dim) + " into " + std::to_string(parts) +
        " equal parts (part " + std::to_string(index) + ")");
  Slice s = *this;
  s.local[dim] = local[dim] / parts;
  s.offset[dim] = offset[dim] + index * s.local[dim];
  return s;
}

Slice Slice::split_padded(int64_t dim, int64_t parts, int64_t index) const {
  if (dim < 0 || dim >= int64_t(full.size()))
    throw std::invalid_argument("split dimension " + std::to_string(dim) +
                                " out of range for " + shape_str(full));
  if (parts <= 0 || index < 0 || index >= parts)
    throw std::invalid_argument(
        "cannot split dimension " + std::to_string(dim) + " into " +
        std::to_string(parts) + " parts (part " + std::to_string(index) + ")");
  const int64_t part = padded_part(local[dim], parts);
  Slice s = *this;
  s.local[dim] = std::clamp<int64_t>(local[dim] - index * part, 0, part);
  s.offset[dim] = offset[dim] + std::min(index * part, local[dim]);
  return s;
}

uint64_t slice_global_index(const Slice &slice, int64_t k) {
  return block_global_index(int(slice.full.size()), slice.local.data(),
                            slice.offset.data(), slice.full.data(), k);
}

float init_normal_at(uint64_t seed, std::string_view name, uint64_t index,
                     float mean, float std) {
  const PhiloxCounter w = philox_words(seed, fnv1a64(name), index);
  return float(mean + std * philox_normal(w));
}

namespace {

/// out[k] = value(the counter words of the slice's k-th element, by its
/// global index), over the slice's elements in parallel chunks.
template <class F>
void init_slice(float *out, const Slice &slice, uint64_t seed,
                std::string_view name, F value) {
  const uint64_t stream = fnv1a64(name);
  for_chunks(slice.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k)
      out[k] = value(philox_words(seed, stream, slice_global_index(slice, k)));
  });
}

} // namespace

void init_normal(float *out, const Slice &slice, uint64_t seed,
                 std::string_view name, float mean, float std) {
  init_slice(out, slice, seed, name, [&](const PhiloxCounter &w) {
    return float(mean + std * philox_normal(w));
  });
}

void init_uniform(float *out, const Slice &slice, uint64_t seed,
                  std::string_view name, float lo, float hi) {
  init_slice(out, slice, seed, name, [&](const PhiloxCounter &w) {
    const float v = float(lo + (double(hi) - lo) * u32_to_unit(w[0]));
    return v < hi ? v : std::nextafter(hi, lo); // rounding may reach hi
  });
}

} // namespace autoddl::rt
