//===- SbpRules.cpp - each op's 1-D SBP signatures, the one table --------===//
//
// After OneFlow's GetSbp functions (paths in Oneflow-Inc/oneflow, see
// /work/shared/reference/autoddl.md §2.3), extended where OneFlow lacks a
// parallelism the planner needs (tensor-parallel conv, vocab-parallel
// cross-entropy, sequence splits of position-dependent ops, sparse ops). Each
// row reads (operand layouts) -> (result layout) on one mesh axis;
// all-broadcast is implied. One function per op kind (or family), named by
// its row of the table of op kinds (OpKinds.cpp).
//
// Rank-dependent rows are generated from the operand shapes, so the table holds
// for any batch rank. Attribute defaults come from withDefaults, the same place
// the shape rules take them from.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpKinds.h"

namespace autoddl::ops {
namespace {

using L = SbpRuleLabel;
using Rules = detail::Rows;

AxisLayout S(int64_t dim) { return AxisLayout::split(dim); }
const AxisLayout B = AxisLayout::broadcast();
const AxisLayout P = AxisLayout::partial();

int64_t rankOf(const std::vector<Shape> &operands, size_t k) {
  return k < operands.size() ? int64_t(operands[k].size()) : 0;
}

/// Drops the layout of an absent trailing optional operand (a bias) from each
/// row written with it.
Rules dropAbsentOperand(Rules rows, size_t numOperands) {
  for (SbpRule &row : rows)
    row.operands.resize(numOperands);
  return rows;
}

/// S(i) -> S(i) for every dimension i of a rank-`rank` value, for ops whose
/// operands and result share a shape and act elementwise: the last dimension
/// of a value of rank 2 or more is its features (Hidden), the others its rows.
Rules splitEveryDim(int64_t rank, size_t numOperands) {
  Rules rows;
  for (int64_t i = 0; i < rank; ++i)
    rows.push_back({i == rank - 1 && rank >= 2 ? L::Hidden : L::Rows,
                    std::vector<AxisLayout>(numOperands, S(i)), S(i)});
  return rows;
}

// ids [B,T], table [V,C] -> [B,T,C]. OneFlow gather_op.cpp: ids split with the
// table whole; the table split by columns gives result columns; split by vocab
// rows, each device looks up only the ids it owns and the others read zero,
// so the result is a partial sum.
} // namespace

namespace detail {

Rules embeddingRows(const std::vector<Shape> &operands, const Attrs &) {
  Rules rows;
  const int64_t idsRank = rankOf(operands, 0);
  for (int64_t i = 0; i < idsRank; ++i)
    rows.push_back({L::Rows, {S(i), B}, S(i)});
  rows.push_back({L::Hidden, {B, S(1)}, S(idsRank)});
  rows.push_back({L::Vocab, {B, S(0)}, P});
  return rows;
}

// x [...,K], w [N,K] (transpose_weight) or [K,N], bias [N]. OneFlow
// matmul_op.cpp: rows of x (S(m) x B -> S), columns of w (B x S(n) -> S, the
// Megatron column-parallel layer), the contraction dim on both (S(k) x S(k) ->
// P, row-parallel), and partial inputs against broadcast ones. The bias joins
// a partial result as a partial value (kept on one device).
Rules linearRows(const std::vector<Shape> &operands, const Attrs &attrs) {
  const int64_t r = rankOf(operands, 0);
  const bool transposed = attrOr(attrs, attr::kTransposeWeight, true);
  const int64_t weightN = transposed ? 0 : 1, weightK = transposed ? 1 : 0;
  Rules rows;
  for (int64_t i = 0; i + 1 < r; ++i)
    rows.push_back({L::Rows, {S(i), B, B}, S(i)});
  rows.push_back({L::Column, {B, S(weightN), S(0)}, S(r - 1)});
  rows.push_back({L::Row, {S(r - 1), S(weightK), P}, P});
  rows.push_back({L::Partial, {P, B, P}, P});
  rows.push_back({L::Partial, {B, P, P}, P});
  return dropAbsentOperand(rows, operands.size());
}

// a [...,M,K], b [...,K,N] (or [...,N,K] with transpose_b). OneFlow
// BatchMatmul: a shared batch dim splits both; M, N and K as for linear.
Rules matmulRows(const std::vector<Shape> &operands, const Attrs &attrs) {
  const int64_t r = rankOf(operands, 0);
  const bool transposed = attrOr(attrs, attr::kTransposeB, false);
  const int64_t bK = transposed ? r - 1 : r - 2,
                bN = transposed ? r - 2 : r - 1;
  Rules rows;
  for (int64_t i = 0; i + 2 < r; ++i)
    rows.push_back({L::Rows, {S(i), S(i)}, S(i)});
  rows.push_back({L::Rows, {S(r - 2), B}, S(r - 2)});
  rows.push_back({L::Column, {B, S(bN)}, S(r - 1)});
  rows.push_back({L::Row, {S(r - 1), S(bK)}, P});
  rows.push_back({L::Partial, {P, B}, P});
  rows.push_back({L::Partial, {B, P}, P});
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
Rules attentionRows(const std::vector<Shape> &operands, const Attrs &attrs) {
  if (operands.size() == 1) {
    Rules rows = {{L::Rows, {S(0)}, S(0)}};
    const int64_t heads = attrOr(attrs, attr::kNumHeads, 1);
    if (attrOr(attrs, attr::kNumKvHeads, heads) == heads)
      rows.push_back({L::Heads, {S(2)}, S(2)});
    return rows;
  }
  return {{L::Rows, {S(0), S(0), S(0)}, S(0)},
          {L::Heads, {S(2), S(2), S(2)}, S(2)}};
}

// Every dim but the softmax axis (OneFlow softmax_op.cpp, generalised from
// "the last axis" to `axis`).
Rules softmaxRows(const std::vector<Shape> &operands, const Attrs &attrs) {
  const int64_t r = rankOf(operands, 0);
  int64_t axis = attrOr(attrs, attr::kAxis, -1);
  if (axis < 0)
    axis += r;
  Rules rows;
  for (int64_t i = 0; i < r; ++i)
    if (i != axis)
      rows.push_back({L::Rows, {S(i)}, S(i)});
  return rows;
}

// Input dim i maps to output dim j when the elements before them agree
// (equal prefix products) and one of the two sizes divides the other: then a
// contiguous slice of one is a contiguous slice of the other, provided the
// split also divides both sizes (checked on the nd signature).
Rules reshapeRows(const std::vector<Shape> &operands, const Attrs &attrs) {
  const Shape in = operands.empty() ? Shape{} : operands[0];
  Shape out = attrOr(attrs, attr::kShape, {});
  // A -1 in the target (an ONNX export's) is what the other sizes leave, as
  // inferReshape resolves it.
  int64_t known = 1, total = 1;
  for (int64_t d : in)
    total *= d;
  for (int64_t d : out)
    known *= d == -1 ? 1 : d;
  for (int64_t &d : out)
    if (d == -1 && known > 0 && total % known == 0)
      d = total / known;
  Rules rows;
  int64_t inPrefix = 1;
  for (size_t i = 0; i < in.size(); inPrefix *= in[i], ++i) {
    int64_t outPrefix = 1;
    for (size_t j = 0; j < out.size(); outPrefix *= out[j], ++j) {
      if (outPrefix != inPrefix || in[i] <= 0 || out[j] <= 0)
        continue;
      if (in[i] % out[j] == 0 || out[j] % in[i] == 0)
        rows.push_back({L::Rows, {S(int64_t(i))}, S(int64_t(j))});
    }
  }
  rows.push_back({L::Partial, {P}, P});
  return rows;
}

// x [B,Cin,H,W], w [Cout,Cin,kh,kw], bias [Cout]. Batch (OneFlow conv_op.cpp
// registers only this); output channels (w and bias split by Cout); input
// channels (a contraction: partial result, bias partial); and linearity in x
// and in w for partial inputs.
Rules conv2dRows(const std::vector<Shape> &operands, const Attrs &) {
  return dropAbsentOperand({{L::Rows, {S(0), B, B}, S(0)},
                            {L::Column, {B, S(0), S(0)}, S(1)},
                            {L::Row, {S(1), S(1), P}, P},
                            {L::Partial, {P, B, P}, P},
                            {L::Partial, {B, P, P}, P}},
                           operands.size());
}

// Batch and channels; average pooling is linear, so it also keeps P.
Rules pool2dRows(const std::vector<Shape> &, const Attrs &attrs) {
  Rules rows = {{L::Rows, {S(0)}, S(0)}, {L::Hidden, {S(1)}, S(1)}};
  if (attrOr(attrs, attr::kPoolKind, "") == "avg")
    rows.push_back({L::Partial, {P}, P});
  return rows;
}

// Dims before start_dim are untouched; start_dim itself is the outermost of
// the merged dims, so its contiguous slices are contiguous slices of the
// merged dim.
Rules flattenRows(const std::vector<Shape> &operands, const Attrs &attrs) {
  const int64_t r = rankOf(operands, 0);
  int64_t start = attrOr(attrs, attr::kStartDim, 1);
  if (start < 0)
    start += r;
  Rules rows;
  for (int64_t i = 0; i <= start && i < r; ++i)
    rows.push_back({L::Rows, {S(i)}, S(i)});
  rows.push_back({L::Partial, {P}, P});
  return rows;
}

// Result dim j is operand dim perm[j].
Rules transposeRows(const std::vector<Shape> &, const Attrs &attrs) {
  Rules rows;
  const std::vector<int64_t> perm = attrOr(attrs, attr::kPerm, {});
  for (size_t j = 0; j < perm.size(); ++j)
    rows.push_back({L::Rows, {S(perm[j])}, S(int64_t(j))});
  rows.push_back({L::Partial, {P}, P});
  return rows;
}

// adj [N,M] times x [M,F]: adjacency rows with features whole (each device
// aggregates its own nodes); feature columns with adjacency whole; the
// reverse split, adjacency columns with x rows (each device aggregates the
// messages of its own source nodes into a partial sum); partial features
// stay partial.
Rules spmmRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0), B}, S(0)},
          {L::Hidden, {B, S(1)}, S(1)},
          {L::Row, {S(1), S(0)}, P},
          {L::Partial, {B, P}, P}};
}

// mask [N,M], x [N,K], y [M,K] -> [N,M]: rows of mask and x; columns of mask
// with rows of y; K on x and y (partial dot products, mask whole).
Rules sddmmRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0), S(0), B}, S(0)},
          {L::Column, {S(1), B, S(0)}, S(1)},
          {L::Row, {B, S(1), S(1)}, P}};
}

// mask [N,M], scores [N,M] -> [N,M]: a row's entries are normalised
// together, so only rows split (each device its own nodes' attention).
Rules edgeSoftmaxRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0), S(0)}, S(0)}};
}

// x [N,H*C], att [H,C] -> [N,H]: nodes; whole heads (x's columns at the
// head's granule with att's rows).
Rules headDotRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0), B}, S(0)}, {L::Hidden, {S(1), S(0)}, S(1)}};
}

// adj [N,M], s_dst [N,H], s_src [M,H], h [M,H*C] -> [N,H*C]: the
// destination nodes' rows (sources whole); whole heads (each head's
// softmax and messages are its own).
Rules gatAggregateRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0), S(0), B, B}, S(0)},
          {L::Hidden, {B, S(1), S(1), S(1)}, S(1)}};
}

// A parameter may be stored split along any dimension (tensor parallelism,
// or ZeRO-style sharding of weights and optimizer state on a data axis) or
// whole. It has no operands: the caller passes its own shape.
Rules parameterRows(const std::vector<Shape> &operands, const Attrs &) {
  Rules rows;
  for (int64_t i = 0; i < rankOf(operands, 0); ++i)
    rows.push_back({L::Rows, {}, S(i)});
  return rows;
}

// x [B,T,C] + table[0:T]: batch split with the table whole; sequence split
// with the table whole (each device adds the rows of its own positions, from
// the offset of its slice); channels split on both; partial sums add into a
// partial sum.
Rules positionalRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0), B}, S(0)},
          {L::Rows, {S(1), B}, S(1)},
          {L::Hidden, {S(2), S(1)}, S(2)},
          {L::Partial, {P, P}, P}};
}

// x [B,T,H*D]: batch, sequence (each device rotates its positions, from the
// offset of its slice), or whole heads (granule D); the rotation is linear,
// so a partial sum stays one.
Rules rotaryRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0)}, S(0)},
          {L::Rows, {S(1)}, S(1)},
          {L::Heads, {S(2)}, S(2)},
          {L::Partial, {P}, P}};
}

// x [...,N] + b [N]: any leading dim with b whole; N on both; partial +
// partial.
Rules biasAddRows(const std::vector<Shape> &operands, const Attrs &) {
  const int64_t r = rankOf(operands, 0);
  Rules rows;
  for (int64_t i = 0; i + 1 < r; ++i)
    rows.push_back({L::Rows, {S(i), B}, S(i)});
  rows.push_back({L::Hidden, {S(r - 1), S(0)}, S(r - 1)});
  rows.push_back({L::Partial, {P, P}, P});
  return rows;
}

// OneFlow math_binary_broadcast_ops.cpp: add keeps P + P -> P.
Rules addRows(const std::vector<Shape> &operands, const Attrs &) {
  Rules rows = splitEveryDim(rankOf(operands, 0), 2);
  rows.push_back({L::Partial, {P, P}, P});
  return rows;
}

// mul is linear in each operand separately: P x B -> P, B x P -> P.
Rules mulRows(const std::vector<Shape> &operands, const Attrs &) {
  Rules rows = splitEveryDim(rankOf(operands, 0), 2);
  rows.push_back({L::Partial, {P, B}, P});
  rows.push_back({L::Partial, {B, P}, P});
  return rows;
}

// Non-linear elementwise ops (gelu, relu, silu, elu): any split, no partial
// (OneFlow math_unary_elementwise_op.cpp).
Rules unaryRows(const std::vector<Shape> &operands, const Attrs &) {
  return splitEveryDim(rankOf(operands, 0), 1);
}

Rules swigluRows(const std::vector<Shape> &operands, const Attrs &) {
  return splitEveryDim(rankOf(operands, 0), 2);
}

// Normalisation over the last dim: only the other dims split, the scale
// (and shift) whole (OneFlow layer_norm_op.cpp).
Rules normRows(const std::vector<Shape> &operands, const Attrs &) {
  Rules rows;
  for (int64_t i = 0; i + 1 < rankOf(operands, 0); ++i)
    rows.push_back({L::Rows, {S(i), B, B}, S(i)});
  return dropAbsentOperand(rows, operands.size());
}

// logits [...,V], targets [...] -> scalar mean. Positions split on both:
// each device sums its losses over the global count, a partial sum. Vocab
// split (logits S(last)): the max and the sum of exponentials are reduced
// inside the kernel across the axis (OneFlow
// sparse_softmax_cross_entropy_ms), and the loss comes out partial.
Rules crossEntropyRows(const std::vector<Shape> &operands, const Attrs &) {
  const int64_t r = rankOf(operands, 0);
  Rules rows;
  for (int64_t i = 0; i + 1 < r; ++i)
    rows.push_back({L::Rows, {S(i), S(i)}, P});
  rows.push_back({L::Vocab, {S(r - 1), B}, P});
  return rows;
}

// scores [B,C], labels [B] -> scalar mean: rows split on both, the loss a
// partial sum. No class split (a row's one-hot target is whole).
Rules squaredErrorRows(const std::vector<Shape> &, const Attrs &) {
  return {{L::Rows, {S(0), S(0)}, P}};
}

// The head dimension of x [B,T,H*D] splits at head boundaries.
int64_t rotaryGranule(const std::vector<Shape> &, const Attrs &attrs, unsigned,
                      int64_t dim) {
  return dim == 2 ? attrOr(attrs, attr::kHeadDim, 1) : 1;
}

int64_t attentionGranule(const std::vector<Shape> &operands, const Attrs &attrs,
                         unsigned valueIndex, int64_t dim) {
  if (dim != 2)
    return 1;
  const int64_t D = attrOr(attrs, attr::kHeadDim, 1);
  if (operands.size() != 1 || valueIndex != 0)
    return D;
  // The packed operand: equal segments split per segment (3 head slices a
  // head); unequal ones (G != H) not at all (the whole dimension).
  const int64_t H = attrOr(attrs, attr::kNumHeads, 1);
  const int64_t G = attrOr(attrs, attr::kNumKvHeads, H);
  return G == H ? 3 * D : (H + 2 * G) * D;
}

} // namespace detail

std::vector<SbpRule> sbpRules(std::string_view kind,
                              const std::vector<Shape> &operands,
                              const Attrs &attrs) {
  const detail::OpKind *k = detail::findOpKind(kind);
  return k ? k->sbp(operands, attrs) : Rules{};
}

int64_t sbpSplitGranule(std::string_view kind,
                        const std::vector<Shape> &operands, const Attrs &attrs,
                        unsigned valueIndex, int64_t dim) {
  const detail::OpKind *k = detail::findOpKind(kind);
  return k && k->granule ? k->granule(operands, attrs, valueIndex, dim) : 1;
}

int gradientFreeOperand(std::string_view kind) {
  const detail::OpKind *k = detail::findOpKind(kind);
  return k ? k->gradientFree : -1;
}

int64_t paddedVocabulary(int64_t rows, int64_t parts) {
  if (parts < 1 || rows < 1)
    return 0;
  const int64_t part = (rows + parts - 1) / parts;
  return rows > part * (parts - 1) ? part * parts : 0;
}

std::string layoutFitProblem(const Shape &shape,
                             const std::vector<AxisLayout> &layout,
                             const std::vector<int64_t> &axisSizes,
                             const std::vector<std::string> &axisNames,
                             const std::function<int64_t(int64_t)> &granule) {
  // Product of the axis sizes splitting each tensor dimension, and their names.
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> splitFactor(shape.size(), 1);
  std::vector<std::string> splitAxes(shape.size());
  for (size_t axis = 0; axis < layout.size(); ++axis) {
    const AxisLayout &entry = layout[axis];
    if (!entry.isSplit())
      continue;
    if (entry.dim >= rank)
      return "expected the split dimension on mesh axis '" + axisNames[axis] +
             "' to be below the tensor rank " + std::to_string(rank) +
             ", got " + std::to_string(entry.dim);
    splitFactor[size_t(entry.dim)] *= axisSizes[axis];
    std::string &names = splitAxes[size_t(entry.dim)];
    names += (names.empty() ? "" : ", ") + axisNames[axis];
  }
  for (int64_t dim = 0; dim < rank; ++dim) {
    const int64_t factor = splitFactor[size_t(dim)], size = shape[size_t(dim)];
    if (factor == 1 || size < 0)
      continue;
    const int64_t unit = factor * (granule ? granule(dim) : 1);
    if (size % unit != 0)
      return "expected the size of dimension " + std::to_string(dim) +
             " to be divisible by " + std::to_string(unit) +
             " (split over mesh axes " + splitAxes[size_t(dim)] +
             (unit != factor ? " in pieces of " + std::to_string(unit / factor)
                             : std::string()) +
             "), got " + std::to_string(size);
  }
  return "";
}

} // namespace autoddl::ops
