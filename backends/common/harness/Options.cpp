//===- Options.cpp - the flags every generated program takes -------------===//
#include "backends/common/harness/Options.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <stdexcept>

namespace autoddl::rt::harness {

namespace {

/// Longest part of a bad value echoed back (a megabyte-long argument quoted
/// whole helps nobody).
constexpr size_t kEchoBytes = 80;

/// Longest run --steps accepts: far beyond any real run, and well inside
/// int64 step arithmetic (a typo of 20 digits must not run "forever").
constexpr int64_t kMaxSteps = int64_t(1) << 40;

} // namespace

std::string quote_value(const std::string &v) {
  // Control bytes are shown as \xNN: a newline in an argument must not split
  // the one-line message.
  std::string r = "\"";
  const size_t shown = std::min(v.size(), kEchoBytes);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = (unsigned char)v[i];
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      r += buf;
    } else {
      r += char(c);
    }
  }
  if (v.size() > kEchoBytes)
    return r + "...\" (" + std::to_string(v.size()) + " bytes)";
  return r + "\"";
}

namespace {

/// A bad value as typed where it is short and printable (`got adam`), else
/// quoted with its control bytes escaped: the message stays one line.
std::string echo_value(const std::string &v) {
  const bool plain =
      v.size() <= kEchoBytes &&
      std::all_of(v.begin(), v.end(), [](char ch) {
        const unsigned char c = (unsigned char)ch;
        return c >= 0x20 && c != 0x7f;
      });
  return plain ? v : quote_value(v);
}

} // namespace

Options parse_options(int argc, char **argv, bool zero, bool kfac) {
  Options o;
  bool save_every_given = false;
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
    // An integer in [lo, hi]; out-of-range values are refused, never
    // saturated (strtoll's ERANGE).
    auto integer = [&](int64_t lo, int64_t hi) {
      const std::string v = next();
      char *end = nullptr;
      errno = 0;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || std::isspace((unsigned char)v[0]))
        throw std::invalid_argument(a + ": expected an integer, got " +
                                    quote_value(v));
      if (errno == ERANGE || x < lo || x > hi)
        throw std::invalid_argument(
            a + ": " + quote_value(v) + " is out of range (" +
            std::to_string(lo) + " to " + std::to_string(hi) + ")");
      return int64_t(x);
    };
    // A finite number >= 0 (a learning rate of nan trains to nan losses).
    auto real = [&]() {
      const std::string v = next();
      char *end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || std::isspace((unsigned char)v[0]))
        throw std::invalid_argument(a + ": expected a number, got " +
                                    quote_value(v));
      if (!std::isfinite(x) || x < 0)
        throw std::invalid_argument(a + ": expected a finite number >= 0, "
                                        "got " +
                                    quote_value(v));
      return x;
    };
    auto path = [&]() {
      std::string v = next();
      if (v.empty())
        throw std::invalid_argument(a + ": empty path");
      return v;
    };
    if (a == "--steps")
      o.steps = integer(0, kMaxSteps);
    else if (a == "--data")
      o.data = path();
    else if (a == "--out")
      o.out = path();
    else if (a == "--trace")
      o.trace = true;
    else if (a == "--save")
      o.save = path();
    else if (a == "--save-every") {
      o.save_every = integer(1, kMaxSteps);
      save_every_given = true;
    } else if (a == "--save-initial")
      o.save_initial = true;
    else if (a == "--resume")
      o.resume = path();
    else if (a == "--init")
      o.init = path();
    else if (a == "--lr")
      o.lr = real(); // 0 is allowed: evaluating a checkpoint
    else if (a == "--weight-decay")
      o.weight_decay = real();
    else if (a == "--optimizer")
      o.optimizer = next();
    else if (a == "--kfac-damping") {
      const std::string v = next();
      char *end = nullptr;
      o.kfac_damping = std::strtod(v.c_str(), &end);
      kfacFlag = true;
      if (v.empty() || *end || std::isspace((unsigned char)v[0]))
        throw std::invalid_argument(a + ": expected a number, got " +
                                    quote_value(v));
      if (!(o.kfac_damping > 0) || !std::isfinite(o.kfac_damping))
        throw std::invalid_argument("--kfac-damping: expected a finite "
                                    "number > 0, got " +
                                    echo_value(v));
    } else if (a == "--kfac-refresh") {
      const std::string v = i + 1 < argc ? argv[i + 1] : "";
      if (!v.empty() && v[0] == '-')
        throw std::invalid_argument("--kfac-refresh: expected a non-negative "
                                    "integer, got " + echo_value(v));
      o.kfac_refresh = integer(0, kMaxSteps);
      kfacFlag = true;
      if (o.kfac_refresh < 1)
        throw std::invalid_argument("--kfac-refresh: expected a number of "
                                    "steps >= 1, got " + v);
    } else if (a == "--kfac-rule") {
      o.kfac_rule = next();
      kfacFlag = true;
      if (o.kfac_rule != "sgd" && o.kfac_rule != "lamb")
        throw std::invalid_argument("--kfac-rule: expected sgd or lamb, got " +
                                    echo_value(o.kfac_rule));
    } else if (a == "--seed")
      o.seed = uint64_t(integer(0, std::numeric_limits<int64_t>::max()));
    else if (a == "--quiet")
      o.quiet = true;
    else
      throw std::invalid_argument(
          "unknown flag " + quote_value(a) +
          " (flags: --steps N --data FILE --out DIR --trace --save DIR "
          "--save-every K --save-initial --resume DIR/step-N --init FILE --lr X "
          "--weight-decay X --optimizer adamw|sgd|kfac --kfac-damping X "
          "--kfac-refresh K --kfac-rule sgd|lamb --seed S --quiet)");
  }
  if (o.optimizer != "adamw" && o.optimizer != "sgd" && o.optimizer != "kfac")
    throw std::invalid_argument("--optimizer: expected adamw, sgd or kfac, "
                                "got " +
                                quote_value(o.optimizer));
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
  if (!o.init.empty() && !o.resume.empty())
    throw std::invalid_argument("--init and --resume: a resumed run takes its "
                                "parameters from the checkpoint; give one");
  if ((save_every_given || o.save_initial) && o.save.empty())
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
