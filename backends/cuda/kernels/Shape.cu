// Permuted copies (Shape.h): one thread per output element, its source index
// from the output's row-major odometer.
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Shape.h"

#include <cstdio>

namespace autoddl::rt {
namespace {
using namespace detail;

struct PermuteGeometry {
  int rank;
  int64_t outShape[kMaxPermuteRank];
  int64_t srcStride[kMaxPermuteRank]; // x's stride of out's dimension d
};

__global__ void permute_kernel(act_t *out, const act_t *x, int64_t n,
                               PermuteGeometry g, bool accumulate) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nth = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = tid; k < n; k += nth) {
    int64_t rest = k, src = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t idx = rest % g.outShape[d];
      rest /= g.outShape[d];
      src += idx * g.srcStride[d];
    }
    const float v = to_float(x[src]);
    out[k] = from_float<act_t>(accumulate ? to_float(out[k]) + v : v);
  }
}
} // namespace

void permute_copy(act_t *out, const act_t *x, const std::vector<int64_t> &shape,
                  const std::vector<int64_t> &perm, bool accumulate) {
  const size_t r = shape.size();
  if (r > size_t(kMaxPermuteRank) || perm.size() != r) {
    char what[128];
    std::snprintf(what, sizeof what,
                  "cudaErrorInvalidValue (permute of rank %zu, perm of %zu; "
                  "at most %d)",
                  r, perm.size(), kMaxPermuteRank);
    cuda_fail(what, "permute_copy", __FILE__, __LINE__);
  }
  PermuteGeometry g{};
  g.rank = int(r);
  int64_t xStride[kMaxPermuteRank];
  int64_t n = 1;
  for (size_t d = r; d-- > 0;) {
    xStride[d] = n;
    n *= shape[d];
  }
  for (size_t d = 0; d < r; ++d) {
    g.outShape[d] = shape[size_t(perm[d])];
    g.srcStride[d] = xStride[perm[d]];
  }
  if (n == 0)
    return;
  permute_kernel<<<grid_for(n, 256), 256, 0, compute_stream()>>>(out, x, n, g,
                                                                 accumulate);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

void transpose_forward(act_t *out, const act_t *x,
                       const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &perm) {
  permute_copy(out, x, shape, perm, false);
}

void transpose_backward(act_t *dx, const act_t *dout,
                        const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &perm) {
  std::vector<int64_t> inverse(perm.size()), outShape(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    inverse[size_t(perm[d])] = int64_t(d);
    outShape[d] = shape[size_t(perm[d])];
  }
  permute_copy(dx, dout, outShape, inverse, true);
}

} // namespace autoddl::rt
