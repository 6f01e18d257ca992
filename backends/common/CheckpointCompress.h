//===- CheckpointCompress.h - BitSnap's encodings of checkpoint tensors ---===//
//
// Issue 46 item 4 (BitSnap): the two encodings a compressed checkpoint stores
// its tensors in, and what they cost. Plain C++17, no dependency.
//  - A bitmask-sparse delta of a parameter against its value in a base (full)
//    checkpoint: one bit per element (1: changed) and the changed elements'
//    fp32 values, in order. Lossless: the decode is bitwise the tensor.
//    Elements equal to the base bit for bit are left out (not "close": a
//    value is exact or stored).
//  - Cluster quantization of an optimizer moment: in chunks of
//    kClusterChunk elements, kClusterLevels levels (a table of floats) and
//    one byte per element naming its nearest level. Two placements:
//    Linear, 1-D k-means of the values (quantile clusters refined by Lloyd's
//    iterations: the squared error, which the largest values dominate), and
//    SignedLog, code 0 for 0 (exact) and even levels of
//    t(x) = sign(x) (1 + ln|x| - ln min|x|) over the chunk's nonzero x: each
//    element's relative error bounded (CheckpointCompress.cpp). AdamW
//    divides m by sqrt(v): what a resumed step needs is each element's
//    relative error of m and of sqrt(v), which SignedLog bounds and Linear
//    does not (a v of 1e-12 in a cluster of mean 1e-6 changes its update a
//    thousandfold). The decode is the same table lookup for both.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_CHECKPOINTCOMPRESS_H
#define AUTODDL_BACKENDS_COMMON_CHECKPOINTCOMPRESS_H

#include <cstdint>
#include <vector>

namespace autoddl::rt {

/// One bit per element, little-endian within each byte (bit i of byte i/8).
struct BitmaskDelta {
  int64_t n = 0;
  std::vector<uint8_t> mask;  // (n + 7) / 8 bytes
  std::vector<float> changed; // the elements whose bit is 1, in order
  /// Bytes as stored: the mask and the changed values.
  int64_t bytes() const {
    return int64_t(mask.size()) + 4 * int64_t(changed.size());
  }
};

/// `value` against `base` (both n elements): the elements whose bits differ.
BitmaskDelta delta_encode(const float *base, const float *value, int64_t n);
/// Writes the tensor back into `out` (n elements): base where the mask is 0.
void delta_decode(const BitmaskDelta &d, const float *base, float *out);

constexpr int64_t kClusterChunk = 65536;
constexpr int kClusterLevels = 256;

enum class Companding { Linear, SignedLog };

struct ClusterQuantized {
  int64_t n = 0;
  std::vector<float> centroids;  // kClusterLevels per chunk, ascending
  std::vector<uint8_t> codes;    // n
  double max_error = 0;          // the largest |x - decoded x| encoded
  double max_relative_error = 0; // the largest |x - decoded x| / |x|, x != 0
  int64_t bytes() const {
    return 4 * int64_t(centroids.size()) + int64_t(codes.size());
  }
};

/// `threads` > 1 quantizes the chunks on that many threads (the same
/// result: each chunk is its own problem). Assumes finite values.
ClusterQuantized cluster_quantize(const float *x, int64_t n, Companding c,
                                  int lloyd_iterations = 32, int threads = 1);
void cluster_dequantize(const ClusterQuantized &q, float *out);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_CHECKPOINTCOMPRESS_H
