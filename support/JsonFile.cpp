//===- JsonFile.cpp -------------------------------------------------------===//
#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <vector>
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

/// Finds the first key an object repeats. JSON leaves the meaning of a
/// repeated key open and nlohmann keeps the last one silently: in a model,
/// cluster or plan file that hides an edit, so it is refused with its place.
class DuplicateKeys : public nlohmann::json_sax<nlohmann::json> {
public:
  std::optional<nlohmann::json::json_pointer> found;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &) override {
    return value();
  }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override {
    frames.push_back({true, {}, {}, 0});
    return true;
  }
  bool key(string_t &k) override {
    Frame &f = frames.back();
    if (!f.keys.insert(k).second) {
      nlohmann::json::json_pointer p;
      for (size_t i = 0; i + 1 < frames.size(); ++i)
        p = frames[i].object ? p / frames[i].key : p / frames[i].index;
      found = p / k;
      return false; // stop: one is enough
    }
    f.key = k;
    return true;
  }
  bool end_object() override {
    frames.pop_back();
    return value();
  }
  bool start_array(std::size_t) override {
    frames.push_back({false, {}, {}, 0});
    return true;
  }
  bool end_array() override {
    frames.pop_back();
    return value();
  }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &) override {
    return false; // the document parsed once already: not reached
  }

private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    size_t index;
  };
  std::vector<Frame> frames;

  bool value() {
    if (!frames.empty() && !frames.back().object)
      ++frames.back().index;
    return true;
  }
};

} // namespace

nlohmann::json parseJsonText(const std::string &text,
                             const std::string &origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UserError(origin + ": file is empty");
  if (looksBinary(text))
    throw UserError(origin + ": file is binary, expected JSON text");
  checkDepth(text, origin);
  try {
    nlohmann::json doc = nlohmann::json::parse(text);
    DuplicateKeys dup;
    nlohmann::json::sax_parse(text, &dup);
    if (dup.found)
      throw UserError(jsonPlace(origin, *dup.found) +
                      "duplicate key (JSON leaves which one counts open; give "
                      "each field once)");
    return doc;
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
