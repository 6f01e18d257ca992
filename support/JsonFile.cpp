//===- JsonFile.cpp -------------------------------------------------------===//
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

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

/// Refuses nesting deeper than kMaxJsonDepth before nlohmann (or any code
/// walking the document recursively) sees it: 100,000 nested arrays would
/// overflow the stack. Strings are skipped so brackets inside them do not
/// count.
void checkDepth(const std::string &text, const std::string &origin) {
  size_t depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        auto [line, col] = lineColumn(text, i);
        throw UserError(origin + ":" + std::to_string(line) + ":" +
                        std::to_string(col) +
                        ": invalid JSON: nested deeper than " +
                        std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

} // namespace

nlohmann::json parseJsonText(const std::string &text,
                             const std::string &origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UserError(origin + ": file is empty");
  if (looksBinary(text))
    throw UserError(origin + ": file is binary, expected JSON text");
  checkDepth(text, origin);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    // e.byte is 1-based and points one past the offending character.
    auto [line, col] = lineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string why = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1,
    // column 2: " prefix.
    if (auto p = why.find(": ");
        p != std::string::npos && why.rfind("[json.exception", 0) == 0)
      why = why.substr(p + 2);
    throw UserError(origin + ":" + std::to_string(line) + ":" +
                    std::to_string(col) + ": invalid JSON: " + why);
  } catch (const nlohmann::json::exception &e) {
    // Raised while parsing but carrying no position, e.g. out_of_range 406
    // "number overflow parsing '1e999'".
    std::string why = e.what();
    if (auto p = why.find("] ");
        p != std::string::npos && why.rfind("[json.exception", 0) == 0)
      why = why.substr(p + 2);
    throw UserError(origin + ": invalid JSON: " + why);
  }
}

nlohmann::json readJsonFile(const std::string &path, const std::string &what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw UserError(path + ": is a directory, expected a " + what +
                    " JSON file");
  return parseJsonText(readUserFile(path, what), path);
}

std::string jsonPlace(const std::string &origin,
                      const nlohmann::json::json_pointer &where) {
  std::string p = where.to_string();
  return origin + ": at " + (p.empty() ? std::string("/") : p) + ": ";
}

void writeFileAtomically(const std::string &path, const std::string &text) {
  writeUserFile(path, text);
}

} // namespace autoddl
