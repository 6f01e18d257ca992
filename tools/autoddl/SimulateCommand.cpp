//===- SimulateCommand.cpp - `autoddl simulate`: pipeline schedules ------===//
//
// Generates a pipeline schedule's per-stage instruction lists, runs them
// through the discrete-event simulator and prints the makespan, the bubble
// fraction and, per stage, busy time, idle intervals and peak activations: as a
// table with a small ASCII timeline, or as JSON (--json); --trace writes a
// Chrome trace. Times are per micro-batch and stage, in milliseconds;
// docs/pipeline-simulator.md describes the model and the constraints of each
// schedule.
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/PipelineTrace.h"
#include "cost_model/pipeline/Schedule.h"
#include "cost_model/pipeline/Simulator.h"
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"
#include "tools/autoddl/Commands.h"
#include "tools/autoddl/KfacRefreshFlag.h"
#include "tools/autoddl/SimulatePipeFisher.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

namespace autoddl::cli {
namespace {

using namespace autoddl::pipeline;

struct SimulateOptions {
  std::string schedule;
  int stages = 0;
  int microbatches = 0;
  int chunks = 2;
  std::string fwd = "1";
  std::string bwd = "2";
  std::string wgrad;
  double p2p = 0;
  bool json = false;
  bool ops = false;
  std::string tracePath;
  // --pipefisher: K-FAC items per layer (SimulatePipeFisher.h), ms.
  bool pipefisher = false;
  int kfacLayers = 1;
  std::string curv = "0.5", inv = "2", sync = "0", precond = "0.25";
  double margin = 0.05;
  std::string kfacRefresh; // K or K0,K1,... (KfacRefreshFlag.h)
  std::string kfacFill;    // items or fluid; empty: items
};

constexpr const char *kTimeUnit = "ms";
constexpr double kMicrosecondsPerUnit = 1000;
// The ASCII timeline is for small cases only.
constexpr int kTimelineMaxColumns = 160;
constexpr int kColumnsPerShortestOp = 3;

/// "1.5" -> {1.5}; "1,2,3" -> {1,2,3}. One value stands for every stage.
std::vector<double> parseTimes(const std::string &text, const char *flag,
                               int stages) {
  std::vector<double> values;
  size_t begin = 0;
  while (true) {
    size_t end = text.find(',', begin);
    std::string item = text.substr(
        begin, end == std::string::npos ? std::string::npos : end - begin);
    const char *first = item.c_str();
    char *last = nullptr;
    errno = 0;
    double value = std::strtod(first, &last);
    bool blankTail =
        last != first &&
        std::all_of(static_cast<const char *>(last), first + item.size(),
                    [](unsigned char c) { return std::isspace(c); });
    if (!blankTail || errno == ERANGE || !std::isfinite(value))
      throw UserError(fmt::format(
          "{}: '{}' is not a number or a comma-separated list of numbers", flag,
          text));
    if (value < 0)
      throw UserError(
          fmt::format("{}: times must be >= 0, got {}", flag, item));
    values.push_back(value);
    if (end == std::string::npos)
      break;
    begin = end + 1;
  }
  if (values.size() == 1)
    values.assign(stages, values.front());
  else if (static_cast<int>(values.size()) != stages)
    throw UserError(fmt::format(
        "{}: expected one time or one per stage ({}), got {} values", flag,
        stages, values.size()));
  return values;
}

ScheduleConfig configFrom(const SimulateOptions &options, bool chunksGiven) {
  std::optional<ScheduleKind> kind = parseScheduleName(options.schedule);
  if (!kind)
    throw UserError(fmt::format("unknown schedule '{}' (expected one of {})",
                                options.schedule, validScheduleNames()));
  if (chunksGiven && *kind != ScheduleKind::Interleaved)
    throw UserError(
        fmt::format("--chunks applies only to --schedule interleaved, got {}",
                    options.schedule));
  ScheduleConfig config;
  config.kind = *kind;
  config.stages = options.stages;
  config.microbatches = options.microbatches;
  config.chunks = *kind == ScheduleKind::Interleaved ? options.chunks : 1;
  if (auto problem = checkScheduleConfig(config))
    throw UserError(*problem);
  return config;
}

StageTimes timesFrom(const SimulateOptions &options,
                     const ScheduleConfig &config) {
  StageTimes times;
  times.forward = parseTimes(options.fwd, "--fwd", config.stages);
  times.backward = parseTimes(options.bwd, "--bwd", config.stages);
  if (!options.wgrad.empty()) {
    times.weightGradient = parseTimes(options.wgrad, "--wgrad", config.stages);
  } else {
    // Zero bubble needs a W; half the backward is the usual split (dX and dW
    // are GEMMs of the same size). The others run the backward whole.
    double share = config.kind == ScheduleKind::ZeroBubbleH1 ? 0.5 : 0.0;
    for (double backward : times.backward)
      times.weightGradient.push_back(backward * share);
  }
  if (!std::isfinite(options.p2p) || options.p2p < 0)
    throw UserError(fmt::format(
        "--p2p: time must be a finite number >= 0, got {}", options.p2p));
  times.p2p = options.p2p;
  for (int s = 0; s < config.stages; ++s)
    if (times.weightGradient[s] > times.backward[s])
      throw UserError(fmt::format(
          "--wgrad {} exceeds --bwd {} at stage {} (the weight-gradient part "
          "cannot exceed the whole backward)",
          times.weightGradient[s], times.backward[s], s));
  if (auto problem = checkStageTimes(times, config.stages))
    throw UserError(*problem);
  return times;
}

std::string kindName(OpKind kind) {
  return kind == OpKind::FullBackward ? "BW" : std::string(opKindLetter(kind));
}

std::string label(const Instruction &op) {
  return std::string(opKindLetter(op.kind)) + std::to_string(op.microbatch);
}

nlohmann::json toJson(const ScheduleConfig &config, const StageTimes &times,
                      const SimulationResult &result, bool withOps) {
  nlohmann::json stages = nlohmann::json::array();
  for (int d = 0; d < config.stages; ++d) {
    const DeviceResult &device = result.devices[d];
    nlohmann::json idle = nlohmann::json::array();
    for (const Interval &gap : device.idleIntervals)
      idle.push_back({{"start", gap.start}, {"end", gap.end}});
    stages.push_back({{"stage", d},
                      {"busy", device.busy},
                      {"idle_time", device.idle},
                      {"idle", idle},
                      {"peak_activations", device.peakActivations}});
    if (withOps)
      stages.back()["ops"] = nlohmann::json::array();
  }
  for (const ExecutedInstruction &executed : result.timeline) {
    if (!withOps)
      break;
    const Instruction &op = executed.op;
    stages[executed.device]["ops"].push_back(
        {{"kind", kindName(op.kind)},
         {"microbatch", op.microbatch},
         {"chunk", op.chunk},
         {"pipeline_stage", op.stage},
         {"direction", op.direction == Direction::Down ? "down" : "up"},
         {"start", executed.start},
         {"end", executed.end}});
  }
  return {{"schedule", scheduleName(config.kind)},
          {"config",
           {{"stages", config.stages},
            {"microbatches", config.microbatches},
            {"chunks", config.chunks},
            {"fwd", times.forward},
            {"bwd", times.backward},
            {"wgrad", times.weightGradient},
            {"p2p", times.p2p}}},
          {"time_unit", kTimeUnit},
          {"makespan", result.makespan},
          {"bubble_fraction", result.bubbleFraction},
          {"stages", stages}};
}

std::string joinTimes(const std::vector<double> &values) {
  bool same = std::all_of(values.begin(), values.end(),
                          [&](double v) { return v == values.front(); });
  if (same)
    return fmt::format("{:g}", values.front());
  std::string text;
  for (double v : values)
    text += (text.empty() ? "" : ",") + fmt::format("{:g}", v);
  return text;
}

/// Rows of characters, one per stage: each instruction is drawn over the
/// columns its time span covers, labelled like "F3" (cut to fit), idle is '.'.
/// Returns an empty string when the case is too big to draw.
std::string asciiTimeline(const Schedule &schedule,
                          const SimulationResult &result) {
  double shortest = 0;
  for (const ExecutedInstruction &executed : result.timeline) {
    double length = executed.end - executed.start;
    if (length > 0 && (shortest == 0 || length < shortest))
      shortest = length;
  }
  if (shortest == 0)
    return "";
  double columnsPerUnit = kColumnsPerShortestOp / shortest;
  double width = std::ceil(result.makespan * columnsPerUnit - 1e-9);
  if (width > kTimelineMaxColumns)
    return "";
  std::vector<std::string> rows(schedule.numDevices(),
                                std::string(static_cast<size_t>(width), '.'));
  for (const ExecutedInstruction &executed : result.timeline) {
    auto from =
        static_cast<size_t>(std::lround(executed.start * columnsPerUnit));
    auto to = std::min(
        static_cast<size_t>(std::lround(executed.end * columnsPerUnit)),
        static_cast<size_t>(width));
    if (to <= from)
      continue;
    std::string text = label(executed.op);
    if (executed.op.direction == Direction::Up)
      text[0] = static_cast<char>(std::tolower(text[0]));
    std::string cell(to - from, ' ');
    // Leave the last column blank to separate neighbours when there is room.
    size_t room = to - from > text.size() ? to - from - 1 : to - from;
    cell.replace(0, std::min(room, text.size()), text, 0, room);
    rows[executed.device].replace(from, to - from, cell);
  }
  std::string text = fmt::format(
      "timeline (1 column = {:g} {}; F/B/W and micro-batch{}, '.' = idle):\n",
      1 / columnsPerUnit, kTimeUnit,
      schedule.config.kind == ScheduleKind::Chimera
          ? ", lower case = up pipeline"
          : "");
  for (int d = 0; d < schedule.numDevices(); ++d)
    text += fmt::format("  stage {:<3}|{}|\n", d, rows[d]);
  return text;
}

std::string humanReport(const Schedule &schedule, const StageTimes &times,
                        const SimulationResult &result) {
  const ScheduleConfig &config = schedule.config;
  std::string text =
      fmt::format("schedule         {} ({} stages, {} micro-batches{})\n",
                  scheduleName(config.kind), config.stages, config.microbatches,
                  config.kind == ScheduleKind::Interleaved
                      ? fmt::format(", {} chunks per stage", config.chunks)
                      : "");
  text += fmt::format(
      "times [{}]       fwd {}, bwd {}{}, p2p {:g}\n", kTimeUnit,
      joinTimes(times.forward), joinTimes(times.backward),
      schedule.splitsBackward()
          ? fmt::format(" (wgrad {})", joinTimes(times.weightGradient))
          : "",
      times.p2p);
  text += fmt::format("makespan         {:g} {}\n", result.makespan, kTimeUnit);
  text += fmt::format("bubble fraction  {:.4f} (idle device-time / (stages x "
                      "makespan))\n\n",
                      result.bubbleFraction);
  text += fmt::format("{:<7}{:>12}{:>12}{:>9}{:>18}\n", "stage", "busy", "idle",
                      "bubbles", "peak activations");
  for (int d = 0; d < config.stages; ++d) {
    const DeviceResult &device = result.devices[d];
    text += fmt::format("{:<7}{:>12g}{:>12g}{:>9}{:>18g}\n", d, device.busy,
                        device.idle, device.idleIntervals.size(),
                        device.peakActivations);
  }
  std::string timeline = asciiTimeline(schedule, result);
  if (!timeline.empty())
    text += "\n" + timeline;
  return text;
}

void runSimulate(const SimulateOptions &options, bool chunksGiven) {
  if (!options.tracePath.empty())
    checkUserOutput(options.tracePath, "--trace");
  ScheduleConfig config = configFrom(options, chunksGiven);
  StageTimes times = timesFrom(options, config);
  OrError<Schedule> schedule = generateSchedule(config);
  if (!schedule)
    throw UserError(schedule.error());
  OrError<SimulationResult> result = simulate(*schedule, times);
  if (!result)
    throw UserError(result.error());

  trace::ChromeTrace chrome =
      pipelineTrace(*schedule, *result, kMicrosecondsPerUnit);
  std::optional<PipeFisherOutput> fisher;
  if (options.pipefisher) {
    PipeFisherTimes kfac;
    kfac.layers = options.kfacLayers;
    kfac.curvature = parseTimes(options.curv, "--curv", config.stages);
    kfac.inversion = parseTimes(options.inv, "--inv", config.stages);
    kfac.reduction = parseTimes(options.sync, "--sync", config.stages);
    kfac.precondition = parseTimes(options.precond, "--precond", config.stages);
    kfac.margin = options.margin;
    const KfacRefreshPin refresh = parseKfacRefresh(options.kfacRefresh);
    kfac.refresh = refresh.all;
    kfac.deviceRefresh = refresh.perDevice;
    kfac.filling = parseKfacFill(options.kfacFill);
    fisher = simulatePipeFisher(*schedule, *result, kfac, &chrome,
                                kMicrosecondsPerUnit);
  }
  if (!options.tracePath.empty())
    writeFileAtomically(options.tracePath, chrome.render());
  if (options.json) {
    nlohmann::json j = toJson(config, times, *result, options.ops);
    if (fisher)
      j["pipefisher"] = fisher->json;
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return;
  }
  std::string text = humanReport(*schedule, times, *result);
  if (fisher)
    text += fisher->text;
  if (!options.tracePath.empty())
    text += fmt::format("\ntrace written to {}\n", options.tracePath);
  std::fputs(text.c_str(), stdout);
}

} // namespace

void registerSimulateCommand(CLI::App &app) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App *sub = app.add_subcommand(
      "simulate", "Simulate a pipeline schedule: makespan, bubbles, peak "
                  "activations per stage");
  sub->add_option("--schedule", options->schedule,
                  "gpipe, 1f1b, interleaved, chimera or zb-h1")
      ->required();
  sub->add_option("--stages", options->stages, "pipeline stages (devices)")
      ->required();
  sub->add_option("--microbatches", options->microbatches,
                  "micro-batches per step (chimera: both directions together)")
      ->required();
  CLI::Option *chunks =
      sub->add_option("--chunks", options->chunks,
                      "model chunks per stage, interleaved only (default 2)");
  sub->add_option("--fwd", options->fwd,
                  "forward time per micro-batch [ms]: one number, or one per "
                  "stage separated by commas")
      ->capture_default_str();
  sub->add_option("--bwd", options->bwd,
                  "whole backward time (input + weight gradient) [ms], same "
                  "form as --fwd")
      ->capture_default_str();
  sub->add_option("--wgrad", options->wgrad,
                  "weight-gradient part of --bwd [ms], same form as --fwd "
                  "(default: bwd/2 for zb-h1, 0 otherwise)");
  sub->add_option("--p2p", options->p2p,
                  "time of one point-to-point transfer between stages [ms]")
      ->capture_default_str();
  sub->add_flag("--json", options->json, "print the result as JSON");
  sub->add_flag("--ops", options->ops,
                "with --json: list each stage's executed instructions");
  sub->add_option("--trace", options->tracePath,
                  "write a Chrome trace (opens in ui.perfetto.dev)");
  CLI::Option *fisher = sub->add_flag(
      "--pipefisher", options->pipefisher,
      "pack K-FAC work into the bubbles (PipeFisher): filled timeline, "
      "utilisation with and without it, refresh interval K");
  sub->add_option("--kfac-layers", options->kfacLayers,
                  "K-FAC layers per stage (per chunk for interleaved; each "
                  "direction for chimera)")
      ->needs(fisher)
      ->capture_default_str();
  // The K-FAC work's times, each in --fwd's form (one number, or one per
  // stage).
  struct KfacTime {
    const char *flag;
    std::string *value;
    const char *what;
  };
  for (const KfacTime &t : {
           KfacTime{"--curv", &options->curv,
                    "curvature time of one layer, factor (A or G) and "
                    "micro-batch [ms]"},
           KfacTime{"--inv", &options->inv,
                    "inversion time of one factor [ms]"},
           KfacTime{"--sync", &options->sync,
                    "reduction time of one factor over the layer's replicas "
                    "[ms] (0: none)"},
           KfacTime{"--precond", &options->precond,
                    "preconditioning time of one layer at the step end [ms]"},
       })
    sub->add_option(t.flag, *t.value,
                    std::string(t.what) + ", same form as --fwd")
        ->needs(fisher)
        ->capture_default_str();
  sub->add_option("--kfac-refresh", options->kfacRefresh,
                  "pin the refresh interval: K for every stage, or K0,K1,... "
                  "one per pipeline device (default: the steps each device's "
                  "bubbles need); what K steps' bubbles do not hold is "
                  "forced")
      ->needs(fisher);
  sub->add_option("--kfac-fill", options->kfacFill,
                  "items (whole items in gaps: PipeFisher; default) or fluid "
                  "(a preemptible filling thread: items in queue order, split "
                  "across gaps)")
      ->needs(fisher);
  sub->add_option("--margin", options->margin,
                  "an item takes a gap only if time x (1 + margin) fits "
                  "(pipe-fisher's 0.05)")
      ->needs(fisher)
      ->capture_default_str();
  sub->callback(
      [options, chunks] { runSimulate(*options, chunks->count() > 0); });
}

} // namespace autoddl::cli
