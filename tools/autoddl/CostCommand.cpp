//===- CostCommand.cpp - `autoddl cost ...`: price collectives and boxing -===//
//
//   autoddl cost collective --op all_reduce --bytes 256MiB --ranks 16 --cluster
//   dgx-h100-ndr [--json] autoddl cost boxing --mesh 2,8 --from "S(0),B" --to
//   "B,S(1)" --bytes 1GiB --cluster ... [--json] autoddl cost cluster --cluster
//   dgx-a100-hdr [--nodes 4] [--json]
//
// --cluster takes a preset name (examples/clusters/<name>.json) or a cluster
// file; docs/cluster-format.md. Formulas: docs/cost-model.md.
//
//===----------------------------------------------------------------------===//
#include "cost_model/Boxing.h"
#include "cost_model/Collectives.h"
#include "cost_model/Compute.h"
#include "cost_model/io/ClusterJson.h"
#include "support/UserError.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <memory>

namespace autoddl::cli {

namespace {

using cost::Cluster;
using json = nlohmann::json;

// "1048576", "1e6", "64KiB", "256MiB", "1GiB", "10MB", "1GB" -> bytes.
double parseBytes(const std::string &text) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (const std::exception &) {
    end = 0;
  }
  std::string unit = text.substr(end);
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "KiB" || unit == "K")
    scale = 1024.0;
  else if (unit == "MiB" || unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  if (end == 0 || scale == 0 || !std::isfinite(v) || v < 0 || v * scale > 1e15)
    throw UserError(
        "--bytes: expected a size such as 1048576, 64KiB, 256MiB or "
        "1GB (0 to 1e15 bytes), got \"" +
        text + "\"");
  return std::floor(v * scale);
}

json estimateJson(const cost::CollectiveEstimate &e) {
  return {{"algorithm", std::string(cost::algorithmName(e.algorithm))},
          {"time_s", e.time},
          {"latency_s", e.latency},
          {"algbw_GBps", e.algbw / 1e9},
          {"busbw_GBps", e.busbw / 1e9}};
}

std::string micro(double seconds) {
  return fmt::format("{:.2f} us", seconds * 1e6);
}

struct ClusterOptions {
  std::string cluster;
  int nodes = 0;
  void add(CLI::App *cmd) {
    cmd->add_option(
           "--cluster", cluster,
           "cluster preset name (examples/clusters/<name>.json) or a cluster "
           "JSON file")
        ->required();
    cmd->add_option("--nodes", nodes, "scale the cluster to this many nodes");
  }
};

// --- collective
// ---------------------------------------------------------------

struct CollectiveOptions : ClusterOptions {
  std::string op, bytes;
  int ranks = 0;
  bool asJson = false;
};

void runCollective(const CollectiveOptions &o) {
  cost::Collective op;
  if (!cost::parseCollective(o.op, op))
    throw UserError("--op: expected all_reduce, all_gather, reduce_scatter, "
                    "all_to_all or send, got \"" +
                    o.op + "\"");
  double bytes = parseBytes(o.bytes);
  if (o.ranks < 1 || (op == cost::Collective::SendRecv && o.ranks < 2))
    throw UserError("--ranks: expected at least " +
                    std::string(op == cost::Collective::SendRecv ? "2" : "1") +
                    ", got " + std::to_string(o.ranks));
  Cluster c = cost::loadCluster(o.cluster, o.nodes);
  // Without --nodes, grow the cluster to the nodes the group needs.
  if (o.nodes == 0 && o.ranks > c.worldSize() && c.nicsPerNode > 0 &&
      o.ranks % c.gpusPerNode == 0)
    c = cost::withNodes(c, o.ranks / c.gpusPerNode);
  cost::GroupPlacement group;
  std::string error;
  if (!cost::contiguousGroup(c, o.ranks, group, error))
    throw UserError("--ranks: " + error);
  cost::CollectiveCost r = cost::collectiveCost(c, op, bytes, group);

  if (o.asJson) {
    json doc = estimateJson(r.best);
    doc["op"] = std::string(cost::collectiveName(op));
    doc["bytes"] = bytes;
    doc["ranks"] = o.ranks;
    doc["cluster"] = c.name;
    doc["group"] = {{"nodes", group.nodes},
                    {"gpus_per_node", group.gpusPerNode}};
    doc["bus_bandwidth_factor"] =
        cost::busBandwidthFactor(op, std::max(2, o.ranks));
    json cands = json::array();
    for (const auto &e : r.candidates)
      cands.push_back(estimateJson(e));
    doc["candidates"] = cands;
    std::printf("%s\n", doc.dump(2).c_str());
    return;
  }
  std::printf("%s of %.0f bytes over %d ranks (%d node%s x %d gpu%s) on %s\n",
              std::string(cost::collectiveName(op)).c_str(), bytes, o.ranks,
              group.nodes, group.nodes == 1 ? "" : "s", group.gpusPerNode,
              group.gpusPerNode == 1 ? "" : "s", c.name.c_str());
  std::printf("  time:      %.6e s (%s)\n", r.best.time,
              micro(r.best.time).c_str());
  std::printf("  algorithm: %s\n",
              std::string(cost::algorithmName(r.best.algorithm)).c_str());
  std::printf("  algbw:     %.1f GB/s\n", r.best.algbw / 1e9);
  std::printf("  busbw:     %.1f GB/s\n", r.best.busbw / 1e9);
  for (const auto &e : r.candidates)
    std::printf("  candidate %-12s %s (latency %s, busbw %.1f GB/s)\n",
                std::string(cost::algorithmName(e.algorithm)).c_str(),
                micro(e.time).c_str(), micro(e.latency).c_str(), e.busbw / 1e9);
}

// --- boxing
// -------------------------------------------------------------------

struct BoxingOptions : ClusterOptions {
  std::string mesh, from, to, bytes;
  bool asJson = false;
};

std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char ch : text) {
    if (ch == '(')
      ++depth;
    if (ch == ')')
      --depth;
    if (ch == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else if (ch != ' ' && !(depth == 0 && (ch == '[' || ch == ']'))) {
      cur += ch;
    }
  }
  parts.push_back(cur);
  return parts;
}

cost::NdSbp parseNdSbp(const std::string &flag, const std::string &text,
                       size_t axes) {
  cost::NdSbp out;
  std::string trimmed = text;
  if (trimmed.size() >= 2 && trimmed.front() == '(' && trimmed.back() == ')' &&
      trimmed.find("S(") != 1)
    trimmed = trimmed.substr(1, trimmed.size() - 2);
  for (const std::string &p : splitList(trimmed)) {
    cost::Sbp s;
    if (!cost::parseSbp(p, s))
      throw UserError(flag + ": expected S(dim), B or P per mesh axis, got \"" +
                      p + "\" in \"" + text + "\"");
    out.push_back(s);
  }
  if (out.size() != axes)
    throw UserError(flag + ": the mesh has " + std::to_string(axes) +
                    " axes, \"" + text + "\" gives " +
                    std::to_string(out.size()));
  return out;
}

void runBoxing(const BoxingOptions &o) {
  std::vector<int64_t> shape;
  for (const std::string &p : splitList(o.mesh)) {
    char *end = nullptr;
    long v = std::strtol(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || v < 1 || v > 1000000)
      throw UserError("--mesh: expected axis sizes such as 2,8, got \"" +
                      o.mesh + "\"");
    shape.push_back(v);
  }
  if (shape.size() > 8)
    throw UserError("--mesh: at most 8 axes, got " +
                    std::to_string(shape.size()));
  cost::NdSbp from = parseNdSbp("--from", o.from, shape.size());
  cost::NdSbp to = parseNdSbp("--to", o.to, shape.size());
  double bytes = parseBytes(o.bytes);
  Cluster c = cost::loadCluster(o.cluster, o.nodes);
  int64_t devices = 1;
  for (int64_t d : shape)
    devices *= d;
  if (o.nodes == 0 && devices > c.worldSize() && c.nicsPerNode > 0 &&
      devices % c.gpusPerNode == 0)
    c = cost::withNodes(c, static_cast<int>(devices / c.gpusPerNode));
  cost::MeshOnCluster mesh;
  std::string error;
  if (!cost::placeMesh(c, shape, mesh, error))
    throw UserError("--mesh: " + error);
  cost::BoxingCost r = cost::ndTransition(c, mesh, bytes, from, to);
  if (r.searchTooLarge)
    throw UserError("--mesh: " + std::to_string(shape.size()) +
                    " axes with these layouts give more than 1e6 states to search");
  if (!r.possible)
    throw UserError("no sequence of collectives turns " +
                    cost::ndSbpToString(from) + " into " +
                    cost::ndSbpToString(to));
  if (o.asJson) {
    json steps = json::array();
    for (const auto &s : r.steps) {
      json js = {{"axis", s.axis},
                 {"from", cost::sbpToString(s.from)},
                 {"to", cost::sbpToString(s.to)},
                 {"free", s.free}};
      if (!s.free) {
        js["collective"] = std::string(cost::collectiveName(s.collective));
        js["bytes"] = s.bytes;
        js["estimate"] = estimateJson(s.estimate);
      }
      steps.push_back(js);
    }
    json doc = {{"from", cost::ndSbpToString(from)},
                {"to", cost::ndSbpToString(to)},
                {"bytes", bytes},
                {"mesh", shape},
                {"cluster", c.name},
                {"time_s", r.time},
                {"steps", steps}};
    std::printf("%s\n", doc.dump(2).c_str());
    return;
  }
  std::printf("%s -> %s of %.0f bytes on mesh %s of %s: %s\n",
              cost::ndSbpToString(from).c_str(),
              cost::ndSbpToString(to).c_str(), bytes, o.mesh.c_str(),
              c.name.c_str(), micro(r.time).c_str());
  for (const auto &s : r.steps) {
    if (s.free)
      std::printf("  axis %d: %s -> %s  free (local)\n", s.axis,
                  cost::sbpToString(s.from).c_str(),
                  cost::sbpToString(s.to).c_str());
    else
      std::printf(
          "  axis %d: %s -> %s  %s of %.0f bytes over %d ranks: %s (%s)\n",
          s.axis, cost::sbpToString(s.from).c_str(),
          cost::sbpToString(s.to).c_str(),
          std::string(cost::collectiveName(s.collective)).c_str(), s.bytes,
          mesh.axes[s.axis].size(), micro(s.estimate.time).c_str(),
          std::string(cost::algorithmName(s.estimate.algorithm)).c_str());
  }
}

// --- cluster
// ------------------------------------------------------------------

struct ClusterShowOptions : ClusterOptions {
  bool asJson = false;
};

void runCluster(const ClusterShowOptions &o) {
  Cluster c = cost::loadCluster(o.cluster, o.nodes);
  json peaks = json::object();
  for (int i = 0; i < cost::kNumPrecisions; ++i)
    if (c.peak[i] > 0)
      peaks[std::string(cost::precisionName(static_cast<cost::Precision>(i)))] =
          c.peak[i] / 1e12;
  json doc = {
      {"name", c.name},
      {"gpu", c.gpuModel},
      {"nodes", c.nodes},
      {"gpus_per_node", c.gpusPerNode},
      {"world_size", c.worldSize()},
      {"peak_tflops", peaks},
      {"memory_GB", c.hbmBytes / 1e9},
      {"memory_bandwidth_GBps", c.hbmBandwidth / 1e9},
      {"intra_node_GBps", c.intraNode.bandwidth / 1e9},
      {"inter_node_GBps_per_node", c.interNode.bandwidth * c.nicsPerNode / 1e9},
      {"calibration_entries", c.calibration.size()}};
  if (o.asJson) {
    std::printf("%s\n", doc.dump(2).c_str());
    return;
  }
  std::printf("%s: %d node%s x %d %s (%d gpus)\n", c.name.c_str(), c.nodes,
              c.nodes == 1 ? "" : "s", c.gpusPerNode, c.gpuModel.c_str(),
              c.worldSize());
  std::printf("  peak: %s TFLOP/s; memory %.0f GB at %.0f GB/s\n",
              peaks.dump().c_str(), c.hbmBytes / 1e9, c.hbmBandwidth / 1e9);
  if (c.gpusPerNode > 1)
    std::printf("  intra-node: %s %.0f GB/s per gpu, %s per step\n",
                c.intraNode.kind.c_str(), c.intraNode.bandwidth / 1e9,
                micro(c.intraNode.latency).c_str());
  if (c.nicsPerNode > 0)
    std::printf("  inter-node: %s %d x %.1f GB/s per node, %s per step\n",
                c.interNode.kind.c_str(), c.nicsPerNode,
                c.interNode.bandwidth / 1e9,
                micro(c.interNode.latency).c_str());
}

// --- op
// -----------------------------------------------------------------------

struct OpOptions : ClusterOptions {
  std::string kind, inputs, params, precision = "bf16";
  std::vector<std::string> attrs;
  bool asJson = false;
};

// "8192x4096,4096x4096:i32" -> value types (f32 unless ":i32"/":i64" follows).
std::vector<ops::ValueType> parseOperands(const std::string &text) {
  std::vector<ops::ValueType> out;
  for (const std::string &item : splitList(text)) {
    ops::ValueType v;
    std::string dims = item;
    if (auto colon = item.find(':'); colon != std::string::npos) {
      auto dt = ops::parseDType(item.substr(colon + 1));
      if (!dt)
        throw UserError("--in: unknown element type in \"" + item + "\"");
      v.dtype = *dt;
      dims = item.substr(0, colon);
    }
    size_t start = 0;
    while (start <= dims.size()) {
      size_t x = dims.find('x', start);
      std::string d =
          dims.substr(start, x == std::string::npos ? x : x - start);
      char *end = nullptr;
      long long n = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || n < 1)
        throw UserError("--in: expected shapes such as 8192x4096, got \"" +
                        item + "\"");
      v.shape.push_back(n);
      if (x == std::string::npos)
        break;
      start = x + 1;
    }
    out.push_back(v);
  }
  return out;
}

ops::Attrs parseAttrs(const std::string &kind,
                      const std::vector<std::string> &items) {
  ops::Attrs attrs;
  for (const std::string &item : items) {
    auto eq = item.find('=');
    std::string name = item.substr(0, eq);
    auto type = ops::attrKind(kind, name);
    if (eq == std::string::npos || !type)
      throw UserError("--attr: expected name=value with an attribute of " +
                      kind + ", got \"" + item + "\"");
    std::string value = item.substr(eq + 1);
    try {
      switch (*type) {
      case ops::AttrKind::I64:
        attrs[name] = static_cast<int64_t>(std::stoll(value));
        break;
      case ops::AttrKind::F64:
        attrs[name] = std::stod(value);
        break;
      case ops::AttrKind::Bool:
        if (value != "true" && value != "false")
          throw std::invalid_argument("bool");
        attrs[name] = value == "true";
        break;
      case ops::AttrKind::Str:
        attrs[name] = value;
        break;
      case ops::AttrKind::I64Array: {
        std::vector<int64_t> list;
        for (const std::string &p : splitList(value))
          list.push_back(std::stoll(p));
        attrs[name] = list;
        break;
      }
      }
    } catch (const std::exception &) {
      throw UserError("--attr: " + name + " of " + kind + " is " +
                      std::string(ops::attrKindName(*type)) + ", got \"" +
                      value + "\"");
    }
  }
  return attrs;
}

json kernelJson(const cost::KernelCost &k) {
  return {{"flops", k.flops},
          {"bytes", k.bytes},
          {"time_s", k.time},
          {"efficiency", k.efficiency},
          {"compute_bound", k.computeBound},
          {"calibrated", k.calibrated}};
}

void runOp(const OpOptions &o) {
  if (!ops::lookupOp(o.kind))
    throw UserError("--kind: \"" + o.kind + "\" is not an op of docs/ir.md");
  cost::Precision precision;
  if (!cost::parsePrecision(o.precision, precision))
    throw UserError("--precision: expected fp32, tf32, bf16, fp16 or fp8, got \"" +
                    o.precision + "\"");
  std::vector<ops::ValueType> operands = parseOperands(o.inputs);
  ops::Attrs attrs = parseAttrs(o.kind, o.attrs);
  ops::InferResult inferred = ops::inferResultTypes(o.kind, operands, attrs);
  if (!inferred.ok())
    throw UserError("--in: " + o.kind + ": " + inferred.error);
  std::vector<bool> isParam(operands.size(), false);
  if (!o.params.empty())
    for (const std::string &p : splitList(o.params)) {
      char *end = nullptr;
      long i = std::strtol(p.c_str(), &end, 10);
      if (p.empty() || *end != '\0' || i < 0 ||
          i >= static_cast<long>(operands.size()))
        throw UserError("--params: expected operand indices below " +
                        std::to_string(operands.size()) + ", got \"" +
                        o.params + "\"");
      isParam[i] = true;
    }
  Cluster c = cost::loadCluster(o.cluster, o.nodes);
  cost::OpCost r =
      cost::opCost(c, o.kind, operands, inferred.results,
                   ops::withDefaults(o.kind, attrs), isParam, precision);
  if (o.asJson) {
    json doc = {{"op", o.kind},
                {"precision", o.precision},
                {"cluster", c.name},
                {"forward", kernelJson(r.forward)},
                {"backward_data", kernelJson(r.backwardData)},
                {"backward_weight", kernelJson(r.backwardWeight)}};
    std::printf("%s\n", doc.dump(2).c_str());
    return;
  }
  std::printf("%s in %s on one %s of %s (local shapes)\n", o.kind.c_str(),
              o.precision.c_str(), c.gpuModel.c_str(), c.name.c_str());
  auto line = [](const char *what, const cost::KernelCost &k) {
    std::printf("  %-16s %s  %.3e FLOP  %.3e bytes  %s%s\n", what,
                micro(k.time).c_str(), k.flops, k.bytes,
                k.time == 0      ? "none"
                : k.computeBound ? "compute-bound"
                                 : "memory-bound",
                k.calibrated ? " (calibrated)" : "");
  };
  line("forward", r.forward);
  line("backward dgrad", r.backwardData);
  line("backward wgrad", r.backwardWeight);
}

} // namespace

void registerCostCommand(CLI::App &app) {
  CLI::App *cost = app.add_subcommand(
      "cost", "price collectives and layout changes with the cost model");
  cost->require_subcommand(1);

  auto co = std::make_shared<CollectiveOptions>();
  CLI::App *coll = cost->add_subcommand(
      "collective", "time, algorithm and bus bandwidth of one collective");
  coll->add_option("--op", co->op,
                   "all_reduce, all_gather, reduce_scatter, all_to_all or send")
      ->required();
  coll->add_option(
          "--bytes", co->bytes,
          "message size (nccl-tests convention), e.g. 1048576, 256MiB, 1GB")
      ->required();
  coll->add_option("--ranks", co->ranks,
                   "ranks in the group (consecutive ranks)")
      ->required();
  co->add(coll);
  coll->add_flag("--json", co->asJson, "print a JSON object");
  coll->callback([co] { runCollective(*co); });

  auto bo = std::make_shared<BoxingOptions>();
  CLI::App *box = cost->add_subcommand(
      "boxing", "cheapest collectives that change a tensor's nd-SBP");
  box->add_option("--mesh", bo->mesh,
                  "mesh axis sizes, outermost first, e.g. 2,8")
      ->required();
  box->add_option("--from", bo->from, "nd-SBP now, e.g. \"S(0),B\"")
      ->required();
  box->add_option("--to", bo->to, "nd-SBP wanted, e.g. \"B,S(1)\"")->required();
  box->add_option("--bytes", bo->bytes, "logical tensor size, e.g. 1GiB")
      ->required();
  bo->add(box);
  box->add_flag("--json", bo->asJson, "print a JSON object");
  box->callback([bo] { runBoxing(*bo); });

  auto cl = std::make_shared<ClusterShowOptions>();
  CLI::App *show =
      cost->add_subcommand("cluster", "show a cluster as the model reads it");
  cl->add(show);
  show->add_flag("--json", cl->asJson, "print a JSON object");
  show->callback([cl] { runCluster(*cl); });
  auto oo = std::make_shared<OpOptions>();
  CLI::App *op = cost->add_subcommand(
      "op",
      "roofline time of one op's forward, dgrad and wgrad on its local shard");
  op->add_option("--kind", oo->kind, "op kind of docs/ir.md, e.g. linear")
      ->required();
  op->add_option(
        "--in", oo->inputs,
        "operand shapes, e.g. 8192x4096,4096x4096 (append :i32 for ids)")
      ->required();
  op->add_option("--params", oo->params,
                 "indices of operands that are trainable parameters, e.g. 1,2");
  op->add_option("--attr", oo->attrs, "attribute name=value (repeatable)");
  op->add_option("--precision", oo->precision,
                 "fp32, tf32, bf16 (default), fp16 or fp8");
  oo->add(op);
  op->add_flag("--json", oo->asJson, "print a JSON object");
  op->callback([oo] { runOp(*oo); });
}

} // namespace autoddl::cli
