// The cuDNN path of the GPU conv2d (Conv.h): cuDNN's convolution engines,
// forward, data gradient and filter gradient, reached through its graph API
// (the C backend API of cudnn_graph.h, as AttentionCudnn.h; no
// cudnn-frontend). Internal to Conv.cu, which calls it first and runs its own
// im2col + GEMM path where it answers false.
//
// Built in where the build found libcudnn (AUTODDL_HAVE_CUDNN) and only for
// bf16 act_t: the fp32 build exists to match the CPU to 1e-4, and cuDNN's
// fp32 engines may compute in TF32. Elsewhere every function answers false.
//
// Tensors NCHW, or channels-last (NHWC, the filter KRSC: ConvCudnn.cu), math
// in fp32. One operation graph a (direction, shape, layout, pointer
// alignment) is planned (heuristics mode B, then A, then the fallback list;
// the first deterministic engine config whose execution plan finalizes and
// whose workspace is within the cap of backends/common/ConvScratch.h;
// AUTODDL_CONV_AUTOTUNE=1: the fastest of the first 8 of them, timed at its
// first call) and cached with its answer: a
// shape cuDNN rejects is asked once and then always runs the own path.
#ifndef AUTODDL_BACKENDS_CUDA_KERNELS_CONVCUDNN_H
#define AUTODDL_BACKENDS_CUDA_KERNELS_CONVCUDNN_H

#include "backends/cuda/kernels/Conv.h"

namespace autoddl::rt::cudnn_conv {

/// out = conv(x, w) (stored; no bias) through cuDNN and true, or false
/// (nothing enqueued) where this build has no cuDNN, conv_use_cudnn(false) is
/// in force or cuDNN rejects the shape.
bool forward(act_t *out, const act_t *x, const act_t *w, const Conv2dShape &s);
/// dx += the input gradient of dout (conv2d_backward's contract; dx = it
/// without accumulate), or false.
bool backward_data(act_t *dx, const act_t *dout, const act_t *w,
                   const Conv2dShape &s, bool accumulate = true);
/// dw (fp32) += the weight gradient of dout over x, or false.
bool backward_filter(float *dw, const act_t *dout, const act_t *x,
                     const Conv2dShape &s);

/// Whether all three calls take shape `s` (16-byte aligned pointers); plans
/// them on first ask, enqueues nothing.
bool takes(const Conv2dShape &s);

} // namespace autoddl::rt::cudnn_conv

#endif // AUTODDL_BACKENDS_CUDA_KERNELS_CONVCUDNN_H
