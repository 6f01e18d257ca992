// Sparsity patterns from files: Matrix Market coordinate files (SuiteSparse's
// .mtx) and plain edge lists (SNAP's .txt: one "u v" pair per line). Read by
// the sparse benchmark (`spmm_bench --graph FILE`) and by a graph model's
// program for a user's adjacency (UserGraph.h).
#ifndef AUTODDL_BACKENDS_COMMON_GRAPHFILE_H
#define AUTODDL_BACKENDS_COMMON_GRAPHFILE_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::rt {

/// The entries of a square sparsity pattern, as read (duplicates and self
/// loops kept; the benchmark's CSR builder merges duplicates).
struct GraphFile {
  int64_t rows = 0;
  std::vector<std::pair<uint32_t, uint32_t>> entries; // (row, column), 0-based
  std::string params; // what was read, for the report
};

/// Reads `path`: a Matrix Market file when its first line starts with
/// "%%MatrixMarket" (coordinate; pattern, real, integer or complex values,
/// ignored; general, or symmetric / skew-symmetric / hermitian with the mirror
/// of each off-diagonal entry added; 1-based; a rectangular M x N pattern is
/// held as max(M, N) rows and columns), otherwise an edge list (whitespace
/// separated 0-based "u v" per line, further fields ignored, lines starting
/// with '#' or '%' skipped; rows = the largest id + 1). Throws
/// std::runtime_error naming the file and the line on anything else (an
/// unreadable file, a dense "array" file, a malformed or out-of-range entry,
/// fewer or more entries than the header says, ids of 2^31 or more).
GraphFile readGraphFile(const std::string &path);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_GRAPHFILE_H
