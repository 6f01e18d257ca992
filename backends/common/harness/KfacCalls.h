//===- KfacCalls.h - the K-FAC calls of generated stage code -------------===//
//
// The K-FAC calls a generated program makes where the plan placed its items
// (docs/kfac.md "Generated programs"), the same for both backends: each
// forwards to the backend's KfacRun `kfac` (KfacCycle.h).
//
// Included by a backend's KfacRun.h after `extern KfacRun kfac`, with `Act`
// its activation type (StageCalls.h) and these members of its KfacRun:
//   void after_item()   after an item run between the schedule's
//                       instructions (CPU: test the pending pipeline sends,
//                       as the stages' ops do; CUDA: nothing, the streams
//                       order them)
//   void release_live() before an activation set is taken again
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_KFACCALLS_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_KFACCALLS_H

#include <cstdint>

namespace autoddl::rt::harness {

inline bool kfac_due() { return kfac.due(); }
inline void kfac_curvature_A(int layer, const Act *x, int64_t rows) {
  kfac.curvature_A(layer, x, rows);
}
inline void kfac_curvature_G(int layer, const Act *dy, int64_t rows) {
  kfac.curvature_G(layer, dy, rows);
}
inline void kfac_save_A(int mb, int layer, const Act *x, int64_t rows) {
  kfac.save(mb, layer, x, rows, false);
}
inline void kfac_save_G(int mb, int layer, const Act *dy, int64_t rows) {
  kfac.save(mb, layer, dy, rows, true);
}
inline void kfac_curvature_saved(int layer, int mb, bool g) {
  kfac.curvature_saved(layer, mb, g);
  kfac.after_item();
}
inline int64_t kfac_phase() { return kfac.phase(); }
inline void kfac_reduce(int layer, bool g) {
  kfac.reduce_item(layer, g);
  kfac.after_item();
}
inline void kfac_invert(int layer, bool g) {
  kfac.invert_item(layer, g);
  kfac.after_item();
}
inline void kfac_release() { kfac.release_live(); }

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_KFACCALLS_H
