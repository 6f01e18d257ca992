// cuDNN's fused attention behind attention_forward/backward (AttentionCudnn.h).
//
// The graphs are the ones cuDNN's fused flash-attention engines recognise
// (the cuDNN developer guide's "scaled dot product attention" patterns): in
// fp32 unless said otherwise, with S = Q Kᵀ [B,H,T,T] virtual,
//   forward:  S·scale, the causal mask (row index >= column index, else the
//             lowest float), softmax as max / sub / exp / sum / div with
//             Stats = max + log(sum) written out, P (bf16) · V -> O;
//   backward: Σ = rowsum(dO ∘ O); P = exp(mask(S·scale) - Stats);
//             dV = Pᵀ dO; dS = P ∘ (dO Vᵀ - Σ) · scale; dK = dSᵀ Q;
//             dQ = dS K through an fp32 accumulator (F16x16 reordered, zeroed
//             before each run); with grouped kv heads dK, dV are summed over
//             each group of q heads by a reduction.
// q/k/v/o and the gradients keep the program's [B,T,heads*D] rows: the 4-d
// tensors [B,heads,T,D] carry their strides (row stride, D, 1), so the fused
// qkv needs no copy.
#include "backends/cuda/kernels/AttentionCudnn.h"
#include "backends/cuda/kernels/CudnnGraph.h"

#if defined(AUTODDL_HAVE_CUDNN) && !defined(AUTODDL_FP32)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>
#endif

namespace autoddl::rt {

namespace {
/// AUTODDL_ATTENTION=own in the environment turns the cuDNN path off at start
/// (anything else, or nothing: on).
bool &cudnn_switch() {
  static bool on = !cudnn_graph::env_is("AUTODDL_ATTENTION", "own");
  return on;
}
} // namespace

void attention_use_cudnn(bool enable) { cudnn_switch() = enable; }
bool attention_cudnn_enabled() { return cudnn_switch(); }
bool attention_cudnn_built() { return cudnn_graph::kBuilt; }

} // namespace autoddl::rt

namespace autoddl::rt::cudnn_attention {

#if defined(AUTODDL_HAVE_CUDNN) && !defined(AUTODDL_FP32)
namespace {

using namespace cudnn_graph;
constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;

bool verbose() {
  static const bool v = env_is("AUTODDL_ATTENTION_VERBOSE");
  return v;
}

/// Tensor ids of the variant pack (the graph's non-virtual tensors).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kLowest,
  kOne,
  kDO,
  kDQ,
  kDK,
  kDV,
  kDQAcc,
  kFirstVirtual = 100
};

/// Builds one operation graph: every descriptor it makes is kept (the plan
/// refers to them).
class GraphBuilder : public Builder {
public:
  std::vector<Desc> ops;

  /// A 4-d tensor; strides empty = packed row-major.
  Desc tensor(std::vector<int64_t> dims, std::vector<int64_t> strides,
              cudnnDataType_t type, int64_t uid, bool isVirtual,
              bool byValue = false, bool reorderF16x16 = false) {
    if (strides.empty()) {
      strides.assign(dims.size(), 1);
      for (int i = int(dims.size()) - 2; i >= 0; --i)
        strides[size_t(i)] = strides[size_t(i) + 1] * dims[size_t(i) + 1];
    }
    Desc t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, int64_t(dims.size()),
        dims.data());
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, int64_t(strides.size()),
        strides.data());
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual);
    if (byValue)
      set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValue);
    if (reorderF16x16) {
      const cudnnBackendTensorReordering_t r = CUDNN_TENSOR_REORDERING_F16x16;
      set(t, CUDNN_ATTR_TENSOR_REORDERING_MODE,
          CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &r);
    }
    finalize(t, "tensor");
    return t;
  }
  /// A virtual intermediate of `dims` (packed strides).
  Desc virt(std::vector<int64_t> dims,
            cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(std::move(dims), {}, type, nextVirtual_++, true);
  }
  /// A by-value scalar (its host value is given in the variant pack).
  Desc scalar(int64_t uid, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor({1, 1, 1, 1}, {1, 1, 1, 1}, type, uid, false, true);
  }

  /// An operation of `type` whose descriptor-valued attributes are `slots`
  /// (a null descriptor: attribute left unset), finalized and added.
  void operation(
      cudnnBackendDescriptorType_t type,
      std::initializer_list<std::pair<cudnnBackendAttributeName_t, Desc>> slots,
      const char *what) {
    Desc op = make(type);
    for (const auto &[name, d] : slots)
      if (d)
        set(op, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
    finalize(op, what);
    ops.push_back(op);
  }

  /// y = mode(x[, b[, t]]) computed in `prec`; axis >= 0 for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc t, Desc y,
                 cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0)
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw, "pointwise descriptor");
    operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw},
               {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x},
               {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
               {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t},
               {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}},
              "pointwise operation");
  }
  /// c = a b (batched over the leading dimensions) in fp32.
  void matmul(Desc a, Desc b, Desc c) {
    Desc mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &kF32);
    finalize(mm, "matmul descriptor");
    operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
               {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
               {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c},
               {CUDNN_ATTR_OPERATION_MATMUL_DESC, mm}},
              "matmul operation");
  }
  /// y = x reduced (over the dimensions where y has extent 1) in fp32.
  void reduce(cudnnReduceTensorOp_t how, Desc x, Desc y) {
    Desc rd = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
        1, &how);
    set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &kF32);
    finalize(rd, "reduction descriptor");
    operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
               {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y},
               {CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd}},
              "reduction operation");
  }
  /// y = x seen with y's dimensions and strides (and type).
  void reshape(Desc x, Desc y) {
    operation(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x},
               {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y}},
              "reshape operation");
  }

  /// s (fp32 [B,H,T,T]) with the upper triangle (column > row) set to the
  /// lowest float; by-value `lowest` holds that value.
  Desc causal_mask(Desc s, Desc lowest, const std::vector<int64_t> &dims) {
    Desc row = virt(dims, CUDNN_DATA_INT32), col = virt(dims, CUDNN_DATA_INT32);
    Desc keep = virt(dims, CUDNN_DATA_BOOLEAN), out = virt(dims);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row,
              CUDNN_DATA_INT32, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col,
              CUDNN_DATA_INT32, 3);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep,
              CUDNN_DATA_BOOLEAN);
    // y = t ? x : b
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, lowest, keep, out);
    return out;
  }

private:
  int64_t nextVirtual_ = kFirstVirtual;
};

/// One planned graph: its execution plan and everything it refers to.
struct Plan {
  bool usable = false;
  Desc plan = nullptr;
  std::vector<Desc> descs;
  int64_t workspaceBytes = 0;
  int64_t dqAccBytes = 0; // backward: the fp32 dQ accumulator
  // By-value scalars, read from these addresses at each execution; `causal`
  // and `backward` say which of them the graph has.
  float scale = 1, lowest = std::numeric_limits<float>::lowest(), one = 1;
  bool causal = false, backward = false;
};

/// Plans `g`'s operations: the first engine config (heuristics mode A, then
/// the fallback list) whose execution plan finalizes.
void plan_graph(GraphBuilder &g, cudnnHandle_t h, Plan &p) {
  const Planned planned = cudnn_graph::plan_graph(
      g, h, g.ops, {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK});
  p.plan = planned.plan;
  p.workspaceBytes = planned.workspaceBytes;
  p.usable = g.ok() && p.plan;
  if (!p.usable && verbose())
    std::fprintf(
        stderr, "autoddl: cuDNN attention not used (%s: %s): own kernels\n",
        g.failedAt ? g.failedAt : "no engine config finalizes",
        lib().GetErrorString(g.ok() ? CUDNN_STATUS_NOT_SUPPORTED : g.status));
  p.descs = std::move(g.descs);
}

/// [B,heads,T,D] over rows of `stride` elements ([B,T,heads*D]).
std::vector<int64_t> bhtd_strides(int64_t T, int64_t D, int64_t stride) {
  return {T * stride, D, stride, 1};
}
/// The transpose [B,heads,D,T] of the same memory.
std::vector<int64_t> bhdt_strides(int64_t T, int64_t D, int64_t stride) {
  return {T * stride, D, 1, stride};
}

void build_forward(Plan &p, cudnnHandle_t h, int64_t B, int64_t T, int64_t H,
                   int64_t G, int64_t D, int64_t qs, int64_t kvs, bool causal) {
  GraphBuilder g;
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
  const std::vector<int64_t> sDims{B, H, T, T}, statDims{B, H, T, 1};
  Desc q = g.tensor({B, H, T, D}, bhtd_strides(T, D, qs), bf16, kQ, false);
  Desc kt = g.tensor({B, G, D, T}, bhdt_strides(T, D, kvs), bf16, kK, false);
  Desc v = g.tensor({B, G, T, D}, bhtd_strides(T, D, kvs), bf16, kV, false);
  Desc o = g.tensor({B, H, T, D}, bhtd_strides(T, D, H * D), bf16, kO, false);
  Desc stats = g.tensor(statDims, {}, CUDNN_DATA_FLOAT, kStats, false);
  Desc scale = g.scalar(kScale);

  Desc s = g.virt(sDims), ss = g.virt(sDims);
  g.matmul(q, kt, s);
  g.pointwise(CUDNN_POINTWISE_MUL, s, scale, nullptr, ss);
  Desc masked = causal ? g.causal_mask(ss, g.scalar(kLowest), sDims) : ss;
  Desc mx = g.virt(statDims), sub = g.virt(sDims), ex = g.virt(sDims);
  Desc sum = g.virt(statDims), lg = g.virt(statDims);
  Desc prob = g.virt(sDims, bf16); // P enters the second GEMM in bf16
  g.reduce(CUDNN_REDUCE_TENSOR_MAX, masked, mx);
  g.pointwise(CUDNN_POINTWISE_SUB, masked, mx, nullptr, sub);
  g.pointwise(CUDNN_POINTWISE_EXP, sub, nullptr, nullptr, ex);
  g.reduce(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, lg);
  g.pointwise(CUDNN_POINTWISE_ADD, mx, lg, nullptr, stats);
  g.pointwise(CUDNN_POINTWISE_DIV, ex, sum, nullptr, prob);
  g.matmul(prob, v, o);
  plan_graph(g, h, p);
}

void build_backward(Plan &p, cudnnHandle_t h, int64_t B, int64_t T, int64_t H,
                    int64_t G, int64_t D, int64_t qs, int64_t kvs, int64_t dqs,
                    int64_t dkvs, bool causal) {
  GraphBuilder g;
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
  const std::vector<int64_t> sDims{B, H, T, T}, statDims{B, H, T, 1};
  const std::vector<int64_t> oStrides = bhtd_strides(T, D, H * D);
  Desc q = g.tensor({B, H, T, D}, bhtd_strides(T, D, qs), bf16, kQ, false);
  Desc kt = g.tensor({B, G, D, T}, bhdt_strides(T, D, kvs), bf16, kK, false);
  Desc vt = g.tensor({B, G, D, T}, bhdt_strides(T, D, kvs), bf16, kV, false);
  Desc o = g.tensor({B, H, T, D}, oStrides, bf16, kO, false);
  Desc dO = g.tensor({B, H, T, D}, oStrides, bf16, kDO, false);
  Desc stats = g.tensor(statDims, {}, CUDNN_DATA_FLOAT, kStats, false);
  Desc dq = g.tensor({B, H, T, D}, bhtd_strides(T, D, dqs), bf16, kDQ, false);
  Desc dk = g.tensor({B, G, T, D}, bhtd_strides(T, D, dkvs), bf16, kDK, false);
  Desc dv = g.tensor({B, G, T, D}, bhtd_strides(T, D, dkvs), bf16, kDV, false);
  Desc dqAcc =
      g.tensor({B, H, T, D}, {}, CUDNN_DATA_FLOAT, kDQAcc, false, false, true);
  Desc scale = g.scalar(kScale), one = g.scalar(kOne);

  // Σ = rowsum(dO ∘ O)
  Desc dOo = g.tensor({B, H, T, D}, oStrides, CUDNN_DATA_FLOAT, 90, true);
  Desc rowsum = g.virt(statDims), sigma = g.virt(statDims);
  g.pointwise(CUDNN_POINTWISE_MUL, dO, o, nullptr, dOo);
  g.reduce(CUDNN_REDUCE_TENSOR_ADD, dOo, rowsum);
  g.pointwise(CUDNN_POINTWISE_MUL, rowsum, one, nullptr, sigma);
  // P = exp(mask(Q Kᵀ · scale) - Stats)
  Desc s = g.virt(sDims), ss = g.virt(sDims);
  g.matmul(q, kt, s);
  g.pointwise(CUDNN_POINTWISE_MUL, s, scale, nullptr, ss);
  Desc masked = causal ? g.causal_mask(ss, g.scalar(kLowest), sDims) : ss;
  Desc shifted = g.virt(sDims), prob = g.virt(sDims);
  g.pointwise(CUDNN_POINTWISE_SUB, masked, stats, nullptr, shifted);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, prob);
  // out = xᵀ b for x [B,H,T,T]: x reshaped to its bf16 transpose, then
  // summed over each kv head's group of q heads where G < H.
  const std::vector<int64_t> tDims{B, H, T, T},
      tStrides{H * T * T, T * T, 1, T};
  auto transposed_matmul = [&](Desc x, int64_t uid, Desc b, Desc out) {
    Desc xT = g.tensor(tDims, tStrides, bf16, uid, true);
    g.reshape(x, xT);
    if (H == G)
      return g.matmul(xT, b, out);
    Desc all = g.virt({B, H, T, D}, bf16);
    g.matmul(xT, b, all);
    g.reduce(CUDNN_REDUCE_TENSOR_ADD, all, out);
  };
  transposed_matmul(prob, 91, dO, dv); // dV = Pᵀ dO
  // dS = P ∘ (dO Vᵀ - Σ) · scale
  Desc dP = g.virt(sDims), dPm = g.virt(sDims), dPs = g.virt(sDims);
  Desc dS = g.virt(sDims), dSs = g.virt(sDims);
  g.matmul(dO, vt, dP);
  g.pointwise(CUDNN_POINTWISE_MUL, dP, one, nullptr, dPm);
  g.pointwise(CUDNN_POINTWISE_SUB, dPm, sigma, nullptr, dPs);
  g.pointwise(CUDNN_POINTWISE_MUL, dPs, prob, nullptr, dS);
  g.pointwise(CUDNN_POINTWISE_MUL, dS, scale, nullptr, dSs);
  transposed_matmul(dSs, 92, q, dk); // dK = dSᵀ Q
  // dQ = dS K through the fp32 accumulator
  Desc k = g.tensor({B, G, T, D}, bhtd_strides(T, D, kvs), bf16, 93, true);
  g.reshape(kt, k);
  g.matmul(dSs, k, dqAcc);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dqAcc, nullptr, nullptr, dq);
  p.dqAccBytes = B * H * T * D * int64_t(sizeof(float));
  plan_graph(g, h, p);
}

/// What a plan is cached under.
struct Key {
  int dev;
  bool backward, causal;
  int64_t B, T, H, G, D, qs, kvs, dqs, dkvs;
  bool operator<(const Key &o) const {
    return std::tie(dev, backward, causal, B, T, H, G, D, qs, kvs, dqs, dkvs) <
           std::tie(o.dev, o.backward, o.causal, o.B, o.T, o.H, o.G, o.D, o.qs,
                    o.kvs, o.dqs, o.dkvs);
  }
};

std::mutex &cache_mutex() {
  static std::mutex m;
  return m;
}

/// The cached plan for `key`, built on first use (null: no cuDNN handle).
Plan *plan_for(const Key &key) {
  static std::map<Key, std::unique_ptr<Plan>> cache; // process lifetime
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second.get();
  auto p = std::make_unique<Plan>();
  if (cudnnHandle_t h = handle()) {
    p->scale = float(1.0 / std::sqrt(double(key.D)));
    p->causal = key.causal;
    p->backward = key.backward;
    if (key.backward)
      build_backward(*p, h, key.B, key.T, key.H, key.G, key.D, key.qs, key.kvs,
                     key.dqs, key.dkvs, key.causal);
    else
      build_forward(*p, h, key.B, key.T, key.H, key.G, key.D, key.qs, key.kvs,
                    key.causal);
  }
  return cache.emplace(key, std::move(p)).first->second.get();
}

bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// Shapes and strides cuDNN's fused attention is asked about at all (the
/// rest goes straight to the own kernels): D a multiple of 8 up to 128, row
/// strides of whole 16-byte vectors, int32-sized index ranges.
bool suitable(int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
              std::initializer_list<int64_t> strides) {
  if (D % 8 != 0 || D > 128 || G <= 0 || H % G != 0 || B * T * H * D == 0)
    return false;
  for (int64_t s : strides)
    if (s % 8 != 0)
      return false;
  return B * H * T * T < (int64_t(1) << 40);
}

bool enabled_here() {
  return attention_cudnn_enabled() &&
         handle_or_say(verbose(), "attention kernels") != nullptr;
}

/// Grow-only device workspace of the current device (never freed: a
/// process-lifetime cache, like the own kernels' and cuBLASLt's).
char *workspace(int64_t bytes) {
  constexpr int kMaxDevices = 64;
  static DeviceBuffer<char> *buffers[kMaxDevices] = {};
  DeviceBuffer<char> *&buf = buffers[current_device() % kMaxDevices];
  if (!buf || buf->size() < bytes) {
    delete buf; // cudaFree waits for work still using it
    buf = new DeviceBuffer<char>(bytes);
  }
  return buf->data();
}

/// Runs plan `p` with the tensors `uids` -> `ptrs` on compute_stream().
void execute(Plan &p, std::vector<int64_t> uids, std::vector<void *> ptrs,
             void *ws) {
  uids.push_back(kScale);
  ptrs.push_back(&p.scale);
  if (p.causal) {
    uids.push_back(kLowest);
    ptrs.push_back(&p.lowest);
  }
  if (p.backward) {
    uids.push_back(kOne);
    ptrs.push_back(&p.one);
  }
  // The plan finalized for this shape, so a failure here is a fault, not a
  // rejection: execute stops as a failed CUDA call does.
  cudnn_graph::execute(handle(), p.plan, uids, ptrs, ws,
                       "cudnnBackendExecute (attention)");
}

Key forward_key(const AttentionViews &in, int64_t B, int64_t T, int64_t H,
                int64_t G, int64_t D, bool causal) {
  return {current_device(), false,        causal, B, T, H, G, D,
          in.q_stride,      in.kv_stride, 0,      0};
}
Key backward_key(const AttentionGradViews &grad, const AttentionViews &in,
                 int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
                 bool causal, bool direct) {
  // Gradients written through the scratch rows (direct = false) have packed
  // strides.
  return {current_device(),
          true,
          causal,
          B,
          T,
          H,
          G,
          D,
          in.q_stride,
          in.kv_stride,
          direct ? grad.q_stride : H * D,
          direct ? grad.kv_stride : G * D};
}

bool forward_suits(const AttentionViews &in, int64_t B, int64_t T, int64_t H,
                   int64_t G, int64_t D) {
  return suitable(B, T, H, G, D, {in.q_stride, in.kv_stride, H * D}) &&
         aligned16(in.q) && aligned16(in.k) && aligned16(in.v);
}

/// Whether cuDNN can write the gradients in place: all three wanted, stored
/// (not added), strides and alignment it takes. Otherwise it writes packed
/// scratch rows that a kernel then adds or stores into the wanted ones.
bool direct_grads(const AttentionGradViews &g, bool accumulate) {
  return !accumulate && g.dq && g.dk && g.dv && aligned16(g.dq) &&
         aligned16(g.dk) && aligned16(g.dv) && g.q_stride % 8 == 0 &&
         g.kv_stride % 8 == 0;
}

/// dst[r * dstStride + c] (+)= src[r * cols + c] for r < rows, c < cols.
__global__ void scatter_rows_kernel(act_t *dst, int64_t dstStride,
                                    const act_t *src, int64_t rows,
                                    int64_t cols, bool accumulate) {
  const int64_t n = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    act_t *p = dst + (i / cols) * dstStride + i % cols;
    const float v = __bfloat162float(src[i]);
    *p = __float2bfloat16_rn(accumulate ? __bfloat162float(*p) + v : v);
  }
}

void scatter_rows(act_t *dst, int64_t dstStride, const act_t *src, int64_t rows,
                  int64_t cols, bool accumulate) {
  if (!dst)
    return;
  const int64_t blocks = std::min<int64_t>((rows * cols + 255) / 256, 1 << 16);
  scatter_rows_kernel<<<unsigned(blocks), 256, 0, compute_stream()>>>(
      dst, dstStride, src, rows, cols, accumulate);
  AUTODDL_CUDA_CHECK_LAUNCH();
}

} // namespace

bool takes_forward(const AttentionViews &in, int64_t B, int64_t T, int64_t H,
                   int64_t G, int64_t D, bool causal) {
  if (!enabled_here() || !forward_suits(in, B, T, H, G, D))
    return false;
  return plan_for(forward_key(in, B, T, H, G, D, causal))->usable;
}

bool forward(act_t *out, float *lse, const AttentionViews &in, int64_t B,
             int64_t T, int64_t H, int64_t G, int64_t D, bool causal) {
  if (!aligned16(out) || !aligned16(lse) ||
      !takes_forward(in, B, T, H, G, D, causal))
    return false;
  Plan &p = *plan_for(forward_key(in, B, T, H, G, D, causal));
  void *ws = p.workspaceBytes > 0 ? workspace(p.workspaceBytes) : nullptr;
  execute(p, {kQ, kK, kV, kO, kStats},
          {const_cast<act_t *>(in.q), const_cast<act_t *>(in.k),
           const_cast<act_t *>(in.v), out, lse},
          ws);
  return true;
}

bool takes_backward(const AttentionGradViews &grad, const AttentionViews &in,
                    int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
                    bool causal) {
  if (!enabled_here() || !forward_suits(in, B, T, H, G, D))
    return false;
  const bool direct = direct_grads(grad, false);
  return plan_for(backward_key(grad, in, B, T, H, G, D, causal, direct))
      ->usable;
}

bool backward(const AttentionGradViews &grad, const act_t *dout,
              const act_t *out, const float *lse, const AttentionViews &in,
              int64_t B, int64_t T, int64_t H, int64_t G, int64_t D,
              bool causal, bool accumulate) {
  if (!enabled_here() || !forward_suits(in, B, T, H, G, D) ||
      !aligned16(dout) || !aligned16(out) || !aligned16(lse))
    return false;
  const bool direct = direct_grads(grad, accumulate);
  Plan &p = *plan_for(backward_key(grad, in, B, T, H, G, D, causal, direct));
  if (!p.usable)
    return false;
  // [plan workspace | dQ accumulator | scratch dq, dk, dv (not direct)],
  // each piece 256-byte aligned.
  auto up = [](int64_t b) { return (b + 255) / 256 * 256; };
  const int64_t rows = B * T;
  const int64_t qBytes = rows * H * D * int64_t(sizeof(act_t));
  const int64_t kvBytes = rows * G * D * int64_t(sizeof(act_t));
  const int64_t wsBytes = up(p.workspaceBytes), accBytes = up(p.dqAccBytes);
  const int64_t scratch = direct ? 0 : up(qBytes) + 2 * up(kvBytes);
  char *ws = workspace(wsBytes + accBytes + scratch);
  char *acc = ws + wsBytes, *sq = acc + accBytes;
  act_t *dq = direct ? grad.dq : reinterpret_cast<act_t *>(sq);
  act_t *dk = direct ? grad.dk : reinterpret_cast<act_t *>(sq + up(qBytes));
  act_t *dv = direct ? grad.dv
                     : reinterpret_cast<act_t *>(sq + up(qBytes) + up(kvBytes));
  zero(acc, p.dqAccBytes); // cuDNN adds into the accumulator
  execute(p, {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kDQAcc},
          {const_cast<act_t *>(in.q), const_cast<act_t *>(in.k),
           const_cast<act_t *>(in.v), const_cast<act_t *>(out),
           const_cast<act_t *>(dout), const_cast<float *>(lse), dq, dk, dv,
           acc},
          p.workspaceBytes > 0 ? ws : nullptr);
  if (!direct) {
    scatter_rows(grad.dq, grad.q_stride, dq, rows, H * D, accumulate);
    scatter_rows(grad.dk, grad.kv_stride, dk, rows, G * D, accumulate);
    scatter_rows(grad.dv, grad.kv_stride, dv, rows, G * D, accumulate);
  }
  return true;
}

int64_t version() { return lib().loaded ? int64_t(lib().GetVersion()) : 0; }

#else // no cuDNN in this build (or the fp32 build): the own kernels only

bool forward(act_t *, float *, const AttentionViews &, int64_t, int64_t,
             int64_t, int64_t, int64_t, bool) {
  return false;
}
bool backward(const AttentionGradViews &, const act_t *, const act_t *,
              const float *, const AttentionViews &, int64_t, int64_t, int64_t,
              int64_t, int64_t, bool, bool) {
  return false;
}
bool takes_forward(const AttentionViews &, int64_t, int64_t, int64_t, int64_t,
                   int64_t, bool) {
  return false;
}
bool takes_backward(const AttentionGradViews &, const AttentionViews &, int64_t,
                    int64_t, int64_t, int64_t, int64_t, bool) {
  return false;
}
int64_t version() { return 0; }

#endif

} // namespace autoddl::rt::cudnn_attention
