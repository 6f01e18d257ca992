//===- CompressedCheckpoint.h - --checkpoint-compress (BitSnap) -----------===//
//
// Issue 46 item 4 (docs/checkpoints.md "Compressed checkpoints"). Under
// --checkpoint-compress a run's first save and every --checkpoint-full-every
// M-th after it are full checkpoints (unchanged: any plan loads them); the
// others are a folder of one file per rank (bitsnap_part_file), each a 1-D
// tensor "part.R" written by rank R alone on its writer thread (encoded
// there, after the snapshot: the save stalls training no longer than a full
// one), the folder renamed atomically once all are written. A part holds the
// blocks rank R writes (those no lower rank holds too: a block replicated
// over dp, tp or tied copies is stored once) encoded
// (backends/common/CheckpointCompress.h): each parameter block as a
// bitmask-sparse delta against its value in the base (the last full save,
// named in the metadata), each AdamW moment block cluster-quantized in the
// log domain (Companding::SignedLog; raw where the levels would outweigh it,
// or where it holds a NaN or an infinity), K-FAC's inverses raw. It resumes
// under the plan that wrote it (each rank reads the parts holding its
// blocks, in the order of the checkpoint entries) on top of the base, which
// must still be there.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_COMPRESSEDCHECKPOINT_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_COMPRESSEDCHECKPOINT_H

#include "backends/host/Checkpoint.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// Optimizer state (optimizer.safetensors; a compressed part stores it as
/// its kind says), the rest parameters (model.safetensors; a delta): the
/// AdamW moments (".exp_avg", ".exp_avg_sq"), K-FAC's inverses (".kfac_")
/// and the FP8 linears' scaling state (Fp8State.h, stored raw).
bool is_optimizer_state(const std::string &name);

/// The file a compressed checkpoint folder holds instead of
/// model.safetensors and optimizer.safetensors.
constexpr const char *kBitsnapFile = "bitsnap.safetensors";
/// Its metadata's "bitsnap_version": 2, a file per rank and the moments'
/// levels even in the log domain; none, an older folder of every rank's part
/// in kBitsnapFile, its levels the k-means of the raw values (the same
/// decode: a table of levels per chunk). A load refuses any other.
constexpr const char *kBitsnapVersion = "2";

/// A run's --checkpoint-compress state on one rank: the base's parameter
/// blocks (a copy taken at the full save) and the saves since it. Used on
/// the training thread; the encode on the writer thread reads only the base
/// it was given (shared: a rollback's restart may drop this state meanwhile).
class CompressState {
public:
  using Base = std::map<std::string, std::vector<float>>;
  /// Whether the next save is a full one (the first, or M saves after the
  /// last full one).
  bool next_is_full(int64_t full_every) const {
    return base_dir_.empty() || since_full_ + 1 >= full_every;
  }
  /// A full save into `dir` of `params`: the base of the next ones. Returns
  /// the copy of their blocks into the base, to run once they hold the
  /// step's values (after the snapshot's `ready`); the next save waits for
  /// the write that runs it.
  std::function<void()> full_saved(const std::string &dir,
                                   const std::vector<CheckpointEntry> &params);
  /// A compressed save: counted; the base its encoding reads.
  std::shared_ptr<const Base> compressed_saved() {
    ++since_full_;
    return base_;
  }
  /// The base folder's name ("step-M"), for the metadata.
  std::string base_name() const;

private:
  std::string base_dir_;
  int64_t since_full_ = 0;
  std::shared_ptr<Base> base_;
};

/// This rank's part of a compressed save (bytes as floats, padded to 4):
/// the blocks of `entries` (the parameters, then the optimizer state, as
/// checkpoint_entries lists them) that it writes (`blocks`: no lower rank
/// holds the same block), each as its kind, its element count and its
/// encoding, the parameters' deltas against `base`. Adds this rank's bytes,
/// raw and encoded, to `raw_bytes` and `encoded_bytes`.
std::vector<float> encode_part(const std::vector<CheckpointEntry> &entries,
                               const CheckpointBlocks &blocks, int rank,
                               const CompressState::Base &base,
                               double &raw_bytes, double &encoded_bytes);

/// The file of rank `rank`'s part in a compressed checkpoint folder: rank
/// 0's is kBitsnapFile (with the folder's metadata), rank r's
/// "bitsnap.r.safetensors". Each rank writes its own, so no rank waits for
/// another's encoding to lay out a shared file.
std::string bitsnap_part_file(int rank);

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
