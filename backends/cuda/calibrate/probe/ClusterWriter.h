//===- ClusterWriter.h - calibration measurements -> cluster JSON ---------===//
//
// The host-side half of the calibration probe (docs/calibrate.md): the
// measurements the GPU side takes, the least-squares fit of t(S) = a + S/B to a
// collective's times, the GEMM shapes measured by default, and the writer of a
// cluster file in docs/cluster-format.md's schema. Plain C++17 without CUDA, so
// that autoddl's unit tests compile the same file and load what it writes with
// the cluster reader.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace calib {

/// One GEMM Y[M,N] = X[M,K] * W[K,N], the key of a cost-model calibration
/// entry (docs/cost-model.md §4.5).
struct GemmShape {
  long long m = 0, n = 0, k = 0;
  bool operator==(const GemmShape &o) const {
    return m == o.m && n == o.n && k == o.k;
  }
};

struct GemmResult {
  GemmShape shape;
  double timeUs = 0; // median of repeated timings of one GEMM
  double tflops() const {
    return 2.0 * shape.m * shape.n * shape.k / (timeUs * 1e-6) / 1e12;
  }
};

/// One message size of a collective: S as nccl-tests defines it (the per-rank
/// buffer of all_reduce, the gathered output of all_gather, the message of
/// send/recv) and the slowest rank's mean time.
struct SizeTime {
  double bytes = 0;
  double timeUs = 0;
};

/// t(S) = fixedUs + S * usPerByte, fitted on relative error.
struct Fit {
  double fixedUs = 0;
  double usPerByte = 0;
  double maxRelError = 0; // worst |fit - measured| / measured over the points
  double algbwGBps() const { return usPerByte > 0 ? 1e-3 / usPerByte : 0; }
};

/// Weighted least squares of t = a + b*S with weights 1/t^2, so small and large
/// messages count alike (bench/nccl/fit_alpha_beta.py does the same). Needs two
/// distinct sizes; returns a zero Fit otherwise.
Fit fitAlphaBeta(const std::vector<SizeTime> &points);

/// The collectives of one group of ranks (one node's GPUs, or one GPU per
/// node), every group of its kind running at once as the cost model assumes.
struct GroupSeries {
  int ranks = 0;
  std::vector<SizeTime> allReduce, allGather, sendRecv;
};

/// What the link-class fields of a cluster file become (docs/cost-model.md
/// §2.3, §2.7): with n ranks all_reduce takes 2(n-1) ring steps and all_gather
/// n-1, so the difference of their fixed times is (n-1) steps of alpha and
/// all_gather's fixed time less its steps is the per-call overhead c.
struct LinkFit {
  Fit allReduce, allGather, sendRecv;
  double busbwGBps = 0;  // all_reduce fit's bandwidth times 2(n-1)/n
  double latencyUs = 0;  // alpha, one ring step (clamped at 0)
  double overheadUs = 0; // c
  double p2pGBps = 0;    // send/recv fit's bandwidth (0: not measured)
};
LinkFit fitLink(const GroupSeries &g);

struct Measurements {
  std::string name;     // the cluster's name
  std::string date;     // YYYY-MM-DD
  std::string probe;    // how it was measured, for the sources (versions, host)
  std::string gpuModel; // cudaDeviceProp::name
  int nodes = 1, gpusPerNode = 1;
  int smCount = 0;
  double memoryBytes = 0; // cudaDeviceProp::totalGlobalMem
  double l2Bytes = 0;     // cudaDeviceProp::l2CacheSize
  double copyGBps = 0;    // device-to-device copy, bytes read + written per s
  double launchUs = 0;    // back-to-back empty kernel launches, per launch
  // Large square GEMMs (8192^3), TFLOP/s.
  double bf16Tflops = 0, tf32Tflops = 0, fp32Tflops = 0;
  std::vector<GemmResult> gemms; // bf16, one per shape
  bool hasIntra = false, hasInter = false;
  GroupSeries intra, inter;
};

/// The cluster file (docs/cluster-format.md). Datasheet peaks and HBM
/// bandwidth are used where the GPU's name is known (H100/H200 SXM, A100), with
/// the measured fraction as gemm_efficiency / memory_efficiency; an unknown GPU
/// gets the measured rates as its peaks and efficiency 1.
std::string clusterJson(const Measurements &m);

/// Every raw number (GEMM table, collective times per size, fits) as JSON.
std::string rawJson(const Measurements &m);

/// The GEMMs measured by default: the forward, dgrad and wgrad GEMM of every
/// linear of GPT-2 124M..1.5B (d_model 768, 1024, 1280, 1600; vocab 50257) at
/// 4096, 8192 and 16384 tokens, unsplit and split two ways (tp = 2), keyed as
/// cost_model/Compute.cpp looks them up: forward [M,N,K], dgrad [M,K,N], wgrad
/// [K,N,M]; plus square 4096^3 and 8192^3.
std::vector<GemmShape> defaultGemmShapes();

/// Reads "M N K" lines ('#' starts a comment). Returns false and sets `error`
/// ("file:line: cause") on a malformed line or an unreadable file.
bool readShapesFile(const std::string &path, std::vector<GemmShape> &out,
                    std::string &error);

} // namespace calib
