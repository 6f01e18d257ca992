//===- Cluster.cpp --------------------------------------------------------===//
#include "cost_model/Cluster.h"
#include "support/EnumNames.h"

#include <cmath>
#include <iterator>

namespace autoddl::cost {

namespace {
constexpr EnumName<Precision> kPrecisionNames[] = {{Precision::FP32, "fp32"},
                                                   {Precision::TF32, "tf32"},
                                                   {Precision::BF16, "bf16"},
                                                   {Precision::FP16, "fp16"},
                                                   {Precision::FP8, "fp8"}};
static_assert(std::size(kPrecisionNames) == kNumPrecisions);
} // namespace

std::string_view precisionName(Precision p) {
  return nameOf(kPrecisionNames, p);
}

bool parsePrecision(std::string_view s, Precision &out) {
  std::optional<Precision> p = parseName(kPrecisionNames, s);
  if (p)
    out = *p;
  return bool(p);
}

double Cluster::peakFlops(Precision p) const {
  double v = peak[static_cast<int>(p)];
  if (v <= 0 && p == Precision::FP8)
    return peakFlops(Precision::BF16);
  return v > 0 ? v : peak[static_cast<int>(Precision::FP32)];
}

double Cluster::nodeNetworkShare(int gpusInGroup) const {
  return interNode.bandwidth * nicsPerNode * gpusInGroup / gpusPerNode;
}

namespace {
bool positive(double v) { return std::isfinite(v) && v > 0; }

/// "<what> must be positive", or, for a value that overflowed to infinity
/// (1e300 GB/s in bytes/s), that it is too large: saying "positive" of a huge
/// number misleads.
std::string notPositive(const std::string &what, double v) {
  if (std::isinf(v) && v > 0)
    return what + " is too large (not a finite number)";
  return what + " must be positive";
}
} // namespace

std::string validateCluster(const Cluster &c) {
  if (c.gpusPerNode < 1)
    return "gpus per node must be at least 1, got " +
           std::to_string(c.gpusPerNode);
  if (c.nodes < 1)
    return "nodes must be at least 1, got " + std::to_string(c.nodes);
  if (static_cast<int64_t>(c.gpusPerNode) * c.nodes > kMaxWorldSize)
    return "the cluster has more than " + std::to_string(kMaxWorldSize) +
           " gpus (" + std::to_string(c.nodes) + " nodes x " +
           std::to_string(c.gpusPerNode) + ")";
  if (c.smCount < 1)
    return "sm count must be at least 1, got " + std::to_string(c.smCount);
  if (!positive(c.peak[static_cast<int>(Precision::FP32)]))
    return notPositive("the fp32 peak",
                       c.peak[static_cast<int>(Precision::FP32)]);
  for (double p : c.peak)
    if (!std::isfinite(p) || p < 0)
      return "peak FLOP/s must be positive or absent";
  if (!positive(c.hbmBytes))
    return notPositive("memory capacity", c.hbmBytes);
  if (!positive(c.hbmBandwidth))
    return notPositive("memory bandwidth", c.hbmBandwidth);
  if (!positive(c.hbmEfficiency) || c.hbmEfficiency > 1)
    return "memory efficiency must be in (0, 1]";
  if (!positive(c.gemmEfficiency) || c.gemmEfficiency > 1)
    return "gemm efficiency must be in (0, 1]";
  if (!std::isfinite(c.kernelLaunch) || c.kernelLaunch < 0)
    return "kernel launch time must not be negative";
  if (!std::isfinite(c.collectiveOverhead) || c.collectiveOverhead < 0)
    return "collective overhead must not be negative";
  if (c.gpusPerNode > 1 && !positive(c.intraNode.bandwidth))
    return notPositive("intra-node bandwidth", c.intraNode.bandwidth);
  if (!std::isfinite(c.intraNode.latency) || c.intraNode.latency < 0)
    return "intra-node latency must not be negative";
  if (c.nodes > 1 || c.nicsPerNode > 0) {
    if (c.nicsPerNode < 1)
      return "a cluster of several nodes needs at least 1 nic per node";
    if (!positive(c.interNode.bandwidth))
      return notPositive("inter-node bandwidth", c.interNode.bandwidth);
  }
  if (!std::isfinite(c.interNode.latency) || c.interNode.latency < 0)
    return "inter-node latency must not be negative";
  return "";
}

Cluster withNodes(const Cluster &c, int nodes) {
  Cluster out = c;
  out.nodes = nodes;
  return out;
}

bool contiguousGroup(const Cluster &c, int ranks, GroupPlacement &out,
                     std::string &error) {
  if (ranks < 1) {
    error = "a group needs at least 1 rank, got " + std::to_string(ranks);
    return false;
  }
  int g = c.gpusPerNode;
  if (ranks <= g) {
    out = {ranks, 1};
  } else if (ranks % g == 0) {
    out = {g, ranks / g};
  } else {
    error = std::to_string(ranks) + " ranks do not fill whole nodes of " +
            std::to_string(g) + " gpus";
    return false;
  }
  if (out.nodes > c.nodes) {
    error = std::to_string(ranks) + " ranks need " + std::to_string(out.nodes) +
            " nodes, the cluster has " + std::to_string(c.nodes) +
            " (scale it with --nodes)";
    return false;
  }
  return true;
}

bool placeMeshAxis(const Cluster &c, const std::vector<int64_t> &meshShape,
                   int axis, GroupPlacement &out, std::string &error) {
  if (axis < 0 || axis >= static_cast<int>(meshShape.size())) {
    error = "mesh axis " + std::to_string(axis) + " out of range";
    return false;
  }
  int64_t total = 1;
  for (int64_t d : meshShape) {
    if (d < 1) {
      error = "mesh axis sizes must be at least 1";
      return false;
    }
    total *= d;
    if (total > c.worldSize()) {
      error = "the mesh needs more gpus than the cluster's " +
              std::to_string(c.worldSize());
      return false;
    }
  }
  int64_t stride = 1;
  for (size_t j = axis + 1; j < meshShape.size(); ++j)
    stride *= meshShape[j];
  int64_t d = meshShape[axis], g = c.gpusPerNode;
  auto straddles = [&] {
    error = "mesh axis " + std::to_string(axis) + " (size " +
            std::to_string(d) + ", stride " + std::to_string(stride) +
            ") straddles nodes of " + std::to_string(g) + " gpus unevenly";
    return false;
  };
  if (stride * d <= g) {
    if (g % (stride * d) != 0 && total > g)
      return straddles();
    out = {static_cast<int>(d), 1};
  } else if (stride >= g) {
    if (stride % g != 0)
      return straddles();
    out = {1, static_cast<int>(d)};
  } else {
    if (g % stride != 0 || (stride * d) % g != 0)
      return straddles();
    int inNode = static_cast<int>(g / stride);
    out = {inNode, static_cast<int>(d / inNode)};
  }
  return true;
}

} // namespace autoddl::cost
