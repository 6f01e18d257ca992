//===- Options.cpp - the flags every generated program takes -------------===//
#include "backends/common/harness/Options.h"

#include "backends/common/KfacRules.h" // kfac_rule_named

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

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
  // At most kEchoBytes characters as shown (an escaped byte is four).
  std::string r = "\"";
  size_t i = 0;
  for (; i < v.size() && r.size() <= kEchoBytes; ++i) {
    const unsigned char c = (unsigned char)v[i];
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      r += buf;
    } else {
      r += char(c);
    }
  }
  if (i < v.size())
    return r + "...\" (" + std::to_string(v.size()) + " bytes)";
  return r + "\"";
}

namespace {

/// A bad value as typed where it is short and printable (`got adam`), else
/// quoted with its control bytes escaped: the message stays one line.
std::string echo_value(const std::string &v) {
  const bool plain =
      v.size() <= kEchoBytes && std::all_of(v.begin(), v.end(), [](char ch) {
        const unsigned char c = (unsigned char)ch;
        return c >= 0x20 && c != 0x7f;
      });
  return plain ? v : quote_value(v);
}

} // namespace

namespace {

/// Every flag parse_options takes: its spelling and what it does (--help).
struct FlagHelp {
  const char *flag, *help;
};
constexpr FlagHelp kFlags[] = {
    {"--steps N", "train N steps in all (default 10; a resumed run counts "
                  "the checkpoint's)"},
    {"--data FILE", "token file: .bin (uint16) or any file read as bytes "
                    "(default synthetic data)"},
    {"--graph-adjacency FILE", "a graph model's own adjacency: .npz (CSR or "
                               "edge list) or .mtx (default generated)"},
    {"--graph-features FILE", "with --graph-adjacency: .npy or .npz "
                              "[nodes, features] floats"},
    {"--graph-labels FILE", "with --graph-adjacency: .npy or .npz [nodes] "
                            "integer labels"},
    {"--out DIR", "write metrics.json (and trace.json) there; a folder "
                  "holding an earlier run's is refused"},
    {"--overwrite", "--out may replace an earlier run's metrics.json and "
                    "trace.json"},
    {"--trace", "also write DIR/trace.json (Chrome trace) under --out"},
    {"--save DIR", "checkpoint into DIR/step-N after the last step"},
    {"--save-every K", "with --save: a checkpoint every K steps too"},
    {"--save-initial", "with --save: DIR/step-0 before the first step"},
    {"--save-sync", "with --save: write each checkpoint before the next step "
                    "(default: on a thread while the next steps run)"},
    {"--resume DIR/step-N", "continue from a checkpoint of this program; "
                            "auto: the newest complete one under --save DIR "
                            "(none: start fresh)"},
    {"--init FILE", "initial parameters from a model.safetensors"},
    {"--straggler-factor F", "name a rank whose step work is above F x the "
                             "median rank's (default 1.5; 0: off)"},
    {"--straggler-window N", "compare the ranks every N steps, on each one's "
                             "median over them (default 10)"},
    {"--on-nan stop|rollback", "a non-finite loss stops the run (default), "
                               "or reloads the newest checkpoint under --save "
                               "and skips the data since it"},
    {"--on-nan-retries R", "with --on-nan rollback: at most R rollbacks "
                           "(default 2)"},
    {"--checkpoint-compress", "with --save: saves between full ones as "
                              "BitSnap deltas (parameters) and quantized "
                              "moments"},
    {"--checkpoint-full-every M", "with --checkpoint-compress: every M-th "
                                  "save full (default 4)"},
    {"--data-skip K", "skip K more global batches of data from the first "
                      "step on (to replay a rollback)"},
    {"--lr X", "learning rate (default 1e-3; 0 evaluates)"},
    {"--warmup N", "linear warm-up: step s (from 0) at lr (s+1)/N for the "
                   "first N steps (default 0)"},
    {"--lr-decay KIND", "none (default: lr after the warm-up), cosine or "
                        "linear down to --min-lr"},
    {"--decay-steps N", "with --lr-decay: the step it reaches --min-lr at "
                        "(default --steps)"},
    {"--min-lr X", "with --lr-decay: the floor (default 0.1 x --lr)"},
    {"--weight-decay X", "decoupled weight decay (default 0)"},
    {"--grad-clip C", "scale the gradients to a global norm of at most C "
                      "before each update (default off)"},
    {"--optimizer NAME", "adamw (default), sgd, or kfac for a K-FAC plan"},
    {"--kfac-damping X", "K-FAC: damping (default the plan's)"},
    {"--kfac-refresh K", "K-FAC: refresh the inverses every K steps"},
    {"--kfac-rule NAME", "K-FAC: sgd, lamb or adam-graft update rule"},
    {"--kfac-factor-every F",
     "K-FAC: factors every F steps into the running average"},
    {"--kfac-factor-decay D", "K-FAC: the average's decay in [0, 1) (0: none)"},
    {"--kfac-stagger", "K-FAC: each layer's inversions at its own step of the "
                       "cycle, not all at the refresh step's"},
    {"--kfac-factor-stride S",
     "K-FAC: factors from every S-th sample of a micro-batch"},
    {"--seed S", "initial weights and synthetic data (default 1234)"},
    {"--quiet", "no per-step lines"},
    {"--help", "print this and exit"},
};

} // namespace

std::string nearest_flag(const std::string &unknown) {
  // Levenshtein distance over a bounded prefix (an argument may be huge).
  const std::string a = unknown.substr(0, 64);
  std::string best;
  size_t bestCost = a.size() / 3 + 1;
  for (const FlagHelp &f : kFlags) {
    const std::string b(f.flag, std::strcspn(f.flag, " "));
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
      row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                           diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    if (row[b.size()] < bestCost) {
      bestCost = row[b.size()];
      best = b;
    }
  }
  return best;
}

bool wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0)
      return true;
  return false;
}

std::string usage(const std::string &program, const std::string &model,
                  const std::string &backend_flags) {
  std::string r = "usage: mpirun -np RANKS " + program + " [flags]\n  trains " +
                  model + " under the plan it was generated from\n\nflags:\n";
  auto line = [&](const std::string &flag, const std::string &help) {
    r += "  " + flag +
         std::string(flag.size() < 22 ? 22 - flag.size() : 1, ' ') + help +
         "\n";
  };
  for (const FlagHelp &f : kFlags)
    line(f.flag, f.help);
  // backend_flags: "FLAG\tHELP\n" lines.
  for (size_t b = 0; b < backend_flags.size();) {
    size_t e = backend_flags.find('\n', b);
    if (e == std::string::npos)
      e = backend_flags.size();
    const std::string l = backend_flags.substr(b, e - b);
    const size_t tab = l.find('\t');
    if (tab != std::string::npos)
      line(l.substr(0, tab), l.substr(tab + 1));
    b = e + 1;
  }
  return r;
}

Options parse_options(int argc, char **argv, bool zero, bool kfac) {
  Options o;
  bool save_every_given = false, on_nan_retries_given = false,
       full_every_given = false;
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
        throw std::invalid_argument(a + ": " + quote_value(v) +
                                    " is out of range (" + std::to_string(lo) +
                                    " to " + std::to_string(hi) + ")");
      return int64_t(x);
    };
    // A number, strtod's whole spelling (`given`: as typed, for messages).
    std::string given;
    auto number = [&]() {
      given = next();
      char *end = nullptr;
      const double x = std::strtod(given.c_str(), &end);
      if (given.empty() || *end || std::isspace((unsigned char)given[0]))
        throw std::invalid_argument(a + ": expected a number, got " +
                                    quote_value(given));
      return x;
    };
    // A finite number >= 0 (a learning rate of nan trains to nan losses).
    auto real = [&]() {
      const double x = number();
      if (!std::isfinite(x) || x < 0)
        throw std::invalid_argument(a +
                                    ": expected a finite number >= 0, "
                                    "got " +
                                    quote_value(given));
      return x;
    };
    // A finite number > 0 (a damping or a norm of 0 or inf means nothing).
    auto positive = [&]() {
      const double x = number();
      if (!(x > 0) || !std::isfinite(x))
        throw std::invalid_argument(a +
                                    ": expected a finite number > 0, "
                                    "got " +
                                    echo_value(given));
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
    else if (a == "--graph-adjacency")
      o.graph.adjacency = path();
    else if (a == "--graph-features")
      o.graph.features = path();
    else if (a == "--graph-labels")
      o.graph.labels = path();
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
    else if (a == "--save-sync")
      o.save_sync = true;
    else if (a == "--resume")
      o.resume = path();
    else if (a == "--init")
      o.init = path();
    else if (a == "--straggler-factor") {
      o.straggler_factor = real();
      if (o.straggler_factor != 0 && o.straggler_factor <= 1)
        throw std::invalid_argument("--straggler-factor: expected 0 (off) or "
                                    "a factor > 1, got " +
                                    echo_value(argv[i]));
    } else if (a == "--straggler-window")
      o.straggler_window = integer(1, kMaxSteps);
    else if (a == "--on-nan") {
      const std::string v = next();
      if (v != "stop" && v != "rollback")
        throw std::invalid_argument("--on-nan: expected stop or rollback, "
                                    "got " +
                                    echo_value(v));
      o.on_nan_rollback = v == "rollback";
    } else if (a == "--on-nan-retries") {
      o.on_nan_retries = integer(0, kMaxSteps);
      on_nan_retries_given = true;
    } else if (a == "--checkpoint-compress")
      o.checkpoint_compress = true;
    else if (a == "--checkpoint-full-every") {
      o.checkpoint_full_every = integer(1, kMaxSteps);
      full_every_given = true;
    } else if (a == "--data-skip")
      o.data_skip = integer(0, kMaxSteps);
    else if (a == "--lr")
      o.lr = real(); // 0 is allowed: evaluating a checkpoint
    else if (a == "--warmup")
      o.warmup = integer(0, kMaxSteps);
    else if (a == "--lr-decay") {
      const std::string v = next();
      if (v != "none" && v != "cosine" && v != "linear")
        throw std::invalid_argument("--lr-decay: expected none, cosine or "
                                    "linear, got " +
                                    echo_value(v));
      o.lr_decay = v == "cosine"   ? LrDecay::Cosine
                   : v == "linear" ? LrDecay::Linear
                                   : LrDecay::None;
    } else if (a == "--decay-steps")
      o.decay_steps = integer(1, kMaxSteps);
    else if (a == "--min-lr")
      o.min_lr = real();
    else if (a == "--weight-decay")
      o.weight_decay = real();
    else if (a == "--optimizer")
      o.optimizer = next();
    else if (a == "--grad-clip")
      o.grad_clip = positive();
    else if (a == "--kfac-damping") {
      o.kfac_damping = positive();
      kfacFlag = true;
    } else if (a == "--kfac-refresh") {
      const std::string v = i + 1 < argc ? argv[i + 1] : "";
      if (!v.empty() && v[0] == '-')
        throw std::invalid_argument("--kfac-refresh: expected a non-negative "
                                    "integer, got " +
                                    echo_value(v));
      o.kfac_refresh = integer(0, kMaxSteps);
      kfacFlag = true;
      if (o.kfac_refresh < 1)
        throw std::invalid_argument("--kfac-refresh: expected a number of "
                                    "steps >= 1, got " +
                                    v);
    } else if (a == "--kfac-rule") {
      o.kfac_rule = next();
      kfacFlag = true;
      KfacRule rule;
      if (!kfac_rule_named(o.kfac_rule, rule))
        throw std::invalid_argument("--kfac-rule: expected " +
                                    kfac_rule_choices() + ", got " +
                                    echo_value(o.kfac_rule));
    } else if (a == "--kfac-factor-every") {
      o.kfac_factor_every = integer(1, kMaxSteps);
      kfacFlag = true;
    } else if (a == "--kfac-factor-stride") {
      o.kfac_factor_stride = integer(1, kMaxSteps);
      kfacFlag = true;
    } else if (a == "--kfac-factor-decay") {
      o.kfac_factor_decay = real();
      kfacFlag = true;
      if (o.kfac_factor_decay >= 1)
        throw std::invalid_argument("--kfac-factor-decay: expected a number "
                                    "in [0, 1), got " +
                                    echo_value(argv[i]));
    } else if (a == "--kfac-stagger") {
      o.kfac_stagger = true;
      kfacFlag = true;
    } else if (a == "--seed")
      o.seed = uint64_t(integer(0, std::numeric_limits<int64_t>::max()));
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--overwrite")
      o.overwrite = true;
    else {
      const std::string near = nearest_flag(a);
      throw std::invalid_argument(
          "unknown flag " + quote_value(a) +
          (near.empty() ? " (" : " (did you mean " + near + "? ") +
          "--help lists the flags)");
    }
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
                                "and --kfac-factor-* need --optimizer kfac");
  // ZeRO shards AdamW's state, or K-FAC's rule's (KfacRun rule_step); plain
  // SGD has no sharded step.
  if (zero && o.optimizer == "sgd")
    throw std::invalid_argument("--optimizer sgd: the plan shards the "
                                "optimizer state (ZeRO); use adamw");
  if (!o.init.empty() && !o.resume.empty())
    throw std::invalid_argument("--init and --resume: a resumed run takes its "
                                "parameters from the checkpoint; give one");
  if ((save_every_given || o.save_initial || o.save_sync) && o.save.empty())
    throw std::invalid_argument(
        "--save-every/--save-initial/--save-sync need --save DIR");
  if (const std::string m = o.graph.missing(); !m.empty())
    throw std::invalid_argument(m + ": missing (a graph read from files needs "
                                    "--graph-adjacency, --graph-features and "
                                    "--graph-labels)");
  if (o.on_nan_rollback && o.save.empty())
    throw std::invalid_argument("--on-nan rollback: needs --save DIR (the "
                                "folder whose newest checkpoint it reloads)");
  if (o.checkpoint_compress && o.save.empty())
    throw std::invalid_argument("--checkpoint-compress: needs --save DIR");
  if (full_every_given && !o.checkpoint_compress)
    throw std::invalid_argument("--checkpoint-full-every: needs "
                                "--checkpoint-compress");
  if (on_nan_retries_given && !o.on_nan_rollback)
    throw std::invalid_argument("--on-nan-retries: needs --on-nan rollback");
  if ((o.decay_steps > 0 || !std::isnan(o.min_lr)) &&
      o.lr_decay == LrDecay::None)
    throw std::invalid_argument("--decay-steps/--min-lr: need --lr-decay "
                                "cosine or linear");
  if (o.min_lr > o.lr) { // also keeps --lr 0 (an evaluation) at 0 throughout
    char buf[96];
    std::snprintf(buf, sizeof buf, "--min-lr: %g is above --lr %g", o.min_lr,
                  o.lr);
    throw std::invalid_argument(buf);
  }
  if (o.decay_steps > 0 && o.decay_steps <= o.warmup)
    throw std::invalid_argument(
        "--decay-steps " + std::to_string(o.decay_steps) +
        ": expected more steps than --warmup " + std::to_string(o.warmup));
  if (o.resume == "auto" && o.save.empty())
    throw std::invalid_argument("--resume auto: needs --save DIR (the folder "
                                "whose newest checkpoint it resumes)");
  return o;
}

LrSchedule lr_schedule(const Options &o) {
  LrSchedule s;
  s.lr = o.lr;
  s.min_lr = std::isnan(o.min_lr) ? 0.1 * o.lr : o.min_lr;
  s.warmup = o.warmup;
  s.decay_steps = o.decay_steps > 0 ? o.decay_steps : o.steps;
  s.decay = o.lr_decay;
  return s;
}

namespace {

/// The AUTODDL_* variables a program reads, and the values each takes ("#": a
/// finite number of seconds >= 0, "#+": > 0, "#n": a number >= 0). Most are
/// read deep in a backend (or only by one of them), where a bad value would be
/// ignored or turned into 0.
struct EnvRule {
  const char *name;
  std::vector<const char *> values;
};
const EnvRule kEnvRules[] = {
    {"AUTODDL_WATCHDOG_TIMEOUT", {"#"}},
    {"AUTODDL_CONNECT_TIMEOUT", {"#+"}},
    {"AUTODDL_CUDA_GRAPH", {"0", "1"}},
    {"AUTODDL_SHARE_GPU", {"0", "1"}},
    {"AUTODDL_ATTENTION", {"own", "cudnn"}},
    {"AUTODDL_ATTENTION_VERBOSE", {"0", "1"}},
    {"AUTODDL_CONV", {"own", "cudnn"}},
    {"AUTODDL_CONV_VERBOSE", {"0", "1"}},
    {"AUTODDL_CONV_AUTOTUNE", {"0", "1"}}, // default 0 (ConvCudnn.cu)
    {"AUTODDL_CONV_WORKSPACE_CAP", {"none"}}, // to measure the cap's cost
    {"AUTODDL_BATCHNORM", {"auto", "split", "fused"}},
    {"AUTODDL_CONV_WGRAD", {"fp32", "bf16"}},
    {"AUTODDL_CONV_GEMM",
     {"0", "1", "forward", "dgrad", "wgrad", "forward,dgrad", "forward,wgrad",
      "dgrad,wgrad", "forward,dgrad,wgrad"}},
    {"AUTODDL_KFAC_FILL", {"placed", "waits", "thread"}},
    {"AUTODDL_KFAC_FACTOR_GRAPH", {"0", "1"}},
    {"AUTODDL_KFAC_PRECOND", {"bf16", "fp32"}},
    {"AUTODDL_GEMM_AUTOTUNE", {"0", "1"}},
    {"AUTODDL_GEMM_NO_PAD", {"1"}}, // any value turns padding off
    {"AUTODDL_GEMM_NO_GELU_EPILOGUE", {"0", "1"}},
    {"AUTODDL_GEMM_NO_RESIDUAL_EPILOGUE", {"0", "1"}},
    {"AUTODDL_FP8", {"0", "all", "rule"}},
    {"AUTODDL_FP8_GEMMS",
     {"forward", "dgrad", "wgrad", "forward,dgrad", "forward,wgrad",
      "dgrad,wgrad", "forward,dgrad,wgrad"}},
    {"AUTODDL_FP8_FAST_ACCUM", {"0", "1"}},
    {"AUTODDL_FP8_MIN_INTENSITY", {"#n"}},
    {"AUTODDL_FP8_CAST_ONCE", {"0", "weights", "all"}},
};

} // namespace

void check_environment() {
  for (const EnvRule &rule : kEnvRules) {
    const char *set = std::getenv(rule.name);
    if (!set || !*set)
      continue;
    const std::string v = set;
    std::string expected;
    bool ok = false;
    for (const char *allowed : rule.values) {
      if (allowed[0] == '#') { // "#", "#+": seconds >= 0, > 0; "#n": >= 0
        char *end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        const bool positive = allowed[1] == '+';
        ok = ok || (!*end && std::isfinite(x) && (positive ? x > 0 : x >= 0) &&
                    !std::isspace((unsigned char)v[0]));
        expected += allowed[1] == 'n' ? "a number >= 0"
                    : positive        ? "a number of seconds > 0"
                                      : "a number of seconds >= 0";
      } else {
        ok = ok || v == allowed;
        expected += (expected.empty() ? "" : " or ") + std::string(allowed);
      }
    }
    if (!ok)
      throw std::invalid_argument(std::string(rule.name) + "=" +
                                  quote_value(v) + ": expected " + expected);
  }
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
