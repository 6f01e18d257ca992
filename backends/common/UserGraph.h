// A user's own graph for a graph model (gcn, gat, sage), read from files:
// docs/model-format.md "A graph from files".
//
// Adjacency: a .npz of numpy arrays (scipy.sparse.save_npz's CSR, indptr and
// indices, or COO, row and col; or an edge list, edge_index [2, E]), or any
// other file as GraphFile.h reads it: Matrix Market (.mtx) or a text edge
// list ("u v" a line, 0-based). Features: a .npy (or a .npz holding one array)
// of float32 or float64 [nodes, features]; labels: the same of integers [nodes]
// in [0, classes). npz members stored (np.savez) or deflated
// (np.savez_compressed, scipy's save_npz), the latter inflated by zlib where
// the runtime is built with it (AUTODDL_HAVE_ZLIB).
#ifndef AUTODDL_BACKENDS_COMMON_USERGRAPH_H
#define AUTODDL_BACKENDS_COMMON_USERGRAPH_H

#include "backends/common/CommunityGraph.h"

#include <cstdint>
#include <string>

namespace autoddl::rt {

/// The three files of a user's graph (all empty: generate the graph).
struct GraphFileNames {
  std::string adjacency, features, labels;
  bool given() const {
    return !adjacency.empty() || !features.empty() || !labels.empty();
  }
  /// The flag of the first file missing when some are given, else "" (here:
  /// the flag parser, which the flags fuzzer links alone, reads it).
  std::string missing() const {
    if (!given())
      return "";
    if (adjacency.empty())
      return "--graph-adjacency";
    if (features.empty())
      return "--graph-features";
    return labels.empty() ? "--graph-labels" : "";
  }
};

/// Reads a user's graph of exactly `nodes` nodes, `features` features and
/// labels in [0, classes): the adjacency's entries as given (duplicates
/// merged, values ignored; a self loop added where missing), GCN-normalised
/// (gcn_normalise), and the features of rows [x_node0, x_node0 + x_rows).
/// Throws std::runtime_error "FILE: place: cause" for a missing or malformed
/// file: wrong sizes, an index out of range, a non-finite feature, a label
/// outside the classes.
PlantedGraph read_graph_files(const GraphFileNames &files, int64_t nodes,
                              int64_t features, int64_t classes,
                              int64_t x_node0, int64_t x_rows);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_USERGRAPH_H
