//===- ImportCliTest.cpp - `autoddl import` as a user runs it ------------===//
//
// Runs the real binary (AUTODDL_BINARY, set by CMake) on good and bad input:
// bad input exits non-zero with one "autoddl: error: <file>..." line, writes no
// -o file and leaves an existing one untouched.
//
//===----------------------------------------------------------------------===//
#include "ImportTestUtil.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>

using autoddl::testing::TempDir;

namespace {

struct CliRun {
  int status;
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `autoddl <args>` under a 60 s timeout (a hang fails the test).
CliRun autoddl(const TempDir &dir, const std::string &args) {
  std::string out = dir.path + "/stdout", err = dir.path + "/stderr";
  std::string cmd = "timeout 60 '" AUTODDL_BINARY "' " + args + " >'" + out +
                    "' 2>'" + err + "'";
  int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128, slurp(out), slurp(err)};
}

bool exists(const std::string &p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

void expectUserError(const CliRun &r, const std::string &place,
                     const std::string &cause) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err.rfind("autoddl: error: ", 0), 0u) << r.err;
  // One line: the only newline ends it.
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find(place), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(cause), std::string::npos) << r.err;
}

TEST(ImportCli, SummaryJson) {
  TempDir dir;
  CliRun r = autoddl(dir, "import gpt2 --summary --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["params"].get<int64_t>(), 124439808); // GPT2LMHeadModel, tied
  EXPECT_EQ(j["layers"].get<int64_t>(), 12);
  EXPECT_EQ(j["seq"].get<int64_t>(), 1024);
  EXPECT_GT(j["forward_flops_per_sample"].get<int64_t>(), 0);
  EXPECT_EQ(j["tensors"].size(), 148u); // every parameter tensor, tied once
  EXPECT_EQ(j["tensors"][0]["name"], "transformer.wte.weight");
  // Batch does not change FLOPs per sample; halving seq does.
  CliRun b = autoddl(dir, "import gpt2 --summary --json --batch 4 --seq 512");
  ASSERT_EQ(b.status, 0) << b.err;
  auto jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(jb["batch"].get<int64_t>(), 4);
  EXPECT_LT(jb["forward_flops_per_sample"].get<int64_t>(),
            j["forward_flops_per_sample"].get<int64_t>());
  CliRun t = autoddl(dir, "import llama-2-70b --summary");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("68,976,648,192"), std::string::npos) << t.out;
}

TEST(ImportCli, BadInputNeverWritesOutput) {
  TempDir dir;
  std::string out = dir.path + "/out.mlir";
  std::string truncated =
      dir.write("trunc.json", "{\"model_type\": \"gpt2\",\n \"n_embd\": ");
  expectUserError(autoddl(dir, "import '" + truncated + "' -o '" + out + "'"),
                  truncated + ":2:", "invalid JSON");
  EXPECT_FALSE(exists(out));

  // An existing output stays byte for byte as it was.
  std::string keep = dir.write("keep.mlir", "precious\n");
  std::string badHeads =
      dir.write("heads.json", R"({"model_type": "gpt2", "n_head": 7})");
  expectUserError(autoddl(dir, "import '" + badHeads + "' -o '" + keep + "'"),
                  badHeads, "not divisible by the number of attention heads 7");
  EXPECT_EQ(slurp(keep), "precious\n");

  std::string empty = dir.write("empty.json", "");
  expectUserError(autoddl(dir, "import '" + empty + "' -o '" + out + "'"),
                  empty, "file is empty");
  std::string binary = dir.write("bin.json", std::string("\0\1\2\3", 4));
  expectUserError(autoddl(dir, "import '" + binary + "'"), binary, "binary");
  expectUserError(autoddl(dir, "import '" + dir.path + "/nope.json'"),
                  "nope.json", "cannot open");
  expectUserError(autoddl(dir, "import '" + dir.path + "'"), dir.path,
                  "is a directory");
  std::string unknown =
      dir.write("u.json", R"({"template": "gpt", "config": {"layers": 2}})");
  expectUserError(autoddl(dir, "import '" + unknown + "' --summary"),
                  "at /config/layers", "unknown field 'layers'");
  std::string rope = dir.write(
      "r.json", R"({"model_type": "llama", "rope_scaling": {"factor": 4}})");
  expectUserError(autoddl(dir, "import '" + rope + "' --summary"),
                  "at /rope_scaling", "rope_scaling is not supported");
  std::string cycle =
      dir.write("c.json", R"({"graph": {"inputs": [{"name": "x", "shape": [2]}],
    "ops": [{"op": "add", "name": "a", "inputs": ["x", "tb"], "outputs": ["ta"]},
            {"op": "add", "name": "b", "inputs": ["ta", "x"], "outputs": ["tb"]}],
    "loss": "ta"}})");
  expectUserError(
      autoddl(dir, "import '" + cycle + "' --summary -o '" + out + "'"), cycle,
      "cycle in the graph");
  EXPECT_FALSE(exists(out));
  // CLI11's own refusal of a non-positive --batch is also a non-zero exit.
  EXPECT_NE(autoddl(dir, "import gpt2 --summary --batch 0").status, 0);
}

// --loss (docs/model-format.md "The loss"): refused, one line, before any
// output, outside its vocabulary and for a model that is not ONNX; an
// explicit graph names squared_error itself.
TEST(ImportCli, LossFlag) {
  TempDir dir;
  std::string out = dir.path + "/out.mlir";
  expectUserError(
      autoddl(dir, "import tiny-mlp --loss mse -o '" + out + "'"), "--loss",
      "expected cross_entropy, causal_lm or squared_error, got \"mse\"");
  EXPECT_FALSE(exists(out));
  expectUserError(autoddl(dir, "import tiny-mlp --loss squared_error"),
                  "tiny-mlp.json", "--loss applies to ONNX models only");
  std::string graph = dir.write("se.json", R"({"graph": {
    "inputs": [{"name": "x", "shape": [4, 8]},
               {"name": "y", "shape": [4], "dtype": "i32"}],
    "params": [{"name": "w", "shape": [3, 8]}],
    "ops": [{"op": "linear", "name": "fc", "inputs": ["x", "w"], "outputs": ["s"],
             "attrs": {"transpose_weight": true}},
            {"op": "squared_error", "name": "loss", "inputs": ["s", "y"],
             "outputs": ["loss"]}],
    "loss": "loss"}})");
  CliRun r = autoddl(dir, "import '" + graph + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("sbp.squared_error"), std::string::npos) << r.out;
}

TEST(ImportCli, WritesIrOnlyOnSuccess) {
  TempDir dir;
  std::string out = dir.path + "/tiny.mlir";
  CliRun r = autoddl(dir, "import tiny-gpt -o '" + out + "'");
  if (r.status != 0 &&
      r.err.find("without the sbp lowering") != std::string::npos)
    GTEST_SKIP() << "this build has no sbp lowering";
  ASSERT_EQ(r.status, 0) << r.err;
  std::string ir = slurp(out);
  EXPECT_NE(ir.find("sbp.attention"), std::string::npos) << ir.substr(0, 400);
  EXPECT_NE(ir.find("transformer.wte.weight"), std::string::npos);
  EXPECT_TRUE(r.out.empty()); // the IR went to the file, not stdout
}

} // namespace
