// The generated graph's features (backends/cuda/sparse/SpmmDecider.h) as the
// planner estimates them (cost_model/GraphFeatures.h) beside the exact ones of
// the graph the program generates (backends/common/CommunityGraph.h), for one
// dp rank's A and A^T: bench/results/gnn/2026-12-07-planner-fill.
//
//   build/planner/autoddl_graph_features NODES NNZ CLASSES [DP [RANK [SEED]]]
//
// One line of JSON per matrix; times in seconds. Generating a Reddit-sized
// graph takes about a minute on 2 cores and a few GB of memory.
#include "backends/common/CommunityGraph.h"
#include "backends/cuda/sparse/SpmmDecider.h"
#include "cost_model/GraphFeatures.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

using namespace autoddl;

namespace {

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

void print(const char *matrix, const char *kind, const sparse::SpmmFeatures &f,
           double s) {
  std::printf("{\"matrix\": \"%s\", \"kind\": \"%s\", \"rows\": %lld, "
              "\"cols\": %lld, \"nnz\": %lld, \"max_degree\": %lld, "
              "\"degree_skew\": %.4f, \"natural_vectors\": %lld, "
              "\"window_fill\": %.5f, \"seconds\": %.3f}\n",
              matrix, kind, (long long)f.rows, (long long)f.cols,
              (long long)f.nnz, (long long)f.maxDegree, f.degreeSkew,
              (long long)f.naturalVectors, f.windowFill, s);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4 || argc > 7) {
    std::fprintf(stderr,
                 "usage: %s NODES NNZ CLASSES [DP [RANK [SEED]]]\n", argv[0]);
    return 2;
  }
  const int64_t nodes = std::atoll(argv[1]), nnz = std::atoll(argv[2]),
                classes = std::atoll(argv[3]);
  const int64_t dp = argc > 4 ? std::atoll(argv[4]) : 1;
  const int64_t rank = argc > 5 ? std::atoll(argv[5]) : 0;
  const uint64_t seed =
      argc > 6 ? std::strtoull(argv[6], nullptr, 10) : cost::kDefaultGraphSeed;
  if (dp < 1 || rank < 0 || rank >= dp) {
    std::fprintf(stderr, "expected 0 <= RANK < DP\n");
    return 2;
  }
  try {
    const int64_t rows = nodes / dp, r0 = rank * rows;
    auto t0 = std::chrono::steady_clock::now();
    const cost::AdjacencyFeatures est =
        cost::communityGraphFeatures(nodes, nnz, classes, rows, r0, seed);
    const double estimated = seconds(t0);
    t0 = std::chrono::steady_clock::now();
    const rt::PlantedGraph g =
        rt::community_graph(seed, nodes, nnz, 1, classes, 0, 0);
    const double generated = seconds(t0);
    // This rank's rows (as graph_shard cuts them) and their transpose.
    std::vector<int32_t> ptr(size_t(rows + 1)), tPtr(size_t(nodes + 1), 0);
    const int32_t e0 = g.row_ptr[size_t(r0)];
    for (int64_t i = 0; i <= rows; ++i)
      ptr[size_t(i)] = g.row_ptr[size_t(r0 + i)] - e0;
    const int32_t *col = g.col_idx.data() + e0;
    std::vector<int32_t> tCol(size_t(ptr.back()));
    for (int32_t e = 0; e < ptr.back(); ++e)
      ++tPtr[size_t(col[e]) + 1];
    for (int64_t j = 0; j < nodes; ++j)
      tPtr[size_t(j + 1)] += tPtr[size_t(j)];
    std::vector<int32_t> next(tPtr.begin(), tPtr.end() - 1);
    for (int64_t i = 0; i < rows; ++i)
      for (int32_t e = ptr[size_t(i)]; e < ptr[size_t(i + 1)]; ++e)
        tCol[size_t(next[size_t(col[e])]++)] = int32_t(i);
    t0 = std::chrono::steady_clock::now();
    const sparse::SpmmFeatures a =
        sparse::spmmFeatures(rows, nodes, ptr.data(), col);
    const sparse::SpmmFeatures at =
        sparse::spmmFeatures(nodes, rows, tPtr.data(), tCol.data());
    const double measured = seconds(t0);
    print("A", "estimated", est.a, estimated);
    print("A", "exact", a, generated + measured);
    print("AT", "estimated", est.at, 0);
    print("AT", "exact", at, 0);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
