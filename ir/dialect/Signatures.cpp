//===- Signatures.cpp - each model op's 1-D SBP signatures ----------------===//
//
// The tables of SbpOpInterface, after OneFlow's GetSbp functions (paths in
// Oneflow-Inc/oneflow, see /work/shared/reference/autoddl.md §2.3), extended
// where OneFlow lacks a parallelism the planner needs (tensor-parallel conv,
// vocab-parallel cross-entropy, sparse ops). Each row reads
// (operand layouts) -> (result layouts) on one mesh axis; all-broadcast is
// implied. A row is valid when every device, computing the op on the pieces it
// holds, produces its piece of the result in the stated layout.
//
// Rank-dependent rows are generated from the operand types, so the tables hold
// for any batch rank. Attribute defaults come from ops::withDefaults, the same
// place the shape rules take them from.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/SbpDialect.h"

#include "ir/dialect/OpSemanticsAdapter.h"

using namespace mlir;

namespace autoddl::sbp {
namespace {

using namespace shorthand;
using Signatures = SmallVector<SbpSignature>;

/// The dual signature, except that integer operand `operand` (ids, targets),
/// which has no gradient, keeps its forward layout.
SbpSignature dualExceptIntegerOperand(const SbpSignature &forward,
                                      unsigned operand) {
  SbpSignature backward = dualSignature(forward);
  backward.outputs[operand] = forward.inputs[operand];
  return backward;
}

int64_t rankOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank();
}

/// The value of attribute `name` with the shared rules' default, or `fallback`
/// when absent or of another kind (the op verifier reports that case).
template <typename T> T attrOr(Operation *op, const char *name, T fallback) {
  std::optional<ops::Attrs> attrs = getOpsAttrs(op);
  if (!attrs)
    return fallback;
  auto it = attrs->find(name);
  if (it == attrs->end())
    return fallback;
  if (const T *value = std::get_if<T>(&it->second))
    return *value;
  return fallback;
}

/// Drops the layout of an absent trailing optional operand (a bias) from each
/// row written with it.
Signatures dropAbsentOperand(Signatures rows, unsigned numOperands) {
  for (SbpSignature &row : rows)
    row.inputs.resize(numOperands);
  return rows;
}

/// S(i) -> S(i) for every dimension i of a rank-`rank` value, for ops whose
/// operands and result share a shape and act elementwise.
Signatures splitEveryDim(int64_t rank, unsigned numOperands) {
  Signatures rows;
  for (int64_t i = 0; i < rank; ++i) {
    SbpSignature row;
    row.inputs.assign(numOperands, S(i));
    row.outputs.assign(1, S(i));
    rows.push_back(row);
  }
  return rows;
}

} // namespace

// A parameter may be stored split along any dimension (tensor parallelism, or
// ZeRO-style sharding of weights and optimizer state on a data axis) or whole.
Signatures ParameterOp::getSbpSignatures() {
  Signatures rows;
  for (int64_t i = 0; i < rankOf(getResult()); ++i)
    rows.push_back(sig({}, {S(i)}));
  return rows;
}

// ids [B,T], table [V,C] -> [B,T,C]. OneFlow gather_op.cpp: ids split with the
// table whole; the table split by columns gives result columns; split by vocab
// rows, each device looks up only the ids it owns and the others read zero,
// so the result is a partial sum.
Signatures EmbeddingOp::getSbpSignatures() {
  Signatures rows;
  int64_t idsRank = rankOf(getIds());
  for (int64_t i = 0; i < idsRank; ++i)
    rows.push_back(sig({S(i), B}, {S(i)}));
  rows.push_back(sig({B, S(1)}, {S(idsRank)}));
  rows.push_back(sig({B, S(0)}, {P}));
  return rows;
}

// Integer ids have no gradient: their entry keeps the forward layout so that
// the backward implies no communication for them.
SbpSignature EmbeddingOp::getBackwardSignature(const SbpSignature &forward) {
  return dualExceptIntegerOperand(forward, /*operand=*/0);
}

// x [B,T,C] + table[0:T]: batch split with the table whole; channels split on
// both; partial sums add into a partial sum.
Signatures PositionalOp::getSbpSignatures() {
  return {sig({S(0), B}, {S(0)}), sig({S(2), S(1)}, {S(2)}), sig({P, P}, {P})};
}

// x [B,T,H*D]: batch, or whole heads (granule D); the rotation is linear, so a
// partial sum stays one.
Signatures RotaryOp::getSbpSignatures() {
  return {sig({S(0)}, {S(0)}), sig({S(2)}, {S(2)}), sig({P}, {P})};
}

int64_t RotaryOp::getSplitGranule(unsigned, int64_t dim) {
  return dim == 2 ? getHeadDim() : 1;
}

// x [...,K], w [N,K] (transpose_weight) or [K,N], bias [N]. OneFlow
// matmul_op.cpp: rows of x (S(m) x B -> S), columns of w (B x S(n) -> S, the
// Megatron column-parallel layer), the contraction dim on both (S(k) x S(k) ->
// P, row-parallel), and partial inputs against broadcast ones. The bias joins
// a partial result as a partial value (kept on one device).
Signatures LinearOp::getSbpSignatures() {
  int64_t r = rankOf(getX());
  bool transposed = attrOr<bool>(*this, "transpose_weight", true);
  int64_t weightN = transposed ? 0 : 1, weightK = transposed ? 1 : 0;
  Signatures rows;
  for (int64_t i = 0; i + 1 < r; ++i)
    rows.push_back(sig({S(i), B, B}, {S(i)}));
  rows.push_back(sig({B, S(weightN), S(0)}, {S(r - 1)}));
  rows.push_back(sig({S(r - 1), S(weightK), P}, {P}));
  rows.push_back(sig({P, B, P}, {P}));
  rows.push_back(sig({B, P, P}, {P}));
  return dropAbsentOperand(rows, getNumOperands());
}

// a [...,M,K], b [...,K,N] (or [...,N,K] with transpose_b). OneFlow
// BatchMatmul: a shared batch dim splits both; M, N and K as for linear.
Signatures MatmulOp::getSbpSignatures() {
  int64_t r = rankOf(getA());
  bool transposed = attrOr<bool>(*this, "transpose_b", false);
  int64_t bK = transposed ? r - 1 : r - 2, bN = transposed ? r - 2 : r - 1;
  Signatures rows;
  for (int64_t i = 0; i + 2 < r; ++i)
    rows.push_back(sig({S(i), S(i)}, {S(i)}));
  rows.push_back(sig({S(r - 2), B}, {S(r - 2)}));
  rows.push_back(sig({B, S(bN)}, {S(r - 1)}));
  rows.push_back(sig({S(r - 1), S(bK)}, {P}));
  rows.push_back(sig({P, B}, {P}));
  rows.push_back(sig({B, P}, {P}));
  return rows;
}

// x [...,N] + b [N]: any leading dim with b whole; N on both; partial +
// partial.
Signatures BiasAddOp::getSbpSignatures() {
  int64_t r = rankOf(getX());
  Signatures rows;
  for (int64_t i = 0; i + 1 < r; ++i)
    rows.push_back(sig({S(i), B}, {S(i)}));
  rows.push_back(sig({S(r - 1), S(0)}, {S(r - 1)}));
  rows.push_back(sig({P, P}, {P}));
  return rows;
}

// OneFlow math_binary_broadcast_ops.cpp: add keeps P + P -> P.
Signatures AddOp::getSbpSignatures() {
  Signatures rows = splitEveryDim(rankOf(getLhs()), 2);
  rows.push_back(sig({P, P}, {P}));
  return rows;
}

// mul is linear in each operand separately: P x B -> P, B x P -> P.
Signatures MulOp::getSbpSignatures() {
  Signatures rows = splitEveryDim(rankOf(getLhs()), 2);
  rows.push_back(sig({P, B}, {P}));
  rows.push_back(sig({B, P}, {P}));
  return rows;
}

// Non-linear elementwise ops: any split, no partial (OneFlow
// math_unary_elementwise_op.cpp).
Signatures GeluOp::getSbpSignatures() {
  return splitEveryDim(rankOf(getX()), 1);
}
Signatures ReluOp::getSbpSignatures() {
  return splitEveryDim(rankOf(getX()), 1);
}
Signatures SiluOp::getSbpSignatures() {
  return splitEveryDim(rankOf(getX()), 1);
}
Signatures SwigluOp::getSbpSignatures() {
  return splitEveryDim(rankOf(getGate()), 2);
}

// Normalisation over the last dim: only the other dims split, gamma and beta
// whole (OneFlow layer_norm_op.cpp).
Signatures LayernormOp::getSbpSignatures() {
  Signatures rows;
  for (int64_t i = 0; i + 1 < rankOf(getX()); ++i)
    rows.push_back(sig({S(i), B, B}, {S(i)}));
  return dropAbsentOperand(rows, getNumOperands());
}

Signatures RmsnormOp::getSbpSignatures() {
  Signatures rows;
  for (int64_t i = 0; i + 1 < rankOf(getX()); ++i)
    rows.push_back(sig({S(i), B}, {S(i)}));
  return rows;
}

// Every dim but the softmax axis (OneFlow softmax_op.cpp, generalised from
// "the last axis" to `axis`).
Signatures SoftmaxOp::getSbpSignatures() {
  int64_t r = rankOf(getX());
  int64_t axis = attrOr<int64_t>(*this, "axis", -1);
  if (axis < 0)
    axis += r;
  Signatures rows;
  for (int64_t i = 0; i < r; ++i)
    if (i != axis)
      rows.push_back(sig({S(i)}, {S(i)}));
  return rows;
}

// Batch, or heads (q, k, v and the result split at head boundaries, granule D;
// with G kv heads, device j's query heads [jH/n, (j+1)H/n) use exactly its kv
// heads [jG/n, (j+1)G/n)). A fused [q | k | v] operand with G = H splits by
// heads too, per segment: S(2) of a packed tensor means each device holds the
// same heads of q, of k and of v (granule 3D over the whole dimension; H % n
// == 0), the layout of generated programs (docs/ir.md "Packed tensors"); the
// linear producing it splits its weight's columns per segment alike, which a
// linear can, its output columns being independent.
Signatures AttentionOp::getSbpSignatures() {
  if (getNumOperands() == 1) {
    Signatures rows = {sig({S(0)}, {S(0)})};
    const std::optional<uint64_t> kv = getNumKvHeads();
    if (!kv || *kv == getNumHeads())
      rows.push_back(sig({S(2)}, {S(2)}));
    return rows;
  }
  return {sig({S(0), S(0), S(0)}, {S(0)}), sig({S(2), S(2), S(2)}, {S(2)})};
}

int64_t AttentionOp::getSplitGranule(unsigned valueIndex, int64_t dim) {
  if (dim != 2)
    return 1;
  const int64_t D = int64_t(getHeadDim()), H = int64_t(getNumHeads());
  if (getNumOperands() != 1 || valueIndex != 0)
    return D;
  // The packed operand: equal segments split per segment (3 head slices a
  // head); unequal ones (G != H) not at all (the whole dimension).
  const std::optional<uint64_t> kv = getNumKvHeads();
  const int64_t G = kv ? int64_t(*kv) : H;
  return G == H ? 3 * D : (H + 2 * G) * D;
}

// logits [...,V], targets [...] -> scalar mean. Positions split on both: each
// device sums its losses over the global count, a partial sum. Vocab split
// (logits S(last)): the max and the sum of exponentials are reduced inside the
// kernel across the axis (OneFlow sparse_softmax_cross_entropy_ms), and the
// loss comes out partial.
Signatures CrossEntropyOp::getSbpSignatures() {
  int64_t r = rankOf(getLogits());
  Signatures rows;
  for (int64_t i = 0; i + 1 < r; ++i)
    rows.push_back(sig({S(i), S(i)}, {P}));
  rows.push_back(sig({S(r - 1), B}, {P}));
  return rows;
}

// Integer targets have no gradient (see EmbeddingOp).
SbpSignature CrossEntropyOp::getBackwardSignature(const SbpSignature &forward) {
  return dualExceptIntegerOperand(forward, /*operand=*/1);
}

// x [B,Cin,H,W], w [Cout,Cin,kh,kw], bias [Cout]. Batch (OneFlow conv_op.cpp
// registers only this); output channels (w and bias split by Cout); input
// channels (a contraction: partial result, bias partial); and linearity in x
// and in w for partial inputs.
Signatures Conv2dOp::getSbpSignatures() {
  Signatures rows = {sig({S(0), B, B}, {S(0)}), sig({B, S(0), S(0)}, {S(1)}),
                     sig({S(1), S(1), P}, {P}), sig({P, B, P}, {P}),
                     sig({B, P, P}, {P})};
  return dropAbsentOperand(rows, getNumOperands());
}

// Batch and channels; average pooling is linear, so it also keeps P.
Signatures Pool2dOp::getSbpSignatures() {
  Signatures rows = {sig({S(0)}, {S(0)}), sig({S(1)}, {S(1)})};
  if (getKind() == "avg")
    rows.push_back(sig({P}, {P}));
  return rows;
}

// Dims before start_dim are untouched; start_dim itself is the outermost of
// the merged dims, so its contiguous slices are contiguous slices of the
// merged dim.
Signatures FlattenOp::getSbpSignatures() {
  int64_t r = rankOf(getX());
  int64_t start = attrOr<int64_t>(*this, "start_dim", 1);
  if (start < 0)
    start += r;
  Signatures rows;
  for (int64_t i = 0; i <= start && i < r; ++i)
    rows.push_back(sig({S(i)}, {S(i)}));
  rows.push_back(sig({P}, {P}));
  return rows;
}

// Input dim i maps to output dim j when the elements before them agree
// (equal prefix products) and one of the two sizes divides the other: then a
// contiguous slice of one is a contiguous slice of the other, provided the
// split also divides both sizes (checked on the nd signature).
Signatures ReshapeOp::getSbpSignatures() {
  ArrayRef<int64_t> in = cast<RankedTensorType>(getX().getType()).getShape();
  ArrayRef<int64_t> out = getShape();
  Signatures rows;
  int64_t inPrefix = 1;
  for (size_t i = 0; i < in.size(); inPrefix *= in[i], ++i) {
    int64_t outPrefix = 1;
    for (size_t j = 0; j < out.size(); outPrefix *= out[j], ++j) {
      if (outPrefix != inPrefix || in[i] <= 0 || out[j] <= 0)
        continue;
      if (in[i] % out[j] == 0 || out[j] % in[i] == 0)
        rows.push_back(sig({S(i)}, {S(j)}));
    }
  }
  rows.push_back(sig({P}, {P}));
  return rows;
}

// Result dim j is operand dim perm[j].
Signatures TransposeOp::getSbpSignatures() {
  Signatures rows;
  for (auto [j, from] : llvm::enumerate(getPerm()))
    rows.push_back(sig({S(from)}, {S(j)}));
  rows.push_back(sig({P}, {P}));
  return rows;
}

// adj [N,M] times x [M,F]: adjacency rows with features whole (each device
// aggregates its own nodes); feature columns with adjacency whole; the reverse
// split, adjacency columns with x rows (each device aggregates the messages of
// its own source nodes into a partial sum); partial features stay partial.
Signatures SpmmOp::getSbpSignatures() {
  return {sig({S(0), B}, {S(0)}), sig({B, S(1)}, {S(1)}),
          sig({S(1), S(0)}, {P}), sig({B, P}, {P})};
}

// mask [N,M], x [N,K], y [M,K] -> [N,M]: rows of mask and x; columns of mask
// with rows of y; K on x and y (partial dot products, mask whole).
Signatures SddmmOp::getSbpSignatures() {
  return {sig({S(0), S(0), B}, {S(0)}), sig({S(1), B, S(0)}, {S(1)}),
          sig({B, S(1), S(1)}, {P})};
}

// mask [N,M], scores [N,M] -> [N,M]: a row's entries are normalised together,
// so only rows split (each device its own nodes' attention).
Signatures EdgeSoftmaxOp::getSbpSignatures() {
  return {sig({S(0), S(0)}, {S(0)})};
}

} // namespace autoddl::sbp
