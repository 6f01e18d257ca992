//===- ProgramAssembly.cpp - the header comment and the whole program -----===//
//
// The plan in the header comment, and the program: the fixed texts of
// TrainText.cpp / CudaTrainText.cpp around the emitted parts.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"

#include <stdexcept>

namespace autoddl::codegen {

// The fixed parts of train.cpp (TrainText.cpp, CudaTrainText.cpp): includes
// and helpers, the runtime glue every stage uses, and main(). The pieces named
// "Shared" are the same for both backends.
extern const char *const kTrainPreludeText;
extern const char *const kTrainSpecText;
extern const char *const kTrainSupportText;
extern const char *const kTrainSharedPipelineText;
extern const char *const kTrainDataText;
extern const char *const kTrainClassDataText;
extern const char *const kTrainAccuracyText;
extern const char *const kTrainClassIncludesText;
extern const char *const kTrainOptionsText;
extern const char *const kTrainParamsText;
extern const char *const kTrainAllParamsText;
extern const char *const kTrainOptimizerText;
extern const char *const kTrainParseText;
extern const char *const kTrainCheckpointText;
extern const char *const kTrainMainText;
extern const char *const kCudaTrainPreludeText;
extern const char *const kCudaTrainSupportText;
extern const char *const kCudaTrainDataText;
extern const char *const kCudaTrainInitText;
extern const char *const kCudaTrainParamsText;
extern const char *const kCudaTrainMainText;

} // namespace autoddl::codegen

namespace autoddl::codegen::emit {

/// `text` with its one `anchor` replaced: the fixed program text a
/// classification model extends.
std::string replaceOnce(std::string text, const std::string &anchor,
                        const std::string &replacement) {
  const size_t at = text.find(anchor);
  if (at == std::string::npos || text.find(anchor, at + 1) != std::string::npos)
    throw std::logic_error("codegen: the fixed program text has no unique '" +
                           anchor + "'");
  return text.replace(at, anchor.size(), replacement);
}

/// The prelude of a classification program: it also includes the image
/// kernels.
std::string classPrelude(const std::string &prelude) {
  const std::string spmm = "// spmm\n", cstdio = "#include <cstdio>\n";
  return replaceOnce(replaceOnce(prelude, spmm, spmm + kTrainClassIncludesText),
                     cstdio, "#include <algorithm>\n" + cstdio);
}

/// main() of a classification program (or, with `graph`, of a graph model,
/// which has its own data): synthetic samples only (no --data), "samples" per
/// second, and the training accuracy of each step (before its update) printed
/// beside its loss; metrics.json's info.accuracy is the last step's. A graph
/// model also reports the accuracy over its held-out nodes
/// (info.heldout_accuracy).
std::string classMain(std::string text, bool graph) {
  const std::string graphData = "  if (kGraphModel) {\n";
  if (!graph) {
    text = replaceOnce(text, graphData,
                       "  if (!o.data.empty())\n    throw "
                       "std::invalid_argument(\"--data: a classification "
                       "model trains on synthetic \"\n                      "
                       "          \"class prototypes generated from "
                       "--seed\");\n" +
                           graphData);
    text = replaceOnce(
        text,
        "  metrics.items_name = kGraphModel ? \"samples\" : \"tokens\";\n",
        "  metrics.items_name = \"samples\";\n");
  }
  const std::string loop =
      "  for (int64_t step = first_step; step < o.steps; ++step) {\n";
  text =
      replaceOnce(text, loop,
                  std::string("  double accuracy = 0; // of the last step\n") +
                      (graph ? "  double heldout_accuracy = 0;\n" : "") + loop);
  const std::string mean = "    loss /= double(kLossCount);\n";
  std::string count =
      "    double correct = local_correct();\n    "
      "mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &correct, 1, MPI_DOUBLE, "
      "MPI_SUM,\n                           MPI_COMM_WORLD));\n    "
      "accuracy = correct / double(kLossCount);\n";
  if (graph)
    count += "    double heldout = local_heldout_correct();\n    "
             "mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &heldout, 1, MPI_DOUBLE, "
             "MPI_SUM,\n                           MPI_COMM_WORLD));\n    "
             "heldout_accuracy = heldout / double(kHeldOutCount);\n";
  text = replaceOnce(text, mean, mean + count);
  text = replaceOnce(
      text,
      "\"step %4lld/%lld: loss %.6f (%.1f ms)\\n\", (long long)step + 1,\n"
      "                  (long long)o.steps, loss, seconds * 1e3);",
      graph
          ? "\"step %4lld/%lld: loss %.6f accuracy %.4f held-out %.4f (%.1f "
            "ms)\\n\",\n                  (long long)step + 1, (long "
            "long)o.steps, loss, accuracy,\n                  "
            "heldout_accuracy, seconds * 1e3);"
          : "\"step %4lld/%lld: loss %.6f accuracy %.4f (%.1f ms)\\n\",\n"
            "                  (long long)step + 1, (long long)o.steps, loss, "
            "accuracy,\n                  seconds * 1e3);");
  const std::string out = "  if (!o.out.empty()) {\n";
  return replaceOnce(
      text, out,
      std::string(
          "  metrics.info[\"accuracy\"] = std::to_string(accuracy);\n") +
          (graph ? "  metrics.info[\"heldout_accuracy\"] = "
                   "std::to_string(heldout_accuracy);\n"
                 : "") +
          out);
}

std::string Emitter::header() const {
  const auto &k = plan_.knobs;
  std::string h;
  h += fmt::format("//===- train.cpp - generated by `autoddl codegen --backend "
                   "{}` from plan.json ===//\n//\n",
                   target_.name);
  h += fmt::format("// Model     {} ({}), {} parameters, {} layers{}\n",
                   plan_.model, g_.family, g_.parameterCount(), g_.numLayers,
                   g_.seq ? ", sequence " + std::to_string(g_.seq) : "");
  h += fmt::format("// Mesh      pp={} x dp={} x tp={} = {} ranks, axes ({}) "
                   "row-major: the last axis varies fastest\n",
                   k.pp, k.dp, k.tp, k.pp * k.dp * k.tp,
                   planner::axisOrderName(k.order));
  h +=
      fmt::format("// Batch     {} samples per step = dp {} x {} micro-batches "
                  "x {} samples\n",
                  plan_.globalBatch, k.dp, k.microbatches, k.microbatch);
  h += fmt::format(
      "// Schedule  {}{}, ZeRO stage {}{}\n",
      pipeline::scheduleName(k.schedule),
      k.chunks > 1 ? " (" + std::to_string(k.chunks) + " chunks)" : "", k.zero,
      k.recompute != cost::Recompute::None
          ? " (recompute " + planner::recomputeName(k.recompute) +
                " is a memory knob; this program keeps every "
                "activation)"
          : "");
  if (!padRows_.empty())
    h += fmt::format(
        "// Vocabulary {} padded on the device to a multiple of 64 rows per "
        "rank (GEMMs with an odd\n// dimension run at a fraction of the "
        "aligned rate): the logits are [N, Vp], the padding rows\n// and "
        "columns stay zero, and checkpoints, gradient sync and metrics use "
        "the real rows only:\n",
        vocab());
  for (const auto &[t, rows] : padRows_) {
    const std::vector<int64_t> ls = local(t, L_.tensors[size_t(t)]);
    h += fmt::format("//   {} {} -> {}\n", g_.tensors[size_t(t)].name,
                     shapeStr(ls), shapeStr({rows, ls[1]}));
  }
  h += "//\n// Stages (model stage -> pipeline device, layers):\n";
  for (const auto &s : plan_.stages)
    h +=
        fmt::format("//   stage {} on device {}: layers [{}, {}){}{}\n",
                    s.stage, s.device, s.firstLayer, s.endLayer,
                    s.pre ? " + embedding" : "", s.post ? " + head, loss" : "");
  if (plan_.stages.empty())
    h += "//   stage 0 on device 0: the whole model\n";
  h += "//\n// Parameters, nd-SBP over (dp, tp) as this program holds them "
       "(dp: B, ZeRO shards the\n// optimizer state over dp):\n";
  for (size_t t = 0; t < g_.tensors.size(); ++t)
    if (isParam(int(t)))
      h += fmt::format("//   {:<40} {:<12} (B, {})\n", g_.tensors[t].name,
                       shapeStr(full(int(t))), L_.tensors[t].str());
  h += "//\n// Ops whose plan signature splits over tp, and how they run "
       "here:\n";
  bool any = false;
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const OpPlan &p = L_.ops[i];
    if (p.signature.empty() || p.signature == "replicate" ||
        plan_.knobs.tp == 1)
      continue;
    static const char *mode[] = {"replicated",         "column",      "row",
                                 "vocab table",        "local heads", "local",
                                 "vocab-parallel loss"};
    h += fmt::format("//   {:<28} {:<10} plan {:<8} -> {}\n", g_.ops[i].name,
                     g_.ops[i].kind, p.signature, mode[int(p.mode)]);
    any = true;
  }
  if (!any)
    h += "//   (none)\n";
  // Splits the program does not generate (Layout.h lists those it does) run
  // replicated over tp: the same function at more than the plan's work per
  // rank.
  int replicatedOps = 0;
  for (size_t i = 0; i < g_.ops.size(); ++i)
    if (plan_.knobs.tp > 1 && L_.ops[i].mode == OpMode::Replicated &&
        !L_.ops[i].signature.empty() && L_.ops[i].signature != "replicate")
      ++replicatedOps;
  if (replicatedOps > 0) {
    const std::string note = fmt::format(
        "{} ops the plan splits over tp run replicated over tp here (splits "
        "of matmul, softmax, reshape, transpose and graph ops, batch or "
        "sequence splits of a graph model's linears and loss, an undivided "
        "vocabulary outside a bias-free lm_head feeding only the loss, tied "
        "tables not split by vocabulary for both their readers, and "
        "parameters read whole by ops on split rows and by others are not "
        "split by generated programs yet): expect more time per step than "
        "predicted; `autoddl plan --tp-mode tensor` leaves out such splits",
        replicatedOps);
    h += "//   " + note + "\n";
    std::fprintf(stderr, "autoddl: codegen: warning: %s\n", note.c_str());
  }
  // Expected communication volume per step, by collective and axis.
  std::map<std::string, std::pair<int64_t, double>> vol;
  for (const auto &c : plan_.collectives) {
    auto &v = vol[c.collective + " over " + c.axis + " (" + c.phase + ")"];
    v.first += c.perStep;
    v.second += c.bytes * double(c.perStep);
  }
  h += "//\n// Expected communication per step and rank (the plan's cost "
       "model):\n";
  if (vol.empty())
    h += "//   none\n";
  for (const auto &[what, v] : vol)
    h += fmt::format("//   {:<48} {:>6} calls {:>14.0f} bytes\n", what, v.first,
                     v.second);
  h += "//\n//===----------------------------------------------------------"
       "------------===//\n";
  return h;
}

std::string Emitter::emit() {
  const auto &k = plan_.knobs;
  pipeline::ScheduleConfig cfg;
  cfg.kind = k.schedule;
  cfg.stages = k.pp;
  cfg.microbatches = int(k.microbatches);
  cfg.chunks = k.schedule == pipeline::ScheduleKind::Interleaved ? k.chunks : 1;
  auto sched = pipeline::generateSchedule(cfg);
  if (!sched)
    throw UserError("plan: " + sched.error());
  const int stages = sched->modelStages();
  if (stages != L_.numStages)
    throw UserError(fmt::format("plan: the schedule has {} model stages but "
                                "the plan lists {}",
                                stages, L_.numStages));
  if (k.zero > planner::kMaxGeneratedZero)
    throw UserError(fmt::format(
        "codegen: plan zero={}: the generated programs shard the optimizer "
        "state only (ZeRO-1), so this plan would hold full gradients and need "
        "more memory than it was priced with; plan again with zero 0 or 1 "
        "(autoddl plan searches only those unless --fix zero=2)",
        k.zero));
  const bool chimera = k.schedule == pipeline::ScheduleKind::Chimera;
  splitBackward_ = sched->splitsBackward();
  if (graphModel_ && k.microbatches > 1)
    throw UserError("codegen: a graph model trains on the whole graph: "
                    "micro-batches must be 1");
  if (nodeSplit() && full(findInput("features"))[0] % k.dp != 0)
    throw UserError(fmt::format(
        "codegen: dp={} splits the graph's nodes, and does not divide its {}",
        k.dp, full(findInput("features"))[0]));

  // Which pipeline devices hold each parameter (a stage's parameters live on
  // the device running it; Chimera runs every stage on two devices).
  std::vector<uint64_t> &mask = deviceMask_;
  mask.assign(g_.tensors.size(), 0);
  for (size_t i = 0; i < g_.ops.size(); ++i) {
    const int st = L_.ops[i].stage;
    uint64_t m = uint64_t(1) << sched->deviceOf(st, Direction::Down);
    if (chimera)
      m |= uint64_t(1) << sched->deviceOf(st, Direction::Up);
    for (int t : g_.ops[i].operands)
      if (isParam(t))
        mask[size_t(t)] |= m;
  }

  users_ = readers();
  planVocabPadding();
  planGeluFusion();
  planResidualFusion();
  std::string stagesText;
  for (int s = 0; s < stages; ++s)
    emitStage(s, stagesText);
  std::string params = "// Every parameter of the model; a rank holds those of "
                       "the stages it runs.\nstruct Params {\n";
  std::string table;
  for (size_t t = 0; t < g_.tensors.size(); ++t) {
    if (!isParam(int(t)))
      continue;
    const auto &td = g_.tensors[t];
    params += fmt::format("  Param {}; // {} {}\n", names_[t],
                          shapeStr(td.shape), L_.tensors[t].str());
    // A packed q|k|v split per segment names its segment count last.
    const std::string segments =
        L_.tensors[t].segments > 1 ? fmt::format(", {}", L_.tensors[t].segments)
                                   : std::string();
    table +=
        fmt::format("      {{&P.{}, \"{}\", {}, {}, \"{}\", {}, {:#x}{}}},\n",
                    names_[t], td.name, shapeInit(td.shape), L_.tensors[t].dim,
                    td.init.empty() ? "normal" : td.init, fmtDouble(td.initStd),
                    mask[t], segments);
  }
  params += "};\nstatic Params P;\n\n";
  params += "// name, full shape, tp split dimension (-1: B), init, std, "
            "pipeline devices holding it (bits)\nstatic std::vector<ParamSpec> "
            "param_specs() {\n  return {\n" +
            table + "  };\n}\n\n";
  if (cuda_)
    params += vocabPaddingText();
  params += tpPartialGradsText();

  int maxBoundary = 1;
  for (int s = 1; s < stages; ++s)
    maxBoundary = std::max(maxBoundary, int(boundaryTensors(g_, L_, s).size()));

  const int64_t globalCount = lossCount_ * k.microbatches * k.dp;
  std::string consts;
  consts += "// ---- the plan ----\n";
  consts += fmt::format("constexpr int64_t kPP = {}, kDP = {}, kTP = {};\n",
                        k.pp, k.dp, k.tp);
  consts += fmt::format(
      "constexpr bool kTensorInner = {}; // mesh axes (pp, dp, tp); else (pp, "
      "tp, dp)\n",
      k.order == planner::AxisOrder::TensorInner ? "true" : "false");
  consts += fmt::format("constexpr int64_t kStages = {}, kMicroBatches = {}, "
                        "kMicroBatch = {};\n",
                        stages, k.microbatches, k.microbatch);
  consts += fmt::format("constexpr int64_t kGlobalBatch = {}, kSeq = {}, "
                        "kVocab = {};\n",
                        plan_.globalBatch, g_.seq, vocab());
  consts +=
      fmt::format("constexpr bool kChimera = {}, kGraphModel = {};\n",
                  chimera ? "true" : "false", graphModel_ ? "true" : "false");
  consts += fmt::format("constexpr int kZero = {};\n", k.zero);
  consts += fmt::format("constexpr bool kLossRowsOnTp = {}; // the loss split "
                        "by rows (batch, sequence) over tp\n",
                        lossRowsSplit_ ? "true" : "false");
  consts += fmt::format("constexpr int kMaxBoundary = {}; // tensors crossing "
                        "one stage boundary\n",
                        maxBoundary);
  if (!graphModel_) // a graph model's count follows kNodes, below
    consts += fmt::format("// The loss is the mean over {} positions of the "
                          "global batch.\nconstexpr int64_t kLossCount = "
                          "{};\nconstexpr float kLossScale = 1.0f / "
                          "float(kLossCount);\n",
                          globalCount, globalCount);
  consts +=
      fmt::format("constexpr const char *kModelName = \"{}\";\n", plan_.model);
  if (cuda_) {
    consts +=
        fmt::format("// Model FLOPs of one step (forward + backward, the "
                    "plan's count) and the peak of one\n// {} (the "
                    "cluster preset): the MFU reported in metrics.json.\n",
                    plan_.gpu.empty() ? "GPU" : plan_.gpu);
    consts += fmt::format("constexpr double kModelFlopsPerStep = {}, "
                          "kPeakFlopsPerGpu = {};\n",
                          fmtDouble(plan_.predicted.modelFlopsPerStep),
                          fmtDouble(plan_.peakFlops));
  }
  if (graphModel_) {
    const int x = findInput("features");
    const auto &fs = full(x);
    int64_t classes = 0;
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (g_.ops[i].kind == "cross_entropy")
        classes = full(g_.ops[i].operands[0]).back();
    consts += fmt::format("constexpr int64_t kNodes = {}, kFeatures = {}, "
                          "kClasses = {};\n",
                          fs[0], fs[1], classes);
    consts += "// The loss is the mean over the graph's training nodes (the "
              "even ones,\n// backends/common/Data.h); the odd ones are held "
              "out, for the held-out accuracy.\nconstexpr int64_t kLossCount "
              "= planted_graph_training_nodes(kNodes);\nconstexpr int64_t "
              "kHeldOutCount = kNodes - kLossCount;\nconstexpr float "
              "kLossScale = 1.0f / float(kLossCount);\n";
  } else if (classModel_) {
    const auto &xs = full(classInput_);
    int64_t classes = 0;
    for (const OpDef &op : g_.ops)
      if (op.kind == "cross_entropy")
        classes = full(op.operands[0]).back();
    consts += fmt::format(
        "// Samples per micro-batch (the leading dimension of {} {}; an "
        "explicit graph's\n// micro-batch is one instance of it), features "
        "of one sample, classes.\nconstexpr int64_t kClassBatch = {};\n"
        "constexpr int64_t kNodes = 0, kFeatures = {}, kClasses = {};\n",
        g_.tensors[size_t(classInput_)].name, shapeStr(xs), xs[0],
        numel(xs) / xs[0], classes);
  } else {
    consts += "constexpr int64_t kNodes = 0, kFeatures = 0, kClasses = 0; // "
              "graph models only\n";
  }
  consts += "\n";

  std::string lastStage = fmt::format("stage{}", stages - 1);
  std::string glue;
  glue += "// ---- the step ----\n\n";
  glue += "static void allocate_stages() {\n";
  for (int s = 0; s < stages; ++s)
    glue += fmt::format("  if (holds_stage({0}))\n    stage{0}.resize(size_t("
                        "kMicroBatches));\n",
                        s);
  glue += "}\n\n";
  if (cuda_) {
    glue += "// Device buffers go before the CUDA context does.\n";
    glue += "static void free_stages() {\n";
    for (int s = 0; s < stages; ++s)
      glue += fmt::format("  stage{}.clear();\n", s);
    glue += "}\n\n";
  }
  // With the loss on split rows (kLossRowsOnTp) every tp rank sums its own
  // positions; otherwise tp rank 0 holds them all.
  glue += "// This rank's share of the step's summed loss (of the devices "
          "running the last stage).\n";
  glue += "static double local_loss_sum() {\n  double sum = 0;\n  if "
          "(kLossRowsOnTp || g.rtp == 0)\n";
  if (cuda_)
    glue += fmt::format("    for (const auto &a : {})\n   "
                        "   sum += sum_to_host(a.losses.data(), "
                        "a.losses.size());\n",
                        lastStage);
  else
    glue += fmt::format("    for (const auto &a : {})\n   "
                        "   sum += a.loss_sum;\n",
                        lastStage);
  glue += "  return sum;\n}\n\n";
  if (reportsAccuracy())
    glue += fmt::format(
        "// This rank's share of the step's correctly classified samples (as "
        "local_loss_sum).\nstatic double local_correct() {{\n  double sum = "
        "0;\n  if (kLossRowsOnTp || g.rtp == 0)\n    for (const auto &a : "
        "{})\n      sum += double(a.correct);\n  return sum;\n}}\n\n",
        lastStage);
  if (graphModel_)
    glue += fmt::format(
        "// The same over the graph's held-out nodes.\nstatic double "
        "local_heldout_correct() {{\n  double sum = 0;\n  if (g.rtp == 0)\n "
        "   for (const auto &a : {})\n      sum += "
        "double(a.correct_heldout);\n  return sum;\n}}\n\n",
        lastStage);
  glue += schedules(*sched);
  if (cuda_) {
    glue += "\n" + gradSyncConfig(*sched);
    glue += stepGraphGlue(stages);
  }

  if (cuda_) // accuracy: the device count_correct (kernels/CrossEntropy.h)
    return header() + kCudaTrainPreludeText + kTrainSpecText + consts + params +
           kCudaTrainSupportText + kTrainSharedPipelineText +
           kCudaTrainDataText + stagesText + glue + kTrainOptionsText +
           kCudaTrainInitText + kTrainAllParamsText + kCudaTrainParamsText +
           kTrainCheckpointText + kTrainParseText +
           (reportsAccuracy() ? classMain(kCudaTrainMainText, graphModel_)
                              : std::string(kCudaTrainMainText));
  std::string prelude = kTrainPreludeText, data = kTrainDataText,
              mainText = kTrainMainText;
  if (classModel_) {
    prelude = classPrelude(prelude);
    data += kTrainClassDataText;
  }
  if (reportsAccuracy()) {
    data += kTrainAccuracyText;
    mainText = classMain(mainText, graphModel_);
  }
  return header() + prelude + kTrainSpecText + consts + params +
         kTrainSupportText + kTrainSharedPipelineText + data + stagesText +
         glue + kTrainOptionsText + kTrainParamsText + kTrainAllParamsText +
         kTrainOptimizerText + kTrainCheckpointText + kTrainParseText +
         mainText;
}

} // namespace autoddl::codegen::emit

namespace autoddl::codegen {

using emit::Emitter;

std::string emitTrainProgram(const planner::Plan &plan, const ModelGraph &model,
                             Backend backend) {
  Emitter e(plan, model, backend);
  return e.emit();
}

std::string emitCpuTrainProgram(const planner::Plan &plan,
                                const ModelGraph &model) {
  return emitTrainProgram(plan, model, Backend::Cpu);
}

} // namespace autoddl::codegen
