//===- ComputeTest.cpp - roofline and backward rules (docs/cost-model.md §4)
#include "cost_model/Compute.h"
#include "tests/unit/cost_model/ToyCluster.h"

#include <gtest/gtest.h>

namespace autoddl::cost {
namespace {

using ops::DType;
using ops::ValueType;
using test::toyCluster;

constexpr double us = 1e-6;

TEST(GemmEfficiency, FullWaveOfFullTiles) {
  Cluster c = toyCluster();
  // 1280 = 10 tiles of 128 each way: 100 tiles on 100 SMs, one full wave, no
  // padding; only the K fill: 1280 / (1280 + 128) = 0.909.
  EXPECT_NEAR(gemmEfficiency(c, 1280, 1280, 1280), 1280.0 / 1408, 1e-12);
}

TEST(GemmEfficiency, TileAndWaveQuantisation) {
  Cluster c = toyCluster();
  // M = 1290 needs 11 row tiles (the last one 10/128 full): tile efficiency
  // 1290 / 1408; 110 tiles on 100 SMs take 2 waves: 110 / 200.
  double expected = (1290.0 / 1408) * (110.0 / 200) * (1280.0 / 1408);
  EXPECT_NEAR(gemmEfficiency(c, 1290, 1280, 1280), expected, 1e-12);
  // Thin GEMMs lose efficiency: splitting N by 8 must not look 8x faster.
  EXPECT_LT(gemmEfficiency(c, 1280, 160, 1280),
            gemmEfficiency(c, 1280, 1280, 1280));
}

TEST(Roofline, ComputeMemoryAndLaunchFloor) {
  Cluster c = toyCluster();
  // 4e9 FLOP at 400 TFLOP/s = 10 us; 1e6 bytes at 1 TB/s = 1 us: compute-bound.
  KernelCost a = roofline(c, 4e9, 1e6, 1.0, Precision::BF16);
  EXPECT_NEAR(a.time, 10 * us, 1e-15);
  EXPECT_TRUE(a.computeBound);
  // 1e8 bytes at 1 TB/s = 100 us: memory-bound.
  KernelCost b = roofline(c, 4e9, 1e8, 1.0, Precision::BF16);
  EXPECT_NEAR(b.time, 100 * us, 1e-15);
  EXPECT_FALSE(b.computeBound);
  // Tiny kernel: the 5 us launch floor.
  EXPECT_NEAR(roofline(c, 1e3, 1e3, 1.0, Precision::BF16).time, 5 * us, 1e-15);
  // tf32 is absent on the toy GPU: it runs at the fp32 peak (100 TFLOP/s): 40
  // us.
  EXPECT_NEAR(roofline(c, 4e9, 0, 1.0, Precision::TF32).time, 40 * us, 1e-15);
}

TEST(OpCost, LinearForwardDgradWgrad) {
  Cluster c = toyCluster();
  std::vector<ValueType> in{{{1280, 1280}, DType::F32},
                            {{1280, 1280}, DType::F32}};
  std::vector<ValueType> out{{{1280, 1280}, DType::F32}};
  OpCost cost = opCost(c, "linear", in, out, {{"transpose_weight", false}},
                       {false, true}, Precision::BF16);
  // Forward 2*M*N*K = 2 * 1280^3 FLOP at 400 TFLOP/s * 0.909 (above);
  // bytes 3 * 1280^2 * 2 (bf16) = 9.8 MB -> 9.8 us < compute time.
  double flops = 2.0 * 1280 * 1280 * 1280;
  double t = flops / (400e12 * 1280.0 / 1408);
  EXPECT_DOUBLE_EQ(cost.forward.flops, flops);
  EXPECT_NEAR(cost.forward.time, t, 1e-12);
  // dX = dY * W^T and dW = X^T * dY: each the forward's FLOPs (Narayanan et al.
  // 2021 §5.1), same square shape, same time.
  EXPECT_DOUBLE_EQ(cost.backwardData.flops, flops);
  EXPECT_DOUBLE_EQ(cost.backwardWeight.flops, flops);
  EXPECT_NEAR(cost.backwardData.time, t, 1e-12);
  // The weight gradient then adds into the fp32 gradient (beta = 1): its
  // read and write, 8 bytes an element at 1 TB/s, after the reduction.
  EXPECT_NEAR(cost.backwardWeight.time, t + 8.0 * 1280 * 1280 / 1e12, 1e-12);
}

TEST(OpCost, ConvWeightGradientSplitsItsLongReduction) {
  Cluster c = toyCluster();
  // ResNet's stem at batch 32: the weight gradient is a GEMM of
  // 147 x 64 outputs (2 tiles) over K = 32*112*112 = 401,408.
  std::vector<ValueType> in{{{32, 3, 224, 224}, DType::F32},
                            {{64, 3, 7, 7}, DType::F32}};
  std::vector<ValueType> out{{{32, 64, 112, 112}, DType::F32}};
  OpCost cost = opCost(c, "conv2d", in, out, {{"stride", int64_t(2)}},
                       {false, true}, Precision::BF16);
  const double flops = 2.0 * 147 * 64 * 401408;
  const double tileEff = 147.0 * 64 / (256 * 128);
  // Unsplit, 2 of the 100 SMs would work: flops / (400 TFLOP/s * tileEff *
  // 2/100). Split over K (50 slices of 8,028) the waves are full, so it is
  // far below that, and never above the tiles' own efficiency allows.
  const double unsplit = flops / (400e12 * tileEff * 0.02);
  EXPECT_LT(cost.backwardWeight.time, 0.1 * unsplit);
  EXPECT_GE(cost.backwardWeight.time, flops / (400e12 * tileEff));
  // A linear of the same GEMM keeps today's pricing (cuBLAS's own choice).
  std::vector<ValueType> lin{{{401408, 147}, DType::F32},
                             {{147, 64}, DType::F32}};
  std::vector<ValueType> linOut{{{401408, 64}, DType::F32}};
  OpCost l = opCost(c, "linear", lin, linOut, {{"transpose_weight", false}},
                    {false, true}, Precision::BF16);
  EXPECT_GT(l.backwardWeight.time, 0.5 * unsplit);
}

TEST(OpCost, MatmulOfTwoActivationsHasNoWgrad) {
  Cluster c = toyCluster();
  std::vector<ValueType> in{{{4, 256, 64}, DType::F32},
                            {{4, 64, 256}, DType::F32}};
  std::vector<ValueType> out{{{4, 256, 256}, DType::F32}};
  OpCost cost =
      opCost(c, "matmul", in, out, {}, {false, false}, Precision::BF16);
  // Both gradients are activation gradients: 2 GEMMs of 2*4*256*256*64 FLOP
  // each.
  EXPECT_DOUBLE_EQ(cost.backwardData.flops, 2 * 2.0 * 4 * 256 * 256 * 64);
  EXPECT_EQ(cost.backwardWeight.flops, 0);
  EXPECT_EQ(cost.backwardWeight.time, 0);
}

TEST(OpCost, AttentionBackwardIsTwoAndAHalfForward) {
  Cluster c = toyCluster();
  ValueType x{{2, 1024, 1024}, DType::F32};
  OpCost cost = opCost(
      c, "attention", {x, x, x}, {x},
      {{"num_heads", int64_t(8)}, {"head_dim", int64_t(128)}, {"causal", true}},
      {false, false, false}, Precision::BF16);
  ASSERT_GT(cost.forward.flops, 0);
  // FlashAttention-2 (Dao 2023): backward = 2.5 x forward FLOPs, all dgrad.
  EXPECT_DOUBLE_EQ(cost.backwardData.flops, 2.5 * cost.forward.flops);
  EXPECT_EQ(cost.backwardWeight.flops, 0);
}

TEST(OpCost, MeasuredAttentionEfficiencyPricesTheKernelItNames) {
  // gpu.attention: the kernel's measured efficiency replaces the batched-GEMM
  // estimate. Counted FLOPs: 4*B*H*T^2*D + 5*B*H*T^2 (not discounted for the
  // mask); the efficiency counts what a causal kernel runs (half), so the
  // causal op takes fwdFlops / (2 * peak * eff): at 2 x 8 x 1024^2 x 128 x 4
  // + ... FLOPs.
  Cluster c = toyCluster();
  c.attention = {"cudnn", 0.5, 0.4};
  ValueType x{{2, 1024, 1024}, DType::F32};
  auto priced = [&](bool causal) {
    return opCost(c, "attention", {x, x, x}, {x},
                  {{"num_heads", int64_t(8)},
                   {"head_dim", int64_t(128)},
                   {"causal", causal}},
                  {false, false, false}, Precision::BF16);
  };
  const double peak = c.peakFlops(Precision::BF16);
  const OpCost full = priced(false), causal = priced(true);
  ASSERT_GT(full.forward.flops, 0);
  EXPECT_NEAR(full.forward.time, full.forward.flops / (peak * 0.5),
              1e-12 + 1e-9 * full.forward.time);
  EXPECT_NEAR(full.backwardData.time, full.backwardData.flops / (peak * 0.4),
              1e-12 + 1e-9 * full.backwardData.time);
  EXPECT_NEAR(causal.forward.time, full.forward.time / 2,
              1e-12 + 1e-9 * full.forward.time);
  EXPECT_NEAR(causal.backwardData.time, full.backwardData.time / 2,
              1e-12 + 1e-9 * full.backwardData.time);
  // Without the entry: the GEMM estimate, the same for both masks.
  c.attention = {};
  EXPECT_DOUBLE_EQ(priced(true).forward.time, priced(false).forward.time);
}

TEST(OpCost, UnfusedAttentionStreamsTheScores) {
  // Megatron-LM 2021 attention on 1 sample, T = 1024, 8 heads of D = 128:
  // the T x T scores of each head go through HBM several times.
  Cluster c = toyCluster();
  const double T = 1024, H = 8, D = 128;
  ValueType x{{1, 1024, 1024}, DType::F32};
  ops::Attrs attrs = {{"num_heads", int64_t(8)},
                      {"num_kv_heads", int64_t(8)},
                      {"head_dim", int64_t(128)},
                      {"causal", true}};
  KernelOptions unfused{AttentionKernel::Unfused, 0.1};
  OpCost u = opCost(c, "attention", {x, x, x}, {x}, attrs,
                    {false, false, false}, Precision::BF16, unfused);
  OpCost f = opCost(c, "attention", {x, x, x}, {x}, attrs,
                    {false, false, false}, Precision::BF16);
  // Same matmul FLOPs as the fused kernel's forward (4·H·T²·D) plus the
  // softmax (5 per score) and dropout (2 per score) element work.
  const double scores = H * T * T;
  EXPECT_DOUBLE_EQ(u.forward.flops, 4 * H * T * T * D + 7 * scores);
  // Bytes of the T x T matrices in bf16 (S = 2·H·T² bytes): q·kᵀ writes S,
  // softmax reads and writes 2S, dropout reads S and writes S plus a
  // one-byte mask (S/2), P·v reads S: 6.5 S; plus q and k (read by q·kᵀ), v
  // and the output (P·v): 4 tensors of [T, H·D].
  const double S = 2 * scores, act = 2 * T * H * D;
  EXPECT_DOUBLE_EQ(u.forward.bytes, 6.5 * S + 4 * act);
  // Korthikanti et al. 2022 (Table 2): 5·a·s²·b bytes kept for backward —
  // probabilities (2), mask (1), dropout output (2) per score.
  EXPECT_DOUBLE_EQ(u.savedInternal, 5 * scores);
  EXPECT_EQ(f.savedInternal, 0);
  // Streaming the scores makes it slower than the fused kernel, both ways.
  EXPECT_GT(u.forward.time, f.forward.time);
  EXPECT_GT(u.backward(), f.backward());
  // Without dropout: no mask, no dropout kernel; only the probabilities kept.
  OpCost nd =
      opCost(c, "attention", {x, x, x}, {x}, attrs, {false, false, false},
             Precision::BF16, KernelOptions{AttentionKernel::Unfused, 0});
  EXPECT_DOUBLE_EQ(nd.savedInternal, 2 * scores);
  EXPECT_DOUBLE_EQ(nd.forward.bytes, 4 * S + 4 * act);
}

TEST(OpCost, ElementwiseIsMemoryBound) {
  Cluster c = toyCluster();
  ValueType x{{4096, 4096}, DType::F32};
  OpCost cost =
      opCost(c, "gelu", {x}, {x}, {{"approximate", std::string("tanh")}},
             {false}, Precision::BF16);
  // Read x, write y: 2 * 4096^2 * 2 bytes = 67.1 MB at 1 TB/s = 67.1 us.
  double xb = 4096.0 * 4096 * 2;
  EXPECT_FALSE(cost.forward.computeBound);
  EXPECT_NEAR(cost.forward.time, 2 * xb / 1e12, 1e-12);
  // dgrad: re-read x, read dY, write dX: 3 * 33.5 MB = 100.7 us.
  EXPECT_NEAR(cost.backwardData.time, 3 * xb / 1e12, 1e-12);
  EXPECT_EQ(cost.backwardWeight.time, 0);
}

TEST(OpCost, AddBackwardReadsOnlyItsResultsGradient) {
  Cluster c = toyCluster();
  ValueType x{{4096, 4096}, DType::F32};
  OpCost cost = opCost(c, "add", {x, x}, {x}, {}, {false, false},
                       Precision::BF16);
  const double xb = 4096.0 * 4096 * 2;
  EXPECT_NEAR(cost.forward.time, 3 * xb / 1e12, 1e-12);
  // dY read, both operands' gradients written; x and y not read again.
  EXPECT_NEAR(cost.backwardData.time, 3 * xb / 1e12, 1e-12);
}

TEST(OpCost, LayerNormHasAWeightGradient) {
  Cluster c = toyCluster();
  ValueType x{{4096, 1024}, DType::F32}, g{{1024}, DType::F32};
  OpCost cost = opCost(c, "layernorm", {x, g, g}, {x}, {{"epsilon", 1e-5}},
                       {false, true, true}, Precision::BF16);
  // wgrad reads x and dY (2 * 8.4 MB) and writes dgamma, dbeta: ~16.8 us.
  double xb = 4096.0 * 1024 * 2, gb = 1024.0 * 2;
  EXPECT_NEAR(cost.backwardWeight.time, (2 * xb + 2 * gb) / 1e12, 1e-12);
}

TEST(OpCost, ImagePrimitivesTakeTheirKernelsPasses) {
  Cluster c = toyCluster();
  ValueType x{{32, 64, 56, 56}, DType::F32}, g{{64}, DType::F32};
  const double xb = 32.0 * 64 * 56 * 56 * 2, gb = 64.0 * 2;
  // A batch norm reads x for its statistics and again to normalise, and dy
  // and x twice backward; the scale and bias gradients in that first pass.
  OpCost bn = opCost(c, "primitive", {x, g, g}, {x},
                     {{"op_type", std::string("BatchNormalization")}},
                     {false, true, true}, Precision::BF16);
  EXPECT_NEAR(bn.forward.time, (3 * xb + 2 * gb) / 1e12, 1e-12);
  EXPECT_NEAR(bn.backwardData.time, (5 * xb + 4 * gb) / 1e12, 1e-12);
  EXPECT_EQ(bn.backwardWeight.time, 0);
  // A max pool's backward rescans its windows in x beside dy and writes dx.
  ValueType y{{32, 64, 28, 28}, DType::F32};
  const double yb = 32.0 * 64 * 28 * 28 * 2;
  OpCost pool = opCost(c, "primitive", {x}, {y},
                       {{"op_type", std::string("MaxPool")}}, {false},
                       Precision::BF16);
  EXPECT_NEAR(pool.forward.time, (xb + yb) / 1e12, 1e-12);
  EXPECT_NEAR(pool.backwardData.time, (2 * xb + yb) / 1e12, 1e-12);
  // Any other primitive streams its operands and result once.
  OpCost relu = opCost(c, "primitive", {x}, {x},
                       {{"op_type", std::string("Relu")}}, {false},
                       Precision::BF16);
  EXPECT_NEAR(relu.forward.time, 2 * xb / 1e12, 1e-12);
}

TEST(OpCost, ViewsCostNothing) {
  Cluster c = toyCluster();
  ValueType x{{4, 8}, DType::F32}, y{{32}, DType::F32};
  OpCost cost =
      opCost(c, "reshape", {x}, {y}, {{"shape", std::vector<int64_t>{32}}},
             {false}, Precision::BF16);
  EXPECT_EQ(cost.forward.time + cost.backward(), 0);
}

TEST(Calibration, FittedScaleAndOverheadPerLaunch) {
  // op_time_scale multiplies a kind's kernels; op_overhead_us is added per
  // launch as the generated programs make them: forward once, backward once
  // (layernorm) or twice (a linear's dgrad and wgrad); views stay free.
  Cluster plain = toyCluster(), fitted = toyCluster();
  fitted.opTimeScales = {{"layernorm", 1.5, 2.0}};
  fitted.opOverhead = 10e-6;
  ValueType x{{4096, 1024}, DType::F32}, g{{1024}, DType::F32};
  auto ln = [&](const Cluster &c) {
    return opCost(c, "layernorm", {x, g, g}, {x}, {{"epsilon", 1e-5}},
                  {false, true, true}, Precision::BF16);
  };
  OpCost a = ln(plain), b = ln(fitted);
  EXPECT_NEAR(b.forward.time, 1.5 * a.forward.time + 10e-6, 1e-15);
  EXPECT_NEAR(b.backward(), 2.0 * a.backward() + 10e-6, 1e-15);
  std::vector<ValueType> in{{{1280, 1280}, DType::F32},
                            {{1280, 1280}, DType::F32}};
  std::vector<ValueType> out{{{1280, 1280}, DType::F32}};
  auto lin = [&](const Cluster &c) {
    return opCost(c, "linear", in, out, {{"transpose_weight", false}},
                  {false, true}, Precision::BF16);
  };
  OpCost l0 = lin(plain), l1 = lin(fitted); // linear: no scale, 3 launches
  EXPECT_NEAR(l1.forward.time, l0.forward.time + 10e-6, 1e-15);
  EXPECT_NEAR(l1.backward(), l0.backward() + 20e-6, 1e-15);
  // A step run as one CUDA graph pays graph_op_overhead_us a launch instead,
  // where the cluster has one.
  KernelOptions graphed;
  graphed.stepGraph = true;
  auto linGraphed = [&](const Cluster &c) {
    return opCost(c, "linear", in, out, {{"transpose_weight", false}},
                  {false, true}, Precision::BF16, graphed);
  };
  EXPECT_NEAR(linGraphed(fitted).forward.time, l1.forward.time, 1e-15);
  fitted.graphOpOverhead = 2e-6;
  EXPECT_NEAR(linGraphed(fitted).forward.time, l0.forward.time + 2e-6, 1e-15);
  EXPECT_NEAR(linGraphed(fitted).backward(), l0.backward() + 4e-6, 1e-15);
  ValueType y{{4096 * 1024}, DType::F32};
  EXPECT_EQ(opCost(fitted, "reshape", {x}, {y},
                   {{"shape", std::vector<int64_t>{4096 * 1024}}}, {false},
                   Precision::BF16)
                .forward.time,
            0);
}

TEST(Calibration, MeasuredGemmReplacesTheEstimate) {
  Cluster c = toyCluster();
  c.calibration.push_back(
      {"gemm", Precision::BF16, {1280, 1280, 1280}, 20e-6, 0});
  std::vector<ValueType> in{{{1280, 1280}, DType::F32},
                            {{1280, 1280}, DType::F32}};
  std::vector<ValueType> out{{{1280, 1280}, DType::F32}};
  OpCost cost = opCost(c, "linear", in, out, {{"transpose_weight", false}},
                       {false, true}, Precision::BF16);
  // The table's 20 us for this shape, forward and both backward GEMMs (same
  // shape).
  EXPECT_DOUBLE_EQ(cost.forward.time, 20e-6);
  EXPECT_TRUE(cost.forward.calibrated);
  EXPECT_DOUBLE_EQ(cost.backwardData.time, 20e-6);
  // Another precision is not matched.
  OpCost fp32 = opCost(c, "linear", in, out, {{"transpose_weight", false}},
                       {false, true}, Precision::FP32);
  EXPECT_FALSE(fp32.forward.calibrated);
  // An efficiency entry: 4.19 GFLOP at 400 TFLOP/s * 0.5 = 21 us.
  c.calibration = {{"linear", Precision::BF16, {1280, 1280, 1280}, 0, 0.5}};
  OpCost eff = opCost(c, "linear", in, out, {{"transpose_weight", false}},
                      {false, true}, Precision::BF16);
  EXPECT_NEAR(eff.forward.time, 2.0 * 1280 * 1280 * 1280 / (400e12 * 0.5),
              1e-12);
}

TEST(SparseRates, MeasuredTableReplacesTheRoofline) {
  Cluster c = toyCluster();
  const int64_t nnz = 1 << 20;
  std::vector<ValueType> in{{{4096, 4096}, DType::F32},
                            {{4096, 48}, DType::F32}};
  std::vector<ValueType> out{{{4096, 48}, DType::F32}};
  ops::Attrs attrs{{"nnz", nnz}};
  OpCost roof =
      opCost(c, "spmm", in, out, attrs, {false, false}, Precision::BF16);
  EXPECT_FALSE(roof.forward.calibrated);
  // fp16 measured at 1 and 2 TFLOP/s for N = 32 and 64: bf16 (its twin) at
  // N = 48 runs at 1.5 TFLOP/s, forward and the transposed product alike.
  c.sparseRates.push_back({"spmm", Precision::FP16, {{32, 1e12}, {64, 2e12}}});
  OpCost cost =
      opCost(c, "spmm", in, out, attrs, {false, false}, Precision::BF16);
  const double flops = 2.0 * nnz * 48;
  EXPECT_TRUE(cost.forward.calibrated);
  EXPECT_NEAR(cost.forward.time, flops / 1.5e12, 1e-15);
  EXPECT_NEAR(cost.backwardData.time, flops / 1.5e12, 1e-15);
  // Outside the measured widths: the nearest width's rate.
  EXPECT_DOUBLE_EQ(sparseFlopRate(c, "spmm", Precision::FP16, 8), 1e12);
  EXPECT_DOUBLE_EQ(sparseFlopRate(c, "spmm", Precision::FP16, 512), 2e12);
  // No fp32 or sddmm entry: those stay on the roofline.
  EXPECT_EQ(sparseFlopRate(c, "spmm", Precision::FP32, 48), 0);
  EXPECT_FALSE(opCost(c, "sddmm", {in[0], in[1], in[1]}, {in[0]}, attrs,
                      {false, false, false}, Precision::BF16)
                   .forward.calibrated);
  // A tiny graph is floored at the launch time.
  ops::Attrs tiny{{"nnz", int64_t{10}}};
  EXPECT_DOUBLE_EQ(
      opCost(c, "spmm", in, out, tiny, {false, false}, Precision::BF16)
          .forward.time,
      c.kernelLaunch);
}

TEST(SparseRates, GatheredRowsBeyondTheL2AreRead) {
  // No measured rates: the roofline. spmm of a 1e6-node graph with 1e8
  // entries at width 256 (bf16 X of 512 MB): without an L2 size, X is read
  // once: 1e8 * (2 + 4) + 512e6 + 512e6 (Y) = 1.624 GB, 1.624 ms at 1 TB/s.
  Cluster c = toyCluster();
  const int64_t nnz = 100'000'000;
  std::vector<ValueType> in{{{1'000'000, 1'000'000}, DType::F32},
                            {{1'000'000, 256}, DType::F32}};
  std::vector<ValueType> out{{{1'000'000, 256}, DType::F32}};
  ops::Attrs attrs{{"nnz", nnz}};
  auto cost = [&] {
    return opCost(c, "spmm", in, out, attrs, {false, false}, Precision::BF16);
  };
  EXPECT_NEAR(cost().forward.time, 1.624e-3, 1e-12);
  // A 64 MB L2 holds 1/8 of X: 7/8 of the entries' 512-byte row reads miss,
  // 1e8 * 512 * 0.875 = 44.8 GB: 0.6 + 44.8 + 0.512 GB = 45.912 ms, forward
  // and the transposed product (gathering dY) alike.
  c.l2Bytes = 64e6;
  EXPECT_NEAR(cost().forward.time, 45.912e-3, 1e-12);
  EXPECT_NEAR(cost().backwardData.time, 45.912e-3, 1e-12);
  // An X the L2 holds (width 16: 32 MB) is read once, as without an L2.
  in[1].shape = out[0].shape = {1'000'000, 16};
  const double once = (6e8 + 2 * 32e6) / 1e12;
  EXPECT_NEAR(cost().forward.time, once, 1e-12);
}

TEST(Optimizer, AdamWStepIsMemoryBound) {
  Cluster c = toyCluster();
  // AdamW, mixed precision: read p, g, m, v, write p, m, v (7 x 4 bytes) + the
  // bf16 copy (2) = 30 bytes per parameter; 1e9 parameters at 1 TB/s = 30 ms.
  KernelCost k = optimizerStep(c, 1e9, Optimizer::AdamW, true);
  EXPECT_NEAR(k.time, 30e-3, 1e-12);
  // SGD in fp32: read p, g, write p = 12 bytes: 12 ms.
  EXPECT_NEAR(optimizerStep(c, 1e9, Optimizer::SGD, false).time, 12e-3, 1e-12);
}

TEST(SparseRates, PricedAtTheDecidersVariant) {
  // Without a graph model's plan (no KernelOptions::adjacencyKnown) the
  // graph is taken as power-law (SpmmDecider.h's powerLawFeatures: skew
  // 40.6, window fill 1): the decider sends spmm to all-tc at every width
  // and sddmm to hybrid (fill <= 1.27).
  Cluster c = toyCluster();
  const int64_t nnz = 1 << 20;
  const std::vector<int64_t> adj{4096, 4096};
  for (Precision p : {Precision::BF16, Precision::FP32}) {
    EXPECT_EQ(sparseVariant(false, adj, nnz, 48, p),
              sparse::SpmmVariant::TensorCore);
    EXPECT_EQ(sparseVariant(true, adj, nnz, 32, p),
              sparse::SpmmVariant::Hybrid);
  }
  std::vector<ValueType> in{{adj, DType::F32}, {{4096, 48}, DType::F32}};
  std::vector<ValueType> out{{{4096, 48}, DType::F32}};
  ops::Attrs attrs{{"nnz", nnz}};
  auto at = [](double rate) -> std::vector<std::pair<double, double>> {
    return {{32, rate}, {64, rate}};
  };
  c.sparseRates.push_back({"spmm", Precision::FP16, at(1e12)});
  c.sparseRates.push_back({"spmm.hybrid", Precision::FP16, at(2e12)});
  c.sparseRates.push_back({"spmm.all-tc", Precision::FP16, at(3e12)});
  c.sparseRates.push_back({"sddmm.hybrid", Precision::FP16, at(4e12)});
  c.sparseRates.push_back({"sddmm.all-tc", Precision::FP16, at(5e12)});
  const double flops = 2.0 * nnz * 48;
  OpCost spmm =
      opCost(c, "spmm", in, out, attrs, {false, false}, Precision::BF16);
  EXPECT_NEAR(spmm.forward.time, flops / 3e12, 1e-15);      // all-tc
  EXPECT_NEAR(spmm.backwardData.time, flops / 3e12, 1e-15); // Aᵀ·dY
  OpCost sddmm = opCost(c, "sddmm", {in[0], in[1], in[1]}, {in[0]}, attrs,
                        {false, false, false}, Precision::BF16);
  EXPECT_NEAR(sddmm.forward.time, flops / 4e12, 1e-15); // hybrid
  // Its two backward products are spmm: the spmm variant's rate.
  EXPECT_NEAR(sddmm.backwardData.time, 2 * flops / 3e12, 1e-15);
  // The plan knows the formats' variants (the decider's picks on the
  // generated graph, planner/AdjacencyMemory.h): A hybrid, A^T all-tc. spmm
  // runs at hybrid's rate, its backward (A^T dY) at all-tc's; sddmm on A at
  // sddmm.hybrid's, its backward products at spmm.hybrid's.
  KernelOptions known;
  known.adjacencyKnown = true;
  known.adjacencyA = sparse::SpmmVariant::Hybrid;
  known.adjacencyAT = sparse::SpmmVariant::TensorCore;
  spmm = opCost(c, "spmm", in, out, attrs, {false, false}, Precision::BF16,
                known);
  EXPECT_NEAR(spmm.forward.time, flops / 2e12, 1e-15);
  EXPECT_NEAR(spmm.backwardData.time, flops / 3e12, 1e-15);
  sddmm = opCost(c, "sddmm", {in[0], in[1], in[1]}, {in[0]}, attrs,
                 {false, false, false}, Precision::BF16, known);
  EXPECT_NEAR(sddmm.forward.time, flops / 4e12, 1e-15);
  EXPECT_NEAR(sddmm.backwardData.time, 2 * flops / 2e12, 1e-15);
  // A table without the variants: the faster variant's rates ("spmm").
  Cluster plain = toyCluster();
  plain.sparseRates.push_back({"spmm", Precision::FP16, at(1e12)});
  EXPECT_NEAR(
      opCost(plain, "spmm", in, out, attrs, {false, false}, Precision::BF16)
          .forward.time,
      flops / 1e12, 1e-15);
}

} // namespace
} // namespace autoddl::cost
