//===- CompressedCheckpoint.h - --checkpoint-compress (BitSnap) -----------===//
//
// Issue 46 item 4 (docs/checkpoints.md "Compressed checkpoints"). Under
// --checkpoint-compress a run's first save and every --checkpoint-full-every
// M-th after it are full checkpoints (unchanged: any plan loads them); the
// others are a folder holding bitsnap.safetensors only: one 1-D tensor
// "part.R" per rank, written by that rank (the parallel writer, atomically),
// holding the blocks it writes (those no lower rank holds too: a block
// replicated over dp, tp or tied copies is stored once) encoded
// (backends/common/CheckpointCompress.h): each parameter block as a
// bitmask-sparse delta against its value in the base (the last full save, named
// in the metadata), each AdamW moment block cluster-quantized (raw where the
// centroids would outweigh it), K-FAC's inverses raw. It resumes under the plan
// that wrote it (each rank reads the parts holding its blocks, in the order of
// the checkpoint entries) on top of the base, which must still be there.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_COMPRESSEDCHECKPOINT_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_COMPRESSEDCHECKPOINT_H

#include "backends/host/Checkpoint.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// The file a compressed checkpoint folder holds instead of
/// model.safetensors and optimizer.safetensors.
constexpr const char *kBitsnapFile = "bitsnap.safetensors";

/// A run's --checkpoint-compress state on one rank: the base's parameter
/// blocks (a copy taken at the full save) and the saves since it.
class CompressState {
public:
  /// Whether the next save is a full one (the first, or M saves after the
  /// last full one).
  bool next_is_full(int64_t full_every) const {
    return base_dir_.empty() || since_full_ + 1 >= full_every;
  }
  /// A full save into `dir` of `params` (copied: the base of the next ones).
  void full_saved(const std::string &dir,
                  const std::vector<CheckpointEntry> &params);
  /// This rank's part of a compressed save (bytes as floats, padded to 4):
  /// the blocks of `entries` (the parameters, then the optimizer state, as
  /// checkpoint_entries lists them) that it writes (`blocks`: no lower rank
  /// holds the same block), each as its kind, its element count and its
  /// encoding. Sets raw_bytes and encoded_bytes (this rank's).
  std::vector<float> encode(const std::vector<CheckpointEntry> &entries,
                            const CheckpointBlocks &blocks, int rank);
  /// The base folder's name ("step-M"), for the metadata.
  std::string base_name() const;
  /// Sizes of the last encode: parameters' and state's bytes, raw and
  /// encoded (metrics.json's checkpoints entries).
  double raw_bytes = 0, encoded_bytes = 0;

private:
  std::string base_dir_;
  int64_t since_full_ = 0;
  std::map<std::string, std::vector<float>> base_;
};

/// Decodes the part `blob` of rank `writer` (of `file`) into the entries of
/// this rank (`rank`) that hold the blocks it wrote (their buffers hold the
/// base's values: the parameters' deltas apply on top); the others are
/// skipped. Throws std::runtime_error naming `file` when the part does not
/// fit the entries (another plan's, or damaged).
void decode_part(const std::string &file, const std::vector<float> &blob,
                 int writer, const std::vector<CheckpointEntry> &entries,
                 const CheckpointBlocks &blocks, int rank);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_COMPRESSEDCHECKPOINT_H
