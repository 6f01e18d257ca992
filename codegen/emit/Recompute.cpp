//===- Recompute.cpp - activation recomputation in the programs -----------===//
//
// A plan's `recompute` and its stages' `recompute_layers` (Megatron's
// --recompute-num-layers: the first layers of each stage) as the programs run
// them. A recomputed layer keeps only the buffers the rest of its stage reads
// (its output and that output's gradient); the buffers only its rerun steps
// touch live in one scratch layer per stage (stage<k>_scratch), allocated once
// with the stage. Its backward starts with stage<k>_recompute_begin (the
// scratch swapped in, its gradients cleared), reruns the forward of those
// steps from the kept input, runs the layer's backward, and swaps the scratch
// out again. `full` reruns every step of the layer; `selective` the ops
// planner::selectiveRecomputes names (an attention that keeps its
// probabilities: the CPU program's; the CUDA program's fused attention keeps
// only the log-sum-exp, so selective reruns nothing there). The rerun writes
// the same numbers the forward did, so losses are unchanged (docs/codegen.md
// "Recomputation"; memory: docs/cost-model.md §5.4).
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Recompute.h"

namespace autoddl::codegen::emit {

namespace {

bool identChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// Whether `text` names stage member `name` ("a.<name>", a whole word).
bool mentions(const std::string &text, const std::string &name) {
  const std::string ref = "a." + name;
  for (size_t p = text.find(ref); p != std::string::npos;
       p = text.find(ref, p + 1)) {
    const size_t e = p + ref.size();
    if ((p == 0 || (!identChar(text[p - 1]) && text[p - 1] != '.')) &&
        (e == text.size() || !identChar(text[e])))
      return true;
  }
  return false;
}

std::string lines(const std::vector<std::string> &ls) {
  std::string r;
  for (const std::string &l : ls)
    r += l + "\n";
  return r;
}

} // namespace

int EmitContext::recomputedLayers(int stage) const {
  if (plan.knobs.recompute == cost::Recompute::None)
    return 0;
  for (const planner::StageInfo &st : plan.stages)
    if (st.stage == stage)
      return st.recomputeLayers;
  return 0;
}

StageRecompute Recomputation::plan(int stage, const StageLayers &sl,
                                   const std::vector<Step> &steps,
                                   const std::string &outside) const {
  StageRecompute rc;
  const int n = cx_.recomputedLayers(stage);
  if (n <= 0)
    return rc;
  if (!sl.folded())
    throw UserError(fmt::format(
        "codegen: stage {} recomputes {} layers, but its layers are not one "
        "table of identical layers; plan again with recompute none",
        stage, n));
  // ZB-H1 and K-FAC with recomputation: refused by planner/Runnable.h.
  const bool full = cx_.plan.knobs.recompute == cost::Recompute::Full;
  auto reruns = [&](const Step &s) {
    return full ||
           (s.op >= 0 && planner::selectiveRecomputes(
                             cx_.g.ops[size_t(s.op)].kind,
                             /*fusedAttention=*/cx_.target.attentionSavesLse));
  };
  // Per layer, the text of its rerun steps, and of everything else.
  const std::vector<Member> &ms = members_.of(stage);
  const size_t width = sl.canon.size();
  rc.scratch.assign(width, true);
  std::vector<std::string> rerunFwd(sl.spans.size());
  for (size_t j = 0; j < sl.spans.size(); ++j) {
    const LayerSpan &sp = sl.spans[j];
    std::string inside, rest = outside;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step &s = steps[i];
      const std::string t =
          lines(s.fwd) + lines(s.bwdInput) + lines(s.bwdWeight);
      const bool own = i >= sp.stepBegin && i < sp.stepEnd && reruns(s);
      (own ? inside : rest) += t;
      if (own && !s.fwd.empty()) // the sends progress in a rerun too
        rerunFwd[j] += lines(s.fwd) + cx_.target.progressCall;
    }
    // A member in the scratch: touched by the rerun steps only.
    for (size_t k = 0; k < width; ++k) {
      const std::string &name = ms[sp.memberBegin + k].name;
      rc.scratch[k] =
          rc.scratch[k] && mentions(inside, name) && !mentions(rest, name);
    }
  }
  if (std::find(rc.scratch.begin(), rc.scratch.end(), true) == rc.scratch.end())
    return {}; // nothing to drop (selective under a fused attention)
  // Gradients in the scratch, cleared before each rerun (the last recomputed
  // layer's backward left its own there).
  bool grads = false;
  for (size_t k = 0; k < width; ++k)
    grads = grads || (rc.scratch[k] && ms[sl.spans[0].memberBegin + k].grad);
  rc.layers = std::min(size_t(n), sl.spans.size());
  // The comments name no layer: the recomputed layers after the first run as
  // one loop (LayerLoop.cpp).
  const std::string how = planner::recomputeName(cx_.plan.knobs.recompute);
  for (size_t j = 0; j < rc.layers; ++j) {
    rc.before.push_back(fmt::format("  stage{}_swap_scratch(a.layers[{}]); // "
                                    "recomputed ({}): buffers in the scratch\n",
                                    stage, j, how));
    rc.rerun.push_back(
        "  // its forward again, from its kept input into the scratch\n" +
        (grads ? fmt::format("  stage{}_clear_scratch_grads(a.layers[{}]);\n",
                             stage, j)
               : std::string()) +
        rerunFwd[j]);
    rc.after.push_back(
        fmt::format("  stage{}_swap_scratch(a.layers[{}]);\n", stage, j));
  }
  return rc;
}

std::string Recomputation::text(int stage, const StageLayers &sl,
                                const StageRecompute &rc) {
  std::string swaps, zeros;
  for (size_t k = 0; k < sl.canon.size(); ++k) {
    if (!rc.scratch[k])
      continue;
    swaps += fmt::format("  std::swap(y.{0}, s.{0});\n", sl.canon[k]);
    if (members_.of(stage)[sl.spans[0].memberBegin + k].grad)
      zeros +=
          fmt::format(fmt::runtime(cx_.target.zeroBuffer), "y." + sl.canon[k]);
  }
  const std::string clear =
      zeros.empty()
          ? std::string()
          : fmt::format(
                "// Before a rerun: the gradients the last recomputed layer's "
                "backward left in the\n// scratch, swapped into layer y, "
                "cleared.\nstatic void "
                "stage{}_clear_scratch_grads(Stage{}Layer "
                "&y) {{\n{}}}\n\n",
                stage, stage, zeros);
  scratch_.insert(stage);
  return fmt::format(
      "// The buffers a recomputed layer of stage {0} drops, held once for the "
      "stage\n// (allocate_stages): a recomputed layer swaps them in for its "
      "forward and\n// again for its rerun and backward.\n"
      "static StageSets<Stage{0}Layer> stage{0}_scratch;\n\n"
      "// Exchanges layer y's dropped buffers with the scratch's (no copy).\n"
      "static void stage{0}_swap_scratch(Stage{0}Layer &y) {{\n"
      "  Stage{0}Layer &s = stage{0}_scratch.front();\n{1}}}\n\n{2}",
      stage, swaps, clear);
}

std::string Recomputation::summary() const {
  if (scratch_.empty())
    return " (nothing to rerun: " +
           std::string(cx_.target.attentionSavesLse
                           ? "the fused attention keeps only its log-sum-exp"
                           : "no layer of a stage recomputes") +
           ")";
  std::string r;
  for (const planner::StageInfo &st : cx_.plan.stages)
    r += fmt::format("{}{} of stage {}", r.empty() ? "" : ", ",
                     scratch_.count(st.stage) ? st.recomputeLayers : 0,
                     st.stage);
  return ": the first layers rerun their forward in the backward (" + r + ")";
}

} // namespace autoddl::codegen::emit
