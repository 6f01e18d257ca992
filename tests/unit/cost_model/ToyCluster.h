//===- ToyCluster.h - a cluster of round numbers for hand-derived tests ---===//
#pragma once

#include "cost_model/Cluster.h"

namespace autoddl::cost::test {

// 8 GPUs per node on a 100 GB/s intra-node link (1 us per step); 8 NICs of 10
// GB/s per node (80 GB/s per node, 10 GB/s per GPU when all 8 talk; 5 us per
// step); 10 us per collective call. 100 SMs; 100 TFLOP/s fp32, 400 bf16; 1 TB/s
// HBM at full efficiency; 5 us kernel floor.
inline Cluster toyCluster(int nodes = 4, int nics = 8) {
  Cluster c;
  c.name = "toy";
  c.gpuModel = "toy";
  c.gpusPerNode = 8;
  c.nodes = nodes;
  c.smCount = 100;
  c.peak = {100e12, 0, 400e12, 400e12}; // fp32, tf32 (absent), bf16, fp16
  c.hbmBytes = 80e9;
  c.hbmBandwidth = 1e12;
  c.hbmEfficiency = 1;
  c.gemmEfficiency = 1;
  c.kernelLaunch = 5e-6;
  c.collectiveOverhead = 10e-6;
  c.intraNode = {"nvlink", 100e9, 1e-6};
  c.interNode = {"infiniband", 10e9, 5e-6};
  c.nicsPerNode = nics;
  return c;
}

} // namespace autoddl::cost::test
