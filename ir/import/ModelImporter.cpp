//===- ModelImporter.cpp - which front end reads a model -----------------===//
#include "ir/import/ModelImporter.h"

#include "ir/import/Readers.h"
#include "ir/lower/FuseImported.h"
#include "support/EmbeddedFiles.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"

#include <algorithm>
#include <cstring>
#include <sys/stat.h>

namespace autoddl::import {

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

/// The byte at which `s` stops being UTF-8 (RFC 3629: no overlong forms,
/// surrogates or code points past U+10FFFF), or npos.
size_t invalidUtf8(const std::string &s) {
  auto at = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = at(i);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf; // the second byte's range
    if (c < 0x80)
      n = 1;
    else if (c >= 0xc2 && c <= 0xdf)
      n = 2;
    else if (c >= 0xe0 && c <= 0xef)
      n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
      n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    if (n == 0 || i + n > s.size() ||
        (n > 1 && (at(i + 1) < lo || at(i + 1) > hi)))
      return i;
    for (size_t k = 2; k < n; ++k)
      if ((at(i + k) >> 6) != 2)
        return i;
    i += n;
  }
  return std::string::npos;
}

/// Names reach generated programs, plans and checkpoints: the programs keep
/// them as C strings, where a NUL byte would cut one short, and plans and
/// checkpoints as JSON, which holds UTF-8 only (docs/codegen.md "Input text
/// in generated sources"). Every other byte is escaped where it lands.
ModelGraph refuseBadNames(ModelGraph g, const std::string &origin) {
  auto check = [&](const std::string &what, const std::string &name) {
    size_t at = name.find('\0');
    const char *cause = "a NUL byte";
    if (at == std::string::npos) {
      at = invalidUtf8(name);
      cause = "a byte that is not UTF-8";
    }
    if (at == std::string::npos)
      return;
    std::string head = name.substr(0, std::min<size_t>(at, 40));
    for (char &c : head) // one line of ASCII, whatever the name holds
      if (static_cast<unsigned char>(c) < 0x20 ||
          static_cast<unsigned char>(c) >= 0x7f)
        c = '?';
    throw UserError(origin + ": " + what + " \"" + head + "...\" holds " +
                    cause + " (at byte " + std::to_string(at) +
                    "): names are UTF-8 without NUL");
  };
  check("the model name", g.name);
  for (const TensorDef &t : g.tensors)
    check("tensor", t.name);
  for (const OpDef &op : g.ops)
    check("op", op.name);
  return g;
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
  return refuseBadNames(
      importJson(parseJsonText(text, origin), origin, name, options), origin);
}

ModelGraph importOnnxBytes(const std::string &bytes, const std::string &origin,
                           const ImportOptions &options) {
  ModelGraph g = readOnnx(bytes, origin, onnxOptions(origin, options));
  fuseImportedGraph(g, origin); // what the reader left primitive
  nameLayerOps(g);              // after the fusions, which make new ops
  return refuseBadNames(std::move(g), origin);
}

ModelGraph importModel(const std::string &model, const ImportOptions &options) {
  if (model.empty())
    throw UserError("empty model name: give a JSON file or a built-in model (" +
                    builtinList() + ")");
  if (isOnnxModel(model)) {
    ModelGraph g = readOnnxFile(model, onnxOptions(model, options));
    fuseImportedGraph(g, model); // what the reader left primitive
    nameLayerOps(g);             // after the fusions, which make new ops
    return refuseBadNames(std::move(g), model);
  }
  if (isPath(model))
    return refuseBadNames(
        importJson(readJsonFile(model, "model"), model, stem(model), options),
        model);
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
