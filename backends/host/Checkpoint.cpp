// Sharded checkpoints (see Checkpoint.h).
#include "backends/host/Checkpoint.h"

#include "backends/common/Safetensors.h"
#include "backends/host/MpiCheck.h"

#include <stdexcept>

namespace autoddl::rt {

namespace {

/// Rank 0 receives every rank's block of one tensor and places it into `full`;
/// `covered` marks the elements some rank held.
void gatherTensor(const CheckpointEntry &e, std::vector<float> &full,
                  std::vector<char> &covered, MPI_Comm comm) {
  const int p = comm_size(comm), r = comm_rank(comm);
  const size_t rank = e.slice.full.size();
  // header: held flag, then offset and local size per dimension
  std::vector<int64_t> header(1 + 2 * rank, 0);
  if (e.data) {
    header[0] = 1;
    for (size_t d = 0; d < rank; ++d) {
      header[1 + d] = e.slice.offset[d];
      header[1 + rank + d] = e.slice.local[d];
    }
  }
  std::vector<int64_t> headers(r == 0 ? header.size() * p : 0);
  mpiCheck(MPI_Gather(header.data(), int(header.size()), MPI_INT64_T,
                      headers.data(), int(header.size()), MPI_INT64_T, 0,
                      comm));
  const int count = e.data ? int(e.slice.numel()) : 0;
  std::vector<int> counts(size_t(r == 0 ? p : 0)), displs(counts.size(), 0);
  mpiCheck(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::vector<float> blocks;
  if (r == 0) {
    for (int q = 1; q < p; ++q)
      displs[q] = displs[q - 1] + counts[q - 1];
    blocks.resize(size_t(displs[p - 1] + counts[p - 1]));
  }
  mpiCheck(MPI_Gatherv(e.data, count, MPI_FLOAT, blocks.data(), counts.data(),
                       displs.data(), MPI_FLOAT, 0, comm));
  if (r != 0)
    return;
  full.assign(size_t(numel(e.slice.full)), 0.0f);
  covered.assign(full.size(), 0);
  for (int q = 0; q < p; ++q) {
    const int64_t *h = headers.data() + q * header.size();
    if (!h[0])
      continue;
    Slice s{e.slice.full, Shape(h + 1, h + 1 + rank),
            Shape(h + 1 + rank, h + 1 + 2 * rank)};
    for (int64_t k = 0; k < s.numel(); ++k) {
      const uint64_t g = slice_global_index(s, k);
      full[g] = blocks[size_t(displs[q] + k)];
      covered[g] = 1;
    }
  }
}

} // namespace

void checkpoint_save(const std::string &path,
                     const std::vector<CheckpointEntry> &entries,
                     const std::map<std::string, std::string> &metadata,
                     MPI_Comm comm) {
  const bool root = comm_rank(comm) == 0;
  std::vector<std::vector<float>> fulls(entries.size());
  std::string missing;
  for (size_t i = 0; i < entries.size(); ++i) {
    std::vector<char> covered;
    gatherTensor(entries[i], fulls[i], covered, comm);
    if (root && missing.empty())
      for (char c : covered)
        if (!c) {
          missing = entries[i].name;
          break;
        }
  }
  if (!root)
    return;
  if (!missing.empty())
    throw std::runtime_error(path + ": tensor \"" + missing +
                             "\" is not fully held by any rank");
  std::vector<NamedTensor> tensors;
  for (size_t i = 0; i < entries.size(); ++i)
    tensors.push_back(
        {entries[i].name, entries[i].file_shape(), fulls[i].data()});
  safetensors_write(path, tensors, metadata);
}

std::map<std::string, std::string>
checkpoint_load(const std::string &path,
                const std::vector<CheckpointEntry> &entries) {
  const SafetensorsFile file = safetensors_read(path);
  for (const CheckpointEntry &e : entries) {
    auto it = file.tensors.find(e.name);
    if (it == file.tensors.end())
      throw std::runtime_error(path + ": no tensor \"" + e.name +
                               "\": a checkpoint of another model?");
    if (it->second.shape != e.file_shape())
      throw std::runtime_error(path + ": tensor \"" + e.name + "\" has shape " +
                               shape_str(it->second.shape) +
                               ", the model needs " +
                               shape_str(e.file_shape()));
    if (!e.data)
      continue;
    for (int64_t k = 0; k < e.slice.numel(); ++k)
      e.data[k] = it->second.data[slice_global_index(e.slice, k)];
  }
  return file.metadata;
}

} // namespace autoddl::rt
