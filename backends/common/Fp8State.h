// The FP8 linears' delayed-scaling state (docs/fp8.md): Fp8Meta, the device
// struct one tensor role's casts read and update (backends/cuda/kernels/
// Fp8.h), and its form in a checkpoint (docs/checkpoints.md "FP8 scaling"):
// plain C++, so that the harness's loader checks a checkpoint's rows and a
// CPU test round-trips them.
#ifndef AUTODDL_BACKENDS_COMMON_FP8STATE_H
#define AUTODDL_BACKENDS_COMMON_FP8STATE_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace autoddl::rt {

constexpr int kFp8AmaxHistory = 32;

/// The delayed-scaling state of one tensor role, on the device. Zero-filled
/// is not valid: fp8_meta_init sets scale 1. Between steps amax and
/// blocksDone are 0 (a recording cast's last block resets them).
struct Fp8Meta {
  float scale;         // the casts multiply by this
  float scaleInv;      // 1 / scale
  float amax;          // of the recording cast now running (reset after)
  int32_t pos;         // the history slot the next amax goes to
  uint32_t blocksDone; // the recording cast's blocks that finished
  int32_t recorded;    // amaxes recorded so far (saturates)
  float history[kFp8AmaxHistory];
};

/// A linear's metas, in this order (Fp8Linear.cu's roles).
constexpr int kFp8Roles = 3; // input, weight, output gradient

/// A linear's row in its checkpoint entry "<weight>.fp8_scaling" (F32
/// [ranks, kFp8RowFloats], row r rank r's: the state is each rank's own, as
/// its tensors' amaxes are): the layouts of its weight's FP8 copy for a step
/// (a bit mask: 1 [O,K], 2 [K,O]), then per role scale, 1/scale, the next
/// history slot, the amaxes recorded (a meta that recorded none primes at
/// its next cast) and the history. A row of zeros: the rank holds no such
/// linear (or nothing was loaded into it).
constexpr int64_t kFp8MetaFloats = 4 + kFp8AmaxHistory;
constexpr int64_t kFp8RowFloats = 1 + kFp8Roles * kFp8MetaFloats;
constexpr const char *kFp8ScalingSuffix = ".fp8_scaling";

inline std::string fp8_scaling_entry(const std::string &weight) {
  return weight + kFp8ScalingSuffix;
}
inline bool is_fp8_scaling_entry(const std::string &name) {
  const size_t n = std::strlen(kFp8ScalingSuffix);
  return name.size() > n &&
         name.compare(name.size() - n, n, kFp8ScalingSuffix) == 0;
}

inline void fp8_row_from_metas(float *row, unsigned layouts,
                               const Fp8Meta *metas) {
  row[0] = float(layouts);
  for (int k = 0; k < kFp8Roles; ++k) {
    const Fp8Meta &m = metas[k];
    float *f = row + 1 + k * kFp8MetaFloats;
    f[0] = m.scale;
    f[1] = m.scaleInv;
    f[2] = float(m.pos);
    f[3] = float(m.recorded);
    std::memcpy(f + 4, m.history, sizeof m.history);
  }
}

inline bool fp8_row_empty(const float *row) {
  for (int64_t i = 0; i < kFp8RowFloats; ++i)
    if (row[i] != 0.0f)
      return false;
  return true;
}

/// Why `row` is no state a cast can run on ("" when it is, or empty): the
/// values a step leaves (a history slot and count in range, positive finite
/// scales, amaxes not NaN nor negative: an overflowed tensor's is +inf).
inline std::string fp8_row_error(const float *row) {
  if (fp8_row_empty(row))
    return "";
  auto whole = [](float v, float lo, float hi) {
    return v >= lo && v <= hi && v == std::floor(v);
  };
  if (!whole(row[0], 0, 3))
    return "the weight copy's layouts are " + std::to_string(row[0]) +
           ", not a mask of 2 bits";
  static const char *kRole[kFp8Roles] = {"input", "weight", "output gradient"};
  for (int k = 0; k < kFp8Roles; ++k) {
    const float *f = row + 1 + k * kFp8MetaFloats;
    const std::string role = std::string("the ") + kRole[k] + " meta's ";
    for (int i = 0; i < 2; ++i)
      if (!(f[i] > 0.0f) || !std::isfinite(f[i]))
        return role + (i ? "1/scale" : "scale") + " is " +
               std::to_string(f[i]) + ", not a positive finite number";
    if (!whole(f[2], 0, kFp8AmaxHistory - 1))
      return role + "history slot is " + std::to_string(f[2]) +
             ", not one of 0.." + std::to_string(kFp8AmaxHistory - 1);
    if (!whole(f[3], 0, kFp8AmaxHistory))
      return role + "count of amaxes is " + std::to_string(f[3]) +
             ", not one of 0.." + std::to_string(kFp8AmaxHistory);
    for (int h = 0; h < kFp8AmaxHistory; ++h)
      if (!(f[4 + h] >= 0.0f))
        return role + "amax history holds " + std::to_string(f[4 + h]);
  }
  return "";
}

/// The inverse of fp8_row_from_metas, for a row fp8_row_error accepts and
/// that is not empty: `metas` as a step left them.
inline void fp8_metas_from_row(const float *row, unsigned &layouts,
                               Fp8Meta *metas) {
  layouts = unsigned(row[0]);
  for (int k = 0; k < kFp8Roles; ++k) {
    const float *f = row + 1 + k * kFp8MetaFloats;
    Fp8Meta &m = metas[k];
    m.scale = f[0];
    m.scaleInv = f[1];
    m.amax = 0.0f;
    m.pos = int32_t(f[2]);
    m.blocksDone = 0;
    m.recorded = int32_t(f[3]);
    std::memcpy(m.history, f + 4, sizeof m.history);
  }
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_FP8STATE_H
