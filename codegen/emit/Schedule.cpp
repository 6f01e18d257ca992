//===- Schedule.cpp - the pipeline schedule and the step graph ------------===//
//
// Each pipeline device's instruction list (cost_model/pipeline/Schedule.h)
// as a table of instructions with the K-FAC items placed in it, which the
// harness walks (backends/common/harness/ScheduleTable.h), and the CUDA step
// graph's glue.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"
#include "codegen/emit/ScheduleEmitter.h"
#include "planner/ProgramDecisions.h"

#include <algorithm>
#include <map>
#include <set>

namespace autoddl::codegen::emit {

namespace {

/// "`var` is one of `values`" as a condition, runs of consecutive values as
/// ranges: "(phase >= 1 && phase <= 36) || phase == 40".
std::string oneOf(const std::string &var, const std::set<int> &values) {
  std::string out;
  for (auto it = values.begin(); it != values.end();) {
    const int lo = *it;
    int hi = lo;
    while (++it != values.end() && *it == hi + 1)
      ++hi;
    out += out.empty() ? "" : " || ";
    out += lo == hi ? fmt::format("{} == {}", var, lo)
                    : fmt::format("({0} >= {1} && {0} <= {2})", var, lo, hi);
  }
  return out;
}

} // namespace

/// kStageFunctions: each model stage's functions (nullptr: none).
std::string
ScheduleEmitter::stageFunctionsText(const pipeline::Schedule &s) const {
  std::string out =
      "// Each model stage's functions, for the instruction tables "
      "(ScheduleTable.h).\nstatic const StageFunctions "
      "kStageFunctions[kStages] = {\n";
  for (int st = 0; st < s.modelStages(); ++st) {
    auto fn = [&](const char *name, bool has) {
      return has ? types_.fn(st, name) : std::string("nullptr");
    };
    const bool kfac = kfac_.onStage(st);
    out += fmt::format("    {{{}, {}, {}, {}, {}, {}, {}, {}}},\n",
                       fn("forward", true), fn("backward", !splitBackward_),
                       fn("backward_input", splitBackward_),
                       fn("backward_weight", splitBackward_), fn("reuse", true),
                       fn("kfac", kfac), fn("allocate", true),
                       fn("free", cx_.target.freesBuffers));
  }
  out += "};\n\n";
  return out;
}

/// kDevice<d>: each pipeline device's instructions with the K-FAC items
/// placed before them and the activation sets they take; run_schedule.
std::string ScheduleEmitter::deviceTablesText(const pipeline::Schedule &s,
                                              const Placement &kfacAt) const {
  std::string out;
  // Slot i's K-FAC entries (before instruction i), in the order of the
  // placement.
  auto kfacEntries = [&](int d, size_t i) {
    std::string line;
    auto it = kfacAt.find({d, i});
    if (it != kfacAt.end())
      for (const KfacEmitter::Call &c : it->second)
        line += c.entry + ", ";
    return line;
  };
  const int p = s.numDevices();
  for (int d = 0; d < p; ++d) {
    std::string list;
    for (const auto &ins : s.devices[size_t(d)]) {
      std::string letter(pipeline::opKindLetter(ins.kind));
      list += " " + letter + std::to_string(ins.microbatch);
    }
    out += fmt::format(
        "// Pipeline device {}:{}\n// A line per instruction: the K-FAC "
        "items placed before it, the set it takes, then its work.\nstatic "
        "const Instruction kDevice{}[] = {{\n",
        d, list, d);
    const auto &takes = sets_.takes[size_t(d)];
    auto take = takes.begin();
    for (const auto &ins : s.devices[size_t(d)]) {
      const size_t i = size_t(&ins - s.devices[size_t(d)].data());
      std::string line = kfacEntries(d, i);
      for (; take != takes.end() && take->index == i; ++take)
        if (take->previous >= 0)
          line += fmt::format(
              "{{kReuse, {}, {}, {}}}, ", take->stage, take->previous,
              s.deviceOf(take->stage, Direction::Down) == d ? "kDown" : "kUp");
      const char *work = ins.kind == OpKind::Forward          ? "kF"
                         : ins.kind == OpKind::Backward       ? "kBI"
                         : ins.kind == OpKind::WeightGradient ? "kBW"
                                                              : "kB";
      line += fmt::format("{{{}, {}, {}{}}},", work, ins.stage, ins.microbatch,
                          ins.direction == Direction::Up ? ", kUp" : "");
      out += "    " + line + "\n";
    }
    std::string last = kfacEntries(d, s.devices[size_t(d)].size());
    if (!last.empty())
      out += "    " + last.substr(0, last.size() - 1) + "\n";
    out += "};\n";
  }
  out += "static const InstructionList kDevices[kPP] = {";
  for (int d = 0; d < p; ++d)
    out +=
        fmt::format("{}{{kDevice{}, sizeof(kDevice{}) / sizeof(Instruction)}}",
                    d ? ", " : "", d, d);
  out += "};\n";
  if (cx_.plan.kfac)
    out += "// The backend's K-FAC calls the tables' K-FAC entries make.\n"
           "static const KfacSteps kKfacSteps = {kfac_due, kfac_phase, "
           "kfac_curvature_saved, kfac_reduce, kfac_invert, "
           "kfac_release};\n";
  out += fmt::format("\nstatic void run_schedule(int64_t step) {{\n  "
                     "run_instructions(kDevices[g.rpp], kStageFunctions, {}, "
                     "step);\n}}\n",
                     cx_.plan.kfac ? "&kKfacSteps" : "nullptr");
  return out;
}

/// K-FAC's refresh cycle as the tables' items place it (a target with
/// kfacBubbleItems): the steps with items, the tail step, the saved layers.
std::string ScheduleEmitter::kfacCycleText(int p,
                                           const Placement &kfacAt) const {
  std::string out;
  // Per device, the steps of the cycle after the refresh step that hold
  // K-FAC items (KfacProgram::items_at).
  std::map<int, std::set<int>> phases;
  for (const auto &[slot, calls] : kfacAt)
    for (const KfacEmitter::Call &c : calls)
      if (c.phase > 0)
        phases[slot.first].insert(c.phase);
  // Per device, the step of its cycle whose end runs what the bubbles leave
  // (KfacProgram::tail_phase): the plan's last placing step.
  std::map<int, int> tail;
  for (const planner::KfacDevicePlan &dev : cx_.plan.kfac->devices)
    tail[dev.device] = std::max(0, dev.steps - 1);
  const bool ranges = std::all_of(phases.begin(), phases.end(), [](auto &e) {
    return *e.second.rbegin() - *e.second.begin() + 1 == int(e.second.size());
  });
  if (ranges) { // the usual: one table
    std::string rows;
    for (int d = 0; d < p; ++d) {
      auto it = phases.find(d);
      auto t = tail.find(d);
      rows += fmt::format("{}{{{}, {}, {}}}", d ? ", " : "",
                          it == phases.end() ? 1 : *it->second.begin(),
                          it == phases.end() ? 0 : *it->second.rbegin(),
                          t == tail.end() ? -1 : t->second);
    }
    out += fmt::format(
        "\n// Per pipeline device: the first and last step (> 0) of its "
        "refresh "
        "cycle with K-FAC\n// items (none: 1, 0), and the step whose end runs "
        "what its bubbles leave.\nstatic const int kKfacCycle[kPP][3] = {{{}}};"
        "\nstatic bool kfac_items_at(int64_t phase) {{\n  return phase >= "
        "kKfacCycle[g.rpp][0] && phase <= kKfacCycle[g.rpp][1];\n}}\nstatic "
        "int64_t kfac_tail_phase() {{ return kKfacCycle[g.rpp][2]; }}\n",
        rows);
  } else {
    out += "\n// Whether this device has K-FAC items in step `phase` (> 0) of "
           "its refresh cycle.\nstatic bool kfac_items_at(int64_t phase) {\n"
           "  switch (g.rpp) {\n";
    for (const auto &[d, set] : phases)
      out +=
          fmt::format("  case {}:\n    return {};\n", d, oneOf("phase", set));
    out += "  }\n  (void)phase;\n  return false;\n}\n";
    out += "\n// The step of this device's refresh cycle whose end runs what "
           "its bubbles leave.\nstatic int64_t kfac_tail_phase() {\n  switch "
           "(g.rpp) {\n";
    for (const auto &[d, t] : tail)
      out += fmt::format("  case {}:\n    return {};\n", d, t);
    out += "  }\n  return -1;\n}\n";
  }
  // Over every device: the layers with curvature items of a later step
  // (KfacProgram::saves).
  std::set<int> saves;
  for (const auto &[slot, calls] : kfacAt)
    for (const KfacEmitter::Call &c : calls)
      if (c.saved >= 0)
        saves.insert(c.saved);
  const std::string any = oneOf("layer", saves);
  out += fmt::format(
      "\n// Whether a pipeline device keeps operands of this K-FAC layer's "
      "curvature for a later\n// step of its refresh cycle.\nstatic bool "
      "kfac_saves(int layer) {{\n  return {};\n}}\n",
      any.empty() ? "(void)layer, false" : any);
  return out;
}

std::string ScheduleEmitter::text(const pipeline::Schedule &s) const {
  const Placement kfacAt = kfac_.placement(s); // K-FAC items, where placed
  std::string out = stageFunctionsText(s) + deviceTablesText(s, kfacAt);
  if (!cx_.plan.kfac || !cx_.target.kfacBubbleItems)
    return out;
  return out + kfacCycleText(s.numDevices(), kfacAt);
}

/// The CUDA program's step graph (backends/cuda/StepGraph.h): whether this
/// plan's forward and backward qualify, and the input loads that run ahead of
/// the graph. Every plan does but one with a training Dropout primitive
/// (planner::stepRunsAsGraph): tensor-parallel collectives run on the compute
/// stream, and the pipeline links' transfers and the gradient buckets'
/// all-reduces on streams forked from it and joined back before the body
/// ends, so the capture holds them with the kernels.
std::string Emitter::stepGraphGlue() const {
  const bool graphable = planner::stepRunsAsGraph(cx_.g);
  std::string out = fmt::format(
      "\n// Whether forward and backward run as one CUDA graph after the "
      "first step (StepGraph.h):\n// {}.\nconstexpr bool kStepGraphable = "
      "{};\n\n",
      graphable ? "yes (collectives and pipeline transfers are captured with "
                  "the kernels)"
                : "not for this plan (a training Dropout keys its mask by the "
                  "step, a host value)",
      graphable ? "true" : "false");
  out += "// The inputs of every micro-batch this rank runs, loaded ahead of "
         "a step graph\n// (copied into the micro-batch's activation set in "
         "the graph).\n[[maybe_unused]] static void preload_inputs(int64_t "
         "step) {\n  for (int64_t mb = 0; mb < kMicroBatches; ++mb) {\n";
  for (int s : inputStages_)
    out += fmt::format("    if (holds_stage({0}))\n      stage{0}_load_inputs("
                       "stage{0}_inputs[size_t(mb)], step, mb);\n",
                       s);
  out += "  }\n  (void)step;\n}\n";
  return out;
}

} // namespace autoddl::codegen::emit
