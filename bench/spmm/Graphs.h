// The benchmark's graph suite, generated on the GPU (R-MAT, Chung-Lu, uniform,
// mesh, banded) or read from the real networks extracted from Debian's
// python3-graph-tool (data/*.agr).
#ifndef AUTODDL_BENCH_SPMM_GRAPHS_H
#define AUTODDL_BENCH_SPMM_GRAPHS_H

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::bench {

/// A pattern CSR on the device: rows sorted by column, no duplicates.
struct DeviceGraph {
  std::string name, kind, params;
  int32_t rows = 0;
  int64_t nnz = 0;
  int32_t *rowPtr = nullptr; // device, rows + 1
  int32_t *col = nullptr;    // device, nnz
  double generateSeconds = 0;
  void release();
};

struct GraphSpec {
  std::string name;
  std::string kind;     // rmat | chunglu | uniform | mesh9 | banded | real | file
  int64_t a = 0, b = 0; // kind parameters (see makeGraph)
  double target =
      0; // chunglu: target stored nnz; chunglu: max/mean degree in `ratio`
  double ratio = 0, exponent = 0;
  std::string file; // real: path of the .agr file; file: a Matrix Market file
                    // or edge list (GraphFile.h)
};

/// Specs of the graphs in `paths` (kind "file", named by their file names
/// without the extension), to run instead of the suite.
std::vector<GraphSpec> fileGraphs(const std::vector<std::string> &paths);

/// The suite of the issue: R-MAT at several scales, Chung-Lu proxies of Reddit
/// and ogbn-products, uniform random, mesh, banded, and real networks.
std::vector<GraphSpec> benchSuite(const std::string &dataDir, bool quick);

/// Generates (or loads) one graph on the device. Exits with a message on
/// failure.
DeviceGraph makeGraph(const GraphSpec &spec, uint64_t seed);

} // namespace autoddl::bench

#endif // AUTODDL_BENCH_SPMM_GRAPHS_H
