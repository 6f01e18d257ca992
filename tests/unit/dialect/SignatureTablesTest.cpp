//===- SignatureTablesTest.cpp - SbpOpInterface tables -------------------===//
//
// Each expectation states where it comes from: OneFlow's GetSbp tables
// (/work/shared/reference/autoddl.md §2.3), the nd product rule (§2.2), or the
// SBP dual used for gradients.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/SbpDialect.h"
#include "ir/dialect/SbpLayout.h"
#include "ir/ops/OpSemantics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <set>

using namespace mlir;
using namespace autoddl::sbp;
using namespace autoddl::sbp::shorthand;

namespace {

std::vector<std::string> strings(ArrayRef<SbpSignature> sigs) {
  std::vector<std::string> out;
  for (const SbpSignature &s : sigs)
    out.push_back(toString(s));
  return out;
}

/// op's 1-D table is exactly `expected`, in order (compared as text, so a
/// mismatch prints both tables).
void expectTable(SbpOpInterface op, std::vector<SbpSignature> expected) {
  EXPECT_EQ(strings(getValidSignatures1D(op)), strings(expected));
}

/// op's 1-D table holds every row of `wanted` and none of `unwanted` (a
/// failure prints the table).
void expectRows(SbpOpInterface op, std::vector<SbpSignature> wanted,
                std::vector<SbpSignature> unwanted = {}) {
  SmallVector<SbpSignature> rows = getValidSignatures1D(op);
  for (const SbpSignature &s : wanted)
    EXPECT_TRUE(llvm::is_contained(rows, s))
        << toString(s) << " not in " << ::testing::PrintToString(strings(rows));
  for (const SbpSignature &s : unwanted)
    EXPECT_FALSE(llvm::is_contained(rows, s))
        << toString(s) << " in " << ::testing::PrintToString(strings(rows));
}

class SignatureTablesTest : public ::testing::Test {
protected:
  SignatureTablesTest() {
    context.loadDialect<SbpDialect, func::FuncDialect>();
  }

  /// Parses `body` as the body of a function over `args` inside a module with
  /// the mesh `sbp.mesh @mesh [dp = 2, tp = 4]`; returns the first op of
  /// `T`.
  template <typename T>
  T parse(const std::string &args, const std::string &body) {
    std::string text = "sbp.mesh @mesh [dp = 2, tp = 4]\nfunc.func @f(" + args +
                       ") {\n" + body + "\n  return\n}\n";
    module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text;
    T found;
    module->walk([&](T op) {
      if (!found)
        found = op;
    });
    EXPECT_TRUE(found) << text;
    return found;
  }

  /// sbp.linear of x [rows,16] by a torch-layout weight [32,16] (N = 32,
  /// K = 16), with the attribute dictionary `attrs`.
  LinearOp torchLinear(int64_t rows, const std::string &attrs = "") {
    std::string x = "tensor<" + std::to_string(rows) + "x16xf32>";
    std::string y = "tensor<" + std::to_string(rows) + "x32xf32>";
    return parse<LinearOp>("%x: " + x + ", %w: tensor<32x16xf32>",
                           "%y = sbp.linear %x, %w " + attrs + " : (" + x +
                               ", tensor<32x16xf32>) -> " + y);
  }

  MeshOp mesh() { return *module->getOps<MeshOp>().begin(); }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(SignatureTablesTest, LinearWithTorchWeightHasOneFlowMatmulTable) {
  auto op = torchLinear(8);
  // MatmulOp::GetSbp with b = wᵀ ([N,K], torch Linear): S(m)×B→S(0),
  // B×S(n)→S(1) where n is w's dim 0, S(k)×S(k)→P where k is x's dim 1 and
  // w's dim 1, P×B→P, B×P→P; all-broadcast last (GetSbpSignaturesIf).
  expectTable(op, {sig({S(0), B}, {S(0)}), sig({B, S(0)}, {S(1)}),
                   sig({S(1), S(1)}, {P}), sig({P, B}, {P}), sig({B, P}, {P}),
                   sig({B, B}, {B})});
}

TEST_F(SignatureTablesTest, LinearWithConv1DWeightSplitsWeightColumns) {
  auto op = parse<LinearOp>(
      "%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>",
      "%y = sbp.linear %x, %w, %b {transpose_weight = false} : "
      "(tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> "
      "tensor<8x32xf32>");
  // GPT-2 Conv1D keeps w as [K,N]: Megatron's column-parallel layer splits w's
  // dim 1 and the bias with it; row-parallel splits w's dim 0 (K) and the
  // result is a partial sum to which the bias contributes once (P).
  expectRows(op, {sig({B, S(1), S(0)}, {S(1)}), sig({S(1), S(0), P}, {P})},
             // A split K with a whole bias would add the bias on every device.
             {sig({S(1), S(0), B}, {P})});
}

TEST_F(SignatureTablesTest, LinearSplitsEveryBatchDimOfX) {
  auto op = parse<LinearOp>(
      "%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>",
      "%y = sbp.linear %x, %w : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> "
      "tensor<2x8x32xf32>");
  expectRows(op, {// Rows of x are all of its leading dims (BroadcastMatmul's
                  // S(i)×B→S(i)).
                  sig({S(0), B}, {S(0)}), sig({S(1), B}, {S(1)}),
                  // The contraction dim is x's last, so K-split reads x as
                  // S(2).
                  sig({S(2), S(1)}, {P})});
  // 2 batch rows + column + K + 2 partial rows + all-broadcast.
  EXPECT_EQ(getValidSignatures1D(op).size(), 7u);
}

TEST_F(SignatureTablesTest, BatchedMatmulSplitsSharedBatchDim) {
  auto op = parse<MatmulOp>(
      "%a: tensor<4x8x16xf32>, %b: tensor<4x8x16xf32>",
      "%y = sbp.matmul %a, %b {transpose_b = true} : (tensor<4x8x16xf32>, "
      "tensor<4x8x16xf32>) -> tensor<4x8x8xf32>");
  expectRows(op, {// BatchMatmul: S(i) on both for each batch axis i.
                  sig({S(0), S(0)}, {S(0)}),
                  // With transpose_b, b is [...,N,K]: N is its dim 1, K its
                  // dim 2.
                  sig({B, S(1)}, {S(2)}), sig({S(2), S(2)}, {P})});
}

TEST_F(SignatureTablesTest, NonLinearElementwiseSplitsAnyDimAndNeverP) {
  auto op = parse<GeluOp>("%x: tensor<2x8x16xf32>",
                          "%y = sbp.gelu %x : (tensor<2x8x16xf32>) -> "
                          "tensor<2x8x16xf32>");
  // math_unary_elementwise_op.cpp: SplitForEachAxis, no partial (gelu is not
  // linear): S(0), S(1), S(2), then all-broadcast.
  expectTable(op, {sig({S(0)}, {S(0)}), sig({S(1)}, {S(1)}),
                   sig({S(2)}, {S(2)}), sig({B}, {B})});
}

TEST_F(SignatureTablesTest, AddKeepsPartialButMulOnlyAgainstBroadcast) {
  auto add = parse<AddOp>("%a: tensor<8xf32>", "%y = sbp.add %a, %a : "
                                               "(tensor<8xf32>, tensor<8xf32>) "
                                               "-> tensor<8xf32>");
  // Sum of partial sums is a partial sum (OneFlow: add P⊗P→P).
  expectRows(add, {sig({P, P}, {P})});
  auto mul = parse<MulOp>("%a: tensor<8xf32>", "%y = sbp.mul %a, %a : "
                                               "(tensor<8xf32>, tensor<8xf32>) "
                                               "-> tensor<8xf32>");
  // (Σa_i)(Σb_i) ≠ Σ a_i b_i: mul is linear in one operand at a time.
  expectRows(mul, {sig({P, B}, {P})}, {sig({P, P}, {P})});
}

TEST_F(SignatureTablesTest, LayernormSplitsOnlyUnnormalisedDims) {
  auto op = parse<LayernormOp>(
      "%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>",
      "%y = sbp.layernorm %x, %g, %b : (tensor<2x8x16xf32>, tensor<16xf32>, "
      "tensor<16xf32>) -> tensor<2x8x16xf32>");
  // layer_norm_op.cpp: S(i) for i < begin_norm_axis (here 2), gamma and beta
  // broadcast.
  expectTable(op, {sig({S(0), B, B}, {S(0)}), sig({S(1), B, B}, {S(1)}),
                   sig({B, B, B}, {B})});
}

TEST_F(SignatureTablesTest, SoftmaxNeverSplitsItsAxis) {
  auto op = parse<SoftmaxOp>("%x: tensor<2x8x16xf32>",
                             "%y = sbp.softmax %x {axis = 1 : i64} : "
                             "(tensor<2x8x16xf32>) -> tensor<2x8x16xf32>");
  // softmax_op.cpp generalised to `axis`: every dim but 1.
  expectTable(op, {sig({S(0)}, {S(0)}), sig({S(2)}, {S(2)}), sig({B}, {B})});
}

TEST_F(SignatureTablesTest, EmbeddingSplitByVocabGivesPartial) {
  auto op = parse<EmbeddingOp>(
      "%ids: tensor<2x8xi32>, %t: tensor<64x16xf32>",
      "%y = sbp.embedding %ids, %t : (tensor<2x8xi32>, tensor<64x16xf32>) -> "
      "tensor<2x8x16xf32>");
  expectRows(op, {// gather_op.cpp: indices B, table S(0) (the gathered
                  // axis) → P.
                  sig({B, S(0)}, {P}),
                  // Table columns split → result's last dim (ids rank 2, so
                  // dim 2).
                  sig({B, S(1)}, {S(2)})});
}

TEST_F(SignatureTablesTest, CrossEntropyWithSplitVocabGivesPartialLoss) {
  auto op = parse<CrossEntropyOp>(
      "%l: tensor<2x8x64xf32>, %t: tensor<2x8xi32>",
      "%y = sbp.cross_entropy %l, %t : (tensor<2x8x64xf32>, tensor<2x8xi32>) "
      "-> tensor<f32>");
  expectRows(op, {// Vocab-parallel loss: logits S(last), targets whole →
                  // partial scalar.
                  sig({S(2), B}, {P}),
                  // Positions split on both → each device's share of the
                  // mean, partial.
                  sig({S(0), S(0)}, {P}), sig({S(1), S(1)}, {P})});
}

TEST_F(SignatureTablesTest, SpmmSplitsAdjacencyRowsOrColumns) {
  auto op = parse<SpmmOp>(
      "%adj: tensor<6x6xf32>, %x: tensor<6x4xf32>",
      "%y = sbp.spmm %adj, %x {nnz = 12 : i64} : (tensor<6x6xf32>, "
      "tensor<6x4xf32>) -> tensor<6x4xf32>");
  expectTable(
      op, {// Row-split adjacency, broadcast features: each device's own nodes.
           sig({S(0), B}, {S(0)}),
           // Features split by column.
           sig({B, S(1)}, {S(1)}),
           // The reverse: adjacency columns with feature rows → partial sums.
           sig({S(1), S(0)}, {P}), sig({B, P}, {P}), sig({B, B}, {B})});
}

TEST_F(SignatureTablesTest, EdgeSoftmaxSplitsRowsOnly) {
  auto op = parse<EdgeSoftmaxOp>(
      "%adj: tensor<6x6xf32>, %s: tensor<6x6xf32>",
      "%a = sbp.edge_softmax %adj, %s {nnz = 12 : i64} : (tensor<6x6xf32>, "
      "tensor<6x6xf32>) -> tensor<6x6xf32>");
  // A row's stored entries are normalised together: rows split, nothing else.
  expectTable(op, {sig({S(0), S(0)}, {S(0)}), sig({B, B}, {B})});
}

TEST_F(SignatureTablesTest, PositionDependentOpsSplitTheSequence) {
  auto rotary = parse<RotaryOp>(
      "%x: tensor<2x8x16xf32>",
      "%y = sbp.rotary %x {head_dim = 4 : i64, num_heads = 4 : i64} : "
      "(tensor<2x8x16xf32>) -> tensor<2x8x16xf32>");
  // Batch; sequence (each device rotates its own positions, from its slice's
  // offset, as the generated programs do); whole heads; linear, so P stays P.
  expectTable(rotary, {sig({S(0)}, {S(0)}), sig({S(1)}, {S(1)}),
                       sig({S(2)}, {S(2)}), sig({P}, {P}), sig({B}, {B})});
  auto positional = parse<PositionalOp>(
      "%x: tensor<2x8x16xf32>, %t: tensor<8x16xf32>",
      "%y = sbp.positional %x, %t : (tensor<2x8x16xf32>, tensor<8x16xf32>) "
      "-> tensor<2x8x16xf32>");
  // A sequence split reads the whole table, each device its positions' rows.
  expectRows(positional, {sig({S(1), B}, {S(1)})});
}

TEST_F(SignatureTablesTest, TransposeAndReshapeMoveSplits) {
  auto t = parse<TransposeOp>("%x: tensor<8x16xf32>",
                              "%y = sbp.transpose %x {perm = array<i64: 1, "
                              "0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>");
  // Result dim j is operand dim perm[j].
  expectRows(t, {sig({S(1)}, {S(0)}), sig({S(0)}, {S(1)})});
  auto r = parse<ReshapeOp>("%x: tensor<2x64xf32>",
                            "%y = sbp.reshape %x {shape = array<i64: 16, 8>} "
                            ": (tensor<2x64xf32>) -> tensor<16x8xf32>");
  // [2,64] → [16,8]: dim 0 of both starts at element 0 and 2 divides 16, so
  // S(0) → S(0); input dim 1 starts after 2 elements of dim 0, no output dim
  // does: only S(0), P and all-broadcast.
  expectTable(r, {sig({S(0)}, {S(0)}), sig({P}, {P}), sig({B}, {B})});
}

TEST_F(SignatureTablesTest, NdSignaturesAreFilteredProductsOfOneD) {
  auto op = torchLinear(8);
  // 6 one-D signatures per axis, 6 × 6 products; every split dim (8, 16, 32)
  // is divisible by any product of axis sizes that can split it (at most 8).
  EXPECT_EQ(enumerateNdSignatures(op, mesh()).size(), 36u);

  auto small = torchLinear(2);
  // A batch of 2 cannot be split over tp (4): the row-split signature is
  // dropped on tp, leaving 6 choices on dp × 5 on tp.
  SmallVector<SignatureAttr> nd = enumerateNdSignatures(small, mesh());
  EXPECT_EQ(nd.size(), 30u);
  // The first is the all-rows signature on dp with the first tp choice,
  // column-parallel (odometer order, last axis fastest).
  EXPECT_EQ(projectSignature(nd[0], 0), sig({S(0), B}, {S(0)}));
  EXPECT_EQ(projectSignature(nd[0], 1), sig({B, S(0)}, {S(1)}));
}

TEST_F(SignatureTablesTest, HeadSplitsMustBeWholeHeads) {
  auto op = parse<AttentionOp>(
      "%q: tensor<4x8x8xf32>",
      "%a = sbp.attention %q, %q, %q {num_heads = 2 : i64, head_dim = 4 : "
      "i64} : (tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> "
      "tensor<4x8x8xf32>");
  // Two heads split over dp (2) are one head each; over tp (4) they would be
  // half heads. Batch 4 splits over either axis but not both (8). Per axis:
  // dp {S(0), S(2), B}, tp {S(0), B}; products minus (S(0), S(0)) and any
  // S(2) on tp: 3 × 2 − 1 = 5.
  EXPECT_EQ(enumerateNdSignatures(op, mesh()).size(), 5u);
}

TEST_F(SignatureTablesTest, BackwardIsTheDualByDefault) {
  auto op = torchLinear(8);
  SbpOpInterface iface = op;
  // Column-parallel forward (B, S(0)) → S(1): dy arrives S(1); dx is a partial
  // sum (Megatron's all-reduce of dx) and dw stays split like w.
  EXPECT_EQ(iface.getBackwardSignature(sig({B, S(0)}, {S(1)})),
            sig({S(1)}, {P, S(0)}));
  // Data-parallel forward: the weight gradient is partial over the data axis,
  // which is the gradient all-reduce of data parallelism.
  EXPECT_EQ(iface.getBackwardSignature(sig({S(0), B}, {S(0)})),
            sig({S(0)}, {S(0), P}));
  // Row-parallel forward (S(1), S(1)) → P: dy is needed whole.
  EXPECT_EQ(iface.getBackwardSignature(sig({S(1), S(1)}, {P})),
            sig({B}, {S(1), S(1)}));
}

TEST_F(SignatureTablesTest, IntegerOperandsKeepTheirLayoutInBackward) {
  auto op = parse<EmbeddingOp>(
      "%ids: tensor<2x8xi32>, %t: tensor<64x16xf32>",
      "%y = sbp.embedding %ids, %t : (tensor<2x8xi32>, tensor<64x16xf32>) -> "
      "tensor<2x8x16xf32>");
  SbpOpInterface iface = op;
  // Vocab-parallel forward (B, S(0)) → P: dy whole, dtable split by vocab;
  // the ids have no gradient, so their entry stays B rather than the dual P.
  EXPECT_EQ(iface.getBackwardSignature(sig({B, S(0)}, {P})),
            sig({B}, {B, S(0)}));
}

TEST_F(SignatureTablesTest, NdBackwardAppliesPerAxis) {
  auto op = torchLinear(
      8, "{sbp.sig = #sbp.sig<@mesh, ([S(0), B], [B, S(0)]) -> ([S(0), "
         "S(1)])>}");
  auto forward = op->getAttrOfType<SignatureAttr>(kSignatureAttr);
  ASSERT_TRUE(forward);
  // dp × tp (LiBai's hybrid): dy (S(0), S(1)); dx partial over tp; dw partial
  // over dp (the data-parallel gradient sync) and split over tp like w.
  SignatureAttr backward = getBackwardSignature(op, forward);
  EXPECT_EQ(projectSignature(backward, 0), sig({S(0)}, {S(0), P}));
  EXPECT_EQ(projectSignature(backward, 1), sig({S(1)}, {P, S(0)}));
}

// The dialect's model ops (SbpOps.td, the ones verified against ir/ops) are
// exactly the op kinds of the table (ir/ops/OpKinds.cpp), so the importers,
// the dialect and the planner share one vocabulary.
TEST_F(SignatureTablesTest, ModelOpsAreTheTableOfOpKinds) {
  std::set<std::string> kinds, modelOps;
  for (const autoddl::ops::OpInfo &op : autoddl::ops::allOps())
    kinds.insert("sbp." + std::string(op.kind));
  for (RegisteredOperationName name : context.getRegisteredOperations())
    if (name.hasTrait<autoddl::sbp::OpTrait::OpSemanticsVerified>())
      modelOps.insert(name.getStringRef().str());
  EXPECT_EQ(modelOps, kinds);
}

} // namespace
