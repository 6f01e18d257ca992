// A tiny JSON value, reader and writer (see MiniJson.h).
#include "backends/common/MiniJson.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace autoddl::rt {

Json Json::of(bool b) {
  Json j;
  j.kind = Kind::Bool;
  j.boolean = b;
  return j;
}
Json Json::of(double d) {
  Json j;
  j.kind = Kind::Number;
  j.number = d;
  return j;
}
Json Json::of(int64_t i) {
  Json j;
  j.kind = Kind::Number;
  j.number = double(i);
  j.integral = true;
  j.integer = i;
  return j;
}
Json Json::of(std::string s) {
  Json j;
  j.kind = Kind::String;
  j.string = std::move(s);
  return j;
}

Json &Json::push(Json v) {
  array.push_back(std::move(v));
  return *this;
}

Json &Json::set(const std::string &key, Json v) {
  for (auto &kv : object)
    if (kv.first == key) {
      kv.second = std::move(v);
      return *this;
    }
  object.emplace_back(key, std::move(v));
  return *this;
}

const Json *Json::find(std::string_view key) const {
  for (const auto &kv : object)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  return out + "\"";
}

static std::string formatNumber(const Json &j) {
  if (j.integral)
    return std::to_string(j.integer);
  if (!std::isfinite(j.number))
    return "null";
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, j.number);
    if (std::strtod(buf, nullptr) == j.number)
      break;
  }
  return buf;
}

std::string Json::dump() const {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return boolean ? "true" : "false";
  case Kind::Number:
    return formatNumber(*this);
  case Kind::String:
    return json_quote(string);
  case Kind::Array: {
    std::string s = "[";
    for (size_t i = 0; i < array.size(); ++i)
      s += (i ? "," : "") + array[i].dump();
    return s + "]";
  }
  case Kind::Object: {
    std::string s = "{";
    for (size_t i = 0; i < object.size(); ++i)
      s += (i ? "," : "") + json_quote(object[i].first) + ":" +
           object[i].second.dump();
    return s + "}";
  }
  }
  return "null";
}

namespace {

/// Recursive-descent parser; depth-limited so hostile input cannot overflow the
/// stack.
class Parser {
public:
  Parser(std::string_view text, const std::string &what)
      : text_(text), what_(what) {}

  Json parseDocument() {
    Json v = parseValue(0);
    skipSpace();
    if (pos_ != text_.size())
      fail("unexpected text after the JSON value");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string &cause) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw std::runtime_error(what_ + ": line " + std::to_string(line) +
                             ", column " + std::to_string(col) + ": " + cause);
  }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  Json parseValue(int depth) {
    if (depth > 64)
      fail("nesting deeper than 64");
    skipSpace();
    if (pos_ >= text_.size())
      fail("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{')
      return parseObject(depth);
    if (c == '[')
      return parseArray(depth);
    if (c == '"')
      return Json::of(parseString());
    if (consume("true"))
      return Json::of(true);
    if (consume("false"))
      return Json::of(false);
    if (consume("null"))
      return Json::null();
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber();
    fail(std::string("unexpected character '") + c + "'");
  }

  // The members of an object or the elements of an array: after the opening
  // bracket, `item()` parses each one, separated by commas, until `close`.
  template <class Item> void parseList(char close, const Item &item) {
    ++pos_; // the opening bracket
    skipSpace();
    const std::string end(1, close);
    if (consume(end))
      return;
    for (;;) {
      item();
      skipSpace();
      if (consume(end))
        return;
      if (!consume(","))
        fail("expected ',' or '" + end + "'");
    }
  }

  Json parseObject(int depth) {
    Json obj = Json::obj();
    parseList('}', [&] {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        fail("expected a string key");
      std::string key = parseString();
      if (obj.find(key))
        fail("duplicate key \"" + key + "\"");
      skipSpace();
      if (!consume(":"))
        fail("expected ':'");
      obj.object.emplace_back(std::move(key), parseValue(depth + 1));
    });
    return obj;
  }

  Json parseArray(int depth) {
    Json arr = Json::arr();
    parseList(']', [&] { arr.array.push_back(parseValue(depth + 1)); });
    return arr;
  }

  std::string parseString() {
    ++pos_; // opening quote
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20)
        fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        break;
      c = text_[pos_++];
      switch (c) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        if (pos_ + 4 > text_.size())
          fail("short \\u escape");
        const unsigned cp = unsigned(std::strtoul(
            std::string(text_.substr(pos_, 4)).c_str(), nullptr, 16));
        pos_ += 4;
        // Basic multilingual plane only, as UTF-8 (enough for tensor names).
        if (cp < 0x80) {
          out += char(cp);
        } else if (cp < 0x800) {
          out += char(0xC0 | (cp >> 6));
          out += char(0x80 | (cp & 0x3F));
        } else {
          out += char(0xE0 | (cp >> 12));
          out += char(0x80 | ((cp >> 6) & 0x3F));
          out += char(0x80 | (cp & 0x3F));
        }
        break;
      }
      default:
        fail(std::string("bad escape '\\") + c + "'");
      }
    }
    if (pos_ >= text_.size())
      fail("unterminated string");
    ++pos_; // closing quote
    return out;
  }

  Json parseNumber() {
    const size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-')
      ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integral = false;
        ++pos_;
      } else {
        break;
      }
    }
    const std::string token(text_.substr(start, pos_ - start));
    char *end = nullptr;
    Json j;
    j.kind = Json::Kind::Number;
    j.number = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size() || token == "-")
      fail("malformed number '" + token + "'");
    if (integral) {
      errno = 0;
      const long long v = std::strtoll(token.c_str(), nullptr, 10);
      if (errno == 0) {
        j.integral = true;
        j.integer = v;
      }
    }
    return j;
  }

  std::string_view text_;
  const std::string &what_;
  size_t pos_ = 0;
};

} // namespace

Json json_parse(std::string_view text, const std::string &what) {
  return Parser(text, what).parseDocument();
}

std::string json_indented(std::string_view compact) {
  std::string out;
  int depth = 0;
  bool quoted = false, escaped = false;
  auto newline = [&] { out += "\n" + std::string(size_t(2 * depth), ' '); };
  for (size_t i = 0; i < compact.size(); ++i) {
    const char c = compact[i];
    if (quoted) { // a string's bytes as they are
      out += c;
      quoted = !(c == '"' && !escaped);
      escaped = !escaped && c == '\\';
      continue;
    }
    const bool empty = i + 1 < compact.size() &&
                       (compact[i + 1] == ']' || compact[i + 1] == '}');
    if ((c == '[' || c == '{') && empty) {
      out += c;
      out += compact[++i];
    } else if (c == '[' || c == '{') {
      out += c;
      ++depth;
      newline();
    } else if (c == ']' || c == '}') {
      --depth;
      newline();
      out += c;
    } else if (c == ',') {
      out += c;
      newline();
    } else {
      out += c == ':' ? ": " : std::string(1, c);
      quoted = c == '"';
    }
  }
  return out + "\n";
}

} // namespace autoddl::rt
