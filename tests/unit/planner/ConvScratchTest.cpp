//===- ConvScratchTest.cpp - the convolution scratch, run and priced ------===//
//
// backends/common/ConvScratch.h: the bytes the CUDA runtime's cuDNN
// convolutions take in their grow-only scratch (ConvCudnn.cu) and the
// planner prices as an op's workspace (Pricing.cpp convScratch).
//
//===----------------------------------------------------------------------===//
#include "backends/common/ConvScratch.h"
#include "cost_model/Memory.h"
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/Search.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace autoddl;
using rt::Conv2dShape;
using rt::ConvDirection;

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;

// ResNet-50's layer1 3x3 convolution at batch 256, channels-last: x and y
// 256·64·56·56 bf16 = 102,760,448 bytes each (the cap, above the 32 MiB
// floor); the KRSC copy 64·64·9·2 = 73,728; dw 36,864 fp32 = 147,456.
TEST(ConvScratch, ResNet50Layer1Conv) {
  const Conv2dShape s{256, 64, 56, 56, 64, 3, 3, 1, 1, true};
  const int64_t act = 102760448;
  EXPECT_EQ(rt::convWorkspaceCap(s), act);
  EXPECT_EQ(rt::convScratchBound(s, ConvDirection::Forward), 73728 + act);
  EXPECT_EQ(rt::convScratchBound(s, ConvDirection::DataGrad),
            73728 + act + act);
  EXPECT_EQ(rt::convScratchBound(s, ConvDirection::FilterGrad), 147456 + act);
  EXPECT_EQ(rt::convScratchBound(s, true), 73728 + 2 * act);
  EXPECT_EQ(rt::convScratchBound(s, false), 147456 + act);
  // NCHW reads the OIHW filter as it is: no copy.
  Conv2dShape nchw = s;
  nchw.channelsLast = false;
  EXPECT_EQ(rt::convScratchBound(nchw, ConvDirection::Forward), act);
}

// The stem, 7x7 stride 2 from 3 channels: y 256·64·112·112 bf16 =
// 411,041,792 bytes is the cap; the copy 64·3·49·2 = 18,816 rounds up to
// 18,944 (74 × 256).
TEST(ConvScratch, ResNet50Stem) {
  const Conv2dShape s{256, 3, 224, 224, 64, 7, 7, 2, 3, true};
  EXPECT_EQ(s.Ho(), 112);
  const int64_t cap = 411041792;
  EXPECT_EQ(rt::convWorkspaceCap(s), cap);
  const rt::ConvScratchParts p =
      rt::convScratchParts(s, ConvDirection::Forward, 0, 1000);
  EXPECT_EQ(p.copy, 18944);
  EXPECT_EQ(p.output, 0);
  EXPECT_EQ(p.total(), 18944 + 1000);
  // The weight gradient of 9,408 values in fp32 (37,632 bytes) beats the
  // forward's copy.
  EXPECT_EQ(rt::convScratchBound(s, false), 37632 + cap);
}

// 1x1 filters and small tensors: no copy, the 32 MiB floor; scratch
// outputs rounded up to 256 bytes.
TEST(ConvScratch, SmallAndOneByOne) {
  const Conv2dShape s{2, 8, 4, 4, 16, 1, 1, 1, 0, true};
  EXPECT_FALSE(rt::convFilterCopied(s));
  EXPECT_EQ(rt::convWorkspaceCap(s), 32 * kMiB);
  // dx: 2·8·4·4 = 256 bf16 values, 512 bytes.
  EXPECT_EQ(rt::convScratchParts(s, ConvDirection::DataGrad, 2, 0).output, 512);
  // dw: 128 values in bf16, 256 bytes; in fp32 512.
  EXPECT_EQ(rt::convScratchParts(s, ConvDirection::FilterGrad, 2, 0).output,
            256);
  EXPECT_EQ(rt::convScratchBound(s, ConvDirection::FilterGrad),
            512 + 32 * kMiB);
  // One input channel: the KRSC filter is the OIHW one.
  EXPECT_FALSE(rt::convFilterCopied({2, 1, 4, 4, 16, 3, 3, 1, 1, true}));
}

// tiny-vgg (conv 3->16 at 32x32 on the images, pool, conv 16->32 at 16x16)
// planned on one H100 at micro-batch 4096: the plan's workspace is
// cuBLASLt's 32 MiB plus the largest convolution's scratch, the first
// conv's weight gradient: y 4096·16·32·32 bf16 = 134,217,728 bytes (its
// cap), dw 432 fp32 rounded to 1,792. Its data gradient would be larger
// (x 25 MB more), but its input is the images: the program runs none.
TEST(ConvScratchPlan, LargestConvIsTheWorkspace) {
  const int64_t b = 4096;
  import::ImportOptions io;
  io.batch = 1;
  const ModelGraph g1 = import::importModel("tiny-vgg", io);
  io.batch = 2;
  const ModelGraph g2 = import::importModel("tiny-vgg", io);
  io.batch = b;
  const ModelGraph gb = import::importModel("tiny-vgg", io);
  int64_t largest = 0, convs = 0;
  for (const OpDef &op : gb.ops) {
    if (op.kind != "conv2d")
      continue;
    ++convs;
    const ops::Shape &x = gb.tensors[size_t(op.operands[0])].shape;
    const ops::Shape &w = gb.tensors[size_t(op.operands[1])].shape;
    const Conv2dShape s{x[0],
                        x[1],
                        x[2],
                        x[3],
                        w[0],
                        w[2],
                        w[3],
                        ops::attrOr(op.attrs, ops::attr::kStride, 1),
                        ops::attrOr(op.attrs, ops::attr::kPadding, 0),
                        true};
    const bool dataGrad =
        gb.tensors[size_t(op.operands[0])].role != TensorRole::Input;
    largest = std::max(largest, rt::convScratchBound(s, dataGrad));
  }
  ASSERT_EQ(convs, 2);
  EXPECT_EQ(largest, 134217728 + 1792);

  cost::Cluster c = cost::loadCluster("dgx-h100-ndr");
  c.gpusPerNode = 1;
  c = cost::withNodes(c, 1);
  planner::PlannerOptions o;
  o.globalBatch = b;
  o.fixed.microbatch = b;
  o.explain = false;
  auto r = planner::plan(g1, g2, c, o);
  ASSERT_TRUE(static_cast<bool>(r)) << r.error();
  const planner::Plan *p = std::get_if<planner::Plan>(&*r);
  ASSERT_NE(p, nullptr);
  const cost::RankMemory &m = p->devices[0].memoryParts;
  EXPECT_DOUBLE_EQ(m.workspace,
                   double(largest) + cost::kCublasLtWorkspaceBytes);
  // The peak the program's wrapper counts (peak_memory_bytes) holds it.
  EXPECT_DOUBLE_EQ(p->predicted.peakAllocated, m.allocated());
  EXPECT_GE(p->predicted.peakAllocated,
            m.state.total() + m.activations + double(largest));
}

} // namespace
