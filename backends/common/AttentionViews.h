// Where an attention's q, k, v live, for both backends' kernels (T: float on
// the CPU, the activation type act_t on CUDA, device pointers there).
#ifndef AUTODDL_BACKENDS_COMMON_ATTENTIONVIEWS_H
#define AUTODDL_BACKENDS_COMMON_ATTENTIONVIEWS_H

#include <cstdint>

namespace autoddl::rt {

/// Row (b, t) of q is q + (b*T + t) * q_stride, head h at column h*D; k and v
/// rows use kv_stride, kv head g at column g*D.
///   separate tensors: q [B,T,H*D] (q_stride = H*D), k, v [B,T,G*D] (kv_stride
///   = G*D); fused qkv [B,T,(H+2G)*D] laid out [q | k | v]: q = qkv, k = qkv +
///   H*D, v = qkv + (H+G)*D, q_stride = kv_stride = (H+2G)*D
///   (attention_qkv_views below).
template <class T> struct AttentionViewsOf {
  const T *q, *k, *v;
  int64_t q_stride, kv_stride;
};
/// The same for gradients (written with +=).
template <class T> struct AttentionGradViewsOf {
  T *dq, *dk, *dv;
  int64_t q_stride, kv_stride;
};

template <class T>
inline AttentionViewsOf<T> attention_qkv_views(const T *qkv, int64_t H,
                                               int64_t G, int64_t D) {
  const int64_t s = (H + 2 * G) * D;
  return {qkv, qkv + H * D, qkv + (H + G) * D, s, s};
}
template <class T>
inline AttentionGradViewsOf<T> attention_qkv_grad_views(T *dqkv, int64_t H,
                                                        int64_t G, int64_t D) {
  const int64_t s = (H + 2 * G) * D;
  return {dqkv, dqkv + H * D, dqkv + (H + G) * D, s, s};
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_ATTENTIONVIEWS_H
