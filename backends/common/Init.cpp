// Plan-invariant parameter initialisation (see Init.h).
#include "backends/common/Init.h"

#include "backends/common/Philox.h"

#include <cmath>
#include <stdexcept>

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

uint64_t slice_global_index(const Slice &slice, int64_t k) {
  // Decompose k over `local` (row-major), shift by `offset`, recompose over
  // `full`.
  uint64_t global = 0, stride = 1;
  for (int64_t d = int64_t(slice.full.size()) - 1; d >= 0; --d) {
    const int64_t c = k % slice.local[d];
    k /= slice.local[d];
    global += uint64_t(c + slice.offset[d]) * stride;
    stride *= uint64_t(slice.full[d]);
  }
  return global;
}

float init_normal_at(uint64_t seed, std::string_view name, uint64_t index,
                     float mean, float std) {
  const PhiloxCounter w = philox_words(seed, fnv1a64(name), index);
  return float(mean + std * philox_normal(w));
}

void init_normal(float *out, const Slice &slice, uint64_t seed,
                 std::string_view name, float mean, float std) {
  const uint64_t stream = fnv1a64(name);
  const int64_t n = slice.numel();
  for (int64_t k = 0; k < n; ++k) {
    const PhiloxCounter w =
        philox_words(seed, stream, slice_global_index(slice, k));
    out[k] = float(mean + std * philox_normal(w));
  }
}

void init_uniform(float *out, const Slice &slice, uint64_t seed,
                  std::string_view name, float lo, float hi) {
  const uint64_t stream = fnv1a64(name);
  const int64_t n = slice.numel();
  for (int64_t k = 0; k < n; ++k) {
    const PhiloxCounter w =
        philox_words(seed, stream, slice_global_index(slice, k));
    const float v = float(lo + (double(hi) - lo) * u32_to_unit(w[0]));
    out[k] = v < hi ? v : std::nextafter(hi, lo); // float rounding may reach hi
  }
}

} // namespace autoddl::rt
