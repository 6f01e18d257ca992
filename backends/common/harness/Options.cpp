//===- Options.cpp - the flags every generated program takes -------------===//
#include "backends/common/harness/Options.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace autoddl::rt::harness {

Options parse_options(int argc, char **argv, bool zero, bool kfac) {
  Options o;
  if (kfac)
    o.optimizer = "kfac";
  bool kfacFlag = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(a + ": missing value");
      return argv[++i];
    };
    auto integer = [&]() {
      const std::string v = next();
      char *end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 0)
        throw std::invalid_argument(a +
                                    ": expected a non-negative integer, "
                                    "got \"" +
                                    v + "\"");
      return int64_t(x);
    };
    auto real = [&]() {
      const std::string v = next();
      char *end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end)
        throw std::invalid_argument(a + ": expected a number, got \"" + v +
                                    "\"");
      return x;
    };
    if (a == "--steps")
      o.steps = integer();
    else if (a == "--data")
      o.data = next();
    else if (a == "--out")
      o.out = next();
    else if (a == "--trace")
      o.trace = true;
    else if (a == "--save")
      o.save = next();
    else if (a == "--save-every")
      o.save_every = integer();
    else if (a == "--save-initial")
      o.save_initial = true;
    else if (a == "--resume")
      o.resume = next();
    else if (a == "--lr")
      o.lr = real();
    else if (a == "--weight-decay")
      o.weight_decay = real();
    else if (a == "--optimizer")
      o.optimizer = next();
    else if (a == "--kfac-damping") {
      o.kfac_damping = real();
      kfacFlag = true;
      if (!(o.kfac_damping > 0) || !std::isfinite(o.kfac_damping))
        throw std::invalid_argument("--kfac-damping: expected a finite "
                                    "number > 0, got " +
                                    std::string(argv[i]));
    } else if (a == "--kfac-refresh") {
      o.kfac_refresh = integer();
      kfacFlag = true;
      if (o.kfac_refresh < 1)
        throw std::invalid_argument("--kfac-refresh: expected a number of "
                                    "steps >= 1, got 0");
    } else if (a == "--kfac-rule") {
      o.kfac_rule = next();
      kfacFlag = true;
      if (o.kfac_rule != "sgd" && o.kfac_rule != "lamb")
        throw std::invalid_argument("--kfac-rule: expected sgd or lamb, got " +
                                    o.kfac_rule);
    } else if (a == "--seed")
      o.seed = uint64_t(integer());
    else if (a == "--quiet")
      o.quiet = true;
    else
      throw std::invalid_argument(
          "unknown flag " + a +
          " (flags: --steps N --data FILE --out DIR --trace --save DIR "
          "--save-every K --save-initial --resume DIR/step-N --lr X "
          "--weight-decay X --optimizer adamw|sgd|kfac --kfac-damping X "
          "--kfac-refresh K --kfac-rule sgd|lamb --seed S --quiet)");
  }
  if (o.optimizer != "adamw" && o.optimizer != "sgd" && o.optimizer != "kfac")
    throw std::invalid_argument("--optimizer: expected adamw, sgd or kfac, "
                                "got " +
                                o.optimizer);
  // K-FAC needs the curvature calls codegen emits from a K-FAC plan.
  if (o.optimizer == "kfac" && !kfac)
    throw std::invalid_argument("--optimizer kfac: this program was generated "
                                "from a first-order plan (plan with "
                                "--optimizer kfac)");
  if (kfacFlag && o.optimizer != "kfac")
    throw std::invalid_argument("--kfac-damping/--kfac-refresh/--kfac-rule "
                                "need --optimizer kfac");
  if (zero && o.optimizer != "adamw")
    throw std::invalid_argument("--optimizer sgd: the plan shards AdamW state "
                                "(ZeRO); use adamw");
  if ((o.save_every || o.save_initial) && o.save.empty())
    throw std::invalid_argument("--save-every/--save-initial need --save DIR");
  return o;
}

bool take_flag(int &argc, char **argv, const char *flag) {
  bool found = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0)
      found = true;
    else
      argv[kept++] = argv[i];
  argc = kept;
  return found;
}

} // namespace autoddl::rt::harness
