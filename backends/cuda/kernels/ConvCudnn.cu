// cuDNN's convolutions behind conv2d_forward/backward (ConvCudnn.h).
//
// Why the graph API: cuDNN 9 marks every legacy cudnnConvolution* call and
// descriptor CUDNN_DEPRECATED (cudnn_cnn.h: a warning at each use under
// -Wall), and its filter gradient takes one data type for x, dy and dw; a
// backend tensor carries its own type, so the fp32 weight gradient can be
// asked for directly. Each graph is one operation: cuDNN's conv + bias
// fusion runs on runtime-fusion engines that want NHWC, the single-op
// engines take NCHW, so Conv.cu adds the bias and sums dbias itself.
//
// Accumulation (dx +=, dw +=): a plan first asks for beta = 1 (the engine
// blends out = conv + out in fp32) into the destination; where no engine
// takes that, beta = 0 into a scratch tensor that a kernel adds; for dw
// last in bf16 (PyTorch's bf16 weight gradient) should no engine write
// fp32 from bf16 operands. A data gradient that its first writer stores
// (codegen's: the buffer then never zeroed nor read) has plans of its own
// with beta = 0.
//
// Channels-last (Conv2dShape::channelsLast): x and y are described NHWC by
// their strides and the filter KRSC, as cuDNN's NHWC tensor-core engines
// want every operand (PyTorch's channels_last converts its weights too).
// The parameter stays OIHW (ONNX's layout, the checkpoints', the CPU
// program's): the forward and data gradient read a KRSC copy made in the
// scratch at each call, and the weight gradient is written KRSC into
// scratch and added transposed into the OIHW dw. A copy kept with the
// parameter would be remade after every optimizer step all the same (the
// weights change each step), and the transposes are ~11M values a step for
// ResNet-50. A 1x1 filter (most of ResNet-50's) or one input channel is the
// same bytes in both: no copy.
//
// Capture safety: the handle, the plans and the scratch (detail::scratch
// slot 3, the own path's, holding [KRSC filter copy | scratch output | engine
// workspace]: backends/common/ConvScratch.h, which the planner prices) come
// into being at a shape's first call, in the program's first, eager step
// (StepGraph.h); later calls build a variant pack on the host and enqueue
// cudnnBackendExecute on compute_stream(), nothing else.
//
// Memory: no engine config whose workspace is over convWorkspaceCap is
// planned or timed, so each call's scratch is within convScratchBound, the
// plan's price; a shape no config of which fits keeps the heuristics' first,
// over that price (AUTODDL_CONV_VERBOSE names it).
#include "backends/cuda/kernels/ConvCudnn.h"
#include "backends/cuda/kernels/CudnnGraph.h"

#if defined(AUTODDL_HAVE_CUDNN) && !defined(AUTODDL_FP32)
#include "backends/common/ConvScratch.h"
#include "backends/cuda/kernels/Common.cuh"
#include "backends/cuda/kernels/Shape.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>
#endif

namespace autoddl::rt {

namespace {
/// AUTODDL_CONV=own in the environment turns the cuDNN path off at start
/// (anything else, or nothing: on).
bool &cudnn_switch() {
  static bool on = !cudnn_graph::env_is("AUTODDL_CONV", "own");
  return on;
}
} // namespace

void conv_use_cudnn(bool enable) { cudnn_switch() = enable; }
bool conv_cudnn_enabled() { return cudnn_switch(); }
bool conv_cudnn_built() { return cudnn_graph::kBuilt; }

} // namespace autoddl::rt

namespace autoddl::rt::cudnn_conv {

#if defined(AUTODDL_HAVE_CUDNN) && !defined(AUTODDL_FP32)
namespace {

using namespace cudnn_graph;

// ConvScratch.h's bytes (the planner's price) count act_t so.
static_assert(sizeof(act_t) == kConvActBytes, "cuDNN runs the bf16 build");

bool verbose() {
  static const bool v = env_is("AUTODDL_CONV_VERBOSE");
  return v;
}

/// AUTODDL_CONV_AUTOTUNE=1: each plan is the fastest of the heuristics' first
/// kTuneCandidates engine configs within the workspace cap, timed once on
/// the shape's first call (cudnn.benchmark's find); else the heuristics'
/// first within the cap. On one H100 ResNet-50's step at batch 256 took
/// 46.58 ms tuned (before the cap) against 46.81
/// (bench/results/onnx/2026-12-07-h100-resnet50-batchnorm-fused/). Opt-in
/// until the capped form has run on a GPU (its memory is priced already).
bool autotune() {
  static const bool v = env_is("AUTODDL_CONV_AUTOTUNE");
  return v;
}
constexpr size_t kTuneCandidates = 8;

/// The workspace cap (ConvScratch.h); AUTODDL_CONV_WORKSPACE_CAP=none lifts
/// it, to measure what it costs (the plan prices the capped scratch only:
/// on one H100 the uncapped tuning took ResNet-50's peak 982 MiB past the
/// untuned one, bench/results/onnx/2026-12-07-h100-resnet50-batchnorm-fused/).
int64_t workspace_cap(const Conv2dShape &s) {
  static const bool capped = !env_is("AUTODDL_CONV_WORKSPACE_CAP", "none");
  return capped ? convWorkspaceCap(s) : INT64_MAX;
}

/// The weight gradient goes into bf16 scratch first (then added into the fp32
/// dw), as PyTorch's autocast weight gradient does; AUTODDL_CONV_WGRAD=fp32
/// asks cuDNN for fp32 output into dw first. On one H100 the fp32-output
/// engines made ResNet-50's step at batch 256 165.4 ms, the bf16 ones 104.2
/// (convolutions' backward 88.7 against 27.2 ms;
/// bench/results/onnx/2026-12-07-h100-resnet50-gpu-samples/).
bool wgrad_bf16_first() {
  static const bool v = !env_is("AUTODDL_CONV_WGRAD", "fp32");
  return v;
}

/// ConvScratch.h's directions; op_names indexes its table by them.
using Dir = ConvDirection;
const char *dir_name(Dir d) {
  return d == Dir::Forward ? "forward" : d == Dir::DataGrad ? "dgrad" : "wgrad";
}

/// Tensor ids of the variant pack, one a role: x [B,Cin,H,W] (dx),
/// w [Cout,Cin,kh,kw] (dw), y [B,Cout,Ho,Wo] (dy).
enum Role : int { kX = 0, kW = 1, kY = 2 };

/// A direction's operation type and attribute names; `out` is the role it
/// writes.
struct OpNames {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t alpha, beta, conv, role[3];
  Role out;
};
const OpNames &op_names(Dir d) {
  static const OpNames names[3] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
        CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
       kY},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
       kX},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
       kW}};
  return names[int(d)];
}

/// How a plan writes its result: into the destination (beta = 1 in the
/// backward, added), or (beta = 0) into a scratch tensor of `type` that a
/// kernel adds into the destination.
struct Variant {
  bool inPlace;
  cudnnDataType_t type;
};
/// `krsc`: the weight gradient is written in KRSC and transposed into dw, so
/// only through scratch.
std::vector<Variant> variants(Dir d, bool krsc) {
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  switch (d) {
  case Dir::Forward:
    return {{true, bf16}};
  case Dir::DataGrad:
    return {{true, bf16}, {false, bf16}};
  case Dir::FilterGrad:
    break;
  }
  if (krsc)
    return wgrad_bf16_first()
               ? std::vector<Variant>{{false, bf16}, {false, f32}}
               : std::vector<Variant>{{false, f32}, {false, bf16}};
  if (wgrad_bf16_first())
    return {{false, bf16}, {true, f32}, {false, f32}};
  return {{true, f32}, {false, f32}, {false, bf16}};
}

/// What a plan is cached under; `align` is the bytes every pointer of the
/// call is aligned to (at most 16: the tensors' promised alignment).
struct Key {
  int dev;
  Dir dir;
  int64_t B, Cin, H, W, Cout, kh, kw, stride, padding, align;
  bool last;  // channels-last: x, y NHWC, the filter KRSC
  bool store; // a backward that stores its result (beta = 0), not adds
  auto tie() const {
    return std::tie(dev, dir, B, Cin, H, W, Cout, kh, kw, stride, padding,
                    align, last, store);
  }
  bool operator<(const Key &o) const { return tie() < o.tie(); }
  Conv2dShape shape() const {
    return {B, Cin, H, W, Cout, kh, kw, stride, padding, last};
  }
};

/// One planned graph: its execution plan and every descriptor it refers to
/// (kept for the process); under autotune, until the first call times them,
/// the candidate plans (workspaceBytes: the largest of theirs, within
/// convWorkspaceCap but where none fits).
struct Plan {
  bool usable = false;
  Variant variant{};
  Desc plan = nullptr;
  std::vector<Desc> descs;
  int64_t workspaceBytes = 0;
  std::vector<Planned> candidates;
};

/// A convolution graph's descriptors.
class ConvBuilder : public Builder {
public:
  /// A packed 4-d tensor of dims [N, C, H, W]: NCHW, or NHWC (`last`; a
  /// filter [K, C, R, S] then KRSC, the same strides).
  Desc tensor(const int64_t (&dims)[4], cudnnDataType_t type, int64_t uid,
              int64_t align, bool last) {
    const int64_t nchw[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3],
                             dims[3], 1};
    const int64_t nhwc[4] = {dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1],
                             dims[1]};
    const int64_t *strides = last ? nhwc : nchw;
    const bool isVirtual = false;
    Desc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual);
    finalize(t, "tensor");
    return t;
  }
  /// A 2-d cross-correlation (ONNX's and PyTorch's Conv) in fp32.
  Desc convolution(const Key &k) {
    const int64_t spatial = 2, pad[2] = {k.padding, k.padding},
                  stride[2] = {k.stride, k.stride}, dilation[2] = {1, 1};
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    Desc c = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    set(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
    set(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    set(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
        &mode);
    set(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    set(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    set(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
    set(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
    finalize(c, "convolution descriptor");
    return c;
  }
};

/// Plans `k` as one variant (a null plan: cuDNN took none of its configs).
void plan_variant(Plan &p, cudnnHandle_t h, const Key &k, Variant v) {
  const int64_t Ho = (k.H + 2 * k.padding - k.kh) / k.stride + 1;
  const int64_t Wo = (k.W + 2 * k.padding - k.kw) / k.stride + 1;
  const int64_t dims[3][4] = {{k.B, k.Cin, k.H, k.W},
                              {k.Cout, k.Cin, k.kh, k.kw},
                              {k.B, k.Cout, Ho, Wo}};
  const OpNames &names = op_names(k.dir);
  ConvBuilder b;
  Desc conv = b.convolution(k);
  Desc op = b.make(names.type);
  for (int r = 0; r < 3; ++r) {
    const cudnnDataType_t type = r == names.out ? v.type : CUDNN_DATA_BFLOAT16;
    // The scratch output is 256-byte aligned (detail::scratch).
    const int64_t align = r == names.out && !v.inPlace ? 16 : k.align;
    Desc t = b.tensor(dims[r], type, int64_t(r) + 1, align, k.last);
    b.set(op, names.role[r], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
  }
  const float alpha = 1.0f,
              beta =
                  v.inPlace && k.dir != Dir::Forward && !k.store ? 1.0f : 0.0f;
  b.set(op, names.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  b.set(op, names.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  b.set(op, names.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
  b.finalize(op, "convolution operation");
  const int64_t cap = workspace_cap(k.shape());
  std::vector<Planned> plans = plan_candidates(
      b, h, {op},
      {CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK},
      deterministic_fp32, autotune() ? kTuneCandidates : 1, cap);
  if (!b.ok() || plans.empty()) {
    if (verbose())
      std::fprintf(
          stderr,
          "autoddl: cuDNN conv2d %s variant (%s, %s) not taken (%s: "
          "%s)\n",
          dir_name(k.dir), v.inPlace ? "in place" : "scratch",
          v.type == CUDNN_DATA_FLOAT ? "fp32" : "bf16",
          b.failedAt ? b.failedAt : "no engine config finalizes",
          lib().GetErrorString(b.ok() ? CUDNN_STATUS_NOT_SUPPORTED : b.status));
    b.release();
    return;
  }
  p.usable = true;
  p.plan = plans[0].plan;
  for (const Planned &c : plans)
    p.workspaceBytes = std::max(p.workspaceBytes, c.workspaceBytes);
  if (p.workspaceBytes > cap && verbose())
    std::fprintf(stderr,
                 "autoddl: cuDNN conv2d %s: no engine config within the "
                 "%ld-byte workspace cap; the first takes %ld (over the "
                 "plan's price)\n",
                 dir_name(k.dir), long(cap), long(p.workspaceBytes));
  if (plans.size() > 1)
    p.candidates = std::move(plans);
  p.variant = v;
  p.descs = std::move(b.descs);
}

std::mutex &cache_mutex() {
  static std::mutex m;
  return m;
}

/// The cached plan for `key`, built on first use (not usable: no handle, or
/// no variant planned).
Plan &plan_for(const Key &key) {
  static std::map<Key, std::unique_ptr<Plan>> cache; // process lifetime
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto it = cache.find(key);
  if (it != cache.end())
    return *it->second;
  auto p = std::make_unique<Plan>();
  if (cudnnHandle_t h = handle())
    for (const Variant &v : variants(key.dir, convFilterCopied(key.shape())))
      if (!p->usable)
        plan_variant(*p, h, key, v);
  if (verbose())
    std::fprintf(
        stderr,
        "autoddl: conv2d %s B%ld %ld->%ld %ldx%ld k%ldx%ld s%ld p%ld "
        "%s: %s\n",
        dir_name(key.dir), long(key.B), long(key.Cin), long(key.Cout),
        long(key.H), long(key.W), long(key.kh), long(key.kw), long(key.stride),
        long(key.padding), key.last ? "NHWC" : "NCHW",
        !p->usable           ? "own kernels"
        : p->variant.inPlace ? "cuDNN"
                             : (p->variant.type == CUDNN_DATA_FLOAT
                                    ? "cuDNN into fp32 scratch, added"
                                    : "cuDNN into bf16 scratch, added"));
  return *cache.emplace(key, std::move(p)).first->second;
}

/// The alignment (bytes, at most 16) all of `ptrs` share.
int64_t common_alignment(std::initializer_list<const void *> ptrs) {
  int64_t a = 16;
  for (const void *p : ptrs)
    while (a > 1 && reinterpret_cast<uintptr_t>(p) % uintptr_t(a) != 0)
      a /= 2;
  return a;
}

Key key_of(Dir d, const Conv2dShape &s, int64_t align, bool store = false) {
  return {current_device(), d,    s.B,  s.Cin,    s.H,       s.W,
          s.Cout,           s.kh, s.kw, s.stride, s.padding, align,
          s.channelsLast,   store};
}

bool enabled_here() {
  return conv_cudnn_enabled() && handle_or_say(verbose(), "conv2d") != nullptr;
}

/// dst[i] += src[i] (in fp32, rounded to Dst); dst[i] = src[i] without
/// accumulate.
template <class Dst, class Src>
__global__ void add_into_kernel(Dst *dst, const Src *src, int64_t n,
                                bool accumulate) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] =
        detail::from_float<Dst>((accumulate ? detail::to_float(dst[i]) : 0.0f) +
                                detail::to_float(src[i]));
}

template <class Dst, class Src>
void add_into(Dst *dst, const void *src, int64_t n, bool accumulate = true) {
  constexpr int kThreads = 256;
  add_into_kernel<<<detail::grid_for(n, kThreads), kThreads, 0,
                    compute_stream()>>>(dst, static_cast<const Src *>(src), n,
                                        accumulate);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// dw[k, c, rs] += src[k, rs, c] (a KRSC weight gradient into the OIHW one,
/// in fp32).
template <class Src>
__global__ void add_krsc_into_kernel(float *dw, const Src *src, int64_t C,
                                     int64_t RS, int64_t n) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t rs = e % RS, c = (e / RS) % C, k = e / (RS * C);
    dw[e] += detail::to_float(src[(k * RS + rs) * C + c]);
  }
}

template <class Src>
void add_krsc_into(float *dw, const void *src, const Conv2dShape &s) {
  constexpr int kThreads = 256;
  const int64_t n = s.Cout * s.Cin * s.kh * s.kw;
  add_krsc_into_kernel<<<detail::grid_for(n, kThreads), kThreads, 0,
                         compute_stream()>>>(dw, static_cast<const Src *>(src),
                                             s.Cin, s.kh * s.kw, n);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

/// Times p's candidates on this call's tensors, the written one replaced by
/// `out` (scratch: the call's result is untouched), and keeps the fastest.
/// Inside a graph capture (nothing may wait there) the heuristics' first
/// stays.
void tune(Plan &p, Dir d, void *const ptrs[3], void *out, void *workspace) {
  std::vector<Planned> candidates = std::move(p.candidates);
  p.candidates.clear();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  AUTODDL_CUDA_CHECK(cudaStreamIsCapturing(compute_stream(), &capture));
  if (capture != cudaStreamCaptureStatusNone)
    return;
  std::vector<void *> tensors(ptrs, ptrs + 3);
  tensors[op_names(d).out] = out;
  cudaEvent_t start, stop;
  AUTODDL_CUDA_CHECK(cudaEventCreate(&start));
  AUTODDL_CUDA_CHECK(cudaEventCreate(&stop));
  float best = 0;
  for (const Planned &c : candidates) {
    auto once = [&] {
      execute(handle(), c.plan, {1, 2, 3}, tensors,
              c.workspaceBytes > 0 ? workspace : nullptr,
              "cudnnBackendExecute (conv2d autotune)");
    };
    once(); // warm-up
    AUTODDL_CUDA_CHECK(cudaEventRecord(start, compute_stream()));
    for (int i = 0; i < 3; ++i)
      once();
    AUTODDL_CUDA_CHECK(cudaEventRecord(stop, compute_stream()));
    AUTODDL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    AUTODDL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (verbose())
      std::fprintf(stderr,
                   "autoddl: conv2d %s candidate %zu: %.4f ms, workspace "
                   "%ld bytes\n",
                   dir_name(d), size_t(&c - candidates.data()), ms / 3,
                   long(c.workspaceBytes));
    if (&c == candidates.data() || ms < best) {
      best = ms;
      p.plan = c.plan;
    }
  }
  AUTODDL_CUDA_CHECK(cudaEventDestroy(start));
  AUTODDL_CUDA_CHECK(cudaEventDestroy(stop));
}

/// Runs direction d's plan with the tensors of roles x, w, y (the one it
/// writes among them: stored by the forward, added into by the backward,
/// stored by a backward that `store`s).
bool run(Dir d, const Conv2dShape &s, const void *x, const void *w,
         const void *y, bool store = false) {
  if (!enabled_here())
    return false;
  Plan &p = plan_for(key_of(d, s, common_alignment({x, w, y}), store));
  if (!p.usable)
    return false;
  void *ptrs[3] = {const_cast<void *>(x), const_cast<void *>(w),
                   const_cast<void *>(y)};
  const Role out = op_names(d).out;
  const int64_t n = convResultElements(s, d);
  const bool f32 = p.variant.type == CUDNN_DATA_FLOAT;
  // Candidates that store in place (the forward, a backward that stores) are
  // timed on the call's own output, which the plan's run then overwrites;
  // only one that adds into it (beta = 1) needs a scratch output to be timed
  // on (ResNet-50: the stem's 411 MB forward output no longer doubled).
  const bool storesInPlace = p.variant.inPlace && (d == Dir::Forward || store);
  const int64_t outElementBytes =
      p.variant.inPlace && (p.candidates.empty() || storesInPlace) ? 0
      : f32 ? int64_t(sizeof(float))
            : int64_t(sizeof(act_t));
  const ConvScratchParts parts =
      convScratchParts(s, d, outElementBytes, p.workspaceBytes);
  const int64_t copyBytes = parts.copy, outBytes = parts.output,
                total = parts.total();
  char *buf =
      total > 0 ? static_cast<char *>(detail::scratch(3, total)) : nullptr;
  if (copyBytes > 0) { // OIHW [K, C, RS] -> KRSC [K, RS, C]
    auto *krsc = reinterpret_cast<act_t *>(buf);
    permute_copy(krsc, static_cast<const act_t *>(w),
                 {s.Cout, s.Cin, s.kh * s.kw}, {0, 2, 1}, false);
    ptrs[kW] = krsc;
  }
  char *ws = buf ? buf + copyBytes : nullptr;
  if (!p.candidates.empty())
    tune(p, d, ptrs, storesInPlace ? ptrs[out] : ws, ws + outBytes);
  void *dst = ptrs[out];
  if (!p.variant.inPlace)
    ptrs[out] = ws;
  execute(handle(), p.plan, {1, 2, 3}, {ptrs[0], ptrs[1], ptrs[2]},
          p.workspaceBytes > 0 ? ws + outBytes : nullptr,
          "cudnnBackendExecute (conv2d)");
  if (p.variant.inPlace)
    return true;
  if (out != kW)
    add_into<act_t, act_t>(static_cast<act_t *>(dst), ws, n, !store);
  else if (convFilterCopied(s) && f32)
    add_krsc_into<float>(static_cast<float *>(dst), ws, s);
  else if (convFilterCopied(s))
    add_krsc_into<act_t>(static_cast<float *>(dst), ws, s);
  else if (f32)
    add_into<float, float>(static_cast<float *>(dst), ws, n);
  else
    add_into<float, act_t>(static_cast<float *>(dst), ws, n);
  return true;
}

} // namespace

bool forward(act_t *out, const act_t *x, const act_t *w, const Conv2dShape &s) {
  return run(Dir::Forward, s, x, w, out);
}

bool backward_data(act_t *dx, const act_t *dout, const act_t *w,
                   const Conv2dShape &s, bool accumulate) {
  return run(Dir::DataGrad, s, dx, w, dout, !accumulate);
}

bool backward_filter(float *dw, const act_t *dout, const act_t *x,
                     const Conv2dShape &s) {
  return run(Dir::FilterGrad, s, x, dw, dout);
}

bool takes(const Conv2dShape &s) {
  if (!enabled_here())
    return false;
  for (Dir d : {Dir::Forward, Dir::DataGrad, Dir::FilterGrad})
    if (!plan_for(key_of(d, s, 16)).usable)
      return false;
  return true;
}

#else // no cuDNN in this build (or the fp32 build): the own path only

bool forward(act_t *, const act_t *, const act_t *, const Conv2dShape &) {
  return false;
}
bool backward_data(act_t *, const act_t *, const act_t *, const Conv2dShape &,
                   bool) {
  return false;
}
bool backward_filter(float *, const act_t *, const act_t *,
                     const Conv2dShape &) {
  return false;
}
bool takes(const Conv2dShape &) { return false; }

#endif

} // namespace autoddl::rt::cudnn_conv
