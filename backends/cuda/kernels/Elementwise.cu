// Elementwise kernels (Elementwise.h): each op is a functor over fp32 values
// run by launch_map (Elementwise.cuh), which reads and writes 16-byte packs.
#include "backends/cuda/kernels/Elementwise.cuh"
#include "backends/cuda/kernels/Elementwise.h"

namespace autoddl::rt {
namespace {
using detail::launch_map;
using detail::MapArgs;

constexpr float kGeluTanhScale = 0.7978845608028654f; // sqrt(2/pi)

__device__ __forceinline__ float sigmoidf(float v) {
  return 1.0f / (1.0f + expf(-v));
}

struct Add {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = x[0] + x[1];
  }
};
struct Copy2 { // both outputs receive the input (add's backward)
  __device__ void operator()(const float (&x)[1], float (&y)[2]) const {
    y[0] = x[0];
    y[1] = x[0];
  }
};
struct AddRelu {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = fmaxf(x[0] + x[1], 0.0f);
  }
};
struct MaskedCopy2 { // x = (out, dout): add_relu's backward
  __device__ void operator()(const float (&x)[2], float (&y)[2]) const {
    y[0] = y[1] = x[0] > 0.0f ? x[1] : 0.0f;
  }
};
struct Copy1 {
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const {
    y[0] = x[0];
  }
};
struct Mul {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = x[0] * x[1];
  }
};
struct MulBackward { // x = (dout, a, b)
  __device__ void operator()(const float (&x)[3], float (&y)[2]) const {
    y[0] = x[0] * x[2];
    y[1] = x[0] * x[1];
  }
};
struct Scale {
  float s;
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const {
    y[0] = x[0] * s;
  }
};
struct Gelu {
  bool tanhForm;
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const {
    const float v = x[0];
    y[0] =
        tanhForm
            ? 0.5f * v *
                  (1.0f + tanhf(kGeluTanhScale * (v + 0.044715f * v * v * v)))
            : 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  }
};
struct GeluBackward { // x = (x, dout)
  bool tanhForm;
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    const float v = x[0];
    float grad;
    if (tanhForm) {
      // With s = sigmoid(2u) = 0.5 (1 + tanh u): sech^2 u = 4 s (1 - s).
      const float u = kGeluTanhScale * (v + 0.044715f * v * v * v);
      const float s = 1.0f / (1.0f + expf(-2.0f * u));
      grad = s + 2.0f * v * s * (1.0f - s) * kGeluTanhScale *
                     (1.0f + 3.0f * 0.044715f * v * v);
    } else {
      const float cdf = 0.5f * (1.0f + erff(v * 0.7071067811865476f));
      const float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
      grad = cdf + v * pdf;
    }
    y[0] = x[1] * grad;
  }
};
struct Relu {
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const {
    y[0] = x[0] > 0.0f ? x[0] : 0.0f;
  }
};
struct ReluBackward { // x = (x, dout)
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = x[0] > 0.0f ? x[1] : 0.0f;
  }
};
struct Elu {
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const {
    y[0] = x[0] > 0.0f ? x[0] : expm1f(x[0]);
  }
};
struct EluBackward { // x = (x, dout)
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = x[0] > 0.0f ? x[1] : x[1] * expf(x[0]);
  }
};
struct Silu {
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const {
    y[0] = x[0] * sigmoidf(x[0]);
  }
};
struct SiluBackward { // x = (x, dout)
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    const float s = sigmoidf(x[0]);
    y[0] = x[1] * (s + x[0] * s * (1.0f - s));
  }
};
struct Swiglu { // x = (gate, up)
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    y[0] = x[0] * sigmoidf(x[0]) * x[1];
  }
};
struct SwigluBackward { // x = (gate, up, dout)
  __device__ void operator()(const float (&x)[3], float (&y)[2]) const {
    const float s = sigmoidf(x[0]);
    y[0] = x[2] * x[1] * (s + x[0] * s * (1.0f - s));
    y[1] = x[2] * x[0] * s;
  }
};
} // namespace

void add_forward(act_t *out, const act_t *a, const act_t *b, int64_t n) {
  launch_map(MapArgs<act_t, 2, 1>{{a, b}, {out}, {false}}, n, Add{});
}
void add_backward(act_t *da, act_t *db, const act_t *dout, int64_t n,
                  bool accumulate_da, bool accumulate_db) {
  launch_map(
      MapArgs<act_t, 1, 2>{{dout}, {da, db}, {accumulate_da, accumulate_db}}, n,
      Copy2{});
}
void add_relu_forward(act_t *out, const act_t *a, const act_t *b, int64_t n) {
  launch_map(MapArgs<act_t, 2, 1>{{a, b}, {out}, {false}}, n, AddRelu{});
}
void add_relu_backward(act_t *da, act_t *db, const act_t *out,
                       const act_t *dout, int64_t n, bool accumulate_da,
                       bool accumulate_db) {
  launch_map(MapArgs<act_t, 2, 2>{{out, dout},
                                  {da, db},
                                  {accumulate_da, accumulate_db}},
             n, MaskedCopy2{});
}
void mul_forward(act_t *out, const act_t *a, const act_t *b, int64_t n) {
  launch_map(MapArgs<act_t, 2, 1>{{a, b}, {out}, {false}}, n, Mul{});
}
void mul_backward(act_t *da, act_t *db, const act_t *dout, const act_t *a,
                  const act_t *b, int64_t n, bool accumulate_da,
                  bool accumulate_db) {
  launch_map(MapArgs<act_t, 3, 2>{{dout, a, b},
                                  {da, db},
                                  {accumulate_da, accumulate_db}},
             n, MulBackward{});
}
void add_into(act_t *dst, const act_t *src, int64_t n, bool accumulate) {
  launch_map(MapArgs<act_t, 1, 1>{{src}, {dst}, {accumulate}}, n, Copy1{});
}
void scale_inplace(act_t *x, float s, int64_t n) {
  launch_map(MapArgs<act_t, 1, 1>{{x}, {x}, {false}}, n, Scale{s});
}
#ifndef AUTODDL_FP32
void scale_inplace(float *x, float s, int64_t n) {
  launch_map(MapArgs<float, 1, 1>{{x}, {x}, {false}}, n, Scale{s});
}
#endif
void gelu_forward(act_t *out, const act_t *x, int64_t n,
                  bool tanh_approximation) {
  launch_map(MapArgs<act_t, 1, 1>{{x}, {out}, {false}}, n,
             Gelu{tanh_approximation});
}
void gelu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                   bool tanh_approximation, bool accumulate_dx) {
  launch_map(MapArgs<act_t, 2, 1>{{x, dout}, {dx}, {accumulate_dx}}, n,
             GeluBackward{tanh_approximation});
}
void relu_forward(act_t *out, const act_t *x, int64_t n) {
  launch_map(MapArgs<act_t, 1, 1>{{x}, {out}, {false}}, n, Relu{});
}
void relu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                   bool accumulate_dx) {
  launch_map(MapArgs<act_t, 2, 1>{{x, dout}, {dx}, {accumulate_dx}}, n,
             ReluBackward{});
}
void elu_forward(act_t *out, const act_t *x, int64_t n) {
  launch_map(MapArgs<act_t, 1, 1>{{x}, {out}, {false}}, n, Elu{});
}
void elu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                  bool accumulate_dx) {
  launch_map(MapArgs<act_t, 2, 1>{{x, dout}, {dx}, {accumulate_dx}}, n,
             EluBackward{});
}
void silu_forward(act_t *out, const act_t *x, int64_t n) {
  launch_map(MapArgs<act_t, 1, 1>{{x}, {out}, {false}}, n, Silu{});
}
void silu_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t n,
                   bool accumulate_dx) {
  launch_map(MapArgs<act_t, 2, 1>{{x, dout}, {dx}, {accumulate_dx}}, n,
             SiluBackward{});
}
void swiglu_forward(act_t *out, const act_t *gate, const act_t *up, int64_t n) {
  launch_map(MapArgs<act_t, 2, 1>{{gate, up}, {out}, {false}}, n, Swiglu{});
}
void swiglu_backward(act_t *dgate, act_t *dup, const act_t *gate,
                     const act_t *up, const act_t *dout, int64_t n,
                     bool accumulate_dgate, bool accumulate_dup) {
  launch_map(MapArgs<act_t, 3, 2>{{gate, up, dout},
                                  {dgate, dup},
                                  {accumulate_dgate, accumulate_dup}},
             n, SwigluBackward{});
}

} // namespace autoddl::rt
