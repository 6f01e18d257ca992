//===- FlagsFuzzer.cpp - fuzzing the generated programs' flag parser -----===//
//
// The input is argv: arguments separated by NUL bytes, the first byte picking
// whether the plan shards AdamW state. parse_options must either return
// options inside their documented ranges or throw std::invalid_argument with
// one short line; anything else (another exception, a crash, a sanitizer
// report) is a finding. Run briefly by scripts/sanitize.sh.
//
//===----------------------------------------------------------------------===//
#include "backends/common/harness/Options.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

using autoddl::rt::harness::Options;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const bool zero = data[0] & 1;
  std::vector<std::string> args = {"train"};
  std::string cur;
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += char(data[i]);
    }
  }
  args.push_back(cur);
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  try {
    const Options o =
        autoddl::rt::harness::parse_options(int(argv.size()), argv.data(), zero);
    const bool ok = o.steps >= 0 && o.steps <= (int64_t(1) << 40) &&
                    o.save_every >= 0 && std::isfinite(o.lr) && o.lr >= 0 &&
                    std::isfinite(o.weight_decay) && o.weight_decay >= 0 &&
                    (o.optimizer == "adamw" || o.optimizer == "sgd");
    if (!ok) {
      std::fprintf(stderr, "options out of range were accepted\n");
      std::abort();
    }
  } catch (const std::invalid_argument &e) {
    const std::string m = e.what();
    if (m.find('\n') != std::string::npos || m.size() > 600) {
      std::fprintf(stderr, "message of %zu bytes or several lines\n",
                   m.size());
      std::abort();
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
