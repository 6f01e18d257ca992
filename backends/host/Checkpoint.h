// Sharded checkpoints: every rank holds blocks (Slice, Init.h) of some tensors;
// a checkpoint is one safetensors file of FULL tensors, so it loads under any
// other plan (or into transformers). A checkpoint folder (DIR/step-N) is
// written atomically: into DIR/.step-N.tmp, every file fsynced, then renamed;
// a process killed mid-write leaves the previous folders as they were.
// CheckpointWriter writes one folder at a time on a thread of its own while
// training goes on (docs/codegen.md "Checkpoints").
#ifndef AUTODDL_BACKENDS_HOST_CHECKPOINT_H
#define AUTODDL_BACKENDS_HOST_CHECKPOINT_H

#include "backends/common/Init.h"

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

/// One safetensors file of a checkpoint, gathered to rank 0 and held in host
/// memory until written: each tensor's blocks as the ranks holding them sent
/// them. Rank 0's own blocks are referenced (not copied) when the caller keeps
/// them unchanged until the write ends; the others' are copies.
struct GatheredFile {
  struct Tensor {
    std::string name;
    Shape shape; // in the file
    std::vector<Slice> blocks;
    std::vector<const float *> data; // blocks[i].numel() floats each
  };
  std::string name; // in the folder: "model.safetensors"
  std::map<std::string, std::string> metadata;
  std::vector<Tensor> tensors;
  std::vector<std::vector<float>> owned; // the copies data points into
  /// Assembles the full tensors (a tensor one block covers is written from
  /// that block, uncopied) and writes them to `path` atomically. Throws
  /// std::runtime_error("PATH: cause"), also when some element of a tensor is
  /// held by no rank.
  void write(const std::string &path) const;
};

/// Gathers every entry's blocks to rank 0 of `comm` (collective). On rank 0
/// the result holds them (`own_stable`: rank 0's own blocks referenced, else
/// copied); elsewhere it is empty.
GatheredFile
checkpoint_gather(const std::string &name,
                  const std::vector<CheckpointEntry> &entries,
                  const std::map<std::string, std::string> &metadata,
                  MPI_Comm comm, bool own_stable);

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

/// A checkpoint folder to write: its gathered files and small text files
/// (config.json), and what must happen before they are read (a device's copy
/// into the host buffers they reference; may be empty).
struct CheckpointFolder {
  std::string dir; // DIR/step-N
  std::vector<GatheredFile> files;
  std::vector<std::pair<std::string, std::string>> texts; // name, contents
  std::function<void()> ready;
};

/// Writes `folder` atomically: into DIR/.step-N.tmp (removed first when a
/// killed run left one), each file written and fsynced, then the folder
/// renamed to DIR/step-N (an older DIR/step-N is replaced) and DIR fsynced.
/// Throws std::runtime_error("PATH: cause"); the temporary folder is removed.
/// AUTODDL_TEST_KILL_CHECKPOINT_WRITE=N (tests only): the process kills itself
/// (SIGKILL) after the first file of step-N, as a crash mid-write would.
void write_checkpoint_folder(const CheckpointFolder &folder);

/// Writes checkpoint folders, one at a time, on a thread of its own (rank 0
/// of a run; the other ranks have nothing to write). At most one write is in
/// flight: start() waits for the previous one first.
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
