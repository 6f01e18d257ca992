//===- ImportFuzzer.cpp - libFuzzer targets for the model importers ------===//
//
// Feeds arbitrary bytes to the importer as a model file: a JSON one, or with
// AUTODDL_FUZZ_ONNX an ONNX one (onnx_fuzzer, seeded from tests/onnx/models).
// Bad input must end in a UserError; any other exception, a crash, a sanitizer
// report, a hang or an out-of-memory is a finding. Built with -DAUTODDL_FUZZ=ON
// (clang); run by scripts/sanitize.sh over a corpus seeded from
// examples/models/.
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
#ifdef AUTODDL_FUZZ_ONNX
    // Dynamic dims pinned, so the fuzzer reaches the lowering of the nodes.
    autoddl::import::ImportOptions options;
    options.batch = 2;
    options.seq = 4;
    autoddl::ModelGraph g =
        autoddl::import::importOnnxBytes(text, "fuzz.onnx", options);
#else
    autoddl::ModelGraph g =
        autoddl::import::importModelText(text, "fuzz.json", "fuzz", {});
#endif
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
