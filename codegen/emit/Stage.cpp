//===- Stage.cpp - a pipeline stage's struct and functions ----------------===//
//
// struct Stage<k> and its forward / backward functions: the ops' lines,
// the pipeline transfers, traces and gradient-bucket calls around them.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"
#include "codegen/emit/NumberFold.h"

namespace autoddl::codegen::emit {

namespace {

/// "  (void)name;\n" for a parameter `body` never names (a function some
/// stages leave it unused in); "" where it is used.
std::string voidIfUnused(const std::string &body, const std::string &name) {
  for (size_t at = body.find(name); at != std::string::npos;
       at = body.find(name, at + 1))
    if ((at == 0 || !identChar(body[at - 1])) &&
        (at + name.size() == body.size() || !identChar(body[at + name.size()])))
      return "";
  return "  (void)" + name + ";\n";
}

} // namespace

/// Activations crossing into `stage` from earlier stages (produced before it,
/// consumed on it or later), in tensor order.
std::vector<int> boundaryTensors(const ModelGraph &g, const ModelLayout &L,
                                 int stage) {
  std::vector<int> prodStage(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (int r : g.ops[i].results)
      prodStage[size_t(r)] = L.ops[i].stage;
  std::set<int> out;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (L.ops[i].stage >= stage)
      for (int t : g.ops[i].operands)
        if (prodStage[size_t(t)] >= 0 && prodStage[size_t(t)] < stage &&
            !g.tensors[size_t(t)].shape.empty())
          out.insert(t);
  return {out.begin(), out.end()};
}

/// What a stage emits from: its ops' steps and members (emitted layer by
/// layer), its boundary tensors, its layers as a table and what it
/// recomputes.
Emitter::StagePlan Emitter::planStage(int stage) {
  std::vector<Step> steps;
  const std::vector<int> in = boundaryTensors(cx_.g, cx_.L, stage);
  const std::vector<int> sendOut =
      stage + 1 < cx_.L.numStages ? boundaryTensors(cx_.g, cx_.L, stage + 1)
                                  : std::vector<int>{};
  for (int t : in)
    buffers_.addTensor(stage, t, cx_.L.tensors[size_t(t)], true);
  std::vector<int> inputs;
  // The steps and members of each layer's ops, for the layer loop.
  std::vector<LayerSpan> spans;
  bool layersContiguous = true;
  for (size_t i = 0; i < cx_.g.ops.size(); ++i) {
    if (cx_.L.ops[i].stage != stage)
      continue;
    const int layer = cx_.g.ops[i].layer;
    if (layer >= 0 && (spans.empty() || spans.back().layer != layer) &&
        cx_.recomputedLayers(stage) > 0) {
      // A recomputing stage's layers must be one table (Recompute.cpp): the
      // layer's first op's operands from outside it (the stage's input in
      // another layout) are converted before the layer, not inside it.
      const OpDef &op = cx_.g.ops[i];
      for (size_t k = 0; k < op.operands.size(); ++k) {
        const int t = op.operands[k], from = cx_.producer[size_t(t)];
        if (from >= 0 && cx_.g.ops[size_t(from)].layer != layer)
          buffers_.ensureLayout(stage, t, cx_.L.ops[i].operands[k], steps);
      }
    }
    if (layer >= 0 && (spans.empty() || spans.back().layer != layer)) {
      for (const LayerSpan &sp : spans)
        layersContiguous = layersContiguous && sp.layer != layer;
      spans.push_back({layer, steps.size(), steps.size(),
                       members_.of(stage).size(), members_.of(stage).size()});
    }
    const bool inLayer = layer >= 0 && spans.back().layer == layer &&
                         spans.back().stepEnd == steps.size() &&
                         spans.back().memberEnd == members_.of(stage).size();
    for (int t : cx_.g.ops[i].operands)
      if (cx_.isInput(t) && !cx_.graphModel &&
          std::find(inputs.begin(), inputs.end(), t) == inputs.end()) {
        inputs.push_back(t);
        buffers_.addTensor(stage, t, TpLayout{}, false);
      }
    const size_t before = steps.size();
    emitOp(i, steps);
    if (steps.size() > before) // the op's own step comes last
      steps.back().op = int(i);
    if (layer >= 0 && inLayer) {
      spans.back().stepEnd = steps.size();
      spans.back().memberEnd = members_.of(stage).size();
    } else if (layer >= 0) {
      layersContiguous = false;
    }
  }
  const StageLayers sl =
      layersContiguous ? layers_.planStageLayers(stage, spans) : StageLayers{};
  // The members the pipeline transfers name, for what recomputation keeps.
  std::string transfers;
  for (const std::vector<int> &ts : {in, sendOut})
    for (int t : ts)
      transfers += cx_.val(t, cx_.L.tensors[size_t(t)]) + " " +
                   cx_.grad(t, cx_.L.tensors[size_t(t)]) + "\n";
  const StageRecompute rc = recompute_.plan(stage, sl, steps, transfers);
  // K-FAC's curvature calls read the layers' buffers under their table
  // names too (KfacEmitter.cpp).
  // (find, not []: a stage without K-FAC layers gets no stage<k>_kfac.)
  kfac_.renameOperands(stage,
                       [&sl](const std::string &t) { return sl.rename(t); });
  const bool hasLoss =
      cx_.g.loss >= 0 && cx_.producer[size_t(cx_.g.loss)] >= 0 &&
      cx_.L.ops[size_t(cx_.producer[size_t(cx_.g.loss)])].stage == stage;

  return {stage, std::move(steps), in, sendOut, std::move(inputs), sl,
          rc,    hasLoss};
}

/// struct Stage<k> (and its layer struct), the per-micro-batch results and
/// inputs kept apart from the sets, and the recomputation's declarations.
/// The gradients of stage p that its sets do not share (StageSets.h), where
/// the plan's schedule lets them share (pipeline::setsShareGradients, which
/// the memory model counts by): the one of its received input, which a send
/// reads. The gradients of its outputs are received, one a set, into buffers
/// of their own (receivedGrad, added here), which the backward copies into
/// the shared ones first: a receive may be posted while another
/// micro-batch's backward still reads them.
std::set<std::string> Emitter::perSetGradients(const StagePlan &p) {
  std::set<std::string> perSet;
  for (int t : p.in)
    perSet.insert("d_" + cx_.bufName(t, cx_.L.tensors[size_t(t)]));
  if (shareGrads_)
    for (int t : p.sendOut)
      members_.add(p.stage,
                   {receivedGrad(t), 0,
                    "the gradient received from the next stage", false, false,
                    false, cx_.elems(t, cx_.L.tensors[size_t(t)])});
  return perSet;
}

std::string Emitter::stageStructText(const StagePlan &p) {
  [[maybe_unused]] const auto &[stage, steps, in, sendOut, inputs, sl, rc,
                                hasLoss] = p;
  std::string out;
  // The struct.
  int64_t first = -1, last = -1;
  for (size_t i = 0; i < cx_.g.ops.size(); ++i)
    if (cx_.L.ops[i].stage == stage) {
      if (first < 0)
        first = int64_t(i);
      last = int64_t(i);
    }
  if (first < 0)
    out += fmt::format(
        "// ---- stage {}: no ops (passes its inputs on) ----\n\n", stage);
  else
    out += fmt::format("// ---- stage {}: ops {} .. {} ----\n\n", stage,
                       commentText(cx_.g.ops[size_t(first)].name),
                       commentText(cx_.g.ops[size_t(last)].name));
  out += fmt::format("// One micro-batch's activations on stage {} (local "
                     "shapes; the batch dimension is the micro-batch).\n",
                     stage);
  const std::set<std::string> perSet = perSetGradients(p);
  // A recomputed layer holds only its kept members, the scratch only the
  // others (`held`, set by the constructor before the members).
  auto decl = [&](const Member &m, const std::string &name,
                  const char *heldUnless = nullptr) {
    std::string size = m.sizeExpr.empty() ? std::to_string(m.size) : m.sizeExpr;
    if (heldUnless)
      size = fmt::format("held != LayerBuffers::{} ? {} : 0", heldUnless, size);
    const char *type = m.i32    ? "int32_t"
                       : m.stat ? "float"
                                : cx_.target.actType;
    if (shareGrads_ && m.grad && !perSet.count(m.name))
      return fmt::format("  SetShared<{}> {}{{{}}}; // {}, one for the "
                         "stage's sets\n",
                         type, name, size, m.comment);
    return fmt::format(fmt::runtime(cx_.target.bufferDecl),
                       fmt::arg("type", type), fmt::arg("name", name),
                       fmt::arg("size", size), fmt::arg("comment", m.comment));
  };
  std::string layerStruct;
  if (rc.any() && !recompute_.anyScratch())
    out += "// Which buffers of a layer a Stage<k>Layer holds: all; those a "
           "recomputed layer\n// keeps (the rest of its stage reads them); or "
           "the others, the stage's scratch.\nenum class LayerBuffers { All, "
           "Kept, Scratch };\n\n";
  if (sl.folded()) {
    out += fmt::format("// One layer's activations on stage {} ({}[{}..{}]).\n"
                       "struct Stage{}Layer {{\n",
                       stage, sl.group, sl.spans.front().layer,
                       sl.spans.back().layer, stage);
    if (rc.any())
      out += "  LayerBuffers held = LayerBuffers::All;\n";
    for (size_t k = 0; k < sl.canon.size(); ++k)
      out += decl(members_.of(stage)[sl.spans[0].memberBegin + k], sl.canon[k],
                  !rc.any()       ? nullptr
                  : rc.scratch[k] ? "Kept"
                                  : "Scratch");
    if (rc.any())
      out += fmt::format("  Stage{0}Layer() = default;\n  explicit "
                         "Stage{0}Layer(LayerBuffers h) : held(h) {{}}\n",
                         stage);
    out += "};\n\n";
  }
  out += fmt::format("struct Stage{} {{\n", stage);
  for (const Member &m : members_.of(stage))
    if (!sl.memberOf.count(m.name))
      out += decl(m, m.name);
  if (sl.folded() && rc.any()) {
    std::string init;
    for (size_t j = 0; j < sl.spans.size(); ++j)
      init += fmt::format("{}Stage{}Layer({})", j ? ", " : "", stage,
                          j < rc.layers ? "LayerBuffers::Kept" : "");
    out += fmt::format("  Stage{}Layer layers[{}] = {{{}}}; // layers {}..{}, "
                       "the first {} recomputed\n",
                       stage, sl.spans.size(), init, sl.spans.front().layer,
                       sl.spans.back().layer, rc.layers);
  } else if (sl.folded()) {
    out += fmt::format("  Stage{}Layer layers[{}]; // layers {}..{}\n", stage,
                       sl.spans.size(), sl.spans.front().layer,
                       sl.spans.back().layer);
  }
  if (hasLoss && !cx_.target.lossSumOnDevice)
    out += "  double loss_sum = 0; // sum of the per-position losses\n";
  if (hasLoss && cx_.reportsAccuracy())
    out += ops_.loss().correctMembers(true);
  if (cx_.target.gradZeroSet)
    out += fmt::format("  ZeroSet grad_zeros; // the gradients "
                       "stage{}_zero_grads clears, one launch\n",
                       stage);
  out += "};\n";
  out +=
      fmt::format("static StageSets<Stage{0}> stage{0}; // kSets[{0}] "
                  "activation sets, micro-batch mb's kSetOf[{0}][mb], on the "
                  "devices running stage {0}\n\n",
                  stage);
  auto memberDecl = [&](const std::string &name) {
    for (const Member &m : members_.of(p.stage))
      if (m.name == name)
        return decl(m, m.name);
    return std::string();
  };
  if (hasLoss) { // read after the step, when the sets hold later micro-batches
    lossStage_ = stage;
    std::string fields = cx_.target.lossSumOnDevice
                             ? memberDecl("losses")
                             : "  double loss_sum = 0;\n";
    if (cx_.reportsAccuracy())
      fields += ops_.loss().correctMembers(false);
    out += fmt::format("// What the step reads of each micro-batch's loss, "
                       "kept apart from its activation set.\nstruct "
                       "Stage{0}Results {{\n{1}}};\nstatic "
                       "std::vector<Stage{0}Results> stage{0}_results; // per "
                       "micro-batch\n\n",
                       stage, fields);
  }
  if (cx_.target.stepGraph && !inputs.empty()) { // loaded ahead of a step graph
    inputStages_.insert(stage);
    std::string fields;
    for (int t : inputs)
      fields += memberDecl(cx_.names[size_t(t)]);
    out += fmt::format("// Each micro-batch's inputs, loaded ahead of a step "
                       "graph and copied into its activation set.\nstruct "
                       "Stage{0}Inputs {{\n{1}}};\nstatic "
                       "std::vector<Stage{0}Inputs> stage{0}_inputs; // per "
                       "micro-batch\n\n",
                       stage, fields);
  }
  if (rc.any()) {
    out += recompute_.text(stage, sl, rc);
  }

  return out;
}

/// stage<k>_forward_compute (and the CUDA program's stage<k>_load_inputs).
std::string Emitter::stageForwardText(const StagePlan &p) const {
  [[maybe_unused]] const auto &[stage, steps, in, sendOut, inputs, sl, rc,
                                hasLoss] = p;
  std::string out;
  // Forward. The CUDA program loads a stage's inputs in their own function,
  // which the step runs ahead of a captured step graph (StepGraph.h).
  std::string load;
  auto holds = [&](int t) { // p's members: clang 14 refuses captured bindings
    return t >= 0 &&
           std::find(p.inputs.begin(), p.inputs.end(), t) != p.inputs.end();
  };
  if (!inputs.empty() && cx_.classModel) {
    const int tg = cx_.classTargets;
    load += fmt::format(
        "  load_samples(step, mb, {}, {});\n",
        holds(cx_.classInput)
            ? "a." + cx_.names[size_t(cx_.classInput)] + ".data()"
            : "nullptr",
        holds(tg) ? "a." + cx_.names[size_t(tg)] + ".data()" : "nullptr");
  } else if (!inputs.empty()) {
    int ids = cx_.findInput("input_ids"), tg = cx_.findInput("targets"),
        types = cx_.findInput("token_type_ids");
    load += fmt::format(
        "  load_tokens(step, mb, {}, {});\n",
        holds(ids) ? "a." + cx_.names[size_t(ids)] + ".data()" : "nullptr",
        holds(tg) ? "a." + cx_.names[size_t(tg)] + ".data()" : "nullptr");
    if (holds(types))
      load += fmt::format(fmt::runtime(cx_.target.zeroTokenTypes),
                          cx_.names[size_t(types)]);
  }
  if (cx_.target.stepGraph) {
    // Into an activation set, or a micro-batch's Stage<k>Inputs.
    out += fmt::format("template <class A>\nstatic void stage{}_load_inputs("
                       "[[maybe_unused]] A &a, [[maybe_unused]] int64_t step, "
                       "[[maybe_unused]] int64_t mb) {{\n",
                       stage) +
           load + "}\n\n";
    out += fmt::format("static void stage{}_forward_compute(Stage{} &a, "
                       "int64_t step, int64_t mb) {{\n",
                       stage, stage);
    std::string copies;
    for (int t : inputs)
      copies += fmt::format("    copy_on_device(a.{0}.data(), in.{0}.data(), "
                            "a.{0}.size() * int64_t(sizeof(*a.{0}.data())));\n",
                            cx_.names[size_t(t)]);
    out += inputs.empty()
               ? fmt::format("  if (!inputs_preloaded)\n    stage{}_load_"
                             "inputs(a, step, mb);\n",
                             stage)
               : fmt::format("  if (!inputs_preloaded) {{\n    stage{0}_load_"
                             "inputs(a, step, mb);\n  }} else {{\n    const "
                             "Stage{0}Inputs &in = stage{0}_inputs[size_t(mb)];"
                             "\n{1}  }}\n",
                             stage, copies);
  } else {
    out += fmt::format("static void stage{}_forward_compute(Stage{} &a, "
                       "int64_t step, int64_t mb) {{\n",
                       stage, stage);
    out += load.empty() ? "  (void)step;\n  (void)mb;\n" : load;
  }
  std::vector<std::string> fwdText(steps.size());
  for (size_t i = 0; i < steps.size(); ++i)
    for (const auto &l : steps[i].fwd)
      fwdText[i] += l + "\n";
  for (std::string &t : fwdText)
    if (!t.empty())
      t += cx_.target.progressCall;
  out += layers_.layerOrdered(sl, fwdText, false, &rc);
  if (hasLoss) {
    out += fmt::format("  Stage{0}Results &r = stage{0}_results[size_t(mb)];\n",
                       stage);
    out += cx_.target.lossSumOnDevice
               ? "  copy_on_device(r.losses.data(), a.losses.data(), "
                 "a.losses.size() * int64_t(sizeof(float)));\n"
               : "  r.loss_sum = a.loss_sum;\n";
    if (cx_.reportsAccuracy())
      out += ops_.loss().correctCopy();
  }
  out += "}\n\n";

  return out;
}

/// stage<k>_backward_compute, or its input- and weight-gradient halves.
std::string Emitter::stageBackwardText(const StagePlan &p) {
  [[maybe_unused]] const auto &[stage, steps, in, sendOut, inputs, sl, rc,
                                hasLoss] = p;
  std::string out;
  // Backward: input-gradient half, weight-gradient half, both.
  std::map<std::pair<size_t, bool>, std::vector<int>> ready;
  // Buckets for dp (no ZeRO: it reduce-scatters at the step), and for
  // gradients partial over tp even when dp = 1.
  if (cx_.target.gradBuckets && cx_.plan.knobs.zero == 0 &&
      (cx_.plan.knobs.dp > 1 || !cx_.L.tpPartialGrads.empty()))
    ready = buckets_.assign(stage, steps, splitBackward_, deviceMask_);
  auto readyLines = [&](size_t i, bool weight) {
    std::string r;
    auto it = ready.find({i, weight});
    if (it != ready.end())
      for (int b : it->second)
        r += fmt::format("  grad_sync.ready({}); // gradient bucket {} "
                         "complete after this micro-batch\n",
                         b, b);
    return r;
  };
  // p's members in the lambda: clang 14 refuses captured structured bindings.
  auto emitBackward = [&](const char *suffix, bool inputPart, bool weightPart) {
    out +=
        fmt::format("static void stage{}_{}([[maybe_unused]] Stage{} &a) {{\n",
                    p.stage, suffix, p.stage);
    if (inputPart && shareGrads_) // the received gradients into the shared
      for (int t : p.sendOut) {
        const TpLayout l = cx_.L.tensors[size_t(t)];
        out += fmt::format(fmt::runtime(cx_.target.copyElements),
                           fmt::arg("dst", cx_.grad(t, l)),
                           fmt::arg("src", "a." + receivedGrad(t) + ".data()"),
                           fmt::arg("n", cx_.elems(t, l)));
      }
    std::vector<std::string> text(p.steps.size());
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const Step &st = p.steps[i];
      if (inputPart) {
        for (const auto &l : st.bwdInput)
          text[i] += l + "\n";
        text[i] += readyLines(i, false);
      }
      if (weightPart) {
        for (const auto &l : st.bwdWeight)
          text[i] += l + "\n";
        text[i] += readyLines(i, true);
      }
      if (!text[i].empty())
        text[i] += cx_.target.progressCall;
    }
    out += layers_.layerOrdered(p.sl, text, true, &p.rc) + "}\n\n";
  };
  if (splitBackward_) {
    emitBackward("backward_input_compute", true, false);
    emitBackward("backward_weight_compute", false, true);
  } else {
    emitBackward("backward_compute", true, true);
  }

  return out;
}

/// stage<k>_zero_grads: the gradients a backward adds into, cleared.
std::string Emitter::stageZeroGradsText(const StagePlan &p) const {
  [[maybe_unused]] const auto &[stage, steps, in, sendOut, inputs, sl, rc,
                                hasLoss] = p;
  std::string out;
  out += fmt::format("static void stage{}_zero_grads(Stage{} &a) {{\n", stage,
                     stage);
  // On cuda the gradients received from the next stage are left alone: the
  // receive overwrites them, possibly already posted; so are those whose only
  // writer stores them (storedGrads_). The rest are one ZeroSet, built at the
  // first call (an eager step: sealing copies to the device).
  std::set<std::string> received;
  for (int t : sendOut)
    received.insert("d_" + cx_.bufName(t, cx_.L.tensors[size_t(t)]));
  if (cx_.target.gradZeroSet)
    out += "  if (!a.grad_zeros.sealed()) {\n";
  auto zeroes = [&](const std::string &flat) {
    return !cx_.target.gradZeroSet ||
           (!received.count(flat) &&
            !storedGrads_.count("a." + flat + ".data()"));
  };
  auto zeroLine = [&](const std::string &ref) {
    return cx_.target.gradZeroSet
               ? fmt::format("    a.grad_zeros.add({0}.data(), {0}.size() * "
                             "int64_t(sizeof(act_t)));\n",
                             ref)
               : fmt::format("  std::fill({0}.begin(), {0}.end(), 0.0f);\n",
                             ref);
  };
  // A layer member zeroed in every layer is zeroed in a loop over them.
  // One zeroed in all but a few (the last layer's output gradient, which
  // the receive overwrites) in an indexed loop that skips those.
  std::set<std::string> loopZeroed;
  std::set<size_t> allLayers; // by k: zeroed in the loop over every layer
  std::string someLayers;
  for (size_t k = 0; k < sl.canon.size(); ++k) {
    std::vector<size_t> zeroed, skipped;
    for (size_t j = 0; j < sl.spans.size(); ++j)
      (zeroes(members_.of(stage)[sl.spans[j].memberBegin + k].name) ? zeroed
                                                                    : skipped)
          .push_back(j);
    if (!members_.of(stage)[sl.spans[0].memberBegin + k].grad)
      continue;
    if (skipped.empty()) {
      allLayers.insert(k);
      for (const LayerSpan &sp : sl.spans)
        loopZeroed.insert(members_.of(stage)[sp.memberBegin + k].name);
    } else if (zeroed.size() >= 2) {
      std::string skip;
      for (size_t j : skipped) {
        skip += fmt::format("{}l == {}", skip.empty() ? "" : " || ", j);
        zeroed.push_back(j); // named in the guard, not in a line of its own
      }
      for (size_t j = 0; j < sl.spans.size(); ++j)
        loopZeroed.insert(members_.of(stage)[sl.spans[j].memberBegin + k].name);
      std::string line = zeroLine("a.layers[l]." + sl.canon[k]);
      line.erase(0, line.find_first_not_of(' '));
      someLayers +=
          fmt::format("  for (size_t l = 0; l < {}; ++l)\n    if (!({}))\n   "
                      "   {}",
                      sl.spans.size(), skip, line);
    }
  }
  for (const Member &m : members_.of(stage))
    if (m.grad && zeroes(m.name) && !loopZeroed.count(m.name))
      out += zeroLine("a." + m.name);
  if (!allLayers.empty()) {
    std::string body;
    for (size_t k : allLayers)
      body += zeroLine("y." + sl.canon[k]);
    out += fmt::format("{0}  for (auto &y : a.layers) {{\n{1}{0}  }}\n",
                       cx_.target.gradZeroSet ? "  " : "", indent(body));
  }
  out += cx_.target.gradZeroSet ? indent(someLayers) : someLayers;
  if (cx_.target.gradZeroSet)
    out += "    a.grad_zeros.seal();\n  }\n  a.grad_zeros.zero();\n";
  out += voidIfUnused(out.substr(out.find(") {\n")), "a") + "}\n\n";
  return out;
}

/// The instructions: stage<k>_forward / _backward (receive, compute traced
/// as F/B/W, send) and stage<k>_reuse.
std::string Emitter::stageInstructionsText(const StagePlan &p) const {
  [[maybe_unused]] const auto &[stage, steps, in, sendOut, inputs, sl, rc,
                                hasLoss] = p;
  std::string out;
  // The instructions: receive, compute (traced F/B/W), send.
  auto transferList = [&](const std::vector<int> &ts, bool grads, int peerStage,
                          int boundary, const char *dirTag, bool send) {
    const char *format = send ? cx_.target.sendFormat : cx_.target.recvFormat;
    std::string s;
    for (size_t k = 0; k < ts.size(); ++k) {
      const int t = ts[k];
      TpLayout l = cx_.L.tensors[size_t(t)];
      const std::string buf = !grads ? cx_.val(t, l)
                              : !send && shareGrads_
                                  ? "a." + receivedGrad(t) + ".data()"
                                  : cx_.grad(t, l);
      s += fmt::format(fmt::runtime(format), buf, cx_.elems(t, l), peerStage,
                       boundary, dirTag, k);
    }
    return s;
  };
  auto recvList = [&](const std::vector<int> &ts, bool grads, int peerStage,
                      int boundary, const char *dirTag) {
    return transferList(ts, grads, peerStage, boundary, dirTag, false);
  };
  auto sendList = [&](const std::vector<int> &ts, bool grads, int peerStage,
                      int boundary, const char *dirTag) {
    return transferList(ts, grads, peerStage, boundary, dirTag, true);
  };
  out += fmt::format(
      "static void stage{0}_forward(int64_t step, int mb, "
      "Direction dir) {{\n  Stage{0} &a = stage{0}[size_t(kSetOf[{0}][mb])];\n",
      stage);
  // The compute of an instruction, timed: on the host clock (cpu) or by CUDA
  // events, skipped while the pipeline's transfers are being recorded (cuda).
  auto timed = [&](const std::string &call, const char *letter) {
    return fmt::format(fmt::runtime(cx_.target.timedCall),
                       fmt::arg("call", call), fmt::arg("letter", letter));
  };
  std::string body = recvList(in, false, stage - 1, stage - 1, "kActivation");
  body +=
      timed(fmt::format("stage{}_forward_compute(a, step, mb);", stage), "F");
  body += sendList(sendOut, false, stage + 1, stage, "kActivation");
  out += body + voidIfUnused(body, "dir") + "}\n\n";
  std::vector<const char *> parts = {"backward"};
  if (splitBackward_)
    parts = {"backward_input", "backward_weight"};
  for (const char *part : parts) {
    const bool weightOnly = std::string(part) == "backward_weight";
    out += fmt::format(
        "static void stage{0}_{1}(int64_t, int mb, Direction "
        "dir) {{\n  Stage{0} &a = stage{0}[size_t(kSetOf[{0}][mb])];\n",
        stage, part);
    std::string body;
    if (!weightOnly) {
      body += fmt::format(fmt::runtime(cx_.target.zeroGradsCall), stage);
      body += recvList(sendOut, true, stage + 1, stage, "kGradient");
    }
    body += timed(fmt::format("stage{}_{}_compute(a);", stage, part),
                  weightOnly ? "W" : "B");
    if (!weightOnly)
      body += sendList(in, true, stage - 1, stage - 1, "kGradient");
    out += body + voidIfUnused(body, "dir") + "}\n\n";
  }
  // Before a micro-batch takes the set another used (Schedule.cpp, from
  // sets_.takes): every one of that one's sends out of the set is done (on
  // the CPU each is its own MPI request, and a small last one can complete
  // before a large earlier one), and receives posted from here on wait for
  // the work queued so far, its last use too.
  out += fmt::format("static void stage{}_reuse([[maybe_unused]] int prev, "
                     "[[maybe_unused]] Direction dir) {{\n",
                     stage);
  if (!sendOut.empty())
    out += fmt::format("  for (int i = 0; i < {}; ++i)\n    pipe_sent_wait("
                       "device_of({}, dir), tag(prev, {}, kActivation, i));\n",
                       sendOut.size(), stage + 1, stage);
  if (!in.empty())
    out += fmt::format("  for (int i = 0; i < {}; ++i)\n    pipe_sent_wait("
                       "device_of({}, dir), tag(prev, {}, kGradient, i));\n",
                       in.size(), stage - 1, stage - 1);
  out += "  pipe_recv_fence();\n}\n\n";
  return out;
}

/// stage<k>_allocate (and _free, where the target frees buffers): the
/// stage's activation sets, and the scratch, inputs and results it keeps
/// apart from them.
std::string Emitter::stageSetsText(const StagePlan &p) const {
  const int stage = p.stage;
  std::vector<std::pair<std::string, std::string>> held = {
      {fmt::format("stage{}", stage),
       fmt::format("resize(size_t(kSets[{}]))", stage)}};
  if (recompute_.hasScratch(stage))
    held.push_back({fmt::format("stage{}_scratch", stage),
                    "emplace_back(LayerBuffers::Scratch)"});
  if (inputStages_.count(stage))
    held.push_back({fmt::format("stage{}_inputs", stage),
                    "resize(size_t(kMicroBatches))"});
  if (stage == lossStage_)
    held.push_back({fmt::format("stage{}_results", stage),
                    "resize(size_t(kMicroBatches))"});
  std::string alloc, release;
  for (const auto &[name, call] : held) {
    alloc += fmt::format("  {}.{};\n", name, call);
    release += fmt::format("  {}.clear();\n", name);
  }
  std::string out =
      fmt::format("static void stage{}_allocate() {{\n{}}}\n\n", stage, alloc);
  if (cx_.target.freesBuffers)
    out +=
        fmt::format("static void stage{}_free() {{\n{}}}\n\n", stage, release);
  return out;
}

void Emitter::emitStage(int stage, std::string &out) {
  const StagePlan p = planStage(stage);
  const size_t stageBegin = out.size();
  // In this order: the struct's text records the stage's loss, inputs and
  // scratch, which the others read.
  out += stageStructText(p);
  out += stageForwardText(p);
  out += stageBackwardText(p);
  out += stageZeroGradsText(p);
  out += stageInstructionsText(p);
  out += stageSetsText(p);
  // Every other reference to a layer's member, as its table entry.
  out.replace(stageBegin, std::string::npos,
              p.sl.rename(out.substr(stageBegin)));
}

} // namespace autoddl::codegen::emit
