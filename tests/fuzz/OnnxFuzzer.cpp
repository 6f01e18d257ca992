//===- OnnxFuzzer.cpp - libFuzzer target for the ONNX model reader -----===//
//
// Feeds arbitrary bytes to the importer as an ONNX model file. Bad input must
// end in a UserError; any other exception, a crash, a sanitizer report, a hang
// or an out-of-memory is a finding. Built with -DAUTODDL_FUZZ=ON (clang); run
// by scripts/sanitize.sh over a corpus seeded from tests/onnx/models (encoded
// by protoc).
//
//===----------------------------------------------------------------------===//
#include "ir/import/ModelImporter.h"
#include "support/UserError.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    // Dynamic dims pinned, so the fuzzer reaches the lowering of the nodes.
    autoddl::import::ImportOptions options;
    options.batch = 2;
    options.seq = 4;
    autoddl::ModelGraph g =
        autoddl::import::importOnnxBytes(text, "fuzz.onnx", options);
    // A model that imports must also summarise without overflow.
    if (g.parameterCount() < 0 || g.forwardFlopsPerSample() < 0)
      std::abort();
  } catch (const autoddl::UserError &) {
    // The expected outcome for bad input.
  } catch (const std::exception &e) {
    std::fprintf(stderr, "non-user error escaped the importer: %s\n", e.what());
    std::abort();
  }
  return 0;
}
