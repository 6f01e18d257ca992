// Sharded checkpoints: every rank holds blocks (Slice, Init.h) of some tensors;
// a checkpoint is one safetensors file of FULL tensors, so it loads under any
// other plan (or into transformers).
#ifndef AUTODDL_BACKENDS_HOST_CHECKPOINT_H
#define AUTODDL_BACKENDS_HOST_CHECKPOINT_H

#include "backends/common/Init.h"

#include <map>
#include <mpi.h>
#include <string>
#include <vector>

namespace autoddl::rt {

/// One tensor of the checkpoint as this rank sees it. Every rank lists every
/// tensor, in the same order; a rank that holds none of it (another pipeline
/// stage) passes data = nullptr. Replicated copies (B) may be held by several
/// ranks: they are equal, any one is written.
struct CheckpointEntry {
  std::string name;
  Slice slice; // the block this rank holds (slice.full is the tensor's shape)
  float *data = nullptr; // slice.numel() floats, or null when not held here
  /// The tensor's shape in the file when slice.full is a view of it (the same
  /// row-major elements, e.g. a packed qkv as [segments, n]); empty:
  /// slice.full.
  Shape shape = {};
  const Shape &file_shape() const { return shape.empty() ? slice.full : shape; }
};

/// Gathers every tensor to rank 0 of `comm` and writes `path` atomically
/// (safetensors, tensors in name order, `metadata` as its __metadata__).
/// Collective over `comm`. Throws on rank 0 when the write fails (the previous
/// file stays intact), or when some element of a tensor is held by no rank.
void checkpoint_save(const std::string &path,
                     const std::vector<CheckpointEntry> &entries,
                     const std::map<std::string, std::string> &metadata,
                     MPI_Comm comm);

/// Reads `path` on every rank and copies each entry's block into entry.data
/// (entries with null data are skipped). Throws std::runtime_error("PATH:
/// cause") when a tensor is missing or has another shape (a checkpoint of
/// another model); returns the file's metadata.
std::map<std::string, std::string>
checkpoint_load(const std::string &path,
                const std::vector<CheckpointEntry> &entries);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_HOST_CHECKPOINT_H
