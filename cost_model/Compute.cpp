//===- Compute.cpp - roofline, GEMM efficiency, backward rules
//(docs/cost-model.md §4)
#include "cost_model/Compute.h"
#include "ir/ops/OpAttrs.h"

#include <algorithm>
#include <cmath>

namespace autoddl::cost {

namespace {

// Output tile of a Hopper/Ampere cuBLAS/CUTLASS tensor-core GEMM kernel; its
// K-pipeline fill (prologue + epilogue) costs about as much as this many K
// steps.
constexpr double kTileM = 128, kTileN = 128, kTileFillK = 128;

double numel(const ops::ValueType &v) {
  double n = 1;
  for (int64_t d : v.shape)
    n *= static_cast<double>(d);
  return n;
}

double elemBytes(const ops::ValueType &v, Precision p) {
  if (v.dtype == ops::DType::I32 || v.dtype == ops::DType::I64)
    return static_cast<double>(ops::dtypeBytes(v.dtype));
  // FP8: a linear's activations and output stay bf16 in memory; its casts
  // are priced apart (planner/Pricing.cpp).
  return p == Precision::BF16 || p == Precision::FP16 || p == Precision::FP8
             ? 2.0
             : 4.0;
}

double bytesOf(const ops::ValueType &v, Precision p) {
  return numel(v) * elemBytes(v, p);
}

bool isFloat(const ops::ValueType &v) {
  return v.dtype != ops::DType::I32 && v.dtype != ops::DType::I64;
}

// A GEMM-shaped kernel: calibration by ("gemm" or `op`, {M,N,K}), else roofline
// at gemmEfficiency.
KernelCost gemmKernel(const Cluster &c, std::string_view op, double batch,
                      double m, double n, double k, double bytes, Precision p) {
  double flops = 2.0 * batch * m * n * k;
  std::vector<int64_t> key{static_cast<int64_t>(batch * m),
                           static_cast<int64_t>(n), static_cast<int64_t>(k)};
  double time = 0, eff = 0;
  if (calibrated(c, op, p, key, time, eff) ||
      calibrated(c, "gemm", p, key, time, eff)) {
    if (time > 0) {
      KernelCost kc;
      kc.flops = flops;
      kc.bytes = bytes;
      kc.time = time;
      kc.calibrated = true;
      kc.efficiency = flops / time / c.peakFlops(p);
      kc.computeBound = true;
      return kc;
    }
    KernelCost kc = roofline(c, flops, bytes, eff, p);
    kc.calibrated = true;
    return kc;
  }
  return roofline(c, flops, bytes, gemmEfficiency(c, m, n, k, batch), p);
}

// A GEMM with few output tiles and a long reduction, a convolution's weight
// gradient (M x N = Cin*kh*kw x Cout, K = B*H'*W'), runs split over K as
// cuDNN's wgrad engines and cuBLAS's split-K do: s slices of K/s fill the SMs,
// each writes an fp32 partial [M,N] that a reduction then reads. Without this
// the stem of ResNet-50 (2 tiles, K = 3.2M at batch 256) priced at 2 of 132
// SMs busy, and the network's convolution backward at 92 ms against 14-27
// measured on one H100 (bench/results/onnx/2026-12-07-h100-resnet50-nhwc/).
constexpr double kMinSplitK = 2048; // a slice long enough to amortise its fill
KernelCost splitKGemmKernel(const Cluster &c, double m, double n, double k,
                            double bytes, Precision p) {
  KernelCost plain = gemmKernel(c, "gemm", 1, m, n, k, bytes, p);
  if (plain.calibrated || c.smCount <= 0)
    return plain;
  const double tiles = std::ceil(m / kTileM) * std::ceil(n / kTileN);
  int best = 1;
  double bestEff = gemmEfficiency(c, m, n, k, 1);
  for (int s = 2; s * tiles <= c.smCount && k / s >= kMinSplitK; ++s) {
    const double eff = gemmEfficiency(c, m, n, k / s, s);
    if (eff > bestEff) {
      best = s;
      bestEff = eff;
    }
  }
  if (best == 1)
    return plain;
  const double partials = 2.0 * best * m * n * 4; // written, then summed
  return roofline(c, 2.0 * m * n * k, bytes + partials, bestEff, p);
}

// A memory-bound kernel: calibration by (op, first operand's shape), else
// roofline at the cluster's large-GEMM efficiency for its (few) FLOPs.
KernelCost streamKernel(const Cluster &c, std::string_view op,
                        const std::vector<int64_t> &shape, double flops,
                        double bytes, Precision p) {
  double time = 0, eff = 0;
  if (calibrated(c, op, p, shape, time, eff)) {
    KernelCost kc =
        roofline(c, flops, bytes, eff > 0 ? eff : c.gemmEfficiency, p);
    if (time > 0)
      kc.time = time;
    kc.calibrated = true;
    return kc;
  }
  return roofline(c, flops, bytes, c.gemmEfficiency, p);
}

// Attention as Megatron-LM ran it before FlashAttention (docs/cost-model.md
// §4.4): per (batch, head) q·kᵀ (GEMM T×T×D) writes the scores; the fused
// scale-mask-softmax kernel reads and writes them; dropout reads them and
// writes the kept values and a one-byte mask; P·v (GEMM T×D×T) reads them.
// Backward: dP = dO·vᵀ and dv = Pᵀ·dO, the dropout and softmax backward over
// the T×T matrices, dq = dS·k and dk = dSᵀ·q. Kept for backward (Korthikanti
// et al. 2022, Table 2: 5·a·s²·b bytes per layer): the probabilities, the mask
// and the dropout output.
OpCost unfusedAttention(const Cluster &c,
                        const std::vector<ops::ValueType> &operands,
                        const std::vector<ops::ValueType> &results,
                        const ops::Attrs &attrs, Precision p, double dropout) {
  OpCost out;
  const ops::ValueType &y = results[0];
  const double d =
      static_cast<double>(ops::attrOr(attrs, ops::attr::kHeadDim, 1));
  const double t = static_cast<double>(y.shape[y.shape.size() - 2]);
  const double heads = static_cast<double>(y.shape.back()) / d;
  const double bh = numel(y) / (t * heads * d) * heads; // batch x local heads
  const double eb = elemBytes(y, p);
  const double scores = bh * t * t * eb; // one T×T matrix per (batch, head)
  double qkv = 0;
  for (const ops::ValueType &v : operands)
    qkv += bytesOf(v, p);
  const double outB = bytesOf(y, p);
  const bool drop = dropout > 0;
  const double mask = drop ? scores / eb : 0; // one byte per element
  auto gemm = [&](double m, double n, double k, double bytes) {
    return roofline(c, 2 * bh * m * n * k, bytes,
                    gemmEfficiency(c, m, n, k, bh), p);
  };
  auto stream = [&](double flops, double bytes) {
    return roofline(c, flops, bytes, c.gemmEfficiency, p);
  };
  const double elems = bh * t * t;
  // Forward: 2 GEMMs, softmax, dropout.
  KernelCost f[] = {gemm(t, t, d, 2 * qkv / 3 + scores),
                    stream(5 * elems, 2 * scores),
                    drop ? stream(2 * elems, 2 * scores + mask) : KernelCost{},
                    gemm(t, d, t, scores + qkv / 3 + outB)};
  // Backward: dP and dv GEMMs, dropout and softmax backward, dq and dk GEMMs.
  KernelCost b[] = {gemm(t, t, d, outB + qkv / 3 + scores),
                    gemm(t, d, t, scores + outB + qkv / 3),
                    drop ? stream(elems, 2 * scores + mask) : KernelCost{},
                    stream(3 * elems, 3 * scores),
                    gemm(t, d, t, scores + 2 * qkv / 3),
                    gemm(t, d, t, scores + 2 * qkv / 3)};
  for (const KernelCost &k : f) {
    out.forward.flops += k.flops;
    out.forward.bytes += k.bytes;
    out.forward.time += k.time;
  }
  for (const KernelCost &k : b) {
    out.backwardData.flops += k.flops;
    out.backwardData.bytes += k.bytes;
    out.backwardData.time += k.time;
  }
  out.forward.efficiency =
      out.forward.flops / out.forward.time / c.peakFlops(p);
  out.backwardData.efficiency =
      out.backwardData.flops / out.backwardData.time / c.peakFlops(p);
  // Probabilities (softmax output), and with dropout its mask and output.
  out.savedInternal = scores + (drop ? mask + scores : 0);
  return out;
}

} // namespace

double gemmEfficiency(const Cluster &c, double m, double n, double k,
                      double batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    return c.gemmEfficiency;
  double tilesM = std::ceil(m / kTileM), tilesN = std::ceil(n / kTileN);
  // Tile quantisation: the padded part of edge tiles is computed and thrown
  // away.
  double tileEff = (m * n) / (tilesM * kTileM * tilesN * kTileN);
  // Wave quantisation: tiles run in waves of one tile per SM; the last wave is
  // partly idle.
  double tiles = batch * tilesM * tilesN;
  double waves = std::ceil(tiles / c.smCount);
  double waveEff = tiles / (waves * c.smCount);
  // Short K: each tile's pipeline fill and epilogue cost ~kTileFillK steps of
  // K.
  double kEff = k / (k + kTileFillK);
  return c.gemmEfficiency * tileEff * waveEff * kEff;
}

KernelCost roofline(const Cluster &c, double flops, double bytes,
                    double efficiency, Precision p) {
  KernelCost kc;
  kc.flops = flops;
  kc.bytes = bytes;
  kc.efficiency = efficiency;
  double tc = flops > 0 ? flops / (c.peakFlops(p) * efficiency) : 0;
  double tm = bytes > 0 ? bytes / (c.hbmBandwidth * c.hbmEfficiency) : 0;
  kc.computeBound = tc >= tm;
  kc.time = std::max({tc, tm, c.kernelLaunch});
  return kc;
}

bool calibrated(const Cluster &c, std::string_view op, Precision p,
                const std::vector<int64_t> &shape, double &time,
                double &efficiency) {
  for (const CalibrationEntry &e : c.calibration)
    if (e.op == op && e.precision == p && e.shape == shape) {
      time = e.time;
      efficiency = e.efficiency;
      return true;
    }
  return false;
}

sparse::SpmmVariant sparseVariant(bool sddmm, const sparse::SpmmFeatures &f,
                                  double width, Precision p) {
  sparse::SpmmQuery q;
  q.sddmm = sddmm;
  q.halfData = p == Precision::BF16 || p == Precision::FP16;
  q.width = static_cast<int64_t>(width);
  return sparse::decideVariant(f, q);
}

sparse::SpmmVariant sparseVariant(bool sddmm,
                                  const std::vector<int64_t> &adjacency,
                                  double nnz, double width, Precision p) {
  const int64_t rows = adjacency.empty() ? 0 : adjacency[0];
  const int64_t cols = adjacency.size() > 1 ? adjacency[1] : rows;
  return sparseVariant(
      sddmm, sparse::powerLawFeatures(rows, cols, static_cast<int64_t>(nnz)),
      width, p);
}

double sparseFlopRate(const Cluster &c, std::string_view op, Precision p,
                      double width) {
  auto find = [&](Precision q) -> const SparseRate * {
    for (const SparseRate &r : c.sparseRates)
      if (r.op == op && r.precision == q && !r.points.empty())
        return &r;
    return nullptr;
  };
  const SparseRate *r = find(p);
  if (!r) {
    const Precision twin = p == Precision::BF16   ? Precision::FP16
                           : p == Precision::FP16 ? Precision::BF16
                           : p == Precision::TF32 ? Precision::FP32
                                                  : Precision::TF32;
    r = find(twin);
  }
  if (!r)
    return 0;
  const auto &pts = r->points;
  if (width <= pts.front().first)
    return pts.front().second;
  for (size_t i = 1; i < pts.size(); ++i)
    if (width <= pts[i].first) {
      const auto &[w0, f0] = pts[i - 1];
      const auto &[w1, f1] = pts[i];
      return f0 + (f1 - f0) * (width - w0) / (w1 - w0);
    }
  return pts.back().second;
}

namespace {

/// A fused (FlashAttention-style) attention kernel: streams q, k, v and writes
/// the output; efficiency as a batched GEMM of TxTxD per (batch, head), or the
/// cluster's measured one.
OpCost fusedAttentionCost(const Cluster &c, std::string_view kind,
                          const std::vector<int64_t> &key, double fwdFlops,
                          double inBytes, double outBytes,
                          const std::vector<ops::ValueType> &results,
                          const ops::Attrs &attrs, Precision p) {
  OpCost out;
  const bool causal = ops::attrOr(attrs, ops::attr::kCausal, false);
  const double causalFactor = causal ? 2.0 : 1.0;
  out.forward = streamKernel(c, kind, key, fwdFlops, inBytes + outBytes, p);
  if (!out.forward.calibrated) {
    const ops::ValueType &y = results[0];
    double t = static_cast<double>(y.shape[y.shape.size() - 2]);
    const double d =
        static_cast<double>(ops::attrOr(attrs, ops::attr::kHeadDim, 1));
    const double heads = static_cast<double>(y.shape.back()) / d;
    double batch = numel(y) / (t * heads * d) * heads;
    // The measured efficiency of the kernel the programs run (cluster
    // gpu.attention: cuDNN's fused attention or the own kernels), else the
    // batched-GEMM estimate. The measurement counts the FLOPs a causal
    // kernel runs (half the scores); fwdFlops counts them all.
    const double eff = c.attention.forwardEfficiency > 0
                           ? c.attention.forwardEfficiency * causalFactor
                           : gemmEfficiency(c, t, t, d, batch);
    out.forward = roofline(c, fwdFlops, inBytes + outBytes, eff, p);
  }
  // FlashAttention-2 (Dao 2023, §3.1/§4): backward recomputes the scores and
  // runs 5 matmuls to the forward's 2, 2.5x the forward FLOPs; it reads q, k,
  // v, o, dO and writes dq, dk, dv: about twice the forward's bytes. All of
  // it is dgrad.
  double bwdEff =
      out.forward.efficiency > 0 ? out.forward.efficiency : c.gemmEfficiency;
  if (c.attention.backwardEfficiency > 0)
    bwdEff = c.attention.backwardEfficiency * causalFactor;
  out.backwardData =
      roofline(c, 2.5 * fwdFlops, 2.0 * (inBytes + outBytes), bwdEff, p);
  return out;
}

/// The HBM bytes of a dense operand of `bytes` whose rows (`rowBytes` each)
/// are gathered once per stored entry: read once while it fits the L2; beyond
/// that, the share of the entries' row reads the L2 cannot hold misses (a
/// Reddit-sized spmm at width 256 moves tens of GB, not the operand's 119 MB).
double gatheredBytes(const Cluster &c, double bytes, double nnz,
                     double rowBytes) {
  if (c.l2Bytes <= 0 || bytes <= c.l2Bytes)
    return bytes;
  return std::max(bytes, nnz * rowBytes * (1.0 - c.l2Bytes / bytes));
}

/// spmm, sddmm, edge_softmax and gat_aggregate: nnz stored values plus 4-byte
/// column indices (CSR) are read; the measured sparse rates where the cluster
/// has them, else the roofline with the gathered operand's row reads.
OpCost sparseOpCost(const Cluster &c, std::string_view kind,
                    const std::vector<int64_t> &key,
                    const std::vector<ops::ValueType> &operands,
                    const std::vector<ops::ValueType> &results,
                    const ops::Attrs &attrs, bool weightOperand,
                    double fwdFlops, double outBytes, Precision p,
                    const KernelOptions &kernels) {
  OpCost out;
  const double nnz =
      static_cast<double>(ops::attrOr(attrs, ops::attr::kNnz, 0));
  if (kind == "spmm" || kind == "sddmm") {
    double sparseBytes = nnz * (elemBytes(operands[0], p) + 4.0);
    double dense = 0;
    for (size_t i = 1; i < operands.size(); ++i)
      dense += bytesOf(operands[i], p);
    double outB = kind == "spmm" ? outBytes : nnz * elemBytes(results[0], p);
    // spmm: dX = Aᵀ·dY, the same product transposed. sddmm: dX = dOut·Y and
    // dY = dOutᵀ·X, two spmm of the same FLOPs each.
    double factor = kind == "spmm" ? 1.0 : 2.0;
    const double width = static_cast<double>(operands[1].shape.back());
    // The roofline's bytes: spmm gathers X's rows by column (its backward
    // gathers dY's, a matrix of the output's size), sddmm the second dense
    // operand's (the first is read row by row).
    const ops::ValueType &g = operands.back();
    const double rowB = width * elemBytes(g, p);
    const double fwdDense =
        dense - bytesOf(g, p) + gatheredBytes(c, bytesOf(g, p), nnz, rowB);
    const double bwdDense =
        kind == "spmm"
            ? dense + gatheredBytes(c, outBytes, nnz, rowB) - outBytes
            : fwdDense;
    // The measured throughput of the format variant the CUDA program builds
    // (KernelOptions::adjacencyA/AT: A's forward, A^T's backward; else the
    // decider's pick for this op and width on a power-law graph), else of the
    // faster variant per case, at this width (the benchmark's median over its
    // graphs); else the roofline. The backward products are spmm.
    auto rate = [&](std::string_view op, bool transpose) {
      const sparse::SpmmVariant v =
          kernels.adjacencyKnown
              ? (transpose ? kernels.adjacencyAT : kernels.adjacencyA)
              : sparseVariant(op == "sddmm", operands[0].shape, nnz, width, p);
      const std::string variant =
          std::string(op) + "." + sparse::variantName(v);
      const double r = sparseFlopRate(c, variant, p, width);
      return r > 0 ? r : sparseFlopRate(c, op, p, width);
    };
    const double fwdRate = rate(kind, false);
    // spmm's backward runs on A^T; sddmm's (D y, D^T x) on both: A's prices
    // it.
    const double bwdRate = rate("spmm", kind == "spmm");
    auto measured = [&](double flops, double bytes, double rate) {
      KernelCost kc = roofline(c, flops, bytes, c.gemmEfficiency, p);
      kc.time = std::max(flops / rate, c.kernelLaunch);
      kc.efficiency = rate / c.peakFlops(p);
      kc.calibrated = true;
      return kc;
    };
    out.forward = fwdRate > 0
                      ? measured(fwdFlops, sparseBytes + dense + outB, fwdRate)
                      : streamKernel(c, kind, key, fwdFlops,
                                     sparseBytes + fwdDense + outB, p);
    KernelCost bwd =
        bwdRate > 0 ? measured(factor * fwdFlops,
                               factor * (sparseBytes + dense + outB), bwdRate)
                    : streamKernel(c, kind, key, factor * fwdFlops,
                                   factor * (sparseBytes + bwdDense + outB), p);
    (weightOperand ? out.backwardWeight : out.backwardData) = bwd;
    return out;
  }
  if (kind == "edge_softmax") {
    // Reads the row pointers and the nnz scores, writes nnz values; backward
    // reads the result and its gradient and writes the scores' gradient. The
    // [N,M] operand types overstate it: only nnz entries are stored.
    const double v = nnz * elemBytes(results[0], p);
    const double rows = static_cast<double>(operands[0].shape[0]) * 4.0;
    out.forward = streamKernel(c, kind, key, fwdFlops, rows + 2 * v, p);
    out.backwardData =
        streamKernel(c, kind, key, 2.0 * fwdFlops, rows + 3 * v, p);
    return out;
  }
  if (kind == "gat_aggregate") {
    // CUDA-core kernels (backends/cuda/kernels/GatAttention.cu): per edge the
    // column index, both heads' terms and the source's H·C features are read
    // (an L2-resident gather at best: priced as streamed), each row written
    // once. Backward recomputes the softmax and reads the rows of h and dY
    // again, scattering dh and ds_src: about three times the bytes.
    const double heads = static_cast<double>(operands[1].shape[1]);
    const double width = static_cast<double>(operands[3].shape[1]);
    const double e = elemBytes(operands[3], p);
    const double rows = static_cast<double>(operands[0].shape[0]) * 4.0;
    const double bytes = rows + nnz * (4.0 + (2.0 * heads + width) * e);
    out.forward = streamKernel(c, kind, key, fwdFlops, bytes + outBytes, p);
    out.backwardData = streamKernel(c, kind, key, 2.0 * fwdFlops,
                                    3.0 * bytes + 2.0 * outBytes, p);
    return out;
  }

  return out;
}

/// The image primitives' HBM traffic as their CUDA kernels move it
/// (backends/cuda/kernels/PrimitiveImageLast.cuh, PrimitiveImage.cuh; the
/// floors of bench/cuda/image_kernels_bench.cu), where it is not one stream
/// of operands and results: a batch norm reads x for its statistics and
/// again to normalise (3 tensor passes forward) and reads dy and x twice
/// backward (5: the scale and bias gradients in the first pass); a max
/// pool's backward rescans its windows in x beside dy; a pool's dx is written
/// once (the first writer stores it, as ResNet's pools are).
/// False: not such a primitive.
bool imagePrimitiveCost(const Cluster &c, std::string_view kind,
                        std::string_view type,
                        const std::vector<ops::ValueType> &operands,
                        const std::vector<ops::ValueType> &results,
                        double paramBytes, double fwdFlops, Precision p,
                        OpCost &out) {
  if (operands.empty() || results.empty())
    return false;
  const double x = bytesOf(operands[0], p), y = bytesOf(results[0], p);
  double fwd = 0, bwd = 0;
  if (type == "BatchNormalization") {
    fwd = 3 * x + paramBytes;
    bwd = 5 * x + 2 * paramBytes;
  } else if (type == "MaxPool") {
    fwd = x + y;
    bwd = 2 * x + y;
  } else if (type == "AveragePool" || type == "GlobalAveragePool" ||
             type == "GlobalMaxPool") {
    fwd = x + y;
    bwd = y + x;
  } else {
    return false;
  }
  // As every stream: a measured entry of the calibration table wins.
  const std::vector<int64_t> &key = operands[0].shape;
  out.forward = streamKernel(c, kind, key, fwdFlops, fwd, p);
  out.backwardData = streamKernel(c, kind, key, 2.0 * fwdFlops, bwd, p);
  return true;
}

/// The op's cost from the roofline, the calibration table and the sparse
/// rates, before the measured corrections of opCost().
OpCost modelledOpCost(const Cluster &c, std::string_view kind,
                      const std::vector<ops::ValueType> &operands,
                      const std::vector<ops::ValueType> &results,
                      const ops::Attrs &attrs,
                      const std::vector<bool> &parameterOperands, Precision p,
                      const KernelOptions &kernels) {
  OpCost out;
  auto isParam = [&](size_t i) {
    return i < parameterOperands.size() && parameterOperands[i];
  };
  double inBytes = 0, outBytes = 0, actBytes = 0, paramBytes = 0;
  for (size_t i = 0; i < operands.size(); ++i) {
    double b = bytesOf(operands[i], p);
    inBytes += b;
    if (isParam(i))
      paramBytes += b;
    else if (isFloat(operands[i]))
      actBytes += b; // inputs that get an activation gradient
  }
  for (const ops::ValueType &r : results)
    outBytes += bytesOf(r, p);
  double fwdFlops = kind == "parameter" ? 0
                                        : static_cast<double>(ops::forwardFlops(
                                              kind, operands, results, attrs));

  if (kind == "parameter" || kind == "reshape" || kind == "flatten")
    return out; // views: no kernel

  if (kind == "linear" || kind == "matmul" || kind == "conv2d") {
    // GEMM dims (implicit GEMM for conv2d): Y[M,N] = X[M,K] · W[K,N].
    double batch = 1, m, n, k;
    const ops::ValueType &x = operands[0], &y = results[0];
    if (kind == "linear") {
      k = static_cast<double>(x.shape.back());
      m = numel(x) / k;
      n = static_cast<double>(y.shape.back());
    } else if (kind == "matmul") {
      size_t r = y.shape.size();
      m = static_cast<double>(y.shape[r - 2]);
      n = static_cast<double>(y.shape[r - 1]);
      k = static_cast<double>(x.shape.back());
      batch = numel(y) / (m * n);
    } else { // conv2d: x [B,Cin,H,W], w [Cout,Cin,kh,kw], y [B,Cout,H',W']
      const ops::ValueType &w = operands[1];
      m = numel(y) / static_cast<double>(y.shape[1]);
      n = static_cast<double>(y.shape[1]);
      k = numel(w) / static_cast<double>(w.shape[0]);
    }
    out.forward = gemmKernel(c, kind, batch, m, n, k, inBytes + outBytes, p);
    // Backward (Narayanan et al. 2021, §5.1: backward = 2 x forward): the
    // gradient of each GEMM operand is one GEMM of the same FLOPs:
    //   dX[M,K] = dY[M,N] · Wᵀ   (GEMM M×K×N)
    //   dW[K,N] = Xᵀ · dY[M,N]   (GEMM K×N×M)
    // Operand 0's gradient is dgrad unless operand 0 is a parameter; operand
    // 1's is wgrad when it is a parameter (linear, conv2d), dgrad otherwise
    // (matmul of two activations, e.g. attention scores written out).
    double b0 = bytesOf(operands[0], p), b1 = bytesOf(operands[1], p);
    KernelCost g0 =
        gemmKernel(c, "gemm", batch, m, k, n, outBytes + b1 + b0, p);
    KernelCost g1 =
        kind == "conv2d" && isParam(1)
            ? splitKGemmKernel(c, k, n, m, b0 + outBytes + b1, p)
            : gemmKernel(c, "gemm", batch, k, n, m, b0 + outBytes + b1, p);
    if (operands.size() > 2 && isParam(2)) { // bias gradient: sum of dY over M
      g1.flops += numel(y);
      g1.bytes += bytesOf(operands[2], p);
    }
    // A weight's gradient is fp32, added into once a micro-batch (beta = 1):
    // the epilogue's read and write, 8 bytes an element, come after the
    // reduction rather than under it. Measured on one H100 at micro-batch 1
    // (gpt2-xl: 16 x 1.56B x 8 bytes a step) the steps were 15 % above the
    // plan without it (bench/results/cuda/2026-12-07-h100-microbatch-fp8-7b/).
    if (isParam(1)) {
      const double accumulate = 8.0 * numel(operands[1]);
      g1.bytes += accumulate;
      g1.time += accumulate / (c.hbmBandwidth * c.hbmEfficiency);
    }
    (isParam(0) ? out.backwardWeight : out.backwardData) = g0;
    if (isParam(1)) {
      out.backwardWeight = g1;
    } else {
      out.backwardData.flops += g1.flops;
      out.backwardData.bytes += g1.bytes;
      out.backwardData.time += g1.time;
    }
    return out;
  }

  std::vector<int64_t> key =
      operands.empty() ? std::vector<int64_t>{} : operands[0].shape;
  if (kind == "attention" && kernels.attention == AttentionKernel::Unfused)
    return unfusedAttention(c, operands, results, attrs, p,
                            kernels.attentionDropout);
  if (kind == "attention")
    return fusedAttentionCost(c, kind, key, fwdFlops, inBytes, outBytes,
                              results, attrs, p);
  if (kind == "spmm" || kind == "sddmm" || kind == "edge_softmax" ||
      kind == "gat_aggregate")
    return sparseOpCost(c, kind, key, operands, results, attrs,
                        operands.size() > 1 && isParam(1), fwdFlops, outBytes,
                        p, kernels);

  if (kind == "embedding") {
    // Gather rows: read ids and C values per token, write them.
    out.forward =
        streamKernel(c, kind, key, 0, inBytes - paramBytes + 2 * outBytes, p);
    // wgrad: scatter-add dY into the table's gradient (read dY,
    // read-modify-write the touched rows) after zeroing it; ids get no
    // gradient.
    if (isParam(1))
      out.backwardWeight =
          streamKernel(c, kind, key, numel(results[0]),
                       bytesOf(operands[0], p) + 3 * outBytes + paramBytes, p);
    return out;
  }

  if (kind == "primitive" &&
      imagePrimitiveCost(c, kind, ops::attrOr(attrs, ops::attr::kOpType, ""),
                         operands, results, paramBytes, fwdFlops, p, out))
    return out;

  // Everything else (bias_add, add, mul, activations, norms, softmax, rotary,
  // positional, cross_entropy, squared_error, pool2d, transpose) is
  // memory-bound and streams its operands and results once.
  double fwdBytes = inBytes + outBytes;
  if (kind == "positional" &&
      operands.size() > 1) // reads only T rows of the table
    fwdBytes = bytesOf(operands[0], p) + outBytes + outBytes;
  out.forward = streamKernel(c, kind, key, fwdFlops, fwdBytes, p);
  // dgrad: re-read the saved inputs and dY, write dX: fwd bytes + the
  // activation inputs' gradients; about 2x the forward's FLOPs
  // (docs/cost-model.md §4.3).
  double dyBytes =
      kind == "cross_entropy" || kind == "squared_error" ? 0 : outBytes;
  // A sum's gradient is its result's: dY read, each operand's written, the
  // operands not read again (add_backward, add_relu_backward).
  const double reread = kind == "add" ? 0 : fwdBytes - outBytes;
  out.backwardData = streamKernel(c, kind, key, 2.0 * fwdFlops,
                                  reread + dyBytes + actBytes, p);
  if (paramBytes > 0) {
    // wgrad of a per-channel parameter (norm gamma/beta, bias, positional
    // table): a reduction of dY (times the normalised input) over the leading
    // dims.
    double dy = results.empty() ? 0 : numel(results[0]);
    out.backwardWeight = streamKernel(c, kind, key, 2.0 * dy,
                                      actBytes + outBytes + paramBytes, p);
  }
  return out;
}

} // namespace

bool isGemmKind(std::string_view kind) {
  return kind == "linear" || kind == "matmul" || kind == "conv2d";
}

OpCost opCost(const Cluster &c, std::string_view kind,
              const std::vector<ops::ValueType> &operands,
              const std::vector<ops::ValueType> &results,
              const ops::Attrs &attrs,
              const std::vector<bool> &parameterOperands, Precision p,
              const KernelOptions &kernels) {
  OpCost out = modelledOpCost(c, kind, operands, results, attrs,
                              parameterOperands, p, kernels);
  // Measured corrections (docs/cost-model.md "Fitted from a profiled run"):
  // the kind's time scale, and the device time each execution costs beyond
  // its kernels, counted as the generated programs launch them: forward once,
  // backward once, a GEMM's dgrad and wgrad apart. Views stay free.
  double fwd = 1, bwd = 1;
  for (const OpTimeScale &s : c.opTimeScales)
    if (s.kind == kind) {
      fwd = s.forward;
      bwd = s.backward;
    }
  const double overhead = kernels.stepGraph && c.graphOpOverhead >= 0
                              ? c.graphOpOverhead
                              : c.opOverhead;
  if (out.forward.time > 0)
    out.forward.time = fwd * out.forward.time + overhead;
  out.backwardData.time *= bwd;
  out.backwardWeight.time *= bwd;
  if (isGemmKind(kind)) {
    for (KernelCost *k : {&out.backwardData, &out.backwardWeight})
      if (k->time > 0)
        k->time += overhead;
  } else if (out.backward() > 0) {
    (out.backwardData.time > 0 ? out.backwardData : out.backwardWeight).time +=
        overhead;
  }
  return out;
}

KernelCost optimizerStep(const Cluster &c, double params, Optimizer opt,
                         bool mixedPrecision) {
  // Bytes per parameter moved in HBM (fp32 master weights and states):
  //   AdamW: read p, g, m, v; write p, m, v -> 7 x 4 = 28, + 2 for the bf16
  //   copy of p. SGD:   read p, g; write p -> 3 x 4 = 12, + 2.
  double perParam = opt == Optimizer::AdamW ? 28.0 : 12.0;
  if (mixedPrecision)
    perParam += 2.0;
  // ~10 FLOPs per parameter for AdamW's moments, bias correction, decay and
  // update.
  double flops = (opt == Optimizer::AdamW ? 10.0 : 2.0) * params;
  return roofline(c, flops, perParam * params, c.gemmEfficiency,
                  Precision::FP32);
}

} // namespace autoddl::cost
