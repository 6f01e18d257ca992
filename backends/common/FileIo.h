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
/// thrown.
void write_file_atomically(const std::string &path,
                           const std::vector<FileChunk> &chunks);
void write_file_atomically(const std::string &path, const std::string &text);

/// The whole file; throws std::runtime_error("PATH: cause").
std::string read_file(const std::string &path);

/// Creates `dir` and its parents (like mkdir -p); throws on failure.
void make_directories(const std::string &dir);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_FILEIO_H
