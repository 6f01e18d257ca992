//===- ClusterJsonTest.cpp - cluster files, presets, bad input ------------===//
#include "cost_model/io/ClusterJson.h"
#include "cost_model/Collectives.h"
#include "cost_model/Compute.h"
#include "support/JsonFile.h"
#include "support/UserError.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace autoddl::cost {
namespace {

using json = nlohmann::json;

class ClusterJsonTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/autoddl-cluster-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    ::unsetenv("AUTODDL_PRESETS_DIR");
  }
  void TearDown() override {
    std::system(("rm -rf " + dir).c_str());
    ::unsetenv("AUTODDL_PRESETS_DIR");
  }
  std::string write(const std::string &name, const std::string &text) {
    std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The h200x2 preset as a document to break one field at a time.
  json preset() {
    return readJsonFile(presetsDir() + "/h200x2-nvlink.json", "cluster");
  }
  // The message readClusterFile gives for `doc`, or "" if it loads.
  std::string errorOf(const json &doc) {
    std::string path = write("c.json", doc.dump(2));
    try {
      readClusterFile(path);
    } catch (const UserError &e) {
      return e.what();
    }
    return "";
  }
  std::string dir;
};

TEST_F(ClusterJsonTest, EveryPresetLoads) {
  std::vector<std::string> names = presetNames();
  for (const char *want : {"dgx-a100-hdr", "dgx-h100-ndr", "dgx-h200-ndr",
                           "h200x2-nvlink", "piz-daint-p100"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const std::string &n : names) {
    Cluster c = loadCluster(n);
    EXPECT_EQ(c.name, n);
    EXPECT_EQ(validateCluster(c), "") << n;
  }
}

TEST_F(ClusterJsonTest, PresetFiguresAreTheDatasheets) {
  Cluster a100 = loadCluster("dgx-a100-hdr");
  // A100 datasheet: 312 TFLOP/s bf16 dense, 80 GB, 2039 GB/s; DGX A100: 8 GPUs
  // and 8 HDR NICs of 200 Gb/s = 25 GB/s.
  EXPECT_DOUBLE_EQ(a100.peakFlops(Precision::BF16), 312e12);
  EXPECT_DOUBLE_EQ(a100.hbmBytes, 80e9);
  EXPECT_DOUBLE_EQ(a100.hbmBandwidth, 2039e9);
  EXPECT_EQ(a100.gpusPerNode, 8);
  EXPECT_EQ(a100.nicsPerNode, 8);
  EXPECT_DOUBLE_EQ(a100.interNode.bandwidth, 25e9);
  // H200 datasheet: 141 GB at 4.8 TB/s.
  Cluster h200 = loadCluster("dgx-h200-ndr");
  EXPECT_DOUBLE_EQ(h200.hbmBytes, 141e9);
  EXPECT_DOUBLE_EQ(h200.hbmBandwidth, 4800e9);
  // P100 has no bf16: it runs at the fp32 peak, 9.3 TFLOP/s.
  Cluster p100 = loadCluster("piz-daint-p100");
  EXPECT_DOUBLE_EQ(p100.peakFlops(Precision::BF16), 9.3e12);
  EXPECT_EQ(p100.gpusPerNode, 1);
}

TEST_F(ClusterJsonTest, H200PairMatchesItsMeasurement) {
  // bench/results/nccl/2026-11-29-h200x2/nccl_h200x2.json: all_reduce of 256
  // MiB took 900.5 us (busbw 298 GB/s) and of 1 KiB 13.2 us. The preset (fit
  // over all sizes) must land within 10% of both.
  Cluster c = loadCluster("h200x2-nvlink");
  double big =
      collectiveCost(c, Collective::AllReduce, 268435456, {2, 1}).best.time;
  double tiny =
      collectiveCost(c, Collective::AllReduce, 1024, {2, 1}).best.time;
  EXPECT_NEAR(big, 900.5e-6, 90e-6);
  EXPECT_NEAR(tiny, 13.2e-6, 1.4e-6);
}

TEST_F(ClusterJsonTest, H200PresetsCarryTheSparseBenchmark) {
  // bench/results/spmm/2026-12-01-suite/sparse_h200.json, median over its
  // graphs (bench/spmm/sparse_table.py): spmm fp16 at N = 128 is 3991.3
  // GFLOP/s.
  for (const char *name :
       {"h200x2-nvlink", "dgx-h200-ndr", "h200-calibrated", "h200-fitted"}) {
    Cluster c = loadCluster(name);
    EXPECT_DOUBLE_EQ(sparseFlopRate(c, "spmm", Precision::FP16, 128), 3991.3e9)
        << name;
    EXPECT_GT(sparseFlopRate(c, "sddmm", Precision::FP32, 64), 0) << name;
  }
  EXPECT_EQ(
      sparseFlopRate(loadCluster("dgx-h100-ndr"), "spmm", Precision::FP16, 128),
      0); // no table: the roofline
  // Widths must ascend, rates be positive, and the table cite its source.
  json doc = preset();
  doc["gpu"]["sparse_gflops"] = {{"spmm", {{"fp16", {{64, 2.0}, {32, 1.0}}}}},
                                 {"source", "test"}};
  EXPECT_NE(errorOf(doc).find("ascending"), std::string::npos) << errorOf(doc);
  doc["gpu"]["sparse_gflops"] = {{"spmm", {{"fp16", {{32, -1.0}}}}},
                                 {"source", "test"}};
  EXPECT_NE(errorOf(doc).find("/gpu/sparse_gflops/spmm/fp16/0"),
            std::string::npos)
      << errorOf(doc);
  doc["gpu"]["sparse_gflops"] = {{"spmm", {{"fp17", {{32, 1.0}}}}},
                                 {"source", "test"}};
  EXPECT_NE(errorOf(doc).find("fp17"), std::string::npos) << errorOf(doc);
  doc["gpu"]["sparse_gflops"] = {{"spmm", {{"fp16", {{32, 1.0}}}}}};
  EXPECT_NE(errorOf(doc).find("source"), std::string::npos) << errorOf(doc);
}

// gpu.kfac_time_scale (bench/pipefisher/utilisation_cpu.py fit): kept as the
// op time scales of kinds "kfac:<item>"; each key optional, factors in
// (0, 100], a source required, no other key.
TEST_F(ClusterJsonTest, KfacTimeScales) {
  json doc = preset();
  doc["gpu"]["kfac_time_scale"] = {{"curvature", 0.25},
                                   {"inversion", 1.5},
                                   {"precondition_bf16", 0.5},
                                   {"source", "test"}};
  ASSERT_EQ(errorOf(doc), "");
  Cluster c = readClusterFile(write("k.json", doc.dump(2)));
  double curvature = 0, inversion = 0, bf16 = 0;
  bool precondition = false;
  for (const OpTimeScale &s : c.opTimeScales) {
    if (s.kind == "kfac:curvature")
      curvature = s.forward;
    if (s.kind == "kfac:inversion")
      inversion = s.forward;
    if (s.kind == "kfac:precondition_bf16")
      bf16 = s.forward;
    precondition |= s.kind == "kfac:precondition";
  }
  EXPECT_EQ(curvature, 0.25);
  EXPECT_EQ(inversion, 1.5);
  EXPECT_EQ(bf16, 0.5);
  EXPECT_FALSE(precondition);
  doc["gpu"]["kfac_time_scale"]["inversion"] = 0;
  EXPECT_NE(errorOf(doc).find("/gpu/kfac_time_scale/inversion"),
            std::string::npos)
      << errorOf(doc);
  doc["gpu"]["kfac_time_scale"]["inversion"] = 101;
  EXPECT_NE(errorOf(doc).find("(0, 100]"), std::string::npos) << errorOf(doc);
  doc["gpu"]["kfac_time_scale"] = {{"inversion", 1.0}, {"reduce", 1.0},
                                   {"source", "test"}};
  EXPECT_NE(errorOf(doc).find("unknown field \"reduce\""), std::string::npos)
      << errorOf(doc);
  doc["gpu"]["kfac_time_scale"] = {{"inversion", 1.0}};
  EXPECT_NE(errorOf(doc).find("source"), std::string::npos) << errorOf(doc);
}

TEST_F(ClusterJsonTest, FittedOpScalesAndOverhead) {
  // h200-fitted: autoddl validate --fit-cluster of a GPT-2 355M run.
  Cluster f = loadCluster("h200-fitted");
  EXPECT_GT(f.opOverhead, 0);
  EXPECT_GT(f.graphOpOverhead, 0); // its run replayed the step as a CUDA graph
  EXPECT_FALSE(f.opTimeScales.empty());
  EXPECT_EQ(loadCluster("h200x2-nvlink").opOverhead, 0);
  json doc = preset();
  doc["gpu"]["op_time_scale"] = {{"layernorm", {{"forward", 1.5}}},
                                 {"source", "test"}};
  doc["gpu"]["op_overhead_us"] = 12.5;
  EXPECT_EQ(errorOf(doc), "");
  doc["gpu"]["op_time_scale"]["layernorm"]["backward"] = 0;
  EXPECT_NE(errorOf(doc).find("/gpu/op_time_scale/layernorm/backward"),
            std::string::npos)
      << errorOf(doc);
  doc["gpu"]["op_time_scale"]["layernorm"] = {{"fwd", 1.0}};
  EXPECT_NE(errorOf(doc).find("unknown field \"fwd\""), std::string::npos)
      << errorOf(doc);
  doc["gpu"]["op_time_scale"] = {{"layernorm", {{"forward", 1.5}}},
                                 {"source", "test"}};
  doc["gpu"]["op_overhead_us"] = -1;
  EXPECT_NE(errorOf(doc).find("/gpu/op_overhead_us"), std::string::npos)
      << errorOf(doc);
  // The graphed step's overhead: absent, -1 (as op_overhead_us); present,
  // microseconds below 10000.
  doc["gpu"]["op_overhead_us"] = 12.5;
  EXPECT_EQ(loadCluster("h200x2-nvlink").graphOpOverhead, -1);
  doc["gpu"]["graph_op_overhead_us"] = 2.5;
  EXPECT_EQ(errorOf(doc), "");
  doc["gpu"]["graph_op_overhead_us"] = 1e5;
  EXPECT_NE(errorOf(doc).find("/gpu/graph_op_overhead_us"), std::string::npos)
      << errorOf(doc);
}

TEST_F(ClusterJsonTest, PresetsScaleToNNodes) {
  Cluster c = loadCluster("dgx-h100-ndr", 64);
  EXPECT_EQ(c.nodes, 64);
  EXPECT_EQ(c.worldSize(), 512);
  Cluster d = loadCluster("piz-daint-p100", 128);
  EXPECT_EQ(d.worldSize(), 128);
  // The 2xH200 preset grows over one NDR port per GPU: 4 nodes = 8 GPUs.
  Cluster h = loadCluster("h200x2-nvlink", 4);
  EXPECT_EQ(h.worldSize(), 8);
  EXPECT_EQ(h.interNode.kind, "infiniband");
  // A cluster file without an inter-node network cannot grow past one node.
  json doc = preset();
  doc.erase("inter_node");
  std::string path = write("island.json", doc.dump());
  EXPECT_EQ(loadCluster(path).worldSize(), 2);
  EXPECT_THROW(loadCluster(path, 2), UserError);
}

TEST_F(ClusterJsonTest, PathsAndThePresetsDirOverride) {
  json doc = preset();
  doc["name"] = "mine";
  std::string path = write("mine.json", doc.dump());
  EXPECT_EQ(loadCluster(path).name, "mine");
  ::setenv("AUTODDL_PRESETS_DIR", dir.c_str(), 1);
  EXPECT_EQ(presetsDir(), dir);
  EXPECT_EQ(loadCluster("mine").name, "mine");
}

TEST_F(ClusterJsonTest, UnknownPresetListsTheKnownOnes) {
  try {
    loadCluster("dgx-b200");
    FAIL() << "expected an error";
  } catch (const UserError &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown preset \"dgx-b200\""), std::string::npos) << m;
    EXPECT_NE(m.find("dgx-h100-ndr"), std::string::npos) << m;
  }
}

TEST_F(ClusterJsonTest, SyntaxErrorsGiveLineAndColumn) {
  std::string path =
      write("bad.json", "{\n  \"name\": \"x\",\n  \"nodes\": ,\n}\n");
  try {
    readClusterFile(path);
    FAIL() << "expected an error";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find(path + ":3:"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(readClusterFile(dir + "/missing.json"), UserError);
  EXPECT_THROW(readClusterFile(write("empty.json", "")), UserError);
}

TEST_F(ClusterJsonTest, UnknownFieldsAreNamedByPointer) {
  json doc = preset();
  doc["gpu"]["memory_gb"] = 141; // misspelt: memory_GB
  EXPECT_NE(errorOf(doc).find("at /gpu/memory_gb: unknown field"),
            std::string::npos)
      << errorOf(doc);
  doc = preset();
  doc["gpu"]["peak_tflops"]["int8"] = 1979;
  EXPECT_NE(errorOf(doc).find("at /gpu/peak_tflops/int8: unknown field"),
            std::string::npos);
}

TEST_F(ClusterJsonTest, ImpossibleValuesAreRejected) {
  json doc = preset();
  doc["intra_node"]["bandwidth_GBps"] = 0;
  EXPECT_NE(
      errorOf(doc).find("at /intra_node/bandwidth_GBps: must be positive"),
      std::string::npos)
      << errorOf(doc);
  doc = preset();
  doc["intra_node"]["latency_us"] = -1;
  EXPECT_NE(errorOf(doc).find("/intra_node/latency_us: must be non-negative"),
            std::string::npos);
  doc = preset();
  doc["gpus_per_node"] = 0;
  EXPECT_NE(errorOf(doc).find("/gpus_per_node: must be an integer in [1"),
            std::string::npos);
  doc = preset();
  doc["gpu"]["memory_efficiency"] = 1.2;
  EXPECT_NE(errorOf(doc).find("/gpu/memory_efficiency: must be a fraction"),
            std::string::npos);
  doc = preset();
  doc["gpu"]["l2_cache_MB"] = -50;
  EXPECT_NE(errorOf(doc).find("/gpu/l2_cache_MB: must be positive"),
            std::string::npos);
  doc = preset();
  doc["gpu"]["memory_GB"] = "141";
  EXPECT_NE(errorOf(doc).find("/gpu/memory_GB: expected a number, got string"),
            std::string::npos);
  doc = preset();
  doc.erase("inter_node");
  doc["nodes"] = 4; // several nodes need an inter_node network
  EXPECT_NE(errorOf(doc).find("missing required field \"inter_node\""),
            std::string::npos);
}

TEST_F(ClusterJsonTest, AttentionKernelAndEfficiency) {
  json doc = preset();
  doc["gpu"]["attention"] = {{"kernel", "cudnn"},
                             {"forward_efficiency", 0.5},
                             {"backward_efficiency", 0.4},
                             {"source", "a measurement"}};
  ASSERT_EQ(errorOf(doc), "");
  doc["gpu"]["attention"]["kernel"] = "triton";
  EXPECT_NE(errorOf(doc).find("/gpu/attention/kernel: expected \"cudnn\" or "
                              "\"own\""),
            std::string::npos)
      << errorOf(doc);
  doc["gpu"]["attention"]["kernel"] = "own";
  doc["gpu"]["attention"]["backward_efficiency"] = 1.5;
  EXPECT_NE(errorOf(doc).find("/gpu/attention/backward_efficiency: must be a "
                              "fraction"),
            std::string::npos)
      << errorOf(doc);
  doc["gpu"]["attention"].erase("backward_efficiency");
  EXPECT_NE(errorOf(doc).find("missing required field "
                              "\"backward_efficiency\""),
            std::string::npos)
      << errorOf(doc);
}

TEST_F(ClusterJsonTest, EveryFigureMustCiteASource) {
  json doc = preset();
  doc["intra_node"].erase("source");
  EXPECT_NE(
      errorOf(doc).find("at /intra_node: missing required field \"source\""),
      std::string::npos)
      << errorOf(doc);
  doc = preset();
  doc["collectives"]["source"] = " ";
  EXPECT_NE(
      errorOf(doc).find("/collectives/source: expected a non-empty string"),
      std::string::npos);
  doc = preset();
  doc["gpu"]["source"]["clock_MHz"] = "somewhere";
  EXPECT_NE(errorOf(doc).find("cites field \"clock_MHz\""), std::string::npos);
}

TEST_F(ClusterJsonTest, CalibrationEntries) {
  json doc = preset();
  doc["calibration"] = json::array({{{"op", "gemm"},
                                     {"precision", "bf16"},
                                     {"shape", {4096, 4096, 4096}},
                                     {"time_us", 180.0},
                                     {"source", "measured"}}});
  std::string path = write("cal.json", doc.dump());
  Cluster c = readClusterFile(path);
  ASSERT_EQ(c.calibration.size(), 1u);
  EXPECT_DOUBLE_EQ(c.calibration[0].time, 180e-6);
  EXPECT_EQ(c.calibration[0].shape, (std::vector<int64_t>{4096, 4096, 4096}));
  doc["calibration"][0]["efficiency"] = 0.7; // both given
  EXPECT_NE(errorOf(doc).find("exactly one of"), std::string::npos);
  doc["calibration"][0].erase("efficiency");
  doc["calibration"][0]["precision"] = "fp4";
  EXPECT_NE(errorOf(doc).find("/calibration/0/precision: expected one of"),
            std::string::npos);
}

} // namespace
} // namespace autoddl::cost
