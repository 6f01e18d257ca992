// numpy's .npy and (stored, uncompressed) .npz layouts, written by
// autoddl-graph so that numpy, PyTorch Geometric and the generated programs'
// reader (backends/common/UserGraph.h) load one graph.
#ifndef AUTODDL_TOOLS_AUTODDL_GRAPH_NPYWRITER_H
#define AUTODDL_TOOLS_AUTODDL_GRAPH_NPYWRITER_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::graphtool {

/// One array: numpy dtype descr ("<i4", "<f4", "|S3"), shape, raw
/// little-endian C-order bytes (not owned).
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

/// The .npy header (format 1.0, padded to 64 bytes) of `a`.
std::string npyHeader(const NpyArray &a);

/// Writes `a` as the .npy file `path` (atomically: FileIo.h).
void writeNpy(const std::string &path, const NpyArray &a);

/// Writes the arrays as members NAME.npy of the .npz `path`, stored (as
/// np.savez writes them; no ZIP64: a member of 4 GiB or more is refused with
/// std::runtime_error).
void writeNpz(const std::string &path,
              const std::vector<std::pair<std::string, NpyArray>> &members);

} // namespace autoddl::graphtool

#endif // AUTODDL_TOOLS_AUTODDL_GRAPH_NPYWRITER_H
