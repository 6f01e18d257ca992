// Convolution and pooling on NCHW or channels-last (NHWC) tensors on the GPU,
// as the CPU kernels of backends/cpu/kernels/Conv.h (the same calls, so codegen
// emits one text): conv2d as a linear's GEMMs where it is one (channels-last
// 1x1 stride 1, below), else through cuDNN where it takes the shape
// (ConvCudnn.h; the bias added and its gradient summed by own kernels), else
// as one GEMM over
// the whole micro-batch (im2col into rows per output pixel, then Linear.h's
// cuBLASLt linear with the bias as its epilogue, the weight gradient fp32 and
// the bias gradient as its column sums); pool2d (max: the gradient to each
// window's first maximum; avg). The own backward gathers into each input
// element (deterministic, no atomics). Scratch: detail::scratch slot 3 (im2col
// and the transposed output gradient, or cuDNN's workspace).
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_CONV_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_CONV_H

#include "backends/common/ConvShape.h"
#include "backends/cuda/Runtime.h"

namespace autoddl::rt {

/// out[B,Cout,Ho,Wo] = conv(x[B,Cin,H,W], w[Cout,Cin,kh,kw]) + bias[Cout]
/// (bias may be null); out and x stored NHWC under s.channelsLast, w OIHW.
void conv2d_forward(act_t *out, const act_t *x, const act_t *w,
                    const act_t *bias, const Conv2dShape &s);
/// dx += W^T dout (through col2im); dw[Cout,K] (fp32) += dout col^T;
/// dbias[Cout] (fp32) += sums of dout. Any of dx, dw, dbias may be null.
/// Without accumulate_dx, dx = W^T dout (stored: codegen's, where this call
/// is dx's first writer; cuDNN's beta 0).
void conv2d_backward(act_t *dx, float *dw, float *dbias, const act_t *dout,
                     const act_t *x, const act_t *w, const Conv2dShape &s,
                     bool accumulate_dx = true);

// cuDNN (ConvCudnn.h): where the build found libcudnn (bf16 builds), conv2d
// runs cuDNN's convolutions for the shapes it takes (asked once a shape and
// direction; the plan is cached) and the im2col path for the rest.

/// Whether this build has the cuDNN path.
bool conv_cudnn_built();
/// Turns the cuDNN path on (the default) or off (the im2col path always);
/// AUTODDL_CONV=own in the environment starts a program with it off.
void conv_use_cudnn(bool enable);
bool conv_cudnn_enabled();
/// Whether cuDNN takes the forward, input and weight gradients of `s`
/// (16-byte aligned tensors; the GEMM path below may run them instead);
/// plans them on first ask, enqueues nothing.
bool conv2d_uses_cudnn(const Conv2dShape &s);

// The GEMM path: a channels-last 1x1 convolution with stride 1 and no padding
// is Linear.h's linear over its NHWC rows (y[BHW, Cout] = x[BHW, Cin] w^T,
// the OIHW weight [Cout, Cin]), so its three directions run as the linears'
// autotuned cuBLASLt GEMMs (our cuDNN path's dgrad for Cin > Cout took
// 1.6-2.5x PyTorch's time on one H200). Ahead of cuDNN, in every build.

/// Which directions of such a convolution run as GEMMs; the others take the
/// cuDNN / im2col path. AUTODDL_CONV_GEMM in the environment sets them at
/// start: 0 (none: the default until a GPU run has checked and timed the
/// path), 1 (all) or a comma list of forward, dgrad, wgrad.
struct ConvGemmDirs {
  bool forward = false, dgrad = false, wgrad = false;
};
void conv_use_gemm(ConvGemmDirs dirs);
ConvGemmDirs conv_gemm_dirs();
/// Whether `s` is a GEMM over its rows (channels-last, 1x1, stride 1, no
/// padding): the shapes the GEMM path takes.
bool conv2d_is_gemm(const Conv2dShape &s);

/// out[N,Ho,Wo] = max or mean over each kernel x kernel window of the N
/// planes x[N,H,W] (no padding), Ho = (H - kernel) / stride + 1.
/// channels_last = C: the planes are an image [N/C, C, H, W] stored NHWC.
void pool2d_forward(act_t *out, const act_t *x, int64_t N, int64_t H, int64_t W,
                    int64_t kernel, int64_t stride, bool is_max,
                    int64_t channels_last = 0);
/// dx[N,H,W] += dout routed to each window's first maximum, or spread evenly
/// (avg); stored (=) without accumulate_dx.
void pool2d_backward(act_t *dx, const act_t *x, const act_t *dout, int64_t N,
                     int64_t H, int64_t W, int64_t kernel, int64_t stride,
                     bool is_max, int64_t channels_last = 0,
                     bool accumulate_dx = true);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_CONV_H
