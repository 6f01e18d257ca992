//===- ClusterFit.cpp - fit a cluster's op times to a profiled run --------===//
#include "cost_model/fit/ClusterFit.h"

#include "cost_model/Compute.h"
#include "cost_model/io/ClusterJson.h"
#include "support/JsonFile.h"
#include "support/UserError.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace autoddl::cost {

using nlohmann::json;

RunFit fitClusterToRun(const RunFitInput &in, const std::string &out,
                       const std::string &what) {
  const std::string path = clusterSpecPath(in.cluster);
  const Cluster old = readClusterFile(path);
  json doc = readJsonFile(path, "cluster");
  json &gpu = doc["gpu"];
  json scales = gpu.value("op_time_scale", json::object());
  double measuredOps = 0, predictedOps = 0, calls = 0;
  for (const OpKindTimes &r : in.ops) {
    const double c = r.executions;
    measuredOps += r.measuredForward + r.measuredBackward;
    predictedOps += r.predictedForward + r.predictedBackward;
    calls += c;
    // The prediction holds old.opOverhead per execution (a GEMM's backward
    // is two); the kernels' part is the rest.
    // (A kind with no forward of its own, a residual add whose forward runs
    // in a GEMM, executes its backward only.)
    const double forwardCalls =
        r.predictedForward > 0 ? c / (isGemmKind(r.kind) ? 3 : 2) : 0;
    const double kf = r.predictedForward - old.opOverhead * forwardCalls;
    const double kb = r.predictedBackward - old.opOverhead * (c - forwardCalls);
    double sf = 1, sb = 1;
    for (const OpTimeScale &s : old.opTimeScales)
      if (s.kind == r.kind) {
        sf = s.forward;
        sb = s.backward;
      }
    auto factor = [](double scale, double predicted, double measured) {
      return predicted > 0 && measured > 0
                 ? std::clamp(scale * measured / predicted, 0.05, 100.0)
                 : scale;
    };
    scales[r.kind] = {{"forward", factor(sf, kf, r.measuredForward)},
                      {"backward", factor(sb, kb, r.measuredBackward)}};
  }
  if (calls <= 0)
    throw UserError(what + ": no op kind both predicted and measured");
  // Step time outside every op: measured, against what the plan prices there
  // (optimizer, bubbles, exposed communication). The op rows hold the old
  // overhead, so the measured gaps are the new overhead whatever the old was.
  const double predictedOther = in.predictedStep - predictedOps;
  const double measuredOther = in.measuredStep - measuredOps;
  RunFit fit;
  fit.overhead = std::max(0.0, (measuredOther - predictedOther) / calls);
  scales["source"] = fmt::format(
      "autoddl validate --fit-cluster: measured / predicted op-kind times of "
      "{} against the run in {}",
      in.planName, in.measuredRun);
  gpu["op_time_scale"] = scales;
  gpu["op_overhead_us"] = std::round(fit.overhead * 1e7) / 10; // 0.1 us
  // A graphed run of the same plan: what it spends outside the ops (measured
  // eagerly, with their own launch gaps) over the same executions is the
  // per-op overhead of a graphed step.
  if (in.graphStep) {
    fit.graphOverhead =
        std::max(0.0, (*in.graphStep - measuredOps - predictedOther) / calls);
    gpu["graph_op_overhead_us"] = std::round(*fit.graphOverhead * 1e7) / 10;
    if (gpu.contains("source") && gpu["source"].is_object())
      gpu["source"]["graph_op_overhead_us"] = fmt::format(
          "autoddl validate --fit-cluster --graph-run {}: the graphed step "
          "({:.3f} ms) outside the profiled run's ops, less what the plan "
          "prices there, over {} op executions",
          in.graphRun, 1e3 * *in.graphStep, calls);
  }
  if (gpu.contains("source") && gpu["source"].is_object())
    gpu["source"]["op_overhead_us"] = fmt::format(
        "autoddl validate --fit-cluster: step time outside every "
        "op of {} ({:.3f} ms measured, {:.3f} ms priced) over {} "
        "op executions",
        in.planName, 1e3 * measuredOther, 1e3 * predictedOther, calls);
  // A preset's name is its file's stem (autoddl plan --cluster NAME).
  doc["name"] = std::filesystem::path(out).stem().string();
  doc["description"] =
      doc.value("description", std::string()) +
      " Op-kind times and per-op overhead fitted to a profiled run "
      "(autoddl validate --fit-cluster).";
  clusterFromJson(doc, out); // what it writes must load
  writeFileAtomically(out, doc.dump(2) + "\n");
  fit.kinds = scales.size() - 1;
  return fit;
}

} // namespace autoddl::cost
