// Layout ops: flatten and reshape are free (Tensor::reshaped over the same
// contiguous data; their backward is the same reshape of the gradient).
// transpose permutes dimensions with a copy. Conventions: see Embedding.h.
#ifndef AUTODDL_BACKENDS_CPU_KERNELS_SHAPE_H
#define AUTODDL_BACKENDS_CPU_KERNELS_SHAPE_H

#include <cstdint>
#include <vector>

namespace autoddl::rt {

/// out = x permuted: out's dimension d is x's dimension perm[d]; shape is x's
/// shape (row-major). When accumulate, out += instead of out =.
inline void permute_copy(float *out, const float *x,
                         const std::vector<int64_t> &shape,
                         const std::vector<int64_t> &perm, bool accumulate) {
  const size_t r = shape.size();
  std::vector<int64_t> xStride(r, 1), outShape(r);
  for (size_t d = r; d-- > 1;)
    xStride[d - 1] = xStride[d] * shape[d];
  int64_t n = 1;
  for (size_t d = 0; d < r; ++d) {
    outShape[d] = shape[perm[d]];
    n *= shape[d];
  }
  std::vector<int64_t> idx(r, 0); // index in out, row-major odometer
  for (int64_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d)
      src += idx[d] * xStride[perm[d]];
    out[k] = accumulate ? out[k] + x[src] : x[src];
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < outShape[d])
        break;
      idx[d] = 0;
    }
  }
}

/// out = transpose(x, perm); x has shape `shape`.
inline void transpose_forward(float *out, const float *x,
                              const std::vector<int64_t> &shape,
                              const std::vector<int64_t> &perm) {
  permute_copy(out, x, shape, perm, false);
}

/// dx += transpose(dout, inverse perm); `shape` is x's shape (dout's is shape
/// permuted).
inline void transpose_backward(float *dx, const float *dout,
                               const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &perm) {
  std::vector<int64_t> inverse(perm.size()), outShape(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    inverse[perm[d]] = int64_t(d);
    outShape[d] = shape[perm[d]];
  }
  permute_copy(dx, dout, outShape, inverse, true);
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CPU_KERNELS_SHAPE_H
