// Crash-safe file writing (see FileIo.h). POSIX: open/write/fsync/rename.
#include "backends/common/FileIo.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace autoddl::rt {

static std::runtime_error ioError(const std::string &path,
                                  const std::string &what) {
  return std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}

static std::string parentDir(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Where `path` is written: itself, or the regular file a symbolic link at
/// it names (the link stays a link). Anything else already there (a FIFO, a
/// device, a folder, a link to one of them or to nothing) is refused: the
/// rename would replace it, and the user meant something by it.
static std::string write_target(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return path;
  if (S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (::stat(path.c_str(), &st) != 0 || !::realpath(path.c_str(), resolved))
      throw std::runtime_error(path + ": a link to a missing file; refusing "
                                      "to replace it");
    if (!S_ISREG(st.st_mode))
      throw std::runtime_error(path + ": a link to a device, FIFO or folder; "
                                      "refusing to write there");
    return resolved;
  }
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": not a regular file (a device, FIFO, "
                                    "socket or folder); refusing to replace "
                                    "it");
  return path;
}

void write_file_atomically(const std::string &requested,
                           const std::vector<FileChunk> &chunks) {
  const std::string path = write_target(requested);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str()); // a leftover of a killed process with this pid
  // O_EXCL | O_NOFOLLOW: never write through whatever sits at the temporary
  // name (a planted link or device).
  const int fd = ::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    throw ioError(path, "cannot create temporary file " + tmp);
  auto abandon = [&](const std::string &what) {
    std::runtime_error e = ioError(path, what);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  for (const FileChunk &chunk : chunks) {
    const char *p = static_cast<const char *>(chunk.first);
    size_t left = chunk.second;
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        throw abandon("write failed");
      p += n;
      left -= size_t(n);
    }
  }
  if (::fsync(fd) != 0)
    throw abandon("fsync failed");
  if (::close(fd) != 0) {
    std::runtime_error e = ioError(path, "close failed");
    ::unlink(tmp.c_str());
    throw e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::runtime_error e = ioError(path, "rename failed");
    ::unlink(tmp.c_str());
    throw e;
  }
  // Make the rename itself durable.
  const int dfd = ::open(parentDir(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void check_replaceable(const std::string &path) { write_target(path); }

void write_file_atomically(const std::string &path, const std::string &text) {
  write_file_atomically(path, {{text.data(), text.size()}});
}

void require_regular_file(const std::string &path, const std::string &what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw ioError(path, "cannot open " + what);
  if (S_ISDIR(st.st_mode))
    throw std::runtime_error(path + ": a directory, not a " + what);
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": not a regular file (a device, FIFO or "
                                    "socket), not a " +
                             what);
}

std::string read_file(const std::string &path) {
  require_regular_file(path, "file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ioError(path, "cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    throw ioError(path, "read error");
  return ss.str();
}

void make_directories(const std::string &dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty())
      continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      throw ioError(partial, "cannot create directory");
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error(dir + ": not a directory");
}

void check_output_dir(const std::string &dir, const std::string &flag) {
  if (dir.empty())
    throw std::runtime_error(flag + ": empty path");
  std::string at = dir;
  while (true) {
    struct stat st;
    if (::stat(at.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        throw std::runtime_error(flag + " " + dir + ": " +
                                 (at == dir ? std::string("")
                                            : at + " ") +
                                 "exists and is not a directory");
      if (::access(at.c_str(), W_OK | X_OK) != 0)
        throw ioError(flag + " " + dir, "cannot write into " + at);
      return;
    }
    if (errno != ENOENT)
      throw ioError(flag + " " + dir, "cannot use " + at);
    if (::lstat(at.c_str(), &st) == 0) // a link to nothing: mkdir would fail
      throw std::runtime_error(flag + " " + dir + ": " + at +
                               " is a symbolic link to a missing path");
    while (at.size() > 1 && at.back() == '/')
      at.pop_back();
    at = parentDir(at);
  }
}

} // namespace autoddl::rt
