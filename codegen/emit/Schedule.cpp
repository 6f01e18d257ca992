//===- Schedule.cpp - the pipeline schedule and the step graph ------------===//
//
// Each pipeline device's instruction list (cost_model/pipeline/Schedule.h)
// spelled out as run_device<d>, and the CUDA step graph's glue.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"
#include "planner/ProgramDecisions.h"

#include <map>
#include <set>

namespace autoddl::codegen::emit {

std::string Emitter::schedules(const pipeline::Schedule &s) const {
  std::string out = kfacStageFunctions();
  const auto kfacAt = kfacPlacement(s); // K-FAC items, where placed
  // Slot i's calls (before instruction i), one block per step of the
  // refresh cycle: the refresh step's under kfac_due().
  auto kfacCalls = [&](int d, size_t i) {
    auto it = kfacAt.find({d, i});
    if (it == kfacAt.end())
      return;
    int phase = -1;
    for (const KfacCall &c : it->second) {
      if (c.phase != phase) {
        if (phase >= 0)
          out += "  }\n";
        phase = c.phase;
        out += phase == 0
                   ? "  if (kfac_due()) {\n"
                   : fmt::format("  if (kfac_phase() == {}) {{\n", phase);
      }
      out += "    " + c.call + "\n";
    }
    out += "  }\n";
  };
  const int p = s.numDevices();
  for (int d = 0; d < p; ++d) {
    std::string list;
    for (const auto &ins : s.devices[size_t(d)]) {
      std::string letter(pipeline::opKindLetter(ins.kind));
      list += " " + letter + std::to_string(ins.microbatch);
    }
    out += fmt::format("// Pipeline device {}:{}\n", d, list);
    out += fmt::format("static void run_device{}(int64_t step) {{\n", d);
    const auto &takes = sets_.takes[size_t(d)];
    auto take = takes.begin();
    for (const auto &ins : s.devices[size_t(d)]) {
      const size_t i = size_t(&ins - s.devices[size_t(d)].data());
      kfacCalls(d, i);
      for (; take != takes.end() && take->index == i; ++take)
        if (take->previous >= 0)
          out += fmt::format(
              "  stage{}_reuse({}, {}); // micro-batch {} takes its set\n",
              take->stage, take->previous,
              s.deviceOf(take->stage, Direction::Down) == d ? "kDown" : "kUp",
              take->microbatch);
      const char *dir = ins.direction == Direction::Up ? "kUp" : "kDown";
      const char *fn = ins.kind == OpKind::Forward          ? "forward"
                       : ins.kind == OpKind::Backward       ? "backward_input"
                       : ins.kind == OpKind::WeightGradient ? "backward_weight"
                                                            : "backward";
      out += fmt::format("  stage{}_{}(step, {}, {});\n", ins.stage, fn,
                         ins.microbatch, dir);
    }
    kfacCalls(d, s.devices[size_t(d)].size());
    out += "}\n\n";
  }
  out += "static void run_schedule(int64_t step) {\n  switch (g.rpp) {\n";
  for (int d = 0; d < p; ++d)
    out +=
        fmt::format("  case {}:\n    run_device{}(step);\n    break;\n", d, d);
  out += "  }\n}\n";
  if (!plan_.kfac || !target_.kfacBubbleItems)
    return out;
  // Per device, the steps of the cycle after the refresh step that hold
  // K-FAC items (KfacProgram::items_at).
  std::map<int, std::set<int>> phases;
  for (const auto &[slot, calls] : kfacAt)
    for (const KfacCall &c : calls)
      if (c.phase > 0)
        phases[slot.first].insert(c.phase);
  out += "\n// Whether this device has K-FAC items in step `phase` (> 0) of "
         "its refresh cycle.\nstatic bool kfac_items_at(int64_t phase) {\n"
         "  switch (g.rpp) {\n";
  for (const auto &[d, set] : phases) {
    std::string any;
    for (int ph : set)
      any += fmt::format("{}phase == {}", any.empty() ? "" : " || ", ph);
    out += fmt::format("  case {}:\n    return {};\n", d, any);
  }
  out += "  }\n  (void)phase;\n  return false;\n}\n";
  // Over every device: the layers with curvature items of a later step
  // (KfacProgram::saves).
  std::set<int> saves;
  for (const auto &[slot, calls] : kfacAt)
    for (const KfacCall &c : calls)
      if (c.saved >= 0)
        saves.insert(c.saved);
  std::string any;
  for (int row : saves)
    any += fmt::format("{}layer == {}", any.empty() ? "" : " || ", row);
  out += fmt::format(
      "\n// Whether a pipeline device keeps operands of this K-FAC layer's "
      "curvature for a later\n// step of its refresh cycle.\nstatic bool "
      "kfac_saves(int layer) {{\n  return {};\n}}\n",
      any.empty() ? "(void)layer, false" : any);
  return out;
}

/// The CUDA program's step graph (backends/cuda/StepGraph.h): whether this
/// plan's forward and backward qualify, and the input loads that run ahead of
/// the graph. Every plan does but one with an accuracy count (copied to the
/// host inside the step): tensor-parallel collectives run on the compute
/// stream, and the pipeline links' transfers and the gradient buckets'
/// all-reduces on streams forked from it and joined back before the body
/// ends, so the capture holds them with the kernels.
std::string Emitter::stepGraphGlue() const {
  const bool graphable = planner::stepRunsAsGraph(g_);
  std::string out = fmt::format(
      "\n// Whether forward and backward run as one CUDA graph after the "
      "first step (StepGraph.h):\n// {}.\nconstexpr bool kStepGraphable = "
      "{};\n\n",
      graphable ? "yes (collectives and pipeline transfers are captured with "
                  "the kernels)"
                : "not for this plan (its accuracy count is read inside the "
                  "step)",
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
