//===- ImportCommand.cpp - `autoddl import`: model -> sbp IR, summary ----===//
//
//   autoddl import MODEL [-o OUT.mlir] [--summary] [--json] [--batch B] [--seq
//   T]
//
// MODEL is a JSON file (Hugging Face config.json, template, explicit graph) or
// a built-in name (docs/model-format.md). Without --summary the sbp IR is
// printed (or written atomically to -o, only once everything succeeded);
// --summary prints parameters, layers and FLOPs, --json prints them as one JSON
// object.
//
//===----------------------------------------------------------------------===//
#include "ir/import/ModelImporter.h"
#include "ir/lower/LowerToSbp.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>
#include <memory>

namespace autoddl::cli {

namespace {

struct ImportArgs {
  std::string model;
  std::string output;
  bool summary = false;
  bool json = false;
  int64_t batch = 0;
  int64_t seq = 0;
  std::string loss;
};

// 124439808 -> "124,439,808".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-')
      out += ',';
    out += digits[i];
  }
  return out;
}

// Parameters grouped by the kind of the first op that reads them (a tied
// embedding counts under "embedding", where it is first used).
std::map<std::string, int64_t> paramsByOpKind(const ModelGraph &g) {
  std::vector<bool> counted(g.tensors.size(), false);
  std::map<std::string, int64_t> out;
  for (const OpDef &op : g.ops)
    for (int t : op.operands)
      if (g.tensors[t].role == TensorRole::Parameter && !counted[t]) {
        counted[t] = true;
        out[op.kind] += ops::numElements(g.tensors[t].shape);
      }
  return out;
}

nlohmann::json shapeJson(const ops::Shape &s) {
  nlohmann::json a = nlohmann::json::array();
  for (int64_t d : s)
    a.push_back(d);
  return a;
}

nlohmann::json summaryJson(const ModelGraph &g) {
  nlohmann::json j;
  j["model"] = g.name;
  j["family"] = g.family;
  j["params"] = g.parameterCount();
  j["layers"] = g.numLayers;
  j["forward_flops_per_sample"] = g.forwardFlopsPerSample();
  j["batch"] = g.batch;
  j["seq"] = g.seq;
  j["ops"] = g.ops.size();
  nlohmann::json byKind = nlohmann::json::object();
  for (const auto &[kind, n] : paramsByOpKind(g))
    byKind[kind] = n;
  j["params_by_op_kind"] = byKind;
  nlohmann::json inputs = nlohmann::json::array(),
                 tensors = nlohmann::json::array();
  for (const TensorDef &t : g.tensors) {
    if (t.role == TensorRole::Input) {
      nlohmann::json in{{"name", t.name},
                        {"shape", shapeJson(t.shape)},
                        {"dtype", std::string(ops::dtypeName(t.dtype))}};
      if (t.sparse)
        in["nnz"] = t.nnz;
      inputs.push_back(in);
    } else if (t.role == TensorRole::Parameter) {
      nlohmann::json p{
          {"name", t.name}, {"shape", shapeJson(t.shape)}, {"init", t.init}};
      if (t.init == "normal")
        p["init_std"] = t.initStd;
      tensors.push_back(p);
    }
  }
  j["inputs"] = inputs;
  j["tensors"] = tensors;
  return j;
}

std::string summaryText(const ModelGraph &g) {
  int64_t params = g.parameterCount();
  std::string s;
  s += fmt::format("model             {} ({})\n", g.name, g.family);
  s += fmt::format("parameters        {} ({:.2f} M)\n", grouped(params),
                   params / 1e6);
  s += fmt::format("layers            {}\n", g.numLayers);
  s += fmt::format("batch x seq       {} x {}\n", g.batch, g.seq);
  s += fmt::format("ops               {}\n", g.ops.size());
  double flops = static_cast<double>(g.forwardFlopsPerSample());
  s += fmt::format("forward FLOPs     {} per sample ({:.3g} GFLOP)\n",
                   grouped(g.forwardFlopsPerSample()), flops / 1e9);
  s += "\nparameters by op kind\n";
  for (const auto &[kind, n] : paramsByOpKind(g))
    s += fmt::format("  {:<14} {:>20} {:6.2f} %\n", kind, grouped(n),
                     params ? 100.0 * n / params : 0.0);
  return s;
}

void runImport(const ImportArgs &a) {
  if (!a.output.empty())
    checkUserOutput(a.output, "-o");
  import::ImportOptions options;
  options.batch = a.batch;
  options.seq = a.seq;
  options.loss = a.loss;
  ModelGraph graph = import::importModel(a.model, options);

  std::string ir;
  if (!a.summary || !a.output.empty()) {
    LowerResult lowered = lowerToSbpText(graph);
    if (!lowered.ok())
      throw UserError(
          a.model +
          ": the imported model does not verify as sbp IR: " + lowered.error);
    ir = std::move(lowered.text);
  }
  // Everything succeeded: only now touch the output file.
  if (!a.output.empty())
    writeFileAtomically(a.output, ir);
  if (a.summary && a.json)
    std::cout << summaryJson(graph).dump(2) << "\n";
  else if (a.summary)
    std::cout << summaryText(graph);
  else if (a.output.empty())
    std::cout << ir;
}

} // namespace

void registerImportCommand(CLI::App &app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App *cmd = app.add_subcommand(
      "import", "Import a model (JSON file or built-in name) into the sbp IR");
  cmd->add_option(
         "MODEL", args->model,
         "model JSON (Hugging Face config.json, template or graph) or a "
         "built-in name such as gpt2, llama-2-7b, bert-base-uncased")
      ->required();
  cmd->add_option(
      "-o,--output", args->output,
      "write the sbp IR to this file (atomically, only on success)");
  cmd->add_flag("--summary", args->summary,
                "print parameters, layers and forward FLOPs instead of the IR");
  cmd->add_flag("--json", args->json,
                "with --summary: print one JSON object (implies --summary)");
  cmd->add_option("--batch", args->batch, "samples per micro-batch (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{INT64_MAX}));
  cmd->add_option("--seq", args->seq,
                  "sequence length (default: the model's context length)")
      ->check(CLI::Range(int64_t{1}, int64_t{INT64_MAX}));
  cmd->add_option(
      "--loss", args->loss,
      "an ONNX model without an exported loss trains with: cross_entropy "
      "(a classifier's default), causal_lm (token ids to logits; "
      "their default) or squared_error (MSE to the one-hot label)");
  cmd->callback([args] {
    if (args->json)
      args->summary = true;
    runImport(*args);
  });
}

} // namespace autoddl::cli
