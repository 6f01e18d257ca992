//===- PlanJson.cpp - plan.json writer and reader ------------------------===//
#include "planner/PlanJson.h"
#include "planner/PlanValidate.h"

#include "planner/JsonReader.h"
#include "planner/KfacJson.h"

#include "support/JsonFile.h"
#include "support/UserError.h"

#include <filesystem>

namespace autoddl::planner {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

namespace {

ojson memoryJson(const cost::RankMemory &m) {
  ojson j;
  j["weights"] = m.state.weights;
  j["gradients"] = m.state.gradients;
  j["optimizer"] = m.state.optimizer;
  j["activations"] = m.activations;
  j["workspace"] = m.workspace;
  if (m.graph > 0)
    j["graph"] = m.graph;
  j["overhead"] = m.overhead;
  j["allocated"] = m.allocated();
  j["host"] = m.host;
  j["total"] = m.total();
  return j;
}

// The tables of the plain records (JsonReader.h's Member): writer and reader.
const Member<OpChoice> kOpChoiceFields[] = {
    {"segment", &OpChoice::segment},
    {"op", &OpChoice::op},
    {"kind", &OpChoice::kind},
    {"signature", &OpChoice::signature},
    {"operands", &OpChoice::operands},
    {"result", &OpChoice::result},
    {"candidates", &OpChoice::candidates}};
const Member<CollectiveUse> kCollectiveFields[] = {
    {"where", &CollectiveUse::where},
    {"phase", &CollectiveUse::phase},
    {"collective", &CollectiveUse::collective},
    {"axis", &CollectiveUse::axis},
    {"bytes", &CollectiveUse::bytes},
    {"time_s", &CollectiveUse::time},
    {"per_step", &CollectiveUse::perStep}};
const Member<Alternative> kAlternativeFields[] = {
    {"knob", &Alternative::knob},
    {"value", &Alternative::value},
    {"feasible", &Alternative::feasible},
    {"step_time_s", &Alternative::stepTime},
    {"peak_memory_bytes", &Alternative::peakMemory},
    {"delta_time_s", &Alternative::deltaTime},
    {"delta_memory_bytes", &Alternative::deltaMemory},
    {"reason", &Alternative::reason}};

/// Each element of `v` by its member table.
template <class T, size_t N>
ojson arrayOfMembers(const std::vector<T> &v, const Member<T> (&table)[N]) {
  ojson a = ojson::array();
  for (const T &x : v) {
    a.push_back(ojson::object());
    writeMembers(a.back(), x, table);
  }
  return a;
}

/// The array `key` of `doc`, each element read by its member table.
template <class T, size_t N>
std::vector<T> membersOf(const Reader &r, const json &doc, const char *key,
                         const Member<T> (&table)[N]) {
  return r.each<T>(doc, json::json_pointer(), key,
                   [&](const json &e, const json::json_pointer &ip) {
                     T x;
                     readMembers(r, e, ip, table, x);
                     return x;
                   });
}

/// A JSON array of `f` applied to each element of `v`.
template <class T, class F> ojson arrayOf(const std::vector<T> &v, F f) {
  ojson a = ojson::array();
  for (const T &x : v)
    a.push_back(f(x));
  return a;
}

std::string chunkedSchedule(const Knobs &k) {
  return std::string(pipeline::scheduleName(k.schedule));
}

} // namespace

namespace {

/// Model, cluster, mesh and the knobs.
ojson headerJson(const Plan &p) {
  ojson j;
  j["format"] = "autoddl-plan";
  j["version"] = p.version;
  j["model"] = {{"name", p.model},
                {"family", p.modelFamily},
                {"parameters", p.parameters},
                {"layers", p.layers},
                {"seq", p.seq}};
  if (!p.modelSource.empty())
    j["model"]["source"] = p.modelSource;
  if (!p.loss.empty())
    j["model"]["loss"] = p.loss;
  if (!p.modelSha256.empty())
    j["model"]["sha256"] = p.modelSha256;
  if (!p.fuseSkip.empty())
    j["model"]["fuse_skip"] = p.fuseSkip;
  j["cluster"] = {
      {"name", p.cluster},         {"gpu", p.gpu},
      {"nodes", p.nodes},          {"gpus_per_node", p.gpusPerNode},
      {"peak_flops", p.peakFlops}, {"memory_bytes", p.memoryCapacity}};
  j["global_batch"] = p.globalBatch;
  j["stack"] = p.stack;
  // Written where it is not the default, so bf16 plans read as before.
  if (p.precision != cost::Precision::BF16)
    j["precision"] = std::string(cost::precisionName(p.precision));
  const Knobs &k = p.knobs;
  ojson mesh;
  mesh["axes"] = {"pp", "dp", "tp"};
  mesh["pp"] = k.pp;
  mesh["dp"] = k.dp;
  mesh["tp"] = k.tp;
  mesh["order"] = axisOrderName(k.order);
  mesh["links"] = ojson::object();
  const char *names[] = {"pp", "dp", "tp"};
  for (size_t i = 0; i < p.axisLinks.size() && i < 3; ++i)
    mesh["links"][names[i]] = p.axisLinks[i];
  j["mesh"] = mesh;
  j["microbatch"] = k.microbatch;
  j["microbatches"] = k.microbatches;
  j["schedule"] = {{"kind", chunkedSchedule(k)}, {"chunks", k.chunks}};
  j["recompute"] = recomputeName(k.recompute);
  j["zero"] = k.zero;
  return j;
}

/// The per-op, per-tensor, per-collective, per-stage and per-rank tables.
void addTables(ojson &j, const Plan &p) {
  j["ops"] = arrayOfMembers(p.ops, kOpChoiceFields);
  j["tensors"] = arrayOf(p.tensors, [](const TensorLayout &t) -> ojson {
    return {{"name", t.name},
            {"role", t.role},
            {"shape", t.shape},
            {"sbp", {{"dp", t.dp}, {"tp", t.tp}}},
            {"stage", t.stage}};
  });
  j["collectives"] = arrayOfMembers(p.collectives, kCollectiveFields);
  j["stages"] = arrayOf(p.stages, [](const StageInfo &s) -> ojson {
    return {{"stage", s.stage},
            {"device", s.device},
            {"chunk", s.chunk},
            {"layers", {s.firstLayer, s.endLayer}},
            {"embedding", s.pre},
            {"head", s.post},
            {"recompute_layers", s.recomputeLayers},
            {"activation_sets", s.activationSets}};
  });
  ojson devs = ojson::array();
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const DeviceTimes &t = p.devices[d];
    ojson dev = {{"pipeline_rank", d}};
    for (auto [key, v] : t.jsonFields())
      dev[key] = v;
    dev["memory"] = memoryJson(t.memoryParts);
    devs.push_back(std::move(dev));
    if (p.kfac) { // K-FAC state is in the rank's total
      devs.back()["memory"]["kfac"] = t.kfacBytes;
      devs.back()["memory"]["total"] = t.memory;
    }
  }
  j["pipeline_ranks"] = devs;
  j["p2p_time_s"] = p.p2pTime;
  j["simulator_times_s"] = {{"forward", p.simForward},
                            {"backward", p.simBackward},
                            {"weight_gradient", p.simWeightGradient}};
}

/// The prediction: step, throughput, memory, breakdown, op kinds.
void addPredicted(ojson &j, const Plan &p) {
  const Prediction &pr = p.predicted;
  ojson out = ojson::object();
  for (const auto &f : Prediction::numbers(pr))
    out[f.key] = *f.value;
  out["step_graph"] = pr.stepGraph;
  ojson breakdown = ojson::object();
  for (const auto &f : Prediction::breakdown(pr))
    breakdown[f.key] = *f.value;
  out["breakdown_s"] = breakdown;
  j["predicted"] = out;
  ojson kinds = ojson::object();
  for (const auto &[kind, t] : pr.opKinds)
    kinds[kind] = {{"forward", t[0]}, {"backward", t[1]}};
  j["predicted"]["op_kinds_s"] = kinds;
  if (!pr.attentionKernel.empty()) // else the batched-GEMM estimate: no key
    j["predicted"]["attention_kernel"] = pr.attentionKernel;
  if (pr.opKindsByDevice.size() > 1) { // pipelines: every device
    ojson byDevice = ojson::array();
    for (const auto &dev : pr.opKindsByDevice) {
      ojson d = ojson::object();
      for (const auto &[kind, t] : dev)
        d[kind] = {{"forward", t[0]}, {"backward", t[1]}};
      byDevice.push_back(d);
    }
    j["predicted"]["op_kinds_by_device_s"] = byDevice;
  }
}

} // namespace

ojson planToJson(const Plan &p) {
  ojson j = headerJson(p);
  addTables(j, p);
  addPredicted(j, p);
  if (p.kfac) { // --optimizer kfac; first-order plans have neither key
    j["optimizer"] = "kfac";
    j["kfac"] = kfacToJson(*p.kfac);
  }
  j["alternatives"] = arrayOfMembers(p.alternatives, kAlternativeFields);
  j["search"] = {{"mode", p.search.mode},
                 {"wall_time_s", p.search.wallSeconds},
                 {"candidates_priced", p.search.candidatesPriced},
                 {"simulated", p.search.simulated},
                 {"sbp_evaluations", p.search.sbpEvaluations},
                 {"descents", p.search.descents},
                 {"sbp_ops", p.search.sbpOps},
                 {"descent_variables", p.search.descentVariables}};
  return j;
}

std::string planToText(const Plan &plan) {
  return planToJson(plan).dump(2) + "\n";
}

namespace {

/// Model, cluster, mesh and the knobs.
void readHeader(const Reader &r, const json &doc, Plan &p) {
  const json::json_pointer root;
  if (r.str(doc, root, "format") != "autoddl-plan")
    r.fail(root / "format", "expected \"autoddl-plan\"");
  p.version = r.int32(doc, root, "version");
  if (p.version != kPlanFormatVersion)
    r.fail(root / "version", "unsupported plan version " +
                                 std::to_string(p.version) + " (expected " +
                                 std::to_string(kPlanFormatVersion) + ")");
  const json &model = r.at(doc, root, "model");
  const auto mp = root / "model";
  p.model = r.str(model, mp, "name");
  p.modelFamily = r.str(model, mp, "family");
  p.parameters = r.integer(model, mp, "parameters");
  p.layers = r.integer(model, mp, "layers");
  p.seq = r.integer(model, mp, "seq");
  if (model.contains("source"))
    p.modelSource = r.str(model, mp, "source");
  if (model.contains("loss"))
    p.loss = r.str(model, mp, "loss");
  if (model.contains("sha256"))
    p.modelSha256 = r.str(model, mp, "sha256");
  if (model.contains("fuse_skip"))
    p.fuseSkip = r.str(model, mp, "fuse_skip");
  const json &cl = r.at(doc, root, "cluster");
  const auto cp = root / "cluster";
  p.cluster = r.str(cl, cp, "name");
  p.gpu = r.str(cl, cp, "gpu");
  p.nodes = r.int32(cl, cp, "nodes");
  p.gpusPerNode = r.int32(cl, cp, "gpus_per_node");
  p.peakFlops = r.num(cl, cp, "peak_flops");
  p.memoryCapacity = r.num(cl, cp, "memory_bytes");
  p.globalBatch = r.integer(doc, root, "global_batch");
  if (doc.contains("stack"))
    p.stack = r.str(doc, root, "stack");
  if (doc.contains("precision")) {
    const std::string prec = r.str(doc, root, "precision");
    if (!cost::parsePrecision(prec, p.precision) ||
        (p.precision != cost::Precision::BF16 &&
         p.precision != cost::Precision::FP8))
      r.fail(root / "precision",
             "expected \"bf16\" or \"fp8\", got \"" + prec + "\"");
  }
  const json &mesh = r.at(doc, root, "mesh");
  const auto meshp = root / "mesh";
  Knobs &k = p.knobs;
  k.pp = r.int32(mesh, meshp, "pp");
  k.dp = r.int32(mesh, meshp, "dp");
  k.tp = r.int32(mesh, meshp, "tp");
  if (k.pp < 1 || k.dp < 1 || k.tp < 1)
    r.fail(meshp, "mesh axis sizes must be positive");
  // The axes every plan has, in this order: collectives name them.
  if (r.at(mesh, meshp, "axes") != json::array({"pp", "dp", "tp"}))
    r.fail(meshp / "axes", "expected [\"pp\", \"dp\", \"tp\"]");
  std::string order = r.str(mesh, meshp, "order");
  if (order == axisOrderName(AxisOrder::TensorInner))
    k.order = AxisOrder::TensorInner;
  else if (order == axisOrderName(AxisOrder::DataInner))
    k.order = AxisOrder::DataInner;
  else
    r.fail(meshp / "order", "unknown axis order \"" + order + "\"");
  const json &links = r.at(mesh, meshp, "links");
  for (const char *a : {"pp", "dp", "tp"})
    p.axisLinks.push_back(r.str(links, meshp / "links", a));
  k.microbatch = r.integer(doc, root, "microbatch");
  k.microbatches = r.integer(doc, root, "microbatches");
  if (k.microbatch < 1 || k.microbatches < 1)
    r.fail(root / "microbatches",
           "micro-batch size and count must be positive");
  const json &sch = r.at(doc, root, "schedule");
  std::string kind = r.str(sch, root / "schedule", "kind");
  auto parsed = pipeline::parseScheduleName(kind);
  if (!parsed)
    r.fail(root / "schedule" / "kind",
           "unknown schedule \"" + kind + "\" (expected one of " +
               pipeline::validScheduleNames() + ")");
  k.schedule = *parsed;
  k.chunks = r.int32(sch, root / "schedule", "chunks");
  if (!parseRecompute(r.str(doc, root, "recompute"), k.recompute))
    r.fail(root / "recompute", "expected none, selective or full");
  k.zero = r.int32(doc, root, "zero");
}

/// The per-op, per-tensor and per-collective tables.
void readTables(const Reader &r, const json &doc, Plan &p) {
  const json::json_pointer root;
  p.ops = membersOf(r, doc, "ops", kOpChoiceFields);
  p.tensors = r.each<TensorLayout>(
      doc, root, "tensors", [&](const json &e, const json::json_pointer &ip) {
        TensorLayout t;
        t.name = r.str(e, ip, "name");
        t.role = r.str(e, ip, "role");
        t.shape = r.list<int64_t>(e, ip, "shape", &json::is_number_integer,
                                  "an integer");
        const json &sbp = r.at(e, ip, "sbp");
        t.dp = r.str(sbp, ip / "sbp", "dp");
        t.tp = r.str(sbp, ip / "sbp", "tp");
        t.stage = r.int32(e, ip, "stage");
        return t;
      });
  p.collectives = membersOf(r, doc, "collectives", kCollectiveFields);
}

/// The stages, against the knobs read before.
void readStages(const Reader &r, const json &doc, Plan &p) {
  const json::json_pointer root;
  const Knobs &k = p.knobs;
  p.stages = r.each<StageInfo>(
      doc, root, "stages", [&](const json &e, const json::json_pointer &ip) {
        StageInfo s;
        s.stage = r.int32(e, ip, "stage");
        s.device = r.int32(e, ip, "device");
        s.chunk = r.int32(e, ip, "chunk");
        const json &l = r.array(e, ip, "layers");
        auto layerIndex = [](const json &v) {
          return v.is_number_integer() && v.get<int64_t>() >= 0 &&
                 v.get<int64_t>() <= INT32_MAX;
        };
        if (l.size() != 2 || !layerIndex(l[0]) || !layerIndex(l[1]))
          r.fail(ip / "layers", "expected [first, end]: two layer indices");
        s.firstLayer = l[0].get<int>();
        s.endLayer = l[1].get<int>();
        s.pre = r.flag(e, ip, "embedding");
        s.post = r.flag(e, ip, "head");
        if (s.device < 0 || s.device >= k.pp)
          r.fail(ip / "device", "expected a pipeline rank below pp");
        // Absent (plans before per-stage counts): every layer of the stage when
        // the plan recomputes.
        const int n = s.endLayer - s.firstLayer;
        s.recomputeLayers = k.recompute == cost::Recompute::None ? 0 : n;
        if (e.contains("recompute_layers")) {
          s.recomputeLayers = r.int32(e, ip, "recompute_layers");
          if (s.recomputeLayers < 0 || s.recomputeLayers > n)
            r.fail(ip / "recompute_layers", "expected 0 to the stage's " +
                                                std::to_string(n) + " layers");
          if (k.recompute == cost::Recompute::None && s.recomputeLayers > 0)
            r.fail(ip / "recompute_layers",
                   "the plan's recompute is none: expected 0");
        }
        if (e.contains("activation_sets")) { // absent in older plans
          s.activationSets =
              static_cast<int>(r.integer(e, ip, "activation_sets"));
          if (s.activationSets < 0 || s.activationSets > k.microbatches)
            r.fail(ip / "activation_sets", "expected 0 to the plan's " +
                                               std::to_string(k.microbatches) +
                                               " micro-batches");
        }
        return s;
      });
}

/// One entry per pipeline rank, in order.
void readRanks(const Reader &r, const json &doc, Plan &p) {
  const json::json_pointer root;
  const Knobs &k = p.knobs;
  const json &devs = r.array(doc, root, "pipeline_ranks");
  if (static_cast<int>(devs.size()) != k.pp)
    r.fail(root / "pipeline_ranks", "expected one entry per pipeline rank (" +
                                        std::to_string(k.pp) + "), got " +
                                        std::to_string(devs.size()));
  for (size_t i = 0; i < devs.size(); ++i) {
    auto ip = root / "pipeline_ranks" / i;
    if (r.integer(devs[i], ip, "pipeline_rank") != static_cast<int64_t>(i))
      r.fail(ip / "pipeline_rank", "expected " + std::to_string(i) +
                                       " (one entry per rank, in order)");
    DeviceTimes t;
    t.forward = r.num(devs[i], ip, "forward_s");
    t.backward = r.num(devs[i], ip, "backward_s");
    t.weightGradient = r.num(devs[i], ip, "weight_gradient_s");
    t.forwardComm = r.num(devs[i], ip, "forward_comm_s");
    t.backwardComm = r.num(devs[i], ip, "backward_comm_s");
    t.recompute = r.num(devs[i], ip, "recompute_s");
    t.gradSync = r.num(devs[i], ip, "grad_sync_s");
    t.gradSyncExposed = r.num(devs[i], ip, "grad_sync_exposed_s");
    t.optimizer = r.num(devs[i], ip, "optimizer_s");
    t.end = r.num(devs[i], ip, "end_s");
    t.inFlight = r.num(devs[i], ip, "in_flight_microbatches");
    const json &m = r.at(devs[i], ip, "memory");
    auto mp2 = ip / "memory";
    t.memoryParts.state.weights = r.num(m, mp2, "weights");
    t.memoryParts.state.gradients = r.num(m, mp2, "gradients");
    t.memoryParts.state.optimizer = r.num(m, mp2, "optimizer");
    t.memoryParts.activations = r.num(m, mp2, "activations");
    t.memoryParts.workspace = r.num(m, mp2, "workspace");
    if (m.contains("graph")) // graph models only
      t.memoryParts.graph = r.num(m, mp2, "graph");
    if (m.contains("overhead")) // absent in older plans
      t.memoryParts.overhead = r.num(m, mp2, "overhead");
    if (m.contains("host"))
      t.memoryParts.host = r.num(m, mp2, "host");
    t.memory = t.memoryParts.total();
    if (m.contains("kfac")) {
      t.kfacBytes = r.num(m, mp2, "kfac");
      t.memory += t.kfacBytes;
    }
    if (t.forward < 0 || t.backward < 0 || t.weightGradient < 0)
      r.fail(ip, "times must not be negative");
    p.devices.push_back(t);
  }
}

/// The simulator's times and the prediction.
void readPredicted(const Reader &r, const json &doc, Plan &p) {
  const json::json_pointer root;
  p.p2pTime = r.num(doc, root, "p2p_time_s");
  const json &st = r.at(doc, root, "simulator_times_s");
  auto stp = root / "simulator_times_s";
  for (auto [key, out] : {std::pair<const char *, std::vector<double> *>{
                              "forward", &p.simForward},
                          {"backward", &p.simBackward},
                          {"weight_gradient", &p.simWeightGradient}}) {
    const json &a = r.array(st, stp, key);
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number() || a[i].get<double>() < 0)
        r.fail(stp / key / i, "expected a non-negative number");
      out->push_back(a[i].get<double>());
    }
  }
  const json &pr = r.at(doc, root, "predicted");
  auto pp = root / "predicted";
  for (const auto &f : Prediction::numbers(p.predicted))
    if (!f.optional || pr.contains(f.key))
      *f.value = r.num(pr, pp, f.key);
  if (pr.contains("step_graph")) // absent in older plans: eager
    p.predicted.stepGraph = r.flag(pr, pp, "step_graph");
  if (pr.contains("attention_kernel")) // absent: the batched-GEMM estimate
    p.predicted.attentionKernel = r.str(pr, pp, "attention_kernel");
  const json &bd = r.at(pr, pp, "breakdown_s");
  auto bp = pp / "breakdown_s";
  for (const auto &f : Prediction::breakdown(p.predicted))
    *f.value = r.num(bd, bp, f.key);
  if (pr.contains("op_kinds_s")) { // absent in older plans
    auto kp = pp / "op_kinds_s";
    const json &kinds = r.at(pr, pp, "op_kinds_s");
    if (!kinds.is_object())
      r.fail(kp, "expected an object");
    for (const auto &[kind, t] : kinds.items())
      p.predicted.opKinds[kind] = {r.num(t, kp / kind, "forward"),
                                   r.num(t, kp / kind, "backward")};
  }
  if (pr.contains("op_kinds_by_device_s")) {
    auto devp = pp / "op_kinds_by_device_s";
    const json &devs = r.at(pr, pp, "op_kinds_by_device_s");
    if (!devs.is_array())
      r.fail(devp, "expected an array");
    for (size_t d = 0; d < devs.size(); ++d) {
      if (!devs[d].is_object())
        r.fail(devp / d, "expected an object");
      auto &out = p.predicted.opKindsByDevice.emplace_back();
      for (const auto &[kind, t] : devs[d].items())
        out[kind] = {r.num(t, devp / d / kind, "forward"),
                     r.num(t, devp / d / kind, "backward")};
    }
  }
}

} // namespace

Plan planFromJson(const json &doc, const std::string &origin) {
  Reader r{origin};
  const json::json_pointer root;
  Plan p;
  if (!doc.is_object())
    r.fail(root, "expected a plan object");
  readHeader(r, doc, p);
  readTables(r, doc, p);
  readStages(r, doc, p);
  readRanks(r, doc, p);
  readPredicted(r, doc, p);
  p.alternatives = membersOf(r, doc, "alternatives", kAlternativeFields);
  if (doc.contains("optimizer") || doc.contains("kfac")) {
    if (!doc.contains("optimizer") || !doc.contains("kfac") ||
        r.str(doc, root, "optimizer") != "kfac")
      r.fail(root / "optimizer",
             "expected \"optimizer\": \"kfac\" together with a \"kfac\" "
             "object (first-order plans have neither)");
    p.kfac = kfacFromJson(doc["kfac"], origin, root / "kfac");
  }
  const json &s = r.at(doc, root, "search");
  auto sp = root / "search";
  p.search.mode = r.str(s, sp, "mode");
  p.search.wallSeconds = r.num(s, sp, "wall_time_s");
  p.search.candidatesPriced = r.integer(s, sp, "candidates_priced");
  p.search.simulated = r.integer(s, sp, "simulated");
  p.search.sbpEvaluations = r.integer(s, sp, "sbp_evaluations");
  p.search.descents = r.integer(s, sp, "descents");
  if (s.contains("sbp_ops"))
    p.search.sbpOps = r.integer(s, sp, "sbp_ops");
  if (s.contains("descent_variables"))
    p.search.descentVariables = r.integer(s, sp, "descent_variables");
  return p;
}

Plan readPlanFile(const std::string &path) {
  Plan p = planFromJson(readJsonFile(path, "plan"), path);
  p.origin = path;
  // Plans of older versions recorded the model's path as typed: relative to
  // the plan's folder when the file is there.
  namespace fs = std::filesystem;
  std::error_code ec;
  auto endsWith = [](const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() &&
           s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  const std::string &src = p.modelSource;
  if (!src.empty() && fs::path(src).is_relative() &&
      (src.find('/') != std::string::npos || endsWith(src, ".json") ||
       endsWith(src, ".onnx"))) {
    const fs::path beside = fs::path(path).parent_path() / p.modelSource;
    if (fs::is_regular_file(beside, ec))
      p.modelSource = fs::absolute(beside, ec).lexically_normal().string();
  }
  validatePlan(p, path);
  return p;
}

} // namespace autoddl::planner
