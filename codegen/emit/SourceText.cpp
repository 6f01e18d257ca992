//===- SourceText.cpp - input text as generated source --------------------===//
//
// See SourceText.h. The escapes are byte-wise: a name's bytes need not be
// UTF-8 (an ONNX file's strings are not checked), and a literal reads back
// as exactly the bytes it was made from.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/SourceText.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdint>

namespace autoddl::codegen::emit {

namespace {

bool printable(unsigned char c) { return c >= 0x20 && c < 0x7f; }

/// FNV-1a: a stable hash (the same name, the same identifier on every run).
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// C++ keywords and alternative tokens, and the lowercase names a standard
/// header or the compiler (GNU mode) defines as macros: no identifier of a
/// generated program may be one.
const std::set<std::string> &keywords() {
  static const std::set<std::string> k = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor",
      "bool", "break", "case", "catch", "char", "char8_t", "char16_t",
      "char32_t", "class", "compl", "concept", "const", "consteval",
      "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
      "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false",
      "float", "for", "friend", "goto", "if", "inline", "int", "long",
      "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr",
      "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof",
      "static", "static_assert", "static_cast", "struct", "switch", "template",
      "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
      "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq", "final", "override", "import",
      "module",
      // Macros of the C library and of GNU mode (-std=gnu++17).
      "errno", "stdin", "stdout", "stderr", "assert", "linux", "unix", "i386",
      "offsetof", "setjmp", "va_arg", "va_start", "va_end", "va_copy",
      // CUDA's built-in variables and qualifiers (train.cu).
      "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"};
  return k;
}

/// Names that may be macros: upper case with an underscore (INT_MAX,
/// MPI_FLOAT, EXIT_SUCCESS) and the C library's others.
bool macroLike(const std::string &id) {
  static const std::set<std::string> bare = {
      "NULL", "EOF", "NAN", "INFINITY", "BUFSIZ", "CLOCKS_PER_SEC"};
  if (bare.count(id))
    return true;
  if (id.find('_') == std::string::npos)
    return false;
  for (char c : id)
    if (std::islower(static_cast<unsigned char>(c)))
      return false;
  return true;
}

} // namespace

std::string cStringLiteral(std::string_view text) {
  std::string r = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      r += std::string("\\") + char(c);
    else if (c == '\n')
      r += "\\n\"\n    \"";            // one source line per line of the text
    else if (printable(c) && c != '?') // '?': no trigraphs
      r += char(c);
    else // three digits: a digit after it is not part of the escape
      r += fmt::format("\\{:03o}", c);
  }
  return r + "\"";
}

std::string wrapList(const std::vector<std::string> &items, size_t start,
                     const std::string &indent, size_t width) {
  std::string out;
  size_t line = start;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i && line + items[i].size() + 2 >= width) { // ", " or "," and "};"
      out += ",\n" + indent;
      line = indent.size();
    } else if (i) {
      out += ", ";
      line += 2;
    }
    out += items[i];
    line += items[i].size();
  }
  return out;
}

std::string commentText(std::string_view text, size_t maxBytes) {
  const std::string_view head = text.substr(0, maxBytes);
  std::string r;
  for (size_t i = 0; i < head.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(head[i]);
    const bool breaksComment =
        (c == '/' && i > 0 && head[i - 1] == '*') || // */
        (c == '*' && i > 0 && head[i - 1] == '/') || // /*
        (c == '?' && i > 0 && head[i - 1] == '?');   // a trigraph's ??
    if (printable(c) && c != '\\' && !breaksComment)
      r += char(c);
    else
      r += fmt::format("<{:02x}>", c);
  }
  if (text.size() > head.size())
    r += fmt::format("...({} bytes)", text.size());
  return r;
}

std::string ident(std::string_view name) {
  std::string r;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      r += c;
    else if (!r.empty() && r.back() != '_')
      r += '_';
  }
  while (!r.empty() && r.back() == '_')
    r.pop_back();
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0])))
    r = "t_" + r;
  // A long name: its head and the whole name's hash, so generated sources
  // stay small and two names with one head still differ.
  constexpr size_t kMax = 48;
  if (r.size() > kMax) {
    r.resize(kMax - 10);
    while (!r.empty() && r.back() == '_')
      r.pop_back();
    r += fmt::format("_h{:08x}", uint32_t(fnv1a(name)));
  }
  return r;
}

bool IdentTable::free(const std::string &id) const {
  return !taken_.count(id) && !keywords().count(id) && !macroLike(id);
}

std::string IdentTable::addIdent(const std::string &id) {
  std::string u = id;
  for (int k = 2; !free(u); ++k)
    u = id + "_" + std::to_string(k);
  taken_.insert(u);
  return u;
}

std::string IdentTable::add(std::string_view name, const std::string &prefix) {
  return addIdent(prefix + ident(name));
}

} // namespace autoddl::codegen::emit
