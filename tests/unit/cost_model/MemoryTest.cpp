//===- MemoryTest.cpp - per-rank memory (docs/cost-model.md §5) -----------===//
#include "cost_model/Memory.h"

#include <gtest/gtest.h>

namespace autoddl::cost {
namespace {

TEST(ModelState, ZeroPaperFigureOne) {
  // ZeRO (Rajbhandari et al. 2020), Figure 1: Ψ = 7.5B parameters, Nd = 64,
  // mixed-precision Adam (K = 12): baseline (2 + 2 + K)Ψ = 120 GB; P_os
  // 2Ψ + 2Ψ + KΨ/Nd = 31.4 GB; P_os+g 2Ψ + (2 + K)Ψ/Nd = 16.6 GB;
  // P_os+g+p (2 + 2 + K)Ψ/Nd = 1.9 GB.
  ModelStateInputs in;
  in.params = 7.5e9;
  in.dataParallel = 64;
  double expected[] = {120e9, 30e9 + 90e9 / 64, 15e9 + 105e9 / 64, 120e9 / 64};
  for (int stage = 0; stage <= 3; ++stage) {
    in.zeroStage = stage;
    EXPECT_NEAR(modelStateBytes(in).total(), expected[stage], 1)
        << "stage " << stage;
  }
  EXPECT_NEAR(expected[1] / 1e9, 31.4, 0.05);
  EXPECT_NEAR(expected[2] / 1e9, 16.6, 0.05);
}

TEST(ModelState, Fp32AdamIsSixteenBytesWithoutMaster) {
  ModelStateInputs in;
  in.params = 1e9;
  in.bytes = fp32Adam();
  // 4 (weights) + 4 (grads) + 8 (m, v) bytes per parameter.
  EXPECT_DOUBLE_EQ(modelStateBytes(in).total(), 16e9);
}

TEST(ModelState, GeneratedProgramsHoldWhatTheirParamHolds) {
  // backends/cuda/harness/Harness.h Param: fp32 value, bf16 working copy,
  // fp32 gradient, fp32 m and v; ZeRO-1 shards m, v and adds an fp32
  // gradient shard: 6 + 4 + (8 + 4) / Nd.
  ModelStateInputs in;
  in.params = 1e9;
  in.bytes = cudaProgramAdamW();
  EXPECT_DOUBLE_EQ(modelStateBytes(in).total(), 18e9);
  in.zeroStage = 1;
  in.dataParallel = 4;
  EXPECT_DOUBLE_EQ(modelStateBytes(in).total(), 10e9 + 12e9 / 4);
  in = ModelStateInputs{};
  in.params = 1e9;
  in.bytes = cpuProgramAdamW(); // fp32 value, gradient, m, v
  EXPECT_DOUBLE_EQ(modelStateBytes(in).total(), 16e9);
}

TEST(RankMemory, MarginIsFivePercentOrOneGiB) {
  EXPECT_DOUBLE_EQ(planningMarginBytes(140e9), 7e9);
  EXPECT_DOUBLE_EQ(planningMarginBytes(10e9), double(1 << 30));
  // The overheads the wrapper does not count: context, NCCL per communicator,
  // the step graph, 0.75 % of the allocation.
  EXPECT_DOUBLE_EQ(cudaOverheadEstimateBytes(2, true, 100e9),
                   2.3 * double(1 << 30) + 0.5 * double(1 << 30) +
                       64.0 * (1 << 20) + 0.75e9);
  // The four one-GPU GPT-2 programs of bench/results/cuda/
  // 2026-12-03-speed-autotune/graph_runs: (allocated, cudaMemGetInfo used) at
  // the peak; the estimate puts each total within 2 % of the measured one.
  const double runs[4][2] = {{14248443216., 16952131584.},
                             {32580079888., 34985541632.},
                             {59955549392., 63305482240.},
                             {102375762832., 105533734912.}};
  for (const auto &r : runs)
    EXPECT_NEAR((r[0] + cudaOverheadEstimateBytes(0, true, r[0])) / r[1], 1.0,
                0.02);
}

TEST(Activations, KorthikantiTableTwo) {
  // Korthikanti et al. 2022, Table 2, for s = 2048, b = 1, h = 12288, a = 96, t
  // = 8 (GPT-3 175B shapes): 5as/(ht) = 5 * 96 * 2048 / (12288 * 8) = 10.
  TransformerActivationInputs in;
  in.seq = 2048;
  in.microBatch = 1;
  in.hidden = 12288;
  in.heads = 96;
  double sbh = 2048.0 * 12288;
  // No parallelism (t = 1): sbh(34 + 5as/h) = sbh(34 + 80).
  EXPECT_DOUBLE_EQ(transformerLayerActivationBytes(in), sbh * (34 + 80));
  in.tensorParallel = 8;
  // Tensor parallel: sbh(10 + 24/t + 5as/(ht)) = sbh(10 + 3 + 10).
  EXPECT_DOUBLE_EQ(transformerLayerActivationBytes(in), sbh * 23);
  in.sequenceParallel = true;
  // + sequence parallel: sbh(34/t + 5as/(ht)) = sbh(4.25 + 10).
  EXPECT_DOUBLE_EQ(transformerLayerActivationBytes(in), sbh * 14.25);
  in.recompute = Recompute::Selective;
  // + selective recomputation: sbh * 34/t.
  EXPECT_DOUBLE_EQ(transformerLayerActivationBytes(in), sbh * 4.25);
  in.recompute = Recompute::Full;
  // Full recomputation keeps the layer input only: 2sbh, /t with sequence
  // parallel.
  EXPECT_DOUBLE_EQ(transformerLayerActivationBytes(in), 2 * sbh / 8);
}

TEST(Activations, FusedAttentionKeepsNoScores) {
  TransformerActivationInputs in{2048, 1,     12288,           96,
                                 1,    false, Recompute::None, true};
  EXPECT_DOUBLE_EQ(transformerLayerActivationBytes(in), 2048.0 * 12288 * 34);
}

TEST(RankMemory, SumsStateActivationsAndWorkspace) {
  RankMemoryInputs in;
  in.state.params = 1e9; // 16 GB of mixed-precision Adam state
  in.activationBytesPerMicroBatch = 2e9;
  in.inFlightMicroBatches = 4; // e.g. stage 0 of a 4-stage 1F1B
  in.workspaceBytes = 1e9;
  RankMemory m = rankMemory(in);
  EXPECT_DOUBLE_EQ(m.state.total(), 16e9);
  EXPECT_DOUBLE_EQ(m.activations, 8e9);
  EXPECT_DOUBLE_EQ(m.total(), 25e9);
}

} // namespace
} // namespace autoddl::cost
