//===- UserFiles.cpp ------------------------------------------------------===//
#include "support/UserFiles.h"
#include "support/UserError.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace autoddl {

namespace {

/// What a non-regular file is, for messages ("a character device").
const char *kindOf(mode_t mode) {
  static constexpr struct {
    mode_t type; // an S_IFMT value
    const char *name;
  } kKinds[] = {{S_IFDIR, "a directory"},    {S_IFCHR, "a character device"},
                {S_IFBLK, "a block device"}, {S_IFIFO, "a FIFO"},
                {S_IFSOCK, "a socket"},      {S_IFLNK, "a symbolic link"}};
  for (const auto &k : kKinds)
    if ((mode & S_IFMT) == k.type)
      return k.name;
  return "not a regular file";
}

// The (device, inode) of every input this process read: an output must not be
// one of them. A process runs one command, so the set lives as long as it.
std::mutex inputsMutex;
std::set<std::pair<dev_t, ino_t>> &inputs() {
  static std::set<std::pair<dev_t, ino_t>> s;
  return s;
}

void noteInput(const struct stat &st) {
  std::lock_guard<std::mutex> lock(inputsMutex);
  inputs().insert({st.st_dev, st.st_ino});
}

bool isInput(const struct stat &st) {
  std::lock_guard<std::mutex> lock(inputsMutex);
  return inputs().count({st.st_dev, st.st_ino}) != 0;
}

std::string notRegular(const std::string &path, const std::string &what,
                       mode_t mode) {
  if (S_ISDIR(mode))
    return path + ": is a directory, expected a " + what + " file";
  return path + ": is " + kindOf(mode) + ", expected a regular " + what +
         " file";
}

} // namespace

std::optional<std::string> userFileProblem(const std::string &path,
                                           const std::string &what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return path + ": cannot open " + what + " file: " + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return notRegular(path, what, st.st_mode);
  if (static_cast<unsigned long long>(st.st_size) > kMaxUserFileBytes)
    return path + ": " + what + " file is " + std::to_string(st.st_size) +
           " bytes, more than the " + std::to_string(kMaxUserFileBytes) +
           " accepted";
  return std::nullopt;
}

std::string readUserFile(const std::string &path, const std::string &what) {
  if (auto problem = userFileProblem(path, what))
    throw UserError(*problem);
  // O_NONBLOCK: should the path have become a FIFO since the check, open must
  // not wait for a writer; fstat below then refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw UserError(path + ": cannot open " + what +
                    " file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(notRegular(path, what, st.st_mode));
  }
  noteInput(st);
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw UserError(path + ": cannot read " + what +
                      " file: " + std::strerror(err));
    }
    if (n == 0)
      break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxUserFileBytes) { // grew while we read it
      ::close(fd);
      throw UserError(path + ": " + what + " file is more than the " +
                      std::to_string(kMaxUserFileBytes) + " bytes accepted");
    }
  }
  ::close(fd);
  return text;
}

void noteUserInput(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    noteInput(st);
}

void clearUserInputs() {
  std::lock_guard<std::mutex> lock(inputsMutex);
  inputs().clear();
}

namespace {

/// Where the output `path` is written (through a link to a regular file),
/// into `target`, and the mode it keeps; or why it may not be written.
std::optional<std::string> outputTargetProblem(const std::string &path,
                                               mode_t &mode,
                                               std::string &target) {
  if (path.empty())
    return std::string("output path is empty");
  target = path;
  mode = 0644;
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0) {
    struct stat st = lst;
    if (S_ISLNK(lst.st_mode)) {
      if (::stat(path.c_str(), &st) != 0)
        return path + ": is a symbolic link to a missing file; refusing to "
                      "replace the link";
      char resolved[PATH_MAX];
      if (S_ISREG(st.st_mode) && ::realpath(path.c_str(), resolved))
        target = resolved; // write through the link, keep the link
    }
    if (!S_ISREG(st.st_mode))
      return path + ": is " + kindOf(st.st_mode) +
             ", not a regular file; refusing to write output there";
    if (isInput(st))
      return path + ": is also an input of this command; refusing to "
                    "overwrite it";
    mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    return path + ": cannot write: " + std::strerror(errno);
  }
  return std::nullopt;
}

std::string outputTarget(const std::string &path, mode_t &mode) {
  std::string target;
  if (auto problem = outputTargetProblem(path, mode, target))
    throw UserError(*problem);
  return target;
}

} // namespace

void checkUserOutput(const std::string &path, const std::string &flag) {
  try {
    mode_t mode = 0;
    const std::string target = outputTarget(path, mode);
    const size_t slash = target.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                         : target.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw UserError(path + ": cannot write: no folder " + dir);
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      throw UserError(path + ": cannot write into " + dir + ": " +
                      std::strerror(errno));
  } catch (const UserError &e) {
    // outputTarget's messages start with the path ("output path is empty"
    // aside): the flag goes in front, as "--out DIR: ..." reads.
    throw UserError(flag + " " + e.what());
  }
}

std::optional<std::string> writeUserFileProblem(const std::string &path,
                                                const std::string &text) {
  mode_t mode = 0644;
  std::string target;
  if (auto problem = outputTargetProblem(path, mode, target))
    return problem;
  std::string tmp = target + ".tmp." + std::to_string(::getpid());
  // O_EXCL | O_NOFOLLOW: never write through whatever sits at the temporary
  // name (a planted link or device).
  int fd = ::open(tmp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return path + ": cannot write: " + std::strerror(errno);
  auto fail = [&](int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return path + ": cannot write: " + std::strerror(err);
  };
  const char *p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return fail(errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0)
    return fail(errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return path + ": cannot write: " + std::strerror(err);
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return path + ": cannot write: " + std::strerror(err);
  }
  return std::nullopt;
}

void writeUserFile(const std::string &path, const std::string &text) {
  if (auto problem = writeUserFileProblem(path, text))
    throw UserError(*problem);
}

std::string capMessage(const std::string &message, size_t limit) {
  std::string out;
  size_t begin = 0;
  while (begin <= message.size()) {
    size_t end = message.find('\n', begin);
    if (end == std::string::npos)
      end = message.size();
    size_t len = end - begin;
    if (len > limit)
      out += message.substr(begin, limit) + "... (" +
             std::to_string(len - limit) + " more bytes)";
    else
      out += message.substr(begin, len);
    if (end == message.size())
      break;
    out += '\n';
    begin = end + 1;
  }
  return out;
}

} // namespace autoddl
