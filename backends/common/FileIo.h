// Crash-safe file writing: a file is either its old contents or its complete
// new contents.
#ifndef AUTODDL_BACKENDS_COMMON_FILEIO_H
#define AUTODDL_BACKENDS_COMMON_FILEIO_H

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::rt {

/// One piece of the file's contents (pointer, bytes), written in order without
/// copying.
using FileChunk = std::pair<const void *, size_t>;

/// Writes `chunks` to `path` atomically: into PATH.tmp.PID in the same
/// directory, fsync, rename over PATH, fsync the directory. A process killed at
/// any moment leaves PATH as it was (or complete); on an error the temporary
/// file is removed, PATH is untouched, and std::runtime_error("PATH: cause") is
/// thrown. A symbolic link to a regular file is written through (the link
/// stays); a FIFO, device, folder or a link to one (or to nothing) at PATH is
/// refused, never replaced.
void write_file_atomically(const std::string &path,
                           const std::vector<FileChunk> &chunks);
void write_file_atomically(const std::string &path, const std::string &text);

/// Throws std::runtime_error("PATH: cause") where write_file_atomically would
/// refuse to replace `path` (a FIFO, device, folder, or a link to one or to
/// nothing); returns quietly for nothing there, a regular file or a link to
/// one.
void check_replaceable(const std::string &path);

/// Throws std::runtime_error("PATH: cause") unless `path` is a regular file
/// (`what` names it: "data file"): a directory, a FIFO with no writer or
/// /dev/zero would fail late, hang or grow memory without bound.
void require_regular_file(const std::string &path, const std::string &what);

/// The whole regular file; throws std::runtime_error("PATH: cause").
std::string read_file(const std::string &path);

/// Creates `dir` and its parents (like mkdir -p); throws on failure.
void make_directories(const std::string &dir);

/// Throws std::runtime_error("FLAG PATH: cause") unless `dir` can become an
/// output directory: an existing writable directory, or a path whose nearest
/// existing ancestor is one. Creates nothing (a run with another bad input
/// must leave no trace), so outputs are checked before the first step.
void check_output_dir(const std::string &dir, const std::string &flag);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_FILEIO_H
