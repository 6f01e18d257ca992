//===- JsonFile.cpp -------------------------------------------------------===//
#include "support/JsonFile.h"
#include "support/UserError.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace autoddl {

namespace {

// nlohmann reports a byte offset; users want line:column (1-based).
std::pair<size_t, size_t> lineColumn(const std::string &text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

bool looksBinary(const std::string &text) {
  size_t n = std::min<size_t>(text.size(), 4096);
  for (size_t i = 0; i < n; ++i)
    if (text[i] == '\0')
      return true;
  return false;
}

} // namespace

nlohmann::json parseJsonText(const std::string &text, const std::string &origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UserError(origin + ": file is empty");
  if (looksBinary(text))
    throw UserError(origin + ": file is binary, expected JSON text");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    // e.byte is 1-based and points one past the offending character.
    auto [line, col] = lineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string why = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: " prefix.
    if (auto p = why.find(": "); p != std::string::npos &&
                                 why.rfind("[json.exception", 0) == 0)
      why = why.substr(p + 2);
    throw UserError(origin + ":" + std::to_string(line) + ":" +
                    std::to_string(col) + ": invalid JSON: " + why);
  } catch (const nlohmann::json::exception &e) {
    // Raised while parsing but carrying no position, e.g. out_of_range 406
    // "number overflow parsing '1e999'".
    std::string why = e.what();
    if (auto p = why.find("] "); p != std::string::npos &&
                                 why.rfind("[json.exception", 0) == 0)
      why = why.substr(p + 2);
    throw UserError(origin + ": invalid JSON: " + why);
  }
}

nlohmann::json readJsonFile(const std::string &path, const std::string &what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw UserError(path + ": cannot open " + what + " file: " +
                    std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    throw UserError(path + ": is a directory, expected a " + what +
                    " JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UserError(path + ": cannot read " + what + " file");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parseJsonText(buf.str(), path);
}

std::string jsonPlace(const std::string &origin,
                      const nlohmann::json::json_pointer &where) {
  std::string p = where.to_string();
  return origin + ": at " + (p.empty() ? std::string("/") : p) + ": ";
}

void writeFileAtomically(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw UserError(path + ": cannot write: " + std::strerror(errno));
  const char *p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw UserError(path + ": cannot write: " + std::strerror(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw UserError(path + ": cannot write: " + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw UserError(path + ": cannot write: " + std::strerror(err));
  }
}

} // namespace autoddl
