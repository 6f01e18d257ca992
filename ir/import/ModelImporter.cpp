//===- ModelImporter.cpp - which front end reads a model -----------------===//
#include "ir/import/ModelImporter.h"

#include "ir/import/Readers.h"
#include "ir/lower/FuseImported.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"

#include <algorithm>
#include <cstring>
#include <sys/stat.h>

namespace autoddl::import {

// Generated from examples/models/*.json at build time (EmbedModels.cmake).
struct BuiltinModel {
  const char *name;
  const char *text;
};
extern const BuiltinModel kBuiltinModels[];
extern const size_t kNumBuiltinModels;

namespace {

bool endsWith(const std::string &s, const char *tail) {
  size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

std::string stem(const std::string &path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0)
    base.resize(base.size() - 5);
  else if (endsWith(base, ".onnx") && base.size() > 5)
    base.resize(base.size() - 5);
  return base.empty() ? "model" : base;
}

bool isPath(const std::string &model) {
  struct stat st {};
  return ::stat(model.c_str(), &st) == 0 ||
         model.find('/') != std::string::npos ||
         (model.size() >= 5 &&
          model.compare(model.size() - 5, 5, ".json") == 0) ||
         endsWith(model, ".onnx");
}

BuildOptions onnxOptions(const std::string &origin,
                         const ImportOptions &options) {
  if (options.batch < 0 || options.seq < 0)
    throw UserError(origin + ": --batch and --seq must be positive");
  BuildOptions o;
  o.name = stem(origin);
  o.place = origin + ": ";
  o.batch = options.batch;
  o.seq = options.seq;
  checkLossName(options.loss);
  o.loss = options.loss;
  return o;
}

std::string builtinList() {
  std::string list;
  for (const std::string &n : builtinModelNames())
    list += (list.empty() ? "" : ", ") + n;
  return list;
}

ModelGraph importJson(const json &doc, const std::string &origin,
                      const std::string &name, const ImportOptions &options) {
  JsonFields top(doc, json::json_pointer(), origin);
  const char *keys[] = {"model_type", "template", "graph"};
  std::vector<std::string> present;
  for (const char *k : keys)
    if (doc.contains(k))
      present.push_back(k);
  if (present.empty())
    throw UserError(top.place() +
                    "not a model description: expected a \"model_type\" field "
                    "(Hugging Face config.json), \"template\" or \"graph\"");
  if (present.size() > 1)
    throw UserError(top.place() + "ambiguous model description: both \"" +
                    present[0] + "\" and \"" + present[1] + "\" are given");
  if (options.batch < 0 || options.seq < 0)
    throw UserError(origin + ": --batch and --seq must be positive");
  checkLossName(options.loss);
  if (!options.loss.empty()) // a graph names its loss op; templates their own
    throw UserError(origin + ": --loss applies to ONNX models only (a "
                             "template or config.json trains with its own "
                             "loss; an explicit graph names its loss op)");
  BuildOptions o;
  o.name = name;
  o.place = origin + ": ";
  o.batch = options.batch ? options.batch : 1;
  o.seq = options.seq;
  if (present[0] == "model_type") {
    ModelGraph g = readHfConfig(top, o);
    g.hfConfig = doc.dump(2) + "\n";
    return g;
  }
  if (present[0] == "template")
    return readTemplate(top, o);
  if (options.batch || options.seq)
    throw UserError(origin +
                    ": an explicit graph has fixed shapes; --batch and --seq "
                    "apply to templates and config.json files only");
  return readGraph(top, o);
}

} // namespace

void checkLossName(const std::string &loss) {
  if (!loss.empty() && loss != "cross_entropy" && loss != "causal_lm" &&
      loss != "squared_error")
    throw UserError("--loss: expected cross_entropy, causal_lm or "
                    "squared_error, got \"" +
                    loss + "\"");
}

bool isOnnxModel(const std::string &model) {
  return isPath(model) && endsWith(model, ".onnx");
}

std::string modelBytes(const std::string &model) {
  if (!userFileProblem(model, "model"))
    return readUserFile(model, "model");
  for (size_t i = 0; i < kNumBuiltinModels; ++i)
    if (model == kBuiltinModels[i].name)
      return kBuiltinModels[i].text;
  return {};
}

std::vector<std::string> builtinModelNames() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kNumBuiltinModels; ++i)
    names.push_back(kBuiltinModels[i].name);
  std::sort(names.begin(), names.end());
  return names;
}

ModelGraph importModelText(const std::string &text, const std::string &origin,
                           const std::string &name,
                           const ImportOptions &options) {
  return importJson(parseJsonText(text, origin), origin, name, options);
}

ModelGraph importOnnxBytes(const std::string &bytes, const std::string &origin,
                           const ImportOptions &options) {
  ModelGraph g = readOnnx(bytes, origin, onnxOptions(origin, options));
  fuseImportedGraph(g, origin); // what the reader left primitive
  return g;
}

ModelGraph importModel(const std::string &model, const ImportOptions &options) {
  if (model.empty())
    throw UserError("empty model name: give a JSON file or a built-in model (" +
                    builtinList() + ")");
  if (isOnnxModel(model)) {
    ModelGraph g = readOnnxFile(model, onnxOptions(model, options));
    fuseImportedGraph(g, model); // what the reader left primitive
    return g;
  }
  if (isPath(model))
    return importJson(readJsonFile(model, "model"), model, stem(model),
                      options);
  for (size_t i = 0; i < kNumBuiltinModels; ++i)
    if (model == kBuiltinModels[i].name)
      return importModelText(kBuiltinModels[i].text,
                             "examples/models/" + model + ".json", model,
                             options);
  throw UserError(model +
                  ": no such file, and not a built-in model (built-in: " +
                  builtinList() + ")");
}

} // namespace autoddl::import
