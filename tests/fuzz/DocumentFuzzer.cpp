//===- DocumentFuzzer.cpp - fuzzing cluster files and plans -------------===//
//
// Feeds arbitrary bytes through the readers a cluster file and a plan take:
// the JSON parser with its depth limit, then clusterFromJson (built as
// cluster_fuzzer) or planFromJson and the plan validator (plan_fuzzer). Bad
// input must end in a UserError; any other exception, a crash, a sanitizer
// report or a hang is a finding. Run briefly by scripts/sanitize.sh.
//
//===----------------------------------------------------------------------===//
#include "support/JsonFile.h"
#include "support/UserError.h"

#if defined(AUTODDL_FUZZ_PLAN)
#include "planner/PlanJson.h"
#include "planner/PlanValidate.h"
#else
#include "cost_model/io/ClusterJson.h"
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    nlohmann::json doc = autoddl::parseJsonText(text, "fuzz.json");
#if defined(AUTODDL_FUZZ_PLAN)
    autoddl::planner::Plan p = autoddl::planner::planFromJson(doc, "fuzz.json");
    autoddl::planner::validatePlan(p, "fuzz.json");
#else
    autoddl::cost::clusterFromJson(doc, "fuzz.json");
#endif
  } catch (const autoddl::UserError &) {
    // The expected outcome for bad input.
  } catch (const std::exception &e) {
    std::fprintf(stderr, "non-user error escaped the reader: %s\n", e.what());
    std::abort();
  }
  return 0;
}
