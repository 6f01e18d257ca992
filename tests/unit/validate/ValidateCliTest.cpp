//===- ValidateCliTest.cpp - `autoddl validate` against a measured fixture ===//
//
// Runs the real binary (AUTODDL_BINARY) on tiny-gpt's one-GPU plan and the
// fixture fixtures/tiny_gpt_1gpu (metrics.json and trace.json as a
// `--profile --trace` run of the generated CUDA program writes them; the
// numbers are hand-made at the scale of an H200 run of this model, not a
// measurement). Checks the report against hand computation from the two
// files, the merged Perfetto trace, the planner's predicted.op_kinds_s, and
// bad input (one line, exit 1, no trace written).
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixture = "tests/unit/validate/fixtures/tiny_gpt_1gpu";

struct CliRun {
  int status;
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json readJson(const std::string &path) { return json::parse(slurp(path)); }

void writeJson(const std::string &path, const json &j) {
  std::ofstream(path) << j.dump(1) << "\n";
}

class ValidateCli : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/autoddl-validate-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // tiny-gpt on one H200: tp = pp = dp = 1, one micro-batch of 8.
    CliRun r = cli("plan tiny-gpt --cluster h200x2-nvlink --gpus 1 "
                   "--global-batch 8 --seq 16 --no-why -o '" +
                   plan() + "'");
    ASSERT_EQ(r.status, 0) << r.err;
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun cli(const std::string &args) {
    const std::string out = dir_ + "/stdout", err = dir_ + "/stderr";
    const std::string cmd = "timeout 120 '" AUTODDL_BINARY "' " + args + " >'" +
                            out + "' 2>'" + err + "'";
    const int raw = std::system(cmd.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128, slurp(out), slurp(err)};
  }
  std::string plan() const { return dir_ + "/plan.json"; }
  /// A copy of the fixture in the temp dir, its metrics.json edited by `f`.
  std::string measuredCopy(const std::function<void(json &)> &f) {
    const std::string d = dir_ + "/run";
    fs::create_directories(d);
    fs::copy_file(kFixture + "/trace.json", d + "/trace.json",
                  fs::copy_options::overwrite_existing);
    json m = readJson(kFixture + "/metrics.json");
    f(m);
    writeJson(d + "/metrics.json", m);
    return d;
  }
  void expectOneLineError(const CliRun &r, const std::string &cause) {
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("autoddl: error: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(cause), std::string::npos) << r.err;
  }

  std::string dir_;
};

// The per-kind rows are the plan's predicted.op_kinds_s and the fixture's
// op_kinds side by side; error = (pred fwd + pred bwd - meas fwd - meas bwd)
// / (meas fwd + meas bwd); MAPE the mean of |error| over the kinds both have.
TEST_F(ValidateCli, ReportMatchesHandComputation) {
  const std::string trace = dir_ + "/merged.json";
  CliRun r = cli("validate '" + plan() + "' --measured " + kFixture +
                 " --json --trace-out '" + trace + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const json rep = json::parse(r.out);
  const json p = readJson(plan()).at("predicted");
  const json m = readJson(kFixture + "/metrics.json");
  const json &pk = p.at("op_kinds_s"), &mk = m.at("op_kinds");
  // The generated program runs the kinds of tiny-gpt: 7 of them (the MLP's
  // GELU runs in the GEMMs' epilogues, timed as "linear").
  ASSERT_EQ(rep.at("op_kinds").size(), 7u);
  double apeSum = 0;
  for (const json &row : rep.at("op_kinds")) {
    const std::string k = row.at("kind");
    SCOPED_TRACE(k);
    ASSERT_TRUE(pk.contains(k) && mk.contains(k));
    EXPECT_DOUBLE_EQ(row.at("predicted_forward_s").get<double>(),
                     pk.at(k).at("forward").get<double>());
    EXPECT_DOUBLE_EQ(row.at("predicted_backward_s").get<double>(),
                     pk.at(k).at("backward").get<double>());
    EXPECT_DOUBLE_EQ(row.at("measured_forward_s").get<double>(),
                     mk.at(k).at("forward_s").get<double>());
    EXPECT_DOUBLE_EQ(row.at("measured_calls").get<double>(),
                     mk.at(k).at("calls").get<double>());
    const double pred = pk.at(k).at("forward").get<double>() +
                        pk.at(k).at("backward").get<double>();
    const double meas = mk.at(k).at("forward_s").get<double>() +
                        mk.at(k).at("backward_s").get<double>();
    EXPECT_NEAR(row.at("error").get<double>(), (pred - meas) / meas, 1e-12);
    apeSum += std::fabs((pred - meas) / meas);
  }
  // linear: 7.6e-5 s forward + 1.21e-4 s backward measured (the fixture).
  for (const json &row : rep.at("op_kinds")) {
    if (row.at("kind") == "linear") {
      EXPECT_NEAR(row.at("measured_forward_s").get<double>() +
                      row.at("measured_backward_s").get<double>(),
                  1.97e-4, 1e-15);
    }
  }
  EXPECT_NEAR(rep.at("op_kinds_mape").get<double>(), apeSum / 7, 1e-12);
  // One GPU: no tensor-parallel collectives on either side.
  EXPECT_TRUE(rep.at("tp_collectives").empty());
  // The step: predicted.step_time_s against mean_step_seconds (1.1 ms, the
  // mean of the steps after the first).
  const double ps = p.at("step_time_s").get<double>();
  EXPECT_DOUBLE_EQ(rep.at("step").at("measured_s").get<double>(), 0.0011);
  EXPECT_NEAR(rep.at("step").at("error").get<double>(), (ps - 0.0011) / 0.0011,
              1e-12);
  // Within 15% (the default tolerance) exactly when |error| <= 0.15.
  EXPECT_EQ(rep.at("step").at("within_tolerance").get<bool>(),
            std::fabs((ps - 0.0011) / 0.0011) <= 0.15);

  // The text form: the same MAPE, as a percentage with one decimal.
  CliRun t = cli("validate '" + plan() + "' --measured " + kFixture);
  ASSERT_EQ(t.status, 0) << t.err;
  char mape[64];
  std::snprintf(mape, sizeof mape, "MAPE over 7 op kinds: %.1f%%",
                apeSum / 7 * 100);
  EXPECT_NE(t.out.find(mape), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("linear"), std::string::npos);
  EXPECT_NE(t.out.find("step within 15%: "), std::string::npos) << t.out;
}

// The merged trace holds inspect --trace's events prefixed "predicted: ",
// moved to the measured second step (the second F0 of rank 0, at 351200 us in
// the fixture), and the fixture's 8 events prefixed "measured: " on process
// ids after the predicted ones.
TEST_F(ValidateCli, MergedTraceHoldsBoth) {
  const std::string merged = dir_ + "/merged.json",
                    inspect = dir_ + "/predicted.json";
  ASSERT_EQ(cli("validate '" + plan() + "' --measured " + kFixture +
                " --trace-out '" + merged + "'")
                .status,
            0);
  ASSERT_EQ(cli("inspect '" + plan() + "' --trace '" + inspect + "'").status,
            0);
  const json doc = readJson(merged), pred = readJson(inspect);
  int64_t maxPredPid = -1;
  std::vector<json> predX, measX;
  for (const json &e : pred.at("traceEvents")) {
    maxPredPid = std::max<int64_t>(maxPredPid, e.at("pid").get<int64_t>());
    if (e.at("ph") == "X")
      predX.push_back(e);
  }
  for (const json &e : doc.at("traceEvents")) {
    if (e.at("ph") != "X")
      continue;
    const std::string name = e.at("name");
    if (name.rfind("predicted: ", 0) == 0)
      EXPECT_LE(e.at("pid").get<int64_t>(), maxPredPid);
    else if (name.rfind("measured: ", 0) == 0)
      measX.push_back(e);
    else
      ADD_FAILURE() << "unprefixed event " << name;
  }
  ASSERT_EQ(measX.size(), 8u);
  for (const json &e : measX)
    EXPECT_EQ(e.at("pid").get<int64_t>(), maxPredPid + 1);
  size_t predCount = 0;
  for (const json &e : doc.at("traceEvents"))
    if (e.at("ph") == "X" &&
        e.at("name").get<std::string>().rfind("predicted: ", 0) == 0) {
      const json &orig = predX[predCount++];
      EXPECT_EQ(e.at("name"),
                "predicted: " + orig.at("name").get<std::string>());
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(),
                       orig.at("ts").get<double>() + 351200.0);
    }
  EXPECT_EQ(predCount, predX.size());
  bool named = false;
  for (const json &e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name" &&
        e.at("args").at("name") == "measured: rank 0")
      named = true;
  EXPECT_TRUE(named);
}

// Tensor-parallel collectives: each kind's share of the plan's tp collective
// time (time_s x per_step) times the critical rank's breakdown tp_comm. With
// all_reduce 1e-5 s x 4 and all_gather 2e-5 s x 1 (shares 2/3 and 1/3) and
// tp_comm 3e-4 s: 2e-4 s and 1e-4 s predicted.
TEST_F(ValidateCli, CollectiveSharesOfTpComm) {
  json p = readJson(plan());
  // A forward tp collective of 4 KiB in the plan's collectives table.
  auto tpForward = [](const char *where, const char *collective, double time,
                      int perStep) {
    return json{{"where", where},           {"phase", "forward"},
                {"collective", collective}, {"axis", "tp"},
                {"bytes", 4096.0},          {"time_s", time},
                {"per_step", perStep}};
  };
  p["collectives"].push_back(tpForward("h.0.attn.proj", "all_reduce", 1e-5, 4));
  p["collectives"].push_back(tpForward("h.0.attn.qkv", "all_gather", 2e-5, 1));
  p["predicted"]["breakdown_s"]["tp_comm"] = 3e-4;
  writeJson(plan(), p);
  const std::string run = measuredCopy([](json &m) {
    m["tp_collectives"] = {
        {"all_reduce",
         {{"forward_s", 1e-4}, {"backward_s", 1.5e-4}, {"calls", 4}}},
        {"slice", {{"forward_s", 1e-5}, {"backward_s", 0.0}, {"calls", 2}}}};
  });
  CliRun r = cli("validate '" + plan() + "' --measured '" + run + "' --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json rows = json::parse(r.out).at("tp_collectives");
  ASSERT_EQ(rows.size(), 3u); // all_gather, all_reduce, slice
  EXPECT_EQ(rows[0].at("kind"), "all_gather");
  EXPECT_NEAR(rows[0].at("predicted_s").get<double>(), 1e-4, 1e-15);
  EXPECT_TRUE(rows[0].at("measured_s").is_null());
  EXPECT_TRUE(rows[0].at("error").is_null());
  EXPECT_EQ(rows[1].at("kind"), "all_reduce");
  EXPECT_NEAR(rows[1].at("predicted_s").get<double>(), 2e-4, 1e-15);
  // measured 1e-4 + 1.5e-4 = 2.5e-4: error (2e-4 - 2.5e-4) / 2.5e-4 = -0.2.
  EXPECT_NEAR(rows[1].at("measured_s").get<double>(), 2.5e-4, 1e-15);
  EXPECT_NEAR(rows[1].at("error").get<double>(), -0.2, 1e-12);
  // A local slice is priced as nothing: predicted null, error -100%.
  EXPECT_EQ(rows[2].at("kind"), "slice");
  EXPECT_TRUE(rows[2].at("predicted_s").is_null());
  EXPECT_NEAR(rows[2].at("error").get<double>(), -1.0, 1e-12);
}

// Without collectives or recomputation, the critical rank's compute is the
// sum of its op kinds: predicted.op_kinds_s adds up to breakdown_s.compute,
// also over pipeline stages, tp and dp.
TEST_F(ValidateCli, OpKindsSumToComputeBreakdown) {
  const char *cases[][3] = {
      {"tiny-gpt", "1", "tp=1,pp=1,dp=1"},
      {"tests/e2e/gpt-4layer.json", "8",
       "tp=2,pp=2,dp=2,microbatch=2,schedule=1f1b"},
      {"tests/e2e/gpt-4layer.json", "8",
       "tp=1,pp=2,dp=4,microbatch=2,schedule=chimera"},
      {"tests/e2e/gpt-4layer.json", "2",
       "tp=1,pp=2,dp=1,microbatch=2,schedule=interleaved,chunks=2"}};
  for (const auto &c : cases) {
    SCOPED_TRACE(c[2]);
    const std::string p = dir_ + "/p.json";
    CliRun r = cli(std::string("plan ") + c[0] +
                   " --cluster h200x2-nvlink --gpus " + c[1] +
                   " --global-batch 16 --seq 16 --no-why --fix "
                   "recompute=none," +
                   c[2] + " -o '" + p + "'");
    ASSERT_EQ(r.status, 0) << r.err;
    const json pr = readJson(p).at("predicted");
    double sum = 0;
    for (const auto &[k, t] : pr.at("op_kinds_s").items())
      sum += t.at("forward").get<double>() + t.at("backward").get<double>();
    EXPECT_GT(sum, 0);
    EXPECT_NEAR(sum, pr.at("breakdown_s").at("compute").get<double>(),
                1e-9 * sum);
  }
}

// --fit-cluster writes the cluster with each kind's measured / predicted
// factor and the unexplained step time as a per-op overhead; the same plan
// made on it then predicts the fitted run's step (one GPU: the step is the
// ops plus what no op accounts for).
TEST_F(ValidateCli, FitClusterReproducesTheFittedRun) {
  const std::string fitted = dir_ + "/h200-fitted.json";
  CliRun r =
      cli("validate '" + plan() + "' --measured " + kFixture +
          " --json --cluster h200x2-nvlink --fit-cluster '" + fitted + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const json before = json::parse(r.out);
  const json c = readJson(fitted);
  EXPECT_EQ(c.at("name"), "h200-fitted"); // a preset's name is its stem
  const json &scales = c.at("gpu").at("op_time_scale");
  for (const json &row : before.at("op_kinds")) {
    const std::string k = row.at("kind");
    SCOPED_TRACE(k);
    ASSERT_TRUE(scales.contains(k));
    // h200x2-nvlink has no scale or overhead: the factor is measured/priced
    // (1 for the residual add, whose forward runs in the projections' GEMMs).
    const double predictedForward = row.at("predicted_forward_s");
    EXPECT_NEAR(scales.at(k).at("forward").get<double>(),
                predictedForward > 0
                    ? std::clamp(row.at("measured_forward_s").get<double>() /
                                     predictedForward,
                                 0.05, 100.0)
                    : 1.0,
                1e-9);
  }
  EXPECT_GE(c.at("gpu").at("op_overhead_us").get<double>(), 0.0);
  // Planned again on the fitted cluster, the step matches the run.
  CliRun p = cli("plan tiny-gpt --cluster '" + fitted +
                 "' --gpus 1 --global-batch 8 --seq 16 --no-why -o '" + dir_ +
                 "/fitted-plan.json'");
  ASSERT_EQ(p.status, 0) << p.err;
  CliRun v = cli("validate '" + dir_ + "/fitted-plan.json' --measured " +
                 kFixture + " --json");
  ASSERT_EQ(v.status, 0) << v.err;
  const json after = json::parse(v.out);
  EXPECT_LT(std::fabs(after.at("step").at("error").get<double>()), 0.03)
      << "before: " << before.at("step").at("error");
  // Fitted again from the fitted cluster, the overhead stays what the run
  // shows (the op rows already hold the old one), and so does the step.
  const std::string again = dir_ + "/h200-refitted.json";
  CliRun r2 =
      cli("validate '" + dir_ + "/fitted-plan.json' --measured " + kFixture +
          " --cluster '" + fitted + "' --fit-cluster '" + again + "'");
  ASSERT_EQ(r2.status, 0) << r2.err;
  EXPECT_NEAR(readJson(again).at("gpu").at("op_overhead_us").get<double>(),
              c.at("gpu").at("op_overhead_us").get<double>(),
              0.1 * c.at("gpu").at("op_overhead_us").get<double>() + 0.2);
  // Without --cluster there is nothing to fit.
  expectOneLineError(cli("validate '" + plan() + "' --measured " + kFixture +
                         " --fit-cluster '" + fitted + "'"),
                     "--fit-cluster: needs --cluster");
}

// --graph-run: a run of the same plan whose step ran as a CUDA graph (15%
// faster here) fits gpu.graph_op_overhead_us below the eager overhead, and a
// one-GPU token plan made on the fitted cluster (its step graphed, and
// marked so) predicts the graphed step, which validate then compares with
// the graphed run; compared with the eager profiled run alone, it says so. A
// run that did not graph is refused.
TEST_F(ValidateCli, GraphRunFitsTheGraphedOverhead) {
  const double eagerStep =
      readJson(kFixture + "/metrics.json").at("mean_step_seconds");
  const std::string graphed = measuredCopy([&](json &m) {
    m["info"]["cuda_graph"] =
        "on: 120 nodes, captured at the run's second step";
    m["mean_step_seconds"] = 0.85 * eagerStep;
  });
  const std::string fitted = dir_ + "/h200-graph-fitted.json";
  CliRun r = cli("validate '" + plan() + "' --measured " + kFixture +
                 " --cluster h200x2-nvlink --fit-cluster '" + fitted +
                 "' --graph-run '" + graphed + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const json gpu = readJson(fitted).at("gpu");
  const double eager = gpu.at("op_overhead_us"),
               graph = gpu.at("graph_op_overhead_us");
  EXPECT_GE(graph, 0.0);
  EXPECT_LT(graph, eager);
  CliRun p = cli("plan tiny-gpt --cluster '" + fitted +
                 "' --gpus 1 --global-batch 8 --seq 16 --no-why -o '" + dir_ +
                 "/graph-plan.json'");
  ASSERT_EQ(p.status, 0) << p.err;
  const double predicted =
      readJson(dir_ + "/graph-plan.json").at("predicted").at("step_time_s");
  EXPECT_NEAR(predicted, 0.85 * eagerStep, 0.03 * eagerStep);
  EXPECT_TRUE(readJson(dir_ + "/graph-plan.json")
                  .at("predicted")
                  .at("step_graph")
                  .get<bool>());
  CliRun vg = cli("validate '" + dir_ + "/graph-plan.json' --measured " +
                  kFixture + " --graph-run '" + graphed + "' --json");
  ASSERT_EQ(vg.status, 0) << vg.err;
  const json step = json::parse(vg.out).at("step");
  EXPECT_TRUE(step.at("graphed").get<bool>());
  EXPECT_NEAR(step.at("measured_s").get<double>(), 0.85 * eagerStep, 1e-12);
  EXPECT_LT(std::fabs(step.at("error").get<double>()), 0.03);
  CliRun ve =
      cli("validate '" + dir_ + "/graph-plan.json' --measured " + kFixture);
  ASSERT_EQ(ve.status, 0) << ve.err;
  EXPECT_NE(ve.out.find("this run's step ran eagerly"), std::string::npos)
      << ve.out;
  // The same model on two GPUs (dp=2) is graphed too (its gradient buckets'
  // all-reduces are captured with the kernels), and so is a graph model (its
  // accuracy counts stay on the device); a model with a training Dropout
  // primitive (its mask keyed by the step) is not.
  // The "predicted" object of `model`'s plan on the fitted cluster (`flags`:
  // GPUs, batch and the rest).
  const auto predictedOf = [&](const std::string &model,
                               const std::string &flags,
                               const std::string &name) {
    const std::string out = dir_ + "/" + name + "-plan.json";
    CliRun r = cli("plan " + model + " --cluster '" + fitted + "' " + flags +
                   " --no-why -o '" + out + "'");
    EXPECT_EQ(r.status, 0) << r.err;
    return readJson(out).at("predicted");
  };
  const json dp2 = predictedOf(
      "tiny-gpt", "--gpus 2 --global-batch 16 --seq 16 --fix tp=1,pp=1,dp=2",
      "dp2");
  EXPECT_GE(dp2.at("step_time_s").get<double>(), predicted);
  EXPECT_TRUE(dp2.at("step_graph").get<bool>());
  EXPECT_TRUE(predictedOf("gcn-cora", "--gpus 1 --global-batch 1", "gcn")
                  .at("step_graph")
                  .get<bool>());
  EXPECT_FALSE(predictedOf("tests/onnx/exports/train-mlp-ts.onnx",
                           "--gpus 1 --global-batch 8", "dropout")
                   .at("step_graph")
                   .get<bool>());
  const std::string eagerRun = measuredCopy([](json &m) {
    m["info"]["cuda_graph"] = "off: turned off (--no-cuda-graph)";
  });
  expectOneLineError(cli("validate '" + plan() + "' --measured " + kFixture +
                         " --cluster h200x2-nvlink --fit-cluster '" + fitted +
                         "' --graph-run '" + eagerRun + "'"),
                     "did not run as a CUDA graph");
}

// A pipeline's profile comes from its busiest rank: the prediction compared is
// that rank's pipeline device's (op_kinds_by_device_s), not the critical one.
TEST_F(ValidateCli, PipelineComparesTheProfiledDevice) {
  const std::string pp = dir_ + "/pp2.json";
  CliRun p = cli("plan tiny-gpt --cluster h200x2-nvlink --gpus 2 "
                 "--global-batch 8 --seq 16 --fix pp=2,microbatch=2 --no-why "
                 "-o '" +
                 pp + "'");
  ASSERT_EQ(p.status, 0) << p.err;
  const json byDevice = readJson(pp).at("predicted").at("op_kinds_by_device_s");
  ASSERT_EQ(byDevice.size(), 2u);
  // The loss is on the last stage (device 1), the embedding on device 0.
  EXPECT_TRUE(byDevice[1].contains("cross_entropy"));
  EXPECT_FALSE(byDevice[0].contains("cross_entropy"));
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    const std::string run = measuredCopy([&](json &m) {
      m["info"]["ranks"] = "2";
      m["op_profile_rank"] = rank;
      const json peak = m["peak_memory_bytes"][0]; // one entry per rank
      m["peak_memory_bytes"] = json::array({peak, peak});
    });
    CliRun v = cli("validate '" + pp + "' --measured '" + run + "' --json");
    ASSERT_EQ(v.status, 0) << v.err;
    for (const json &row : json::parse(v.out).at("op_kinds")) {
      if (row.at("kind") == "cross_entropy") {
        EXPECT_EQ(row.at("predicted_forward_s").is_null(), rank == 0);
      }
    }
  }
}

// A plan from before op_kinds_s still validates: predicted null, a warning.
TEST_F(ValidateCli, OlderPlanWithoutOpKinds) {
  json p = readJson(plan());
  p["predicted"].erase("op_kinds_s");
  writeJson(plan(), p);
  CliRun r =
      cli("validate '" + plan() + "' --measured " + kFixture + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("no predicted.op_kinds_s"), std::string::npos);
  const json rep = json::parse(r.out);
  EXPECT_TRUE(rep.at("op_kinds")[0].at("predicted_forward_s").is_null());
  EXPECT_TRUE(rep.at("op_kinds_mape").is_null());
}

TEST_F(ValidateCli, BadInput) {
  const std::string trace = dir_ + "/merged.json";
  // No metrics.json in the directory.
  fs::create_directories(dir_ + "/empty");
  expectOneLineError(cli("validate '" + plan() + "' --measured '" + dir_ +
                         "/empty' --trace-out '" + trace + "'"),
                     "no metrics.json");
  // A run of another model.
  std::string run =
      measuredCopy([](json &m) { m["info"]["model"] = "tiny-llama"; });
  expectOneLineError(cli("validate '" + plan() + "' --measured '" + run +
                         "' --trace-out '" + trace + "'"),
                     "a run of model tiny-llama, but");
  // A run on another rank count.
  run = measuredCopy([](json &m) { m["info"]["ranks"] = "4"; });
  expectOneLineError(cli("validate '" + plan() + "' --measured '" + run + "'"),
                     "a run on 4 ranks");
  // A run without --profile.
  run = measuredCopy([](json &m) { m.erase("op_kinds"); });
  expectOneLineError(cli("validate '" + plan() + "' --measured '" + run + "'"),
                     "run the program with --profile");
  // A negative time.
  run = measuredCopy([](json &m) { m["op_kinds"]["add"]["forward_s"] = -1.0; });
  expectOneLineError(cli("validate '" + plan() + "' --measured '" + run + "'"),
                     "/op_kinds/add/forward_s: expected a non-negative number");
  // Malformed JSON: the place is line:column.
  std::ofstream(run + "/metrics.json") << "{\"op_kinds\": {,}\n";
  expectOneLineError(cli("validate '" + plan() + "' --measured '" + run + "'"),
                     "metrics.json:1:");
  EXPECT_FALSE(fs::exists(trace));
  expectOneLineError(cli("validate '" + plan() + "' --measured " + kFixture +
                         " --step-tolerance -1"),
                     "--step-tolerance: expected a non-negative fraction");
  // Without --measured, this machine must have a GPU.
  if (!fs::exists("/dev/nvidia0") && !fs::exists("/proc/driver/nvidia/gpus")) {
    CliRun r = cli("validate '" + plan() + "'");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("GPU"), std::string::npos) << r.err;
  }
}

// Memory beside time: each rank's predicted allocation (the plan's
// pipeline_ranks[].memory.allocated) against peak_memory_bytes, the predicted
// total against the device's use at that peak; error = (pred - meas) / meas.
TEST_F(ValidateCli, MemoryErrorBesideTheStepError) {
  const json dev = readJson(plan()).at("pipeline_ranks").at(0).at("memory");
  const double pred = dev.at("allocated").get<double>();
  const double total = dev.at("total").get<double>();
  ASSERT_GT(pred, 0);
  ASSERT_GT(total, pred); // the estimated overheads
  const double meas = pred / 1.25, used = total * 1.05;
  const std::string run = measuredCopy([&](json &m) {
    m["peak_memory_bytes"] = json::array({meas});
    m["peak_device_used_bytes"] = json::array({used});
  });
  CliRun r = cli("validate '" + plan() + "' --measured '" + run + "' --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json mem = json::parse(r.out).at("memory");
  const json &row = mem.at("ranks").at(0);
  EXPECT_DOUBLE_EQ(row.at("predicted_bytes").get<double>(), pred);
  EXPECT_NEAR(row.at("error").get<double>(), 0.25, 1e-9);
  EXPECT_NEAR(row.at("used_error").get<double>(), 1 / 1.05 - 1, 1e-9);
  EXPECT_FALSE(mem.at("within_tolerance").get<bool>()); // 25% > 10%
  CliRun t = cli("validate '" + plan() + "' --measured '" + run +
                 "' --memory-tolerance 0.3");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("memory within 30%: yes (worst +25.0%)"),
            std::string::npos)
      << t.out;
  // A rank count that is not the plan's, and a bad tolerance: one line each.
  const std::string two = measuredCopy([&](json &m) {
    m["peak_memory_bytes"] = json::array({meas, meas});
  });
  expectOneLineError(cli("validate '" + plan() + "' --measured '" + two + "'"),
                     "/peak_memory_bytes: 2 ranks, the plan has 1");
  expectOneLineError(cli("validate '" + plan() + "' --measured " + kFixture +
                         " --memory-tolerance -1"),
                     "--memory-tolerance: expected a non-negative");
}

} // namespace
