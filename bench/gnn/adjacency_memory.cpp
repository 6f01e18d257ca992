// The CUDA program's device bytes for a graph model's adjacency, by
// allocation, as the planner prices them (planner/AdjacencyMemory.h): the
// per-allocation table of bench/results/gnn/2026-12-06-memory-model.
//
//   build/planner/autoddl_adjacency_memory MODEL.json [CLUSTER [DP [VARIANT]]]
//
// One line of JSON per precision (act_t bf16, and the --fp32 build), bytes,
// with the formats' features (cost_model/GraphFeatures.h: the generated
// graph's) that decided their variants and blocks.
// VARIANT: auto (the decider's pick, as the planner prices it), or hybrid /
// tc for both formats (as AUTODDL_SPMM_VARIANT forces them).
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/AdjacencyMemory.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

using namespace autoddl;

int main(int argc, char **argv) {
  const std::string variant = argc > 4 ? argv[4] : "auto";
  if (argc < 2 || argc > 5 ||
      (variant != "auto" && variant != "hybrid" && variant != "tc")) {
    std::fprintf(stderr,
                 "usage: %s MODEL.json [CLUSTER [DP [auto|hybrid|tc]]]\n",
                 argv[0]);
    return 2;
  }
  try {
    import::ImportOptions io;
    io.batch = 1;
    const ModelGraph g = import::importModel(argv[1], io);
    const cost::Cluster c =
        cost::loadCluster(argc > 2 ? argv[2] : "dgx-h100-ndr");
    const int dp = argc > 3 ? std::atoi(argv[3]) : 1;
    int adj = -1;
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (g.tensors[t].role == TensorRole::Input && g.tensors[t].sparse)
        adj = int(t);
    if (adj < 0 || dp < 1) {
      std::fprintf(stderr, "%s: no sparse adjacency input (or DP < 1)\n",
                   argv[1]);
      return 1;
    }
    for (double eb : {2.0, 4.0}) {
      planner::AdjacencyUse u =
          planner::adjacencyUse(g, adj, dp, eb, c, cost::Precision::BF16);
      if (variant != "auto")
        u.a.tensorCores = u.at.tensorCores = variant == "tc";
      const planner::AdjacencyBytes b = planner::adjacencyBytes(u);
      std::printf(
          "{\"model\": \"%s\", \"act_bytes\": %g, \"dp\": %d, \"variant_a\": "
          "\"%s\", \"variant_at\": \"%s\", \"skew_a\": %.4g, \"fill_a\": "
          "%.5g, \"skew_at\": %.4g, \"fill_at\": %.5g, \"row_ptr\": %.0f, "
          "\"formats\": "
          "%.0f, \"positions\": %.0f, \"values\": %.0f, \"means\": %.0f, "
          "\"workspace\": %.0f, \"scratch\": %.0f, \"staging\": %.0f, "
          "\"build\": %.0f, \"peak\": %.0f}\n",
          g.name.c_str(), eb, dp,
          !u.a.built        ? "none"
          : u.a.tensorCores ? "all-tc"
                            : "hybrid",
          !u.at.built        ? "none"
          : u.at.tensorCores ? "all-tc"
                             : "hybrid",
          u.a.features.degreeSkew, u.a.features.windowFill,
          u.at.features.degreeSkew, u.at.features.windowFill, b.rowPtr, b.formats, b.positions, b.values, b.means, b.workspace,
          b.scratch, b.staging, b.build, b.peak);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
    return 1;
  }
  return 0;
}
