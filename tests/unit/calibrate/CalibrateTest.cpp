//===- CalibrateTest.cpp - the calibration probe's host half and emission -===//
//
// What runs without a GPU: the alpha-beta fit, the GEMM shape list against the
// cost model's lookup keys, the cluster writer against the cluster reader (on
// fixture measurements shaped like the probe's), the shapes-file reader and
// the emitted project.
//
//===----------------------------------------------------------------------===//
#include "driver/Calibrate.h"
#include "backends/cuda/calibrate/probe/ClusterWriter.h"
#include "cost_model/Compute.h"
#include "cost_model/io/ClusterJson.h"
#include "support/UserError.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using autoddl::cost::Cluster;
using autoddl::cost::Precision;

// t = a + S / B with B in GB/s, a in us, on sizes 1 KiB .. 1 GiB (x4), as the
// probe measures them.
std::vector<calib::SizeTime> series(double aUs, double algbwGBps) {
  std::vector<calib::SizeTime> v;
  for (double b = 1024; b <= double(1 << 30); b *= 4)
    v.push_back({b, aUs + b / (algbwGBps * 1e3)});
  return v;
}

// A probe result shaped like one node of `gpus` H200s.
calib::Measurements fixture(const std::string &gpu, int nodes, int gpus) {
  calib::Measurements m;
  m.name = "fixture";
  m.date = "2026-11-29";
  m.probe = "fixture";
  m.gpuModel = gpu;
  m.nodes = nodes;
  m.gpusPerNode = gpus;
  m.smCount = 132;
  m.memoryBytes = 150.1e9;
  m.l2Bytes = 52428800; // 50 MiB
  m.copyGBps = 3943;
  m.launchUs = 4.77;
  m.bf16Tflops = 713.9;
  m.tf32Tflops = 404.9;
  m.fp32Tflops = 50.8;
  for (const calib::GemmShape &s : calib::defaultGemmShapes()) {
    calib::GemmResult r;
    r.shape = s;
    r.timeUs = 2.0 * s.m * s.n * s.k / 600e12 * 1e6; // 600 TFLOP/s
    m.gemms.push_back(r);
  }
  // Per link: all_reduce and all_gather latencies (us) at one algbw, then
  // send_recv's latency and bandwidth.
  auto link = [](int ranks, double reduceUs, double gatherUs, double GBps,
                 double sendUs, double sendGBps) {
    calib::GroupSeries g;
    g.ranks = ranks;
    g.allReduce = series(reduceUs, GBps);
    g.allGather = series(gatherUs, GBps);
    g.sendRecv = series(sendUs, sendGBps);
    return g;
  };
  m.hasIntra = gpus > 1;
  if (m.hasIntra)
    m.intra = link(gpus, 14.0, 13.0, 292.0, 13.0, 377.0);
  m.hasInter = nodes > 1;
  if (m.hasInter)
    m.inter = link(nodes, 20.0, 17.0, 40.0, 16.0, 45.0);
  return m;
}

Cluster load(const std::string &text) {
  return autoddl::cost::clusterFromJson(nlohmann::json::parse(text),
                                        "fixture.json");
}

TEST(CalibrateFit, RecoversAlphaAndBandwidth) {
  // Exact data t = 10 us + S / (300 GB/s): the weighted fit returns both.
  calib::Fit f = calib::fitAlphaBeta(series(10.0, 300.0));
  EXPECT_NEAR(f.fixedUs, 10.0, 1e-6);
  EXPECT_NEAR(f.algbwGBps(), 300.0, 1e-6);
  EXPECT_LT(f.maxRelError, 1e-9);
  // One size cannot give two unknowns.
  EXPECT_EQ(calib::fitAlphaBeta({{1024, 5}}).usPerByte, 0.0);
}

TEST(CalibrateFit, LinkFieldsFollowTheRingModel) {
  // 4 ranks: a_AR = c + 6 alpha = 14, a_AG = c + 3 alpha = 13 (docs/cost-model
  // §2.3) give alpha = 1/3 us and c = 12 us; bus bandwidth = algbw * 2(n-1)/n =
  // 292 * 1.5 = 438 GB/s.
  calib::GroupSeries g;
  g.ranks = 4;
  g.allReduce = series(14.0, 292.0);
  g.allGather = series(13.0, 292.0);
  g.sendRecv = series(13.0, 377.0);
  calib::LinkFit l = calib::fitLink(g);
  EXPECT_NEAR(l.latencyUs, 1.0 / 3.0, 1e-6);
  EXPECT_NEAR(l.overheadUs, 12.0, 1e-6);
  EXPECT_NEAR(l.busbwGBps, 438.0, 1e-6);
  EXPECT_NEAR(l.p2pGBps, 377.0, 1e-6);
}

TEST(CalibrateWriter, H200PairLoadsWithDatasheetPeaksAndMeasuredFractions) {
  Cluster c = load(calib::clusterJson(fixture("NVIDIA H200", 1, 2)));
  EXPECT_EQ(c.name, "fixture");
  EXPECT_EQ(c.gpusPerNode, 2);
  EXPECT_EQ(c.smCount, 132);
  // H200 datasheet: 989.5 TFLOP/s bf16 dense, 4.8 TB/s; the fractions are the
  // measured 713.9 / 989.5 and 3943 / 4800, written to 3 decimals.
  EXPECT_DOUBLE_EQ(c.peakFlops(Precision::BF16), 989.5e12);
  EXPECT_DOUBLE_EQ(c.hbmBandwidth, 4800e9);
  EXPECT_NEAR(c.gemmEfficiency, 713.9 / 989.5, 1e-3);
  EXPECT_NEAR(c.hbmEfficiency, 3943.0 / 4800.0, 1e-3);
  EXPECT_NEAR(c.kernelLaunch, 4.77e-6, 1e-9);
  EXPECT_NEAR(c.l2Bytes, 52.4e6, 1e-9); // the device's L2, to 0.1 MB
  // 2 ranks: alpha = a_AR - a_AG = 1 us, c = 13 - 1 = 12 us; busbw = algbw *
  // 2(n-1)/n = 292 GB/s.
  EXPECT_NEAR(c.intraNode.latency, 1e-6, 1e-8);
  EXPECT_NEAR(c.collectiveOverhead, 12e-6, 1e-8);
  EXPECT_NEAR(c.intraNode.bandwidth, 292e9, 0.1e9);
  EXPECT_NEAR(c.intraNode.pointToPoint(), 377e9, 0.1e9);
  EXPECT_EQ(c.calibration.size(), calib::defaultGemmShapes().size());
}

TEST(CalibrateWriter, UnknownGpuUsesTheMeasuredRatesAsPeaks) {
  Cluster c = load(calib::clusterJson(fixture("Mystery GPU", 1, 1)));
  // No datasheet: the measured 8192^3 rates are the peaks, efficiency 1.
  EXPECT_NEAR(c.peakFlops(Precision::BF16), 713.9e12, 1e9);
  EXPECT_NEAR(c.peakFlops(Precision::FP32), 50.8e12, 1e9);
  EXPECT_DOUBLE_EQ(c.gemmEfficiency, 1.0);
  EXPECT_NEAR(c.hbmBandwidth * c.hbmEfficiency, 3943e9, 1e9);
  EXPECT_EQ(c.gpusPerNode, 1);
}

TEST(CalibrateWriter, SeveralNodesGetAMeasuredNetwork) {
  Cluster c = load(calib::clusterJson(fixture("NVIDIA H200", 2, 8)));
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.nicsPerNode, 8); // assumed one NIC per GPU
  // 2 nodes: busbw = 40 GB/s algbw * 2(2-1)/2; alpha = 20 - 17 = 3 us.
  EXPECT_NEAR(c.interNode.bandwidth, 40e9, 0.1e9);
  EXPECT_NEAR(c.interNode.latency, 3e-6, 1e-8);
}

TEST(CalibrateWriter, RawOutputIsJson) {
  auto raw =
      nlohmann::json::parse(calib::rawJson(fixture("NVIDIA H200", 2, 2)));
  EXPECT_EQ(raw["gemm_bf16"].size(), calib::defaultGemmShapes().size());
  EXPECT_EQ(raw["collectives"]["intra_node"]["all_reduce"]["points"].size(),
            series(1, 1).size());
  EXPECT_TRUE(raw["collectives"].contains("inter_node"));
}

TEST(CalibrateShapes, CoverEveryGemmOfGpt2LinearsAsTheCostModelKeysThem) {
  // A measured table only helps where the cost model looks it up: price each
  // GPT-2 linear (every size, 4096/8192/16384 tokens, tp 1 and 2) on the
  // fixture cluster and require forward, dgrad and wgrad all calibrated.
  Cluster c = load(calib::clusterJson(fixture("NVIDIA H200", 1, 1)));
  namespace ops = autoddl::ops;
  int priced = 0;
  for (int64_t ch : {768, 1024, 1280, 1600})
    for (int64_t tokens : {4096, 8192, 16384})
      for (int64_t tp : {1, 2}) {
        const int64_t linears[][2] = {{ch, 3 * ch / tp},
                                      {ch / tp, ch},
                                      {ch, 4 * ch / tp},
                                      {4 * ch / tp, ch},
                                      {ch, (50257 + tp - 1) / tp}};
        for (const auto &l : linears) {
          ops::ValueType x{{tokens, l[0]}, ops::DType::BF16};
          ops::ValueType w{{l[1], l[0]}, ops::DType::BF16}; // [N, K]
          ops::ValueType y{{tokens, l[1]}, ops::DType::BF16};
          auto cost = autoddl::cost::opCost(c, "linear", {x, w}, {y}, {},
                                            {false, true}, Precision::BF16);
          EXPECT_TRUE(cost.forward.calibrated) << tokens << "x" << l[0];
          EXPECT_TRUE(cost.backwardData.calibrated) << tokens << "x" << l[0];
          EXPECT_TRUE(cost.backwardWeight.calibrated) << tokens << "x" << l[0];
          ++priced;
        }
      }
  EXPECT_EQ(priced, 4 * 3 * 2 * 5);
}

class CalibrateFiles : public ::testing::Test {
protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() /
           ("autoddl-calibrate-test-" + std::to_string(::getpid())))
              .string();
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string &name, const std::string &text) {
    std::string p = dir + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string dir;
};

TEST_F(CalibrateFiles, ShapesFileReadsAndNamesTheBadLine) {
  std::vector<calib::GemmShape> shapes;
  std::string err;
  ASSERT_TRUE(calib::readShapesFile(
      write("ok.txt", "# M N K\n8192 8192 8192\n\n16384 768 3072 # fc\n"),
      shapes, err))
      << err;
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[1].k, 3072);
  shapes.clear();
  std::string bad = write("bad.txt", "1 2 3\n4 5\n");
  EXPECT_FALSE(calib::readShapesFile(bad, shapes, err));
  EXPECT_EQ(err, bad + ":2: expected three positive integers M N K");
  EXPECT_FALSE(
      calib::readShapesFile(write("neg.txt", "1 -2 3\n"), shapes, err));
  EXPECT_FALSE(
      calib::readShapesFile(write("four.txt", "1 2 3 4\n"), shapes, err));
  EXPECT_FALSE(calib::readShapesFile(dir + "/missing.txt", shapes, err));
}

TEST_F(CalibrateFiles, EmittedProbeIsTheSourceTree) {
  // The embedded copy must be today's probe/, byte for byte.
  std::string out = dir + "/probe";
  autoddl::calibrate::emitProbe(out);
  for (const char *f : {"CMakeLists.txt", "calibrate.cu", "ClusterWriter.h",
                        "ClusterWriter.cpp"}) {
    std::ifstream a(out + "/" + f),
        b(std::string("backends/cuda/calibrate/probe/") + f);
    ASSERT_TRUE(a && b) << f;
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    EXPECT_EQ(sa.str(), sb.str()) << f;
  }
  // Emitting again over it is allowed; over a foreign non-empty folder not.
  EXPECT_NO_THROW(autoddl::calibrate::emitProbe(out));
  fs::create_directories(dir + "/other");
  write("other/keep.txt", "user file");
  EXPECT_THROW(autoddl::calibrate::emitProbe(dir + "/other"),
               autoddl::UserError);
}

TEST_F(CalibrateFiles, BadOptionsFailBeforeAnyBuildAndLeaveTheOutputAlone) {
  std::string out = write("cluster.json", "user's file");
  autoddl::calibrate::Options o;
  o.output = dir; // a directory
  EXPECT_THROW(autoddl::calibrate::run(o), autoddl::UserError);
  o.output = dir + "/no-such-folder/c.json";
  EXPECT_THROW(autoddl::calibrate::run(o), autoddl::UserError);
  o.output = out;
  o.shapes = write("s.txt", "1 2\n");
  try {
    autoddl::calibrate::run(o);
    FAIL() << "expected a UserError";
  } catch (const autoddl::UserError &e) {
    EXPECT_NE(std::string(e.what()).find("s.txt:1:"), std::string::npos)
        << e.what();
  }
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "user's file");
}

TEST(CalibrateGpu, WithoutAGpuItSaysSo) {
  if (autoddl::calibrate::localGpuCount() > 0)
    GTEST_SKIP() << "this machine has a GPU";
  autoddl::calibrate::Options o;
  o.output =
      (fs::temp_directory_path() / "autoddl-calibrate-nogpu.json").string();
  try {
    autoddl::calibrate::run(o);
    FAIL() << "expected a UserError";
  } catch (const autoddl::UserError &e) {
    EXPECT_NE(std::string(e.what()).find("no NVIDIA GPU"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(o.output));
}

} // namespace
