//===- Cluster.h - the machine the cost model prices plans on ------------===//
//
// A cluster is N identical nodes of G GPUs. Inside a node GPUs talk over one
// link class (NVLink/NVSwitch, PCIe); between nodes over NICs (InfiniBand,
// Aries, ...). Every number is in SI units (bytes, seconds, FLOP/s); the JSON
// reader (io/ClusterJson.h) converts the human units of cluster files.
// docs/cluster-format.md describes the file, docs/cost-model.md the formulas
// that use these numbers.
//
// Plain C++17, no exceptions: the MLIR-based planner links this.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace autoddl::cost {

/// The arithmetic a kernel runs in; each has its own peak on a GPU.
/// FP8: Hopper's E4M3/E5M2 tensor-core GEMMs (a plan precision: its eligible
/// transformer-block linears run in FP8, everything else in bf16;
/// docs/cost-model.md "FP8").
enum class Precision { FP32, TF32, BF16, FP16, FP8 };
constexpr int kNumPrecisions = 5;
/// "fp32", "tf32", "bf16", "fp16", "fp8"
std::string_view precisionName(Precision p);
bool parsePrecision(std::string_view s, Precision &out);
/// What a plan of precision `p` runs outside its FP8 GEMMs: bf16 for fp8,
/// else `p`. Also the peak MFU is quoted against for an fp8 plan (MFU is
/// not defined when two peaks mix; the bf16 one is the conservative base).
inline Precision bulkPrecision(Precision p) {
  return p == Precision::FP8 ? Precision::BF16 : p;
}

/// One class of link. For the intra-node class `bandwidth` is what one GPU
/// attains in one direction inside a ring (the nccl-tests bus bandwidth of a
/// large message); for the inter-node class it is one NIC's bandwidth in one
/// direction.
struct LinkClass {
  std::string kind;     // "nvlink", "pcie", "infiniband", "aries", "ethernet"
  double bandwidth = 0; // bytes/s
  double latency = 0;   // seconds per algorithm step (the α of one hop)
  /// Bytes/s of one point-to-point transfer (send/recv), which NCCL runs with
  /// more channels per peer than a ring step; 0 = same as `bandwidth`.
  double p2pBandwidth = 0;
  double pointToPoint() const {
    return p2pBandwidth > 0 ? p2pBandwidth : bandwidth;
  }
};

/// A measured time or efficiency that replaces the analytical estimate of one
/// kernel (the calibration hook). Matched exactly on (op, precision, shape);
/// see compute::calibratedTime and docs/cluster-format.md "calibration".
struct CalibrationEntry {
  std::string op; // op kind as in docs/ir.md, or "gemm"
  Precision precision = Precision::BF16;
  std::vector<int64_t>
      shape; // gemm/linear/matmul: {M, N, K}; others: first operand's shape
  double time = 0;       // seconds; 0 = not given
  double efficiency = 0; // fraction of peak; 0 = not given
};

/// Measured throughput of a sparse kernel (spmm, sddmm) at one precision by
/// feature width (docs/cluster-format.md "sparse_gflops"): the cost model
/// prices the op from it, interpolating between widths, instead of the
/// roofline.
struct SparseRate {
  std::string op; // "spmm" or "sddmm"
  Precision precision = Precision::FP32;
  std::vector<std::pair<double, double>> points; // (width, FLOP/s), ascending
};

/// A measured correction of one op kind's priced time (docs/cluster-format.md
/// "op_time_scale"): `autoddl validate --fit-cluster` writes measured /
/// predicted from a profiled run of a generated program.
struct OpTimeScale {
  std::string kind; // op kind as in docs/ir.md
  double forward = 1, backward = 1;
};

/// The fused attention kernel the generated programs run on this GPU and its
/// measured efficiency (docs/cluster-format.md "attention"): `kernel` names it
/// ("cudnn": cuDNN's fused attention, which programs built with libcudnn use;
/// "own": the runtime's FlashAttention-2 kernels); the efficiencies are
/// achieved FLOP/s over the bf16 peak with 4·B·H·T²·D FLOPs forward, half that
/// under the causal mask (what the kernel runs), 2.5 times that backward.
/// Absent (kernel empty): a fused kernel priced as a batched T x T x D GEMM
/// (gemmEfficiency by shape), as before.
struct AttentionRates {
  std::string kernel;
  double forwardEfficiency = 0, backwardEfficiency = 0;
};

struct Cluster {
  std::string name;
  std::string gpuModel;
  int gpusPerNode = 1;
  int nodes = 1;
  int smCount = 1;
  /// Dense peak FLOP/s by Precision (index = enum value); 0 = not supported, in
  /// which case that precision runs at the fp32 peak (fp8: at the bf16 peak,
  /// as the programs run it in bf16 there; see peakFlops()).
  std::array<double, kNumPrecisions> peak{};
  double hbmBytes = 0;     // memory capacity per GPU
  double hbmBandwidth = 0; // bytes/s, datasheet
  double hbmEfficiency =
      1; // achievable fraction of hbmBandwidth (measured copy)
  double gemmEfficiency =
      1; // achievable fraction of peak by a large GEMM (measured)
  double kernelLaunch = 0; // seconds, floor of any kernel
  double l2Bytes = 0; // last-level cache; 0: unknown (gathers priced as reads)
  double collectiveOverhead =
      0; // seconds, fixed cost of one NCCL call (launch + base latency)
  LinkClass intraNode;
  LinkClass interNode;
  int nicsPerNode = 0;
  std::vector<CalibrationEntry> calibration;
  std::vector<SparseRate> sparseRates; // empty: the roofline prices spmm/sddmm
  std::vector<OpTimeScale> opTimeScales; // empty: every kind as priced
  AttentionRates attention;              // empty kernel: the GEMM estimate
  /// Seconds of device time each op execution (forward, backward) costs
  /// beyond its kernels, as a profiled run measures it (0: none).
  double opOverhead = 0;
  /// The same where the step runs as one CUDA graph (generated programs of
  /// token models: backends/cuda/StepGraph.h), whose kernels need no launch
  /// from the host each; < 0: opOverhead.
  double graphOpOverhead = -1;

  int worldSize() const { return gpusPerNode * nodes; }
  /// The peak of `p`, or the fp32 peak where the GPU lacks `p` (e.g. bf16 on
  /// P100); fp8 where the GPU lacks it: the bf16 peak.
  double peakFlops(Precision p) const;
  /// Bytes/s the NICs of one node give the `gpusInGroup` GPUs of that node that
  /// belong to one communication group, when all G GPUs of the node communicate
  /// at once (as every SPMD collective on a mesh axis does): the node's NICs
  /// are shared evenly.
  double nodeNetworkShare(int gpusInGroup) const;
};

/// The largest cluster the model accepts (GPUs); keeps rank arithmetic in int.
constexpr int64_t kMaxWorldSize = 10000000;

/// Empty when `c` is usable; otherwise a lower-case message naming the first
/// bad field.
std::string validateCluster(const Cluster &c);

/// The same cluster with `nodes` nodes (every preset scales this way).
Cluster withNodes(const Cluster &c, int nodes);

/// How one communication group lies on the hierarchy: `gpusPerNode` of its
/// members share a node, spread over `nodes` nodes (size = gpusPerNode *
/// nodes).
struct GroupPlacement {
  int gpusPerNode = 1;
  int nodes = 1;
  int size() const { return gpusPerNode * nodes; }
};

/// A group of `ranks` consecutive ranks (rank r on node r / G). Fails (message)
/// when the group does not tile nodes evenly (ranks > G and not a multiple of
/// G) or needs more nodes than the cluster has.
bool contiguousGroup(const Cluster &c, int ranks, GroupPlacement &out,
                     std::string &error);

/// The group of mesh axis `axis` of a device mesh laid out row-major over the
/// ranks (the last axis is innermost: its neighbours are consecutive ranks). An
/// axis whose stride times size is at most G stays inside a node (NVLink); one
/// with stride >= G puts one GPU per node in each group; one in between spans
/// nodes with several GPUs each. Fails when the mesh does not fit the cluster
/// or an axis straddles nodes unevenly.
bool placeMeshAxis(const Cluster &c, const std::vector<int64_t> &meshShape,
                   int axis, GroupPlacement &out, std::string &error);

} // namespace autoddl::cost
