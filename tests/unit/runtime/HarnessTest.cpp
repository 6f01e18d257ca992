// The harness of generated programs (backends/common/harness): flags, the
// parameter table, data selection and pipeline tags, without MPI.
#include "backends/common/FileIo.h"
#include "backends/common/harness/DataOrder.h"
#include "backends/common/harness/KfacProgram.h" // kfac_run_config
#include "backends/common/harness/Options.h"
#include "backends/common/harness/ParamTable.h"
#include "backends/common/harness/Pipeline.h"
#include "backends/common/harness/Spec.h"
#include "tests/unit/ThrownMessage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

using namespace autoddl::rt;
using namespace autoddl::rt::harness;

namespace {

Options parse(std::vector<std::string> args, bool zero = false,
              bool kfac = false) {
  args.insert(args.begin(), "train");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  return parse_options(int(argv.size()), argv.data(), zero, kfac);
}

/// The message parse() throws, or "" when it does not.
std::string parseError(std::vector<std::string> args, bool zero = false,
                       bool kfac = false) {
  try {
    parse(std::move(args), zero, kfac);
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "";
}

TEST(HarnessOptions, DefaultsAndEveryFlag) {
  const Options d = parse({});
  EXPECT_EQ(d.steps, 10);
  EXPECT_EQ(d.optimizer, "adamw");
  EXPECT_EQ(d.seed, 1234u);
  EXPECT_DOUBLE_EQ(d.lr, 1e-3);
  const Options o = parse({"--steps",
                           "7",
                           "--data",
                           "d.bin",
                           "--out",
                           "o",
                           "--trace",
                           "--save",
                           "ck",
                           "--save-every",
                           "3",
                           "--save-initial",
                           "--resume",
                           "ck/step-3",
                           "--lr",
                           "0.5",
                           "--weight-decay",
                           "0.1",
                           "--optimizer",
                           "sgd",
                           "--seed",
                           "99",
                           "--quiet"});
  EXPECT_EQ(o.steps, 7);
  EXPECT_EQ(o.data, "d.bin");
  EXPECT_EQ(o.out, "o");
  EXPECT_TRUE(o.trace);
  EXPECT_EQ(o.save, "ck");
  EXPECT_EQ(o.save_every, 3);
  EXPECT_TRUE(o.save_initial);
  EXPECT_EQ(o.resume, "ck/step-3");
  EXPECT_DOUBLE_EQ(o.lr, 0.5);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.1);
  EXPECT_EQ(o.optimizer, "sgd");
  EXPECT_EQ(o.seed, 99u);
  EXPECT_TRUE(o.quiet);
}

// A program generated from a K-FAC plan runs K-FAC by default; its flags
// override the plan's values, and only K-FAC takes them.
TEST(HarnessOptions, KfacFlags) {
  const Options d = parse({}, false, true);
  EXPECT_EQ(d.optimizer, "kfac");
  EXPECT_TRUE(std::isnan(d.kfac_damping));
  EXPECT_EQ(d.kfac_refresh, 0);
  const Options o = parse(
      {"--kfac-damping", "0.01", "--kfac-refresh", "5", "--kfac-rule", "lamb"},
      false, true);
  EXPECT_EQ(o.kfac_damping, 0.01);
  EXPECT_EQ(o.kfac_refresh, 5);
  EXPECT_EQ(o.kfac_rule, "lamb");
  EXPECT_EQ(parse({"--optimizer", "adamw"}, false, true).optimizer, "adamw");
  EXPECT_EQ(parseError({"--kfac-damping", "0"}, false, true),
            "--kfac-damping: expected a finite number > 0, got 0");
  EXPECT_EQ(parseError({"--kfac-refresh", "0"}, false, true),
            "--kfac-refresh: expected a number of steps >= 1, got 0");
  EXPECT_EQ(parseError({"--kfac-rule", "adam"}, false, true),
            "--kfac-rule: expected sgd, lamb or adam-graft, got adam");
  // A value with a newline stays on the message's one line (flags_fuzzer).
  EXPECT_EQ(parseError({"--kfac-rule", ";\n;"}, false, true),
            "--kfac-rule: expected sgd, lamb or adam-graft, got \";\\x0a;\"");
  EXPECT_EQ(parseError({"--kfac-refresh", "-\n"}, false, true),
            "--kfac-refresh: expected a non-negative integer, got \"-\\x0a\"");
  EXPECT_EQ(parseError({"--optimizer", "kfac"}),
            "--optimizer kfac: this program was generated from a first-order "
            "plan (plan with --optimizer kfac)");
  EXPECT_EQ(
      parseError({"--optimizer", "sgd", "--kfac-refresh", "2"}, false, true),
      "--kfac-damping/--kfac-refresh/--kfac-rule and --kfac-factor-* need "
      "--optimizer kfac");
  // The running average of the factors (KfacRules.h kfac_factor_due).
  EXPECT_EQ(d.kfac_factor_every, 0);
  EXPECT_TRUE(std::isnan(d.kfac_factor_decay));
  const Options f = parse(
      {"--kfac-factor-every", "5", "--kfac-factor-decay", "0.95"}, false, true);
  EXPECT_EQ(f.kfac_factor_every, 5);
  EXPECT_EQ(f.kfac_factor_decay, 0.95);
  EXPECT_EQ(parseError({"--kfac-factor-every", "0"}, false, true),
            "--kfac-factor-every: \"0\" is out of range (1 to 1099511627776)");
  EXPECT_EQ(parseError({"--kfac-factor-decay", "1"}, false, true),
            "--kfac-factor-decay: expected a number in [0, 1), got 1");
  EXPECT_EQ(parseError({"--kfac-factor-decay", "-0.5"}, false, true),
            "--kfac-factor-decay: expected a finite number >= 0, got \"-0.5\"");
  // The factor stride (KfacRules.h kfac_row_stride); 0: not given.
  EXPECT_EQ(d.kfac_factor_stride, 0);
  EXPECT_EQ(
      parse({"--kfac-factor-stride", "4"}, false, true).kfac_factor_stride, 4);
  EXPECT_EQ(parseError({"--kfac-factor-stride", "0"}, false, true),
            "--kfac-factor-stride: \"0\" is out of range (1 to 1099511627776)");
}

// The flag's rule over the plan's, and the rule's eps (kfac_rule_eps).
TEST(HarnessOptions, KfacRuleFlagOverThePlans) {
  struct NoParam {};
  NoParam w;
  KfacProgramOf<NoParam> p;
  p.rule = "lamb";
  p.layers.push_back({"fc", &w, nullptr, 4, 4, true});
  const KfacConfig plan = kfac_run_config(p, parse({}, false, true));
  EXPECT_EQ(plan.rule, KfacRule::Lamb);
  EXPECT_EQ(plan.eps, 1e-6);
  const KfacConfig flag =
      kfac_run_config(p, parse({"--kfac-rule", "adam-graft"}, false, true));
  EXPECT_EQ(flag.rule, KfacRule::AdamGraft);
  EXPECT_EQ(flag.eps, 1e-8); // AdamW's
  p.rule = "adam";
  EXPECT_THROW(kfac_run_config(p, parse({}, false, true)),
               std::invalid_argument);
}

TEST(HarnessOptions, BadFlagsSayWhatAndWhereOnOneLine) {
  EXPECT_EQ(parseError({"--steps", "-1"}),
            "--steps: \"-1\" is out of range (0 to 1099511627776)");
  EXPECT_EQ(parseError({"--steps", "3x"}),
            "--steps: expected an integer, got \"3x\"");
  // Beyond int64: refused, not saturated to 2^63-1 steps.
  EXPECT_EQ(parseError({"--steps", "99999999999999999999"}),
            "--steps: \"99999999999999999999\" is out of range (0 to "
            "1099511627776)");
  EXPECT_EQ(parseError({"--lr", "fast"}),
            "--lr: expected a number, got \"fast\"");
  for (const char *v : {"nan", "inf", "-1e-3", "1e999"})
    EXPECT_EQ(parseError({"--lr", v}),
              std::string("--lr: expected a finite number >= 0, got \"") + v +
                  "\"");
  EXPECT_EQ(parseError({"--lr", "0"}), ""); // evaluating a checkpoint
  EXPECT_EQ(parseError({"--weight-decay", "nan"}),
            "--weight-decay: expected a finite number >= 0, got \"nan\"");
  EXPECT_EQ(parseError({"--save", "ck", "--save-every", "0"}),
            "--save-every: \"0\" is out of range (1 to 1099511627776)");
  EXPECT_EQ(parseError({"--out", ""}), "--out: empty path");
  EXPECT_EQ(parseError({"--data"}), "--data: missing value");
  EXPECT_EQ(parseError({"--optimizer", "adam"}),
            "--optimizer: expected adamw, sgd or kfac, got \"adam\"");
  EXPECT_EQ(
      parseError({"--optimizer", "sgd"}, /*zero=*/true),
      "--optimizer sgd: the plan shards the optimizer state (ZeRO); use adamw");
  EXPECT_EQ(parseError({"--save-every", "2"}),
            "--save-every/--save-initial/--save-sync need --save DIR");
  EXPECT_EQ(parseError({"--save-sync"}),
            "--save-every/--save-initial/--save-sync need --save DIR");
  EXPECT_EQ(parseError({"--resume", "auto"}),
            "--resume auto: needs --save DIR (the folder whose newest "
            "checkpoint it resumes)");
  const std::string unknown = parseError({"--stpes", "3"});
  EXPECT_EQ(unknown, "unknown flag \"--stpes\" (did you mean --steps? --help "
                     "lists the flags)");
  EXPECT_EQ(parseError({"--zzzzzzzzzz"}),
            "unknown flag \"--zzzzzzzzzz\" (--help lists the flags)");
  // A long value is echoed by its first 80 bytes.
  const std::string huge = parseError({"--seed", std::string(100000, '7')});
  EXPECT_LT(huge.size(), 200u) << huge;
  EXPECT_NE(huge.find("(100000 bytes)"), std::string::npos) << huge;
  // A control byte in an argument is shown escaped (flags_fuzzer found it).
  EXPECT_EQ(parseError({"--optimizer", "a\nb"}),
            "--optimizer: expected adamw, sgd or kfac, got \"a\\x0ab\"");
  for (const std::string &m :
       {unknown, parseError({"--lr", "x"}), parseError({"--data"}), huge})
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(parseError({"--optimizer", "sgd"}), "");
}

// The anomaly flags (docs/checkpoints.md "Anomalies"): defaults, values, and
// each bad one refused in one line naming the flag.
TEST(HarnessOptions, AnomalyFlags) {
  const Options d = parse({});
  EXPECT_DOUBLE_EQ(d.straggler_factor, 1.5);
  EXPECT_EQ(d.straggler_window, 10);
  EXPECT_FALSE(d.on_nan_rollback);
  EXPECT_EQ(d.on_nan_retries, 2);
  EXPECT_EQ(d.data_skip, 0);
  const Options o = parse({"--straggler-factor", "0", "--straggler-window", "4",
                           "--save", "ck", "--on-nan", "rollback",
                           "--on-nan-retries", "0", "--data-skip", "3"});
  EXPECT_DOUBLE_EQ(o.straggler_factor, 0);
  EXPECT_EQ(o.straggler_window, 4);
  EXPECT_TRUE(o.on_nan_rollback);
  EXPECT_EQ(o.on_nan_retries, 0);
  EXPECT_EQ(o.data_skip, 3);
  EXPECT_FALSE(parse({"--on-nan", "stop"}).on_nan_rollback);
  EXPECT_EQ(parseError({"--straggler-factor", "1"}),
            "--straggler-factor: expected 0 (off) or a factor > 1, got 1");
  EXPECT_EQ(parseError({"--straggler-window", "0"}),
            "--straggler-window: \"0\" is out of range (1 to 1099511627776)");
  EXPECT_EQ(parseError({"--on-nan", "skip"}),
            "--on-nan: expected stop or rollback, got skip");
  EXPECT_EQ(parseError({"--on-nan", "rollback"}),
            "--on-nan rollback: needs --save DIR (the folder whose newest "
            "checkpoint it reloads)");
  EXPECT_EQ(parseError({"--on-nan-retries", "1"}),
            "--on-nan-retries: needs --on-nan rollback");
  const Options z = parse({"--save", "ck", "--checkpoint-compress",
                           "--checkpoint-full-every", "3"});
  EXPECT_TRUE(z.checkpoint_compress);
  EXPECT_EQ(z.checkpoint_full_every, 3);
  EXPECT_EQ(d.checkpoint_full_every, 4);
  EXPECT_EQ(parseError({"--checkpoint-compress"}),
            "--checkpoint-compress: needs --save DIR");
  EXPECT_EQ(parseError({"--save", "ck", "--checkpoint-full-every", "2"}),
            "--checkpoint-full-every: needs --checkpoint-compress");
  EXPECT_EQ(parseError({"--data-skip", "-1"}),
            "--data-skip: \"-1\" is out of range (0 to 1099511627776)");
}

// The schedule's flags (LrSchedule.h): defaults filled in by lr_schedule,
// each bad value refused in one line naming the flag.
TEST(HarnessOptions, LrScheduleFlags) {
  const LrSchedule d = lr_schedule(parse({"--lr", "0.5", "--steps", "7"}));
  EXPECT_EQ(d.decay, LrDecay::None);
  EXPECT_EQ(d.warmup, 0);
  EXPECT_EQ(d.decay_steps, 7);      // --steps
  EXPECT_DOUBLE_EQ(d.min_lr, 0.05); // 0.1 x --lr
  const Options o = parse({"--warmup", "3", "--lr-decay", "linear",
                           "--decay-steps", "9", "--min-lr", "1e-5"});
  EXPECT_EQ(o.warmup, 3);
  EXPECT_EQ(o.lr_decay, LrDecay::Linear);
  EXPECT_EQ(lr_schedule(o).decay_steps, 9);
  EXPECT_EQ(lr_schedule(o).min_lr, 1e-5);
  EXPECT_EQ(parse({"--lr-decay", "cosine"}).lr_decay, LrDecay::Cosine);
  // A resumed run counts --steps from step 0 too: the same schedule.
  const LrSchedule resumed = lr_schedule(
      parse({"--lr-decay", "cosine", "--steps", "7", "--resume", "ck/step-3"}));
  EXPECT_EQ(resumed.decay_steps, 7);
  EXPECT_EQ(parseError({"--warmup", "-1"}),
            "--warmup: \"-1\" is out of range (0 to 1099511627776)");
  EXPECT_EQ(parseError({"--lr-decay", "step"}),
            "--lr-decay: expected none, cosine or linear, got step");
  EXPECT_EQ(parseError({"--lr-decay", "cosine", "--decay-steps", "0"}),
            "--decay-steps: \"0\" is out of range (1 to 1099511627776)");
  for (const char *v : {"nan", "inf", "-1"})
    EXPECT_EQ(parseError({"--lr-decay", "cosine", "--min-lr", v}),
              std::string("--min-lr: expected a finite number >= 0, got \"") +
                  v + "\"");
  EXPECT_EQ(parseError({"--lr-decay", "cosine", "--min-lr", "0.01"}),
            "--min-lr: 0.01 is above --lr 0.001");
  // An evaluation (--lr 0) takes no floor above it.
  EXPECT_EQ(
      parseError({"--lr", "0", "--lr-decay", "cosine", "--min-lr", "1e-6"}),
      "--min-lr: 1e-06 is above --lr 0");
  EXPECT_EQ(parseError({"--min-lr", "0"}),
            "--decay-steps/--min-lr: need --lr-decay cosine or linear");
  EXPECT_EQ(parseError({"--decay-steps", "5"}),
            "--decay-steps/--min-lr: need --lr-decay cosine or linear");
  EXPECT_EQ(parseError({"--lr-decay", "linear", "--warmup", "5",
                        "--decay-steps", "5"}),
            "--decay-steps 5: expected more steps than --warmup 5");
}

// --grad-clip C: off by default; C a finite number > 0, else one line
// naming the flag and the value.
TEST(HarnessOptions, GradClipFlag) {
  EXPECT_EQ(parse({}).grad_clip, 0.0);
  EXPECT_EQ(parse({"--grad-clip", "1.0"}).grad_clip, 1.0);
  EXPECT_EQ(parse({"--grad-clip", "2e-3"}, true, true).grad_clip, 2e-3);
  for (const char *v : {"0", "-1", "nan", "inf", "-inf"})
    EXPECT_EQ(parseError({"--grad-clip", v}),
              std::string("--grad-clip: expected a finite number > 0, got ") +
                  v);
  EXPECT_EQ(parseError({"--grad-clip", "1x"}),
            "--grad-clip: expected a number, got \"1x\"");
  EXPECT_EQ(parseError({"--grad-clip", ""}),
            "--grad-clip: expected a number, got \"\"");
  EXPECT_EQ(parseError({"--grad-clip"}), "--grad-clip: missing value");
  EXPECT_EQ(parseError({"--grad-clip", "1\n"}),
            "--grad-clip: expected a number, got \"1\\x0a\"");
  EXPECT_EQ(parseError({"--grad-clp", "1"}),
            "unknown flag \"--grad-clp\" (did you mean --grad-clip? --help "
            "lists the flags)");
}

// Step s reads batch s + the batches skipped so far (a rollback's window).
TEST(HarnessData, SkippedBatchesShiftTheDataOfEveryLaterStep) {
  set_data_skip(0);
  EXPECT_EQ(data_batch(5), 5);
  set_data_skip(3);
  EXPECT_EQ(data_batch(4), 7);
  EXPECT_EQ(data_skip(), 3);
  set_data_skip(0);
}

TEST(HarnessOptions, GraphFilesComeTogetherAndOnlyForGraphModels) {
  const Options o = parse({"--graph-adjacency", "a.npz", "--graph-features",
                           "x.npy", "--graph-labels", "y.npy"});
  EXPECT_EQ(o.graph.adjacency, "a.npz");
  EXPECT_EQ(o.graph.features, "x.npy");
  EXPECT_EQ(o.graph.labels, "y.npy");
  EXPECT_EQ(
      parseError({"--graph-adjacency", "a.npz", "--graph-labels", "y.npy"}),
      "--graph-features: missing (a graph read from files needs "
      "--graph-adjacency, --graph-features and --graph-labels)");
  EXPECT_EQ(parseError({"--graph-labels", "y.npy"})
                .rfind("--graph-adjacency: missing", 0),
            0u);
  ProgramSpec s;
  EXPECT_THROW(check_data_flags(s, "", o.graph), std::invalid_argument);
  EXPECT_NO_THROW(check_data_flags(s, "tokens.bin", GraphFileNames{}));
  s.data = DataKind::Graph;
  EXPECT_NO_THROW(check_data_flags(s, "", o.graph));
  EXPECT_THROW(check_data_flags(s, "tokens.bin", GraphFileNames{}),
               std::invalid_argument);
}

// --help lists every flag parse_options takes, and a backend's own; the
// unknown-flag message names the same flags.
TEST(HarnessOptions, HelpListsEveryFlag) {
  const std::string help =
      usage("train", "\"tiny\"", "--profile\tper-op-kind device time\n");
  for (const char *flag :
       {"--steps N",        "--data FILE",      "--out DIR",
        "--overwrite",      "--trace",          "--save DIR",
        "--save-every K",   "--save-initial",   "--resume DIR/step-N",
        "--init FILE",      "--lr X",           "--weight-decay X",
        "--optimizer NAME", "--kfac-damping X", "--kfac-refresh K",
        "--kfac-rule NAME", "--seed S",         "--quiet",
        "--help",           "--profile",        "--warmup N",
        "--lr-decay KIND",  "--decay-steps N",  "--min-lr X",
        "--grad-clip C"})
    EXPECT_NE(help.find(std::string("\n  ") + flag), std::string::npos) << flag;
  EXPECT_TRUE(parse({"--overwrite"}).overwrite);
  char prog[] = "train", flag[] = "-h";
  char *argv[] = {prog, flag};
  EXPECT_TRUE(wants_help(2, argv));
  EXPECT_FALSE(wants_help(1, argv));
}

// The AUTODDL_* variables a program reads: a value it does not take is
// refused by name, empty is unset.
TEST(HarnessOptions, EnvironmentValuesAreChecked) {
  auto error = [](const char *name, const char *value) {
    ::setenv(name, value, 1);
    std::string m;
    try {
      check_environment();
    } catch (const std::invalid_argument &e) {
      m = e.what();
    }
    ::unsetenv(name);
    return m;
  };
  EXPECT_EQ(error("AUTODDL_CUDA_GRAPH", "off"),
            "AUTODDL_CUDA_GRAPH=\"off\": expected 0 or 1");
  EXPECT_EQ(error("AUTODDL_KFAC_FILL", "x"),
            "AUTODDL_KFAC_FILL=\"x\": expected placed or waits or thread");
  EXPECT_EQ(error("AUTODDL_WATCHDOG_TIMEOUT", "-1"),
            "AUTODDL_WATCHDOG_TIMEOUT=\"-1\": expected a number of seconds "
            ">= 0");
  EXPECT_EQ(error("AUTODDL_CONNECT_TIMEOUT", "0"),
            "AUTODDL_CONNECT_TIMEOUT=\"0\": expected a number of seconds > 0");
  EXPECT_EQ(error("AUTODDL_WATCHDOG_TIMEOUT", "0"), "");
  EXPECT_EQ(error("AUTODDL_CUDA_GRAPH", ""), "");
  EXPECT_EQ(error("AUTODDL_ATTENTION", "own"), "");
  EXPECT_EQ(error("AUTODDL_CONV", "own"), "");
  EXPECT_EQ(error("AUTODDL_CONV_WGRAD", "bf16"), "");
  EXPECT_EQ(error("AUTODDL_CONV_WGRAD", "fp16"),
            "AUTODDL_CONV_WGRAD=\"fp16\": expected fp32 or bf16");
  EXPECT_EQ(error("AUTODDL_CONV", "im2col"),
            "AUTODDL_CONV=\"im2col\": expected own or cudnn");
  // On by default (ConvCudnn.cu); 0 keeps the heuristics' first config.
  EXPECT_EQ(error("AUTODDL_CONV_AUTOTUNE", "0"), "");
  EXPECT_EQ(error("AUTODDL_CONV_AUTOTUNE", "off"),
            "AUTODDL_CONV_AUTOTUNE=\"off\": expected 0 or 1");
  EXPECT_EQ(error("AUTODDL_CONV_WORKSPACE_CAP", "none"), "");
  EXPECT_EQ(error("AUTODDL_CONV_WORKSPACE_CAP", "0"),
            "AUTODDL_CONV_WORKSPACE_CAP=\"0\": expected none");
  EXPECT_EQ(error("AUTODDL_KFAC_FACTOR_GRAPH", "0"), "");
  EXPECT_NE(error("AUTODDL_KFAC_FACTOR_GRAPH", "off"), "");
  EXPECT_EQ(error("AUTODDL_BATCHNORM", "fused"), "");
  EXPECT_EQ(error("AUTODDL_BATCHNORM", "1"),
            "AUTODDL_BATCHNORM=\"1\": expected auto or split or fused");
  EXPECT_EQ(error("AUTODDL_KFAC_PRECOND", "fp32"), "");
  EXPECT_EQ(error("AUTODDL_KFAC_PRECOND", "tf32"),
            "AUTODDL_KFAC_PRECOND=\"tf32\": expected bf16 or fp32");
  EXPECT_EQ(error("AUTODDL_CONV_GEMM", "dgrad,wgrad"), "");
  EXPECT_NE(error("AUTODDL_CONV_GEMM", "wgrad,dgrad"), "");
  // FP8's measuring knobs (docs/fp8.md "Knobs").
  EXPECT_EQ(error("AUTODDL_FP8", "yes"),
            "AUTODDL_FP8=\"yes\": expected 0 or all or rule");
  EXPECT_EQ(error("AUTODDL_FP8_GEMMS", "forward,dgrad"), "");
  EXPECT_NE(error("AUTODDL_FP8_GEMMS", "dgrad,forward"), "");
  EXPECT_EQ(error("AUTODDL_FP8_MIN_INTENSITY", "500"), "");
  EXPECT_EQ(error("AUTODDL_FP8_CAST_ONCE", "weights"), "");
  EXPECT_NE(error("AUTODDL_FP8_CAST_ONCE", "1"), "");
  EXPECT_EQ(error("AUTODDL_FP8_MIN_INTENSITY", "-5"),
            "AUTODDL_FP8_MIN_INTENSITY=\"-5\": expected a number >= 0");
}

TEST(HarnessOptions, OutputFoldersAreCheckedWithoutCreatingThem) {
  const std::string base =
      ::testing::TempDir() + "autoddl_outdir_" + std::to_string(::getpid());
  EXPECT_NO_THROW(check_output_dir(base + "/a/b", "--out"));
  EXPECT_FALSE(std::filesystem::exists(base)); // nothing created
  try {
    check_output_dir("/dev/null/x", "--save");
    FAIL() << "accepted a folder under a device";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()).rfind("--save /dev/null/x: ", 0), 0u)
        << e.what();
  }
  EXPECT_THROW(check_output_dir("/dev/full", "--out"), std::runtime_error);
  try {
    require_regular_file("/dev/zero", "data file");
    FAIL() << "accepted /dev/zero as data";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()).rfind("/dev/zero: not a regular file", 0),
              0u)
        << e.what();
  }
}

TEST(HarnessOptions, TakeFlagRemovesEveryCopyAndKeepsOrder) {
  std::vector<std::string> args = {"train", "--profile", "--steps", "2",
                                   "--profile"};
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  int argc = int(argv.size());
  EXPECT_TRUE(take_flag(argc, argv.data(), "--profile"));
  ASSERT_EQ(argc, 3);
  EXPECT_STREQ(argv[1], "--steps");
  EXPECT_STREQ(argv[2], "2");
  EXPECT_FALSE(take_flag(argc, argv.data(), "--profile"));
  EXPECT_EQ(argc, 3);
}

TEST(HarnessParamTable, SlicesTileTheFullTensor) {
  // B: every rank holds the whole tensor.
  const Slice b = param_slice(Shape{6, 4}, -1, 1, 2, 1);
  EXPECT_EQ(b.local, (Shape{6, 4}));
  // S(0) over 2: rows [3r, 3r + 3).
  const Slice s1 = param_slice(Shape{6, 4}, 0, 1, 2, 1);
  EXPECT_EQ(s1.offset, (Shape{3, 0}));
  EXPECT_EQ(s1.local, (Shape{3, 4}));
  // A vocabulary of 5 rows over 2 ranks: blocks of 3, the last shorter.
  EXPECT_EQ(param_slice(Shape{5, 4}, 0, 1, 2, 0).local, (Shape{3, 4}));
  EXPECT_EQ(param_slice(Shape{5, 4}, 0, 1, 2, 1).local, (Shape{2, 4}));
  // A packed q|k|v [4, 12] split per segment over 2: a view [4, 3, 4], rank 1
  // holds columns [2, 4) of every segment.
  const Slice qkv = param_slice(Shape{4, 12}, 1, 3, 2, 1);
  EXPECT_EQ(qkv.full, (Shape{4, 3, 4}));
  EXPECT_EQ(qkv.offset, (Shape{0, 0, 2}));
  EXPECT_EQ(qkv.local, (Shape{4, 3, 2}));
}

struct FakeParam : ParamBlock {};

TEST(HarnessParamTable, LayOutSizesBuffersByTheLargestBlock) {
  ProgramSpec s;
  s.tp = 2;
  s.dp = 4;
  FakeParam p;
  const ParamSpecOf<FakeParam> row{&p,       "lm_head", Shape{5, 4}, 0,
                                   "normal", 0.02,      0x2};
  EXPECT_EQ(row.segments, 1);
  lay_out(row, s, /*rtp=*/1, /*rpp=*/0);
  EXPECT_EQ(p.name, "lm_head");
  EXPECT_FALSE(p.held);    // device 0 does not hold it (bits 0x2)
  EXPECT_EQ(p.n, 8);       // rows [3, 5) of 4
  EXPECT_EQ(p.padded, 12); // rank 0's 12 elements, a multiple of dp
  lay_out(row, s, 0, 1);
  EXPECT_TRUE(p.held);
  EXPECT_EQ(p.n, 12);
}

// --grad-clip's norm counts every distinct gradient element once over the
// world: a tp block on each tp rank, a block replicated over tp on rank 0,
// an all-reduced gradient on dp rank 0 (a ZeRO shard on each), a tied one
// on the lowest pipeline device holding it.
TEST(HarnessParamTable, GradRangeCountsEachElementOnce) {
  ProgramSpec s;
  s.tp = 2;
  s.dp = 4;
  FakeParam split, whole;
  const ParamSpecOf<FakeParam> splitRow{&split,   "lm_head", Shape{5, 4}, 0,
                                        "normal", 0.02,      0x3};
  const ParamSpecOf<FakeParam> wholeRow{&whole, "ln.w", Shape{6}, -1,
                                        "ones", 0.0,    0x1};
  auto range = [&](const ParamSpecOf<FakeParam> &row, int64_t rpp, int64_t rtp,
                   int64_t rdp, bool zero) {
    lay_out(row, s, rtp, rpp);
    return grad_range(*row.p, row.devices, s, rpp, rtp, rdp, zero);
  };
  // Split over tp: each tp rank's block (rows [3, 5) on rank 1), on dp rank
  // 0 and pipeline device 0 (the lower of the two sharing it) only.
  GradRange r = range(splitRow, 0, 1, 0, false);
  EXPECT_EQ(r.offset, 0);
  EXPECT_EQ(r.n, 8);
  EXPECT_TRUE(r.counted);
  EXPECT_TRUE(range(splitRow, 0, 0, 0, false).counted);
  EXPECT_FALSE(range(splitRow, 0, 1, 2, false).counted); // dp's copy
  r = range(splitRow, 1, 0, 0, false); // the tied copy: scaled, not counted
  EXPECT_EQ(r.n, 12);
  EXPECT_FALSE(r.counted);
  // Replicated over tp: tp rank 0's copy only.
  EXPECT_TRUE(range(wholeRow, 0, 0, 0, false).counted);
  EXPECT_FALSE(range(wholeRow, 0, 1, 0, false).counted);
  EXPECT_EQ(range(wholeRow, 1, 0, 0, false).n, 0); // device 1 lacks it
  // ZeRO: each dp rank its shard of the padded buffer (12 floats on 4
  // ranks), the padding left out: rank 1 of tp holds 8 real elements.
  r = range(splitRow, 0, 1, 2, true);
  EXPECT_EQ(r.offset, 6);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.counted);
  r = range(splitRow, 0, 1, 3, true);
  EXPECT_EQ(r.offset, 9);
  EXPECT_EQ(r.n, 0);
  EXPECT_EQ(range(wholeRow, 0, 0, 3, true).n, 0); // 8 padded: [6, 8) padding
  EXPECT_EQ(range(wholeRow, 0, 0, 2, true).n, 2);
  EXPECT_FALSE(range(wholeRow, 0, 1, 2, true).counted);
}

TEST(HarnessParamTable, DeviceGroupsInFirstSeenOrder) {
  std::vector<uint64_t> seen;
  bool is_new = false;
  EXPECT_EQ(device_group(0x1, seen, is_new), -1); // one device: no group
  EXPECT_FALSE(is_new);
  EXPECT_EQ(device_group(0x5, seen, is_new), 0);
  EXPECT_TRUE(is_new);
  EXPECT_EQ(device_group(0x3, seen, is_new), 1);
  EXPECT_TRUE(is_new);
  EXPECT_EQ(device_group(0x5, seen, is_new), 0);
  EXPECT_FALSE(is_new);
  for (uint64_t d = 2; seen.size() < 64; ++d)
    device_group((d << 8) | 0x1, seen, is_new);
  EXPECT_THROW(device_group(0x3ull << 40, seen, is_new), std::runtime_error);
}

/// The data tests' step: dp 2 ranks of 2 micro-batches of 3 samples (a token
/// model's micro_batch, a classifier's class_batch), 12 in all.
ProgramSpec twelveSampleStep() {
  ProgramSpec s;
  s.dp = 2;
  s.micro_batches = 2;
  s.micro_batch = s.class_batch = 3;
  s.global_batch = 12;
  return s;
}

TEST(HarnessData, EveryRankAndMicroBatchReadsItsOwnBlock) {
  ProgramSpec s = twelveSampleStep();
  s.seq = 5;
  s.vocab = 50;
  std::set<int64_t> starts;
  for (int64_t rdp = 0; rdp < s.dp; ++rdp)
    for (int64_t mb = 0; mb < s.micro_batches; ++mb)
      starts.insert(token_block_start(s, rdp, mb));
  EXPECT_EQ(starts, (std::set<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(token_block_start(s, 1, 0), 6);
  // The tokens are the rows of the whole batch read at once.
  TokenSource source;
  EXPECT_FALSE(source.from_file());
  std::vector<int32_t> ids(size_t(s.micro_batch * s.seq)), targets(ids.size());
  source.read(s, 7, 3, 1, 1, ids.data(), targets.data());
  std::vector<int32_t> all(size_t(s.global_batch * s.seq)), allT(all.size());
  synthetic_tokens(7, 3, s.global_batch, s.seq, s.vocab, 0, s.global_batch,
                   all.data(), allT.data());
  const size_t at = size_t(9 * s.seq);
  EXPECT_EQ(ids, std::vector<int32_t>(all.begin() + at,
                                      all.begin() + at + ids.size()));
  EXPECT_EQ(targets, std::vector<int32_t>(allT.begin() + at,
                                          allT.begin() + at + ids.size()));
  // Either output may be skipped.
  std::vector<int32_t> only(ids.size());
  source.read(s, 7, 3, 1, 1, nullptr, only.data());
  EXPECT_EQ(only, targets);
}

TEST(HarnessData, TokenFileErrorsNameTheFile) {
  TokenSource source;
  const std::string error = autoddl::testing::thrownMessage(
      [&] { source.open("/nonexistent/tokens.bin", 50); });
  EXPECT_NE(error.find("/nonexistent/tokens.bin"), std::string::npos)
      << "opening a missing file: '" << error << "'";
}

TEST(HarnessData, ClassSamplesAreTheirBlockOfTheGlobalBatch) {
  ProgramSpec s = twelveSampleStep();
  s.features = 16;
  s.classes = 4;
  EXPECT_EQ(class_block_start(s, 1, 1), 9);
  std::vector<float> x(size_t(s.class_batch * s.features));
  std::vector<int32_t> y(size_t(s.class_batch));
  class_samples(s, 5, 2, 1, 1, x.data(), y.data());
  const int64_t n = s.global_batch;
  std::vector<float> allX(size_t(n * s.features));
  std::vector<int32_t> allY(static_cast<size_t>(n));
  synthetic_classes(5, 2, n, s.features, s.classes, kClassNoise, 0, n,
                    allX.data(), allY.data());
  EXPECT_EQ(y, std::vector<int32_t>(allY.begin() + 9, allY.end()));
  EXPECT_EQ(x, std::vector<float>(allX.begin() + 9 * s.features, allX.end()));
  // On threads (the CUDA program's host), the same values: samples 1-11 on
  // 4 threads, shares of 3, 3, 3 and 2.
  std::vector<float> threadedX(size_t((n - 1) * s.features), -1.0f);
  std::vector<int32_t> threadedY(size_t(n - 1), -1);
  synthetic_classes(5, 2, n, s.features, s.classes, kClassNoise, 1, n - 1,
                    threadedX.data(), threadedY.data(), 4);
  EXPECT_EQ(threadedX,
            std::vector<float>(allX.begin() + s.features, allX.end()));
  EXPECT_EQ(threadedY, std::vector<int32_t>(allY.begin() + 1, allY.end()));
}

TEST(HarnessData, GraphShardsPartitionTheRowsAndEdges) {
  ProgramSpec s;
  s.data = DataKind::Graph;
  s.nodes = 40;
  s.graph_nnz = 200;
  s.features = 3;
  s.classes = 4;
  const GraphShard whole = graph_shard(s, 11, 0);
  EXPECT_EQ(whole.graph_nnz, 200);
  EXPECT_EQ(whole.col_idx.size(), 200u);
  s.dp = 2;
  const GraphShard a = graph_shard(s, 11, 0), b = graph_shard(s, 11, 1);
  EXPECT_EQ(a.rows, 20);
  EXPECT_EQ(b.node0, 20);
  ASSERT_EQ(a.row_ptr.size(), 21u);
  EXPECT_EQ(a.row_ptr.front(), 0);
  EXPECT_EQ(b.row_ptr.front(), 0);
  EXPECT_EQ(size_t(a.row_ptr.back()), a.col_idx.size());
  EXPECT_EQ(a.col_idx.size() + b.col_idx.size(), 200u);
  EXPECT_EQ(a.values.size(), a.col_idx.size());
  // b's edges are the whole graph's from its first row on, and its features
  // the whole graph's rows 20..39.
  const size_t e0 = size_t(whole.row_ptr[20]);
  EXPECT_EQ(b.col_idx, std::vector<int32_t>(whole.col_idx.begin() + long(e0),
                                            whole.col_idx.end()));
  EXPECT_EQ(b.values, std::vector<float>(whole.values.begin() + long(e0),
                                         whole.values.end()));
  EXPECT_EQ(b.graph.x, std::vector<float>(whole.graph.x.begin() + 20 * 3,
                                          whole.graph.x.end()));
  EXPECT_EQ(a.train_labels.size(), 40u);
  EXPECT_EQ(a.train_labels[1], -1); // odd nodes are held out
  EXPECT_EQ(a.heldout_labels[0], -1);
  std::map<std::string, std::string> info;
  graph_info(a, info);
  EXPECT_EQ(info["graph_nodes"], "40");
  EXPECT_EQ(info["graph_adjacency_entries"], "200");
}

TEST(HarnessData, CountCorrectSkipsPaddingAndUnlabelledRows) {
  // Rows of 3 logits stored 4 apart (a padded vocabulary).
  const std::vector<float> logits = {0, 2, 1, 9,  // argmax 1 (9 is padding)
                                     5, 5, 1, 0,  // tie: the first, 0
                                     0, 1, 3, 0}; // 2
  const std::vector<int32_t> labels = {1, 1, -1};
  EXPECT_EQ(count_correct(logits.data(), labels.data(), 3, 3, 4), 1);
  const std::vector<int32_t> all = {1, 0, 2};
  EXPECT_EQ(count_correct(logits.data(), all.data(), 3, 3, 4), 3);
  EXPECT_EQ(count_correct(logits.data(), all.data(), 3, 4), 2); // ld = V
}

TEST(HarnessPipeline, DevicesAndTagsFollowTheSpec) {
  ProgramSpec s;
  s.pp = 4;
  s.stages = 8; // interleaved: stage 5 on device 1
  s.max_boundary = 3;
  set_program_spec(s);
  EXPECT_EQ(device_of(5, kDown), 1);
  EXPECT_EQ(device_of(1, kUp), 2);
  EXPECT_TRUE(device_runs_stage(1, 5));
  EXPECT_FALSE(device_runs_stage(2, 1));
  s.chimera = true;
  set_program_spec(s);
  EXPECT_TRUE(device_runs_stage(2, 1)); // Chimera's up pipeline
  std::set<int> tags;
  for (int64_t mb = 0; mb < 2; ++mb)
    for (int64_t boundary = 0; boundary < 8; ++boundary)
      for (TagKind kind : {kActivation, kGradient})
        for (int64_t k = 0; k < 3; ++k)
          tags.insert(tag(mb, boundary, kind, k));
  EXPECT_EQ(tags.size(), size_t(2 * 8 * 2 * 3)); // all distinct
  EXPECT_EQ(*tags.rbegin(), 2 * 8 * 2 * 3 - 1);  // and dense
}

} // namespace
