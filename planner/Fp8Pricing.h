//===- Fp8Pricing.h - what an fp8 plan's FP8 linears cost ----------------===//
//
// The prices of backends/common/Fp8Rule.h's rule as the CUDA runtime runs it
// (backends/cuda/kernels/Fp8Linear.cu; docs/fp8.md "Pricing"): which linears
// run in FP8, and the time and memory of their casts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Cluster.h"
#include "cost_model/Compute.h"
#include "planner/ProgramDecisions.h"
#include "planner/SearchGraph.h"

#include <vector>

namespace autoddl::planner {

/// Whether `op` runs its GEMMs in FP8 in a plan of precision `p`: a linear
/// of a repeated block (a transformer layer: not the embedding or the head)
/// whose local shape passes backends/common/Fp8Rule.h's rule, as the CUDA
/// runtime decides for the weights codegen registers (fp8Linear in
/// ProgramDecisions.h).
bool runsInFp8(const OpDef &op, const std::vector<ops::ValueType> &in,
               const ops::ValueType &out, cost::Precision p);

/// fp8SharedInput (ProgramDecisions.h) for graph op `gi` at micro-batch `b`:
/// priced at tp 1 only, where the neighbours read one x buffer (no boxing
/// between them); none on a wider tp axis.
Fp8SharedInput fp8SharedAt(const SearchGraph &sg, size_t gi, int64_t b, int tp);

/// What an FP8 linear's casts add (x, W, dY: Fp8Rule.h): seconds to its
/// forward and backward, of the backward its weight gradient's; its scratch
/// (the op's workspace, bytes) and its weight's FP8 copy, held through the
/// step (bytes).
struct Fp8CastCost {
  double forward = 0, backward = 0, wgrad = 0, scratch = 0, weightCopy = 0;
};
/// x[N,K] in, y[N,O] out (local shapes). dxInBf16: its input gradient runs
/// in bf16 (through a fused GELU), so the weight gradient casts dY itself
/// and the copy holds the forward's layout only. W's cast, once a step in
/// the first forward, is shared by the step's `microbatches` forwards
/// (exact for one stage); x's and x^T's are not paid where a neighbour casts
/// them (`shared`).
Fp8CastCost fp8CastCost(const cost::Cluster &c, const ops::ValueType &x,
                        const ops::ValueType &y, bool dxInBf16,
                        int64_t microbatches, Fp8SharedInput shared);

} // namespace autoddl::planner
