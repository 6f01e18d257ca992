// Sharded checkpoints: every rank holds blocks (Slice, Init.h) of some tensors;
// a checkpoint is one safetensors file of FULL tensors, so it loads under any
// other plan (or into transformers), each rank reading its block. Every rank
// writes its own blocks into the file (no gather). A checkpoint folder
// (DIR/step-N) is written atomically: into DIR/.step-N.tmp, every file
// fsynced, then renamed by rank 0 once every rank has written; a process
// killed mid-write leaves the previous folders as they were. CheckpointWriter
// writes one folder at a time on a thread of its own (on every rank) while
// training goes on (docs/checkpoints.md "Checkpoints").
#ifndef AUTODDL_BACKENDS_HOST_CHECKPOINT_H
#define AUTODDL_BACKENDS_HOST_CHECKPOINT_H

#include "backends/common/Init.h"
#include "backends/common/Safetensors.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mpi.h>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace autoddl::rt {

/// One tensor of the checkpoint as this rank sees it. Every rank lists every
/// tensor, in the same order; a rank that holds none of it (another pipeline
/// stage) passes data = nullptr. Replicated copies (B) may be held by several
/// ranks: they are equal, the lowest rank holding a block writes it.
struct CheckpointEntry {
  std::string name;
  Slice slice; // the block this rank holds (slice.full is the tensor's shape)
  float *data = nullptr; // held_count() floats, or null when not held here
  /// The tensor's shape in the file when slice.full is a view of it (the same
  /// row-major elements, e.g. a packed qkv as [segments, n]); empty:
  /// slice.full.
  Shape shape = {};
  /// A ZeRO shard: data holds the block's row-major elements [flat_begin,
  /// flat_begin + flat_count); those past slice.numel() are padding, not in
  /// the file (zero when loaded). flat_count < 0: the whole block.
  int64_t flat_begin = 0, flat_count = -1;
  /// A module buffer (BufferSpec): --init keeps the program's start where the
  /// file lacks it (a model saved before buffers were).
  bool buffer = false;
  const Shape &file_shape() const { return shape.empty() ? slice.full : shape; }
  int64_t held_count() const {
    return flat_count < 0 ? slice.numel() : flat_count;
  }
};

/// One safetensors file of a checkpoint as this rank writes it: the file's
/// layout (its header and every tensor's offset: the same on every rank) and
/// the runs of bytes this rank writes into it, its own blocks that no lower
/// rank holds too. No rank gathers another's data: each writes its part at
/// its offsets (pwrite) into the file rank 0 created at its full size.
struct ShardedFile {
  struct Run {
    uint64_t offset; // in the file
    const float *data;
    int64_t count;
  };
  std::string name; // in the folder: "model.safetensors"
  SafetensorsIndex layout;
  std::vector<Run> runs;
  std::vector<std::vector<float>> owned; // the copies data points into
  /// Rank 0: creates `path` at its full size with its header (the data
  /// zeros until the ranks write it). Throws std::runtime_error("PATH:
  /// cause").
  void create(const std::string &path) const;
  /// Writes this rank's runs into `path` and fsyncs it.
  void write(const std::string &path) const;
};

/// Who writes which block of a checkpoint: writer[q][i] is the lowest rank
/// holding the same block of entry i as rank q (q itself when no lower rank
/// does; -1 where q holds none of it), real[q][i] the real elements of q's
/// block (ZeRO padding left out). Collective over `comm`: one MPI_Allgather
/// of the blocks' places, no data.
struct CheckpointBlocks {
  std::vector<std::vector<int>> writer;
  std::vector<std::vector<int64_t>> real;
};
CheckpointBlocks checkpoint_blocks(const std::vector<CheckpointEntry> &entries,
                                   MPI_Comm comm);

/// This rank's part of a checkpoint file of `entries` (collective over
/// `comm`: the ranks exchange which blocks they hold, not the data). Its own
/// blocks are referenced (`own_stable`: the caller keeps them unchanged until
/// the write ends) or copied. Throws std::runtime_error("NAME: cause"), the
/// same on every rank, when some element of a tensor is held by no rank.
ShardedFile checkpoint_shard(const std::string &name,
                             const std::vector<CheckpointEntry> &entries,
                             const std::map<std::string, std::string> &metadata,
                             MPI_Comm comm, bool own_stable);

/// Writes the tensors of `entries` to `path` (safetensors, tensors in name
/// order, `metadata` as its __metadata__), every rank its own blocks, through
/// a temporary file rank 0 renames to `path` once all have written.
/// Collective over `comm`. Throws on rank 0 when the write fails (the
/// previous file stays intact), or when some element of a tensor is held by
/// no rank (nothing is written).
void checkpoint_save(const std::string &path,
                     const std::vector<CheckpointEntry> &entries,
                     const std::map<std::string, std::string> &metadata,
                     MPI_Comm comm);

/// Reads each entry's block from `path` (only the bytes of the block: pread
/// at the offsets of the file's header; entries with null data are only
/// checked). Throws std::runtime_error("PATH: cause") when a tensor is
/// missing or has another shape (a checkpoint of another model); returns the
/// file's metadata.
std::map<std::string, std::string>
checkpoint_load(const std::string &path,
                const std::vector<CheckpointEntry> &entries);

/// As above, for a file whose index the caller read already.
void checkpoint_load(const std::string &path, const SafetensorsIndex &index,
                     const std::vector<CheckpointEntry> &entries);

/// A checkpoint folder to write, this rank's part of it: its files and small
/// text files (config.json, written by rank 0), and what must happen before
/// the files' runs are read (a device's copy into the host buffers they
/// reference; may be empty).
struct CheckpointFolder {
  std::string dir; // DIR/step-N
  std::vector<ShardedFile> files;
  std::vector<std::pair<std::string, std::string>> texts; // name, contents
  std::function<void()> ready;
  /// Files this rank alone lays out, makes and writes, on the writer thread
  /// after `ready` (a compressed checkpoint's part: only its encoding knows
  /// its size); may be empty.
  std::function<std::vector<ShardedFile>()> own_files;
  int rank = 0, ranks = 1; // of the ranks writing it
  /// Set by prepare_checkpoint_folder: rank 0 made the temporary folder
  /// (else write_checkpoint_folder makes it, for one rank alone), or could
  /// not (`error`, thrown by rank 0's write; the others write nothing).
  bool prepared = false;
  std::string error;
  bool skip = false; // rank 0 could not prepare: this rank writes nothing
};

/// Collective over `comm`: rank 0 makes DIR/.step-N.tmp (removing a killed
/// run's leftover) holding every file at its full size, before any rank
/// writes into it. An older DIR/step-N that is not only a checkpoint's files
/// is refused here (folder.error on rank 0).
void prepare_checkpoint_folder(CheckpointFolder &folder, MPI_Comm comm);

/// Writes this rank's part of `folder` into DIR/.step-N.tmp and fsyncs it;
/// the other ranks then leave a marker there. Rank 0, after its own part,
/// waits for every rank's marker, writes the texts, renames the folder to
/// DIR/step-N (an older DIR/step-N is replaced) and fsyncs DIR. Throws
/// std::runtime_error("PATH: cause"), rank 0 also another rank's error; the
/// temporary folder is removed. AUTODDL_TEST_KILL_CHECKPOINT_WRITE=N (tests
/// only): rank 0 kills itself (SIGKILL) after its part of the first file of
/// step-N, as a crash mid-write would.
void write_checkpoint_folder(const CheckpointFolder &folder);

/// Writes this rank's part of checkpoint folders, one at a time, on a thread
/// of its own. At most one write is in flight: start() waits for the
/// previous one first.
class CheckpointWriter {
public:
  struct Done {
    std::string dir;
    double write_seconds = 0; // from start() to the folder's rename
  };
  CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter &) = delete;
  CheckpointWriter &operator=(const CheckpointWriter &) = delete;
  /// Waits for the write in flight (never throws here: its error is lost
  /// only when the run is ending by another error already).
  ~CheckpointWriter();
  /// Blocks until no write is in flight; rethrows the last write's error.
  /// Returns the seconds it waited.
  double wait();
  /// Whether a write is in flight now, and of which folder.
  bool busy(std::string *dir = nullptr);
  /// Writes `folder` on the writer thread (async) or in this one.
  void start(CheckpointFolder folder, bool async);
  /// The writes finished so far, in order.
  std::vector<Done> done();

private:
  void run(CheckpointFolder folder);
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;
  std::string busy_dir_;
  std::string error_;
  std::vector<Done> done_;
  std::thread thread_;
};

/// The newest complete checkpoint folder under `save_dir` (step-N holding a
/// model.safetensors and an optimizer.safetensors whose headers and sizes
/// agree), for --resume auto; "" when `save_dir` holds no step-N folder at
/// all (or does not exist). Newer incomplete folders are skipped, each
/// described in `skipped` ("PATH: cause"). Throws std::runtime_error("PATH:
/// cause") when step-N folders exist but none is complete (nothing to resume,
/// and a fresh run would write over them).
std::string newest_checkpoint(const std::string &save_dir,
                              std::vector<std::string> &skipped);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_HOST_CHECKPOINT_H
