//===- Fp8Pricing.cpp - what an fp8 plan's FP8 linears cost --------------===//
#include "planner/Fp8Pricing.h"

#include "backends/common/Fp8Rule.h"

#include <algorithm>

namespace autoddl::planner {
namespace {
double prod(const std::vector<int64_t> &s) {
  double p = 1;
  for (int64_t d : s)
    p *= static_cast<double>(d);
  return p;
}
} // namespace

bool runsInFp8(const OpDef &op, const std::vector<ops::ValueType> &in,
               const ops::ValueType &out, cost::Precision p) {
  if (p != cost::Precision::FP8 || !fp8Linear(op) || in.empty() ||
      in[0].shape.empty() || out.shape.empty())
    return false;
  const int64_t K = in[0].shape.back(), O = out.shape.back();
  const int64_t N = K > 0 ? int64_t(prod(in[0].shape)) / K : 0;
  return rt::fp8RunsLinear(N, K, O);
}

Fp8SharedInput fp8SharedAt(const SearchGraph &sg, size_t gi, int64_t b,
                           int tp) {
  if (tp != 1)
    return {};
  const ModelGraph &g = *sg.graph;
  return fp8SharedInput(g, gi, [&](size_t j) {
    const std::vector<int64_t> x = sg.shapeAt(g.ops[j].operands[0], b);
    const int64_t K = x.empty() ? 0 : x.back();
    const std::vector<int64_t> y = sg.shapeAt(g.ops[j].results[0], b);
    return K > 0 && !y.empty() &&
           rt::fp8RunsLinear(int64_t(prod(x)) / K, K, y.back());
  });
}

Fp8CastCost fp8CastCost(const cost::Cluster &c, const ops::ValueType &x,
                        const ops::ValueType &y, bool dxInBf16,
                        int64_t microbatches, Fp8SharedInput shared) {
  const int64_t K = x.shape.back(), O = y.shape.back();
  const int64_t N = int64_t(prod(x.shape)) / K;
  const rt::Fp8CastBytes b = rt::fp8CastBytes(N, K, O, !dxInBf16);
  const double bw = c.hbmBandwidth * c.hbmEfficiency;
  const double xCast = 3 * double(N) * double(K); // read bf16, write E4M3
  const double inputGrad = dxInBf16 ? 0 : b.inputGrad;
  const double weightGrad =
      (dxInBf16 ? b.weightGrad + 2 * double(N) * double(O) : b.weightGrad) -
      (shared.xT ? xCast : 0);
  Fp8CastCost r;
  r.forward = (b.forward - (shared.x ? xCast : 0) +
               b.weightPerStep / double(std::max<int64_t>(1, microbatches))) /
              bw;
  r.backward = (inputGrad + weightGrad) / bw; // the backward holds wgrad
  r.wgrad = weightGrad / bw;
  r.scratch = rt::fp8Scratch(N, K, O);
  r.weightCopy = double(rt::fp8WeightCopyBytes(K, O, dxInBf16 ? 1 : 2));
  return r;
}

} // namespace autoddl::planner
