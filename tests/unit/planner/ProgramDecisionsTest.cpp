//===- ProgramDecisionsTest.cpp - shared decisions and the one rule table -===//
//
// The decisions codegen and the pricing both take from
// planner/ProgramDecisions.h, on the built-in models; and that every candidate
// signature the planner weighs is a row of the one SBP rule table
// (ir/ops/SbpRules.h), up to the planner's two documented readings.
//
//===----------------------------------------------------------------------===//
#include "planner/ProgramDecisions.h"
#include "ir/import/ModelImporter.h"
#include "ir/ops/SbpRules.h"
#include "planner/SearchGraph.h"

#include <gtest/gtest.h>

#include <string>

using namespace autoddl;
using namespace autoddl::planner;

namespace {

ModelGraph load(const char *model, int64_t batch = 1) {
  import::ImportOptions io;
  io.batch = batch;
  return import::importModel(model, io);
}

int count(const ModelGraph &g, const char *kind) {
  int n = 0;
  for (const OpDef &op : g.ops)
    n += op.kind == kind;
  return n;
}

TEST(ProgramDecisions, Gpt2FusesEveryMlpGeluAndBothResidualsPerLayer) {
  ModelGraph g = load("tiny-gpt");
  const GraphUses uses(g);
  int chains = 0, residuals = 0, padded = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    GeluChain chain;
    if (geluEpilogueChain(g, uses, i, chain)) {
      ++chains;
      // c_fc -> gelu -> c_proj: the linears around the GELU.
      EXPECT_EQ(g.ops[chain.fc1].kind, "linear");
      EXPECT_EQ(g.ops[chain.fc2].operands[0], g.ops[i].results[0]);
    }
    // The attention and MLP projections each write the residual's sum.
    residuals += !residualGemmOperands(g, uses, i).empty();
    padded += padsVocabulary(g, uses, g.ops[i]);
  }
  // One tanh GELU per block, between c_fc and c_proj.
  EXPECT_EQ(chains, count(g, "gelu"));
  // Two residual adds per block (after attention, after the MLP).
  EXPECT_EQ(residuals, 2 * count(g, "attention"));
  // The tied lm_head alone reads the vocabulary by rows into the loss.
  EXPECT_EQ(padded, 1);
  // A token model's step runs as one CUDA graph, and so does a graph model's
  // (its accuracy counts stay on the device until the step ends); one with a
  // training Dropout primitive does not (step_graph_cuda.test).
  EXPECT_TRUE(stepRunsAsGraph(g));
  EXPECT_TRUE(stepRunsAsGraph(load("gcn-cora")));
}

TEST(ProgramDecisions, GraphLayersRunTheirBiasAndReluInOnePass) {
  // gcn-cora: conv1 (bias, relu), conv2 (bias into the loss).
  ModelGraph g = load("gcn-cora");
  const GraphUses uses(g);
  int fused = 0, biases = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const int relu = fusedBiasRelu(g, uses, i);
    biases += g.ops[i].kind == "bias_add";
    if (relu < 0)
      continue;
    ++fused;
    EXPECT_EQ(g.ops[size_t(relu)].kind, "relu");
    EXPECT_EQ(g.ops[size_t(relu)].operands[0], g.ops[i].results[0]);
  }
  EXPECT_EQ(biases, 2);
  // The hidden layer's; the output layer's bias feeds the cross-entropy.
  EXPECT_EQ(fused, 1);
  EXPECT_EQ(fused, count(g, "relu"));
  // A transformer has no bias_add (its biases are GEMM epilogues).
  ModelGraph gpt = load("tiny-gpt");
  const GraphUses gptUses(gpt);
  for (size_t i = 0; i < gpt.ops.size(); ++i)
    EXPECT_LT(fusedBiasRelu(gpt, gptUses, i), 0);
}

TEST(ProgramDecisions, VocabularySplitsAndPadding) {
  // 50257 = 25129 + 25128 on tp = 2: an uneven vocabulary split runs (padded
  // rows), an uneven split of anything else does not.
  EXPECT_TRUE(splitRuns(50257, 2, /*paddedRows=*/true));
  EXPECT_FALSE(splitRuns(50257, 2, /*paddedRows=*/false));
  EXPECT_TRUE(splitRuns(768, 4, false));
  // 5 rows on tp = 4: parts of 2 leave the last rank none.
  EXPECT_FALSE(unevenVocabSplitRuns(5, 4));
  // The rule itself (ir/ops/SbpRules.h), which plan.mlir pads by: GPT-3's
  // vocabulary over tp = 4 and 8, an exact split, and parts of padding only.
  EXPECT_EQ(ops::paddedVocabulary(50257, 4), 50260);
  EXPECT_EQ(ops::paddedVocabulary(50257, 8), 50264);
  EXPECT_EQ(ops::paddedVocabulary(768, 4), 768);
  EXPECT_EQ(ops::paddedVocabulary(5, 4), 0);
  EXPECT_EQ(ops::paddedVocabulary(0, 4), 0);
  // Local rows round up to a multiple of 64: 25129 -> 25152, 64 stays.
  EXPECT_EQ(paddedVocabRows(25129), 25152);
  EXPECT_EQ(paddedVocabRows(64), 64);
  // tiny-gpt's vocab_size (examples/models/tiny-gpt.json); mlp-mnist has no
  // embedding.
  EXPECT_EQ(load("tiny-gpt").vocabularyRows(), 256);
  EXPECT_EQ(load("mlp-mnist").vocabularyRows(), 0);
}

/// Whether `s` is table row `r` as the planner reads it: a parameter read
/// partial is read B, and the vocabulary-parallel loss leaves its op whole
/// (docs/planner.md "signatures").
bool readsRow(const ModelGraph &g, const OpDef &op, const Signature &s,
              const ops::SbpRule &r) {
  auto same = [](const cost::Sbp &a, const ops::AxisLayout &b) {
    return a.kind == (b.isSplit()     ? cost::Sbp::Split
                      : b.isPartial() ? cost::Sbp::Partial
                                      : cost::Sbp::Broadcast) &&
           (!b.isSplit() || a.dim == b.dim);
  };
  if (s.operands.size() != r.operands.size())
    return false;
  for (size_t k = 0; k < r.operands.size(); ++k) {
    const bool param =
        g.tensors[size_t(op.operands[k])].role == TensorRole::Parameter;
    ops::AxisLayout want = r.operands[k];
    if (param && want.isPartial())
      want = ops::AxisLayout::broadcast();
    if (!same(s.operands[k], want))
      return false;
  }
  if (op.kind == "cross_entropy" && s.inOpAllReduceBytes > 0)
    return s.result == cost::Sbp::broadcast();
  return same(s.result, r.result);
}

TEST(ProgramDecisions, EveryPlannerSignatureIsATableRow) {
  int checked = 0;
  for (const char *model :
       {"tiny-gpt", "tiny-llama", "tiny-bert", "tiny-vgg", "mlp-mnist",
        "gcn-cora", "gat-cora", "transformer_conv-cora"}) {
    // A graph model trains on the whole graph: nothing scales with a batch.
    const bool graphModel =
        std::string(model).find("-cora") != std::string::npos;
    ModelGraph g1 = load(model), g2 = graphModel ? g1 : load(model, 2);
    SearchGraph sg;
    std::string err;
    ASSERT_TRUE(buildSearchGraph(g1, g2, sg, err)) << model << ": " << err;
    for (int tp : {2, 4})
      for (bool dataSplits : {true, false}) {
        enumerateSignatures(sg, tp, 8, dataSplits);
        for (const CollapsedOp &cop : sg.ops) {
          const OpDef &op = g1.ops[size_t(cop.op)];
          std::vector<ops::Shape> shapes;
          for (int t : op.operands)
            shapes.push_back(sg.shapeAt(t, 8));
          const std::vector<ops::SbpRule> rules = ops::sbpRules(
              op.kind, shapes, ops::withDefaults(op.kind, op.attrs));
          for (const Signature &s : cop.sigs) {
            if (s.name == "replicate")
              continue; // all-broadcast, implied by the table
            ++checked;
            bool found = false;
            for (const ops::SbpRule &r : rules)
              found = found || readsRow(g1, op, s, r);
            EXPECT_TRUE(found) << model << " tp=" << tp << " op " << op.name
                               << " (" << op.kind << ") signature " << s.name;
          }
        }
      }
  }
  // Every model offers splits at tp 2 and 4 (hundreds of candidates).
  EXPECT_GT(checked, 100);
}

} // namespace
