//===- ClusterJson.cpp - cluster files (docs/cluster-format.md) -----------===//
#include "cost_model/io/ClusterJson.h"
#include "cost_model/io/PresetsConfig.h"
#include "support/JsonFile.h"
#include "support/UserError.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <dirent.h>
#include <optional>
#include <set>
#include <sys/stat.h>

namespace autoddl::cost {

namespace {

using json = nlohmann::json;
using Ptr = json::json_pointer;

// Reads the fields of one JSON object, remembering which it saw so that any
// other field is reported as unknown (a misspelt field must not silently keep a
// default).
class ObjectReader {
public:
  ObjectReader(const json &obj, Ptr where, const std::string &origin)
      : obj_(obj), where_(std::move(where)), origin_(origin) {
    if (!obj_.is_object())
      fail(where_, std::string("expected an object, got ") + obj_.type_name());
  }

  [[noreturn]] void fail(const Ptr &at, const std::string &why) const {
    throw UserError(jsonPlace(origin_, at) + why);
  }
  Ptr at(const std::string &key) const { return where_ / key; }
  bool has(const std::string &key) {
    known_.insert(key);
    return obj_.contains(key);
  }
  const json &get(const std::string &key) {
    if (!has(key))
      fail(where_, "missing required field \"" + key + "\"");
    return obj_.at(key);
  }

  // The required field, which must pass `is`: else "expected <what>, got "
  // the JSON type's name (with showValue: the value).
  const json &typed(const std::string &key, bool (json::*is)() const noexcept,
                    const char *what, bool showValue = false) {
    const json &v = get(key);
    if (!(v.*is)())
      fail(at(key), std::string("expected ") + what + ", got " +
                        (showValue ? v.dump() : v.type_name()));
    return v;
  }

  std::string string(const std::string &key, bool required = true) {
    if (!required && !has(key))
      return "";
    return typed(key, &json::is_string, "a string").get<std::string>();
  }

  // A finite number > 0 (or >= 0 when zeroOk); `fallback` when optional and
  // absent.
  double number(const std::string &key, bool zeroOk = false,
                std::optional<double> fallback = std::nullopt) {
    if (fallback && !has(key))
      return *fallback;
    const json &v = typed(key, &json::is_number, "a number");
    double d = v.get<double>();
    if (!std::isfinite(d) || d < 0 || (!zeroOk && d == 0))
      fail(at(key), std::string("must be ") +
                        (zeroOk ? "non-negative" : "positive") + ", got " +
                        v.dump());
    return d;
  }

  double fraction(const std::string &key, double fallback) {
    double d = number(key, false, fallback);
    if (d > 1)
      fail(at(key), "must be a fraction in (0, 1], got " + get(key).dump());
    return d;
  }

  int integer(const std::string &key, int min,
              std::optional<int> fallback = std::nullopt) {
    if (fallback && !has(key))
      return *fallback;
    const json &v = typed(key, &json::is_number_integer, "an integer", true);
    long long i = v.get<long long>();
    if (i < min || i > 1000000)
      fail(at(key), "must be an integer in [" + std::to_string(min) +
                        ", 1000000], got " + v.dump());
    return static_cast<int>(i);
  }

  // Every figure must cite where it comes from: "source" is a non-empty string,
  // or an object of non-empty strings keyed by the fields they cite.
  void source() {
    const json &v = get("source");
    auto empty = [](const json &s) {
      return !s.is_string() ||
             s.get<std::string>().find_first_not_of(" \t") == std::string::npos;
    };
    if (v.is_object()) {
      if (v.empty())
        fail(at("source"), "must cite at least one source");
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (empty(it.value()))
          fail(at("source") / it.key(), "expected a non-empty string citing a "
                                        "datasheet or measurement");
        if (it.key() != "*" && !obj_.contains(it.key()))
          fail(at("source") / it.key(),
               "cites field \"" + it.key() +
                   "\", which this object does not have");
      }
    } else if (empty(v)) {
      fail(at("source"),
           "expected a non-empty string (or object of strings) citing "
           "a datasheet or measurement");
    }
  }

  void finish() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!known_.count(it.key()))
        fail(at(it.key()), "unknown field \"" + it.key() + "\"");
  }

private:
  const json &obj_;
  Ptr where_;
  const std::string &origin_;
  std::set<std::string> known_;
};

/// gpu.op_time_scale: {"layernorm": {"forward": 1.4, "backward": 2.7}, ...,
/// "source": ...}; factors in (0, 100].
std::vector<OpTimeScale> readOpTimeScales(const json &v, const Ptr &where,
                                          const std::string &origin) {
  ObjectReader table(v, where, origin);
  std::vector<OpTimeScale> scales;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() == "source")
      continue;
    table.get(it.key()); // a known field
    ObjectReader k(it.value(), where / it.key(), origin);
    OpTimeScale s;
    s.kind = it.key();
    s.forward = k.number("forward", false, 1.0);
    s.backward = k.number("backward", false, 1.0);
    if (s.forward > 100)
      k.fail(k.at("forward"), "expected a factor in (0, 100]");
    if (s.backward > 100)
      k.fail(k.at("backward"), "expected a factor in (0, 100]");
    k.finish();
    scales.push_back(s);
  }
  table.source();
  table.finish();
  return scales;
}

/// gpu.kfac_time_scale: {"curvature": f, "inversion": f, "precondition": f,
/// "precondition_bf16": f, "source": ...}, measured / priced time of the
/// K-FAC work items (docs/pipefisher.md §2; fitted from a traced run by
/// bench/pipefisher/utilisation_cpu.py fit or kfac_gpu_fit.py), each optional
/// (1), factors in (0, 100]; precondition_bf16 is the preconditioning priced
/// as bf16 GEMMs (planner/Kfac.cpp), precondition as fp32 ones. Kept in
/// Cluster::opTimeScales under the kinds "kfac:<key>" (the factor as
/// `forward`), which no op kind matches; planner/Kfac.cpp reads them
/// (kfacTimeScale).
void readKfacTimeScales(const json &v, const Ptr &where,
                        const std::string &origin,
                        std::vector<OpTimeScale> &scales) {
  ObjectReader table(v, where, origin);
  for (const char *item :
       {"curvature", "inversion", "precondition", "precondition_bf16"}) {
    if (!table.has(item))
      continue;
    OpTimeScale s;
    s.kind = std::string("kfac:") + item;
    s.forward = s.backward = table.number(item);
    if (s.forward > 100)
      table.fail(table.at(item), "expected a factor in (0, 100]");
    scales.push_back(s);
  }
  table.source();
  table.finish();
}

/// gpu.sparse_gflops: {"spmm": {"fp32": [[width, GFLOP/s], ...], ...},
/// "sddmm": {...}, and each format variant's ("spmm.hybrid", "spmm.all-tc",
/// "sddmm.hybrid", "sddmm.all-tc"), "source": ...}, widths ascending.
std::vector<SparseRate> readSparseRates(const json &v, const Ptr &where,
                                        const std::string &origin) {
  ObjectReader table(v, where, origin);
  std::vector<SparseRate> rates;
  for (const char *op : {"spmm", "sddmm", "spmm.hybrid", "spmm.all-tc",
                         "sddmm.hybrid", "sddmm.all-tc"}) {
    if (!table.has(op))
      continue;
    const json &byPrecision = table.get(op);
    if (!byPrecision.is_object())
      table.fail(table.at(op), std::string("expected an object, got ") +
                                   byPrecision.type_name());
    for (auto it = byPrecision.begin(); it != byPrecision.end(); ++it) {
      const Ptr at = table.at(op) / it.key();
      SparseRate r;
      r.op = op;
      if (!parsePrecision(it.key(), r.precision))
        table.fail(at, "expected a precision (fp32, tf32, bf16, fp16, fp8), got \"" +
                           it.key() + "\"");
      const json &pts = it.value();
      if (!pts.is_array() || pts.empty())
        table.fail(at, "expected a non-empty array of [width, GFLOP/s] pairs");
      for (size_t i = 0; i < pts.size(); ++i) {
        const json &pt = pts[i];
        const bool ok = pt.is_array() && pt.size() == 2 && pt[0].is_number() &&
                        pt[1].is_number() && pt[0].get<double>() > 0 &&
                        pt[1].get<double>() > 0 &&
                        std::isfinite(pt[1].get<double>());
        if (!ok)
          table.fail(at / i, "expected [width, GFLOP/s], both positive, got " +
                                 pt.dump());
        const double w = pt[0].get<double>();
        if (!r.points.empty() && w <= r.points.back().first)
          table.fail(at / i,
                     "expected widths in ascending order, got " + pt.dump());
        r.points.push_back({w, 1e9 * pt[1].get<double>()});
      }
      rates.push_back(std::move(r));
    }
  }
  table.source();
  table.finish();
  return rates;
}

bool isFile(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

Cluster clusterFromJson(const json &doc, const std::string &origin) {
  Cluster c;
  ObjectReader top(doc, Ptr(), origin);
  c.name = top.string("name");
  top.string("description", false);
  c.nodes = top.integer("nodes", 1);
  c.gpusPerNode = top.integer("gpus_per_node", 1);

  {
    ObjectReader gpu(top.get("gpu"), Ptr("/gpu"), origin);
    c.gpuModel = gpu.string("model");
    c.smCount = gpu.integer("sm_count", 1);
    ObjectReader peaks(gpu.get("peak_tflops"), Ptr("/gpu/peak_tflops"), origin);
    for (int i = 0; i < kNumPrecisions; ++i) {
      auto p = static_cast<Precision>(i);
      std::string key(precisionName(p));
      bool required = p == Precision::FP32;
      c.peak[i] =
          1e12 * (required ? peaks.number(key) : peaks.number(key, false, 0.0));
    }
    peaks.finish();
    c.hbmBytes = 1e9 * gpu.number("memory_GB");
    c.hbmBandwidth = 1e9 * gpu.number("memory_bandwidth_GBps");
    c.hbmEfficiency = gpu.fraction("memory_efficiency", 1.0);
    c.gemmEfficiency = gpu.fraction("gemm_efficiency", 1.0);
    c.kernelLaunch = 1e-6 * gpu.number("kernel_launch_us", true);
    c.l2Bytes = 1e6 * gpu.number("l2_cache_MB", false, 0.0);
    if (gpu.has("sparse_gflops"))
      c.sparseRates = readSparseRates(gpu.get("sparse_gflops"),
                                      gpu.at("sparse_gflops"), origin);
    if (gpu.has("op_time_scale"))
      c.opTimeScales = readOpTimeScales(gpu.get("op_time_scale"),
                                        gpu.at("op_time_scale"), origin);
    if (gpu.has("kfac_time_scale"))
      readKfacTimeScales(gpu.get("kfac_time_scale"), gpu.at("kfac_time_scale"),
                         origin, c.opTimeScales);
    if (gpu.has("attention")) {
      ObjectReader att(gpu.get("attention"), Ptr("/gpu/attention"), origin);
      c.attention.kernel = att.string("kernel");
      if (c.attention.kernel != "cudnn" && c.attention.kernel != "own")
        att.fail(att.at("kernel"), "expected \"cudnn\" or \"own\"");
      for (const char *key : {"forward_efficiency", "backward_efficiency"}) {
        const double f = att.number(key); // required, > 0
        if (f > 1)
          att.fail(att.at(key),
                   "must be a fraction in (0, 1], got " + att.get(key).dump());
        (key[0] == 'f' ? c.attention.forwardEfficiency
                       : c.attention.backwardEfficiency) = f;
      }
      att.source();
      att.finish();
    }
    c.opOverhead = 1e-6 * gpu.number("op_overhead_us", true, 0.0);
    if (c.opOverhead >= 1e-2)
      gpu.fail(gpu.at("op_overhead_us"), "expected microseconds below 10000");
    if (gpu.has("graph_op_overhead_us")) {
      c.graphOpOverhead = 1e-6 * gpu.number("graph_op_overhead_us", true);
      if (c.graphOpOverhead >= 1e-2)
        gpu.fail(gpu.at("graph_op_overhead_us"),
                 "expected microseconds below 10000");
    }
    gpu.source();
    gpu.finish();
  }

  if (top.has("intra_node")) {
    ObjectReader link(top.get("intra_node"), Ptr("/intra_node"), origin);
    c.intraNode.kind = link.string("kind");
    c.intraNode.bandwidth = 1e9 * link.number("bandwidth_GBps");
    c.intraNode.latency = 1e-6 * link.number("latency_us", true);
    c.intraNode.p2pBandwidth =
        1e9 * link.number("p2p_bandwidth_GBps", false, 0.0);
    link.source();
    link.finish();
  } else if (c.gpusPerNode > 1) {
    top.fail(Ptr(), "missing required field \"intra_node\" (nodes have " +
                        std::to_string(c.gpusPerNode) + " gpus)");
  }

  if (top.has("inter_node")) {
    ObjectReader link(top.get("inter_node"), Ptr("/inter_node"), origin);
    c.interNode.kind = link.string("kind");
    c.nicsPerNode = link.integer("nics_per_node", 1);
    c.interNode.bandwidth = 1e9 * link.number("nic_bandwidth_GBps");
    c.interNode.latency = 1e-6 * link.number("latency_us", true);
    link.source();
    link.finish();
  }

  {
    ObjectReader sw(top.get("collectives"), Ptr("/collectives"), origin);
    c.collectiveOverhead = 1e-6 * sw.number("overhead_us", true);
    sw.source();
    sw.finish();
  }

  if (top.has("calibration")) {
    const json &cal = top.get("calibration");
    if (!cal.is_array())
      top.fail(Ptr("/calibration"),
               std::string("expected an array, got ") + cal.type_name());
    for (size_t i = 0; i < cal.size(); ++i) {
      Ptr where = Ptr("/calibration") / i;
      ObjectReader e(cal[i], where, origin);
      CalibrationEntry entry;
      entry.op = e.string("op");
      std::string prec = e.string("precision");
      if (!parsePrecision(prec, entry.precision))
        e.fail(e.at("precision"),
               "expected one of fp32, tf32, bf16, fp16, fp8, got \"" + prec + "\"");
      const json &shape = e.get("shape");
      if (!shape.is_array() || shape.empty())
        e.fail(e.at("shape"),
               "expected a non-empty array of positive integers");
      for (size_t k = 0; k < shape.size(); ++k) {
        if (!shape[k].is_number_integer() || shape[k].get<long long>() < 1)
          e.fail(e.at("shape") / k,
                 "expected a positive integer, got " + shape[k].dump());
        entry.shape.push_back(shape[k].get<int64_t>());
      }
      bool hasTime = e.has("time_us"), hasEff = e.has("efficiency");
      if (hasTime == hasEff)
        e.fail(where, "give exactly one of \"time_us\" and \"efficiency\"");
      if (hasTime)
        entry.time = 1e-6 * e.number("time_us");
      else
        entry.efficiency = e.fraction("efficiency", 1.0);
      e.source();
      e.finish();
      c.calibration.push_back(entry);
    }
  }
  top.finish();

  if (c.nodes > 1 && c.nicsPerNode < 1)
    top.fail(Ptr(), "missing required field \"inter_node\" (the cluster has " +
                        std::to_string(c.nodes) + " nodes)");
  if (std::string why = validateCluster(c); !why.empty())
    throw UserError(origin + ": " + why);
  return c;
}

Cluster readClusterFile(const std::string &path) {
  return clusterFromJson(readJsonFile(path, "cluster"), path);
}

std::string presetsDir() {
  if (const char *env = std::getenv("AUTODDL_PRESETS_DIR"); env && *env) {
    // Named by the variable: "unknown preset (presets in X: none)" would not
    // say where X came from.
    struct stat st {};
    if (::stat(env, &st) != 0 || !S_ISDIR(st.st_mode))
      throw UserError(std::string("AUTODDL_PRESETS_DIR=") + env +
                      ": not a folder of cluster presets");
    return env;
  }
  return AUTODDL_PRESETS_SOURCE_DIR;
}

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  DIR *dir = ::opendir(presetsDir().c_str());
  if (!dir)
    return names;
  while (dirent *e = ::readdir(dir)) {
    std::string f = e->d_name;
    if (f.size() > 5 && f.compare(f.size() - 5, 5, ".json") == 0)
      names.push_back(f.substr(0, f.size() - 5));
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string clusterSpecPath(const std::string &spec) {
  if (spec.empty())
    throw UserError(
        "--cluster: expected a preset name or a cluster file, got an "
        "empty string");
  bool isPath =
      isFile(spec) || spec.find('/') != std::string::npos ||
      (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0);
  std::string path = isPath ? spec : presetsDir() + "/" + spec + ".json";
  if (!isPath && !isFile(path)) {
    std::string known;
    for (const std::string &n : presetNames())
      known += (known.empty() ? "" : ", ") + n;
    throw UserError("--cluster: unknown preset \"" + spec + "\" (presets in " +
                    presetsDir() + ": " + (known.empty() ? "none" : known) +
                    "); a path to a cluster file also works");
  }
  return path;
}

Cluster loadCluster(const std::string &spec, int nodes) {
  const std::string path = clusterSpecPath(spec);
  Cluster c = readClusterFile(path);
  if (nodes < 0)
    throw UserError("--nodes: must be at least 1, got " +
                    std::to_string(nodes));
  if (nodes > 0) {
    if (nodes > 1 && c.nicsPerNode < 1)
      throw UserError(path + ": cannot scale to " + std::to_string(nodes) +
                      " nodes: the cluster has no \"inter_node\" network");
    c = withNodes(c, nodes);
    if (std::string why = validateCluster(c); !why.empty())
      throw UserError("--nodes: " + why);
  }
  return c;
}

} // namespace autoddl::cost
