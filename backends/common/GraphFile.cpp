// Graphs from Matrix Market files and edge lists (GraphFile.h).
#include "backends/common/GraphFile.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace autoddl::rt {

namespace {

constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max(); // CSR is int32

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

[[noreturn]] void fail(const std::string &path, int64_t line,
                       const std::string &what) {
  throw std::runtime_error(path + (line > 0 ? ":" + std::to_string(line) : "") +
                           ": " + what);
}

bool blankOrComment(const std::string &line, const char *marks) {
  for (char c : line) {
    if (std::isspace(static_cast<unsigned char>(c)))
      continue;
    return std::strchr(marks, c) != nullptr;
  }
  return true;
}

/// Two non-negative integers at the start of `line` (further fields ignored).
bool twoIds(const std::string &line, int64_t &a, int64_t &b) {
  std::istringstream in(line);
  std::string sa, sb;
  if (!(in >> sa >> sb))
    return false;
  auto parse = [](const std::string &s, int64_t &v) {
    if (s.empty() || s.size() > 18 ||
        !std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isdigit(c); }))
      return false;
    v = std::stoll(s);
    return true;
  };
  return parse(sa, a) && parse(sb, b);
}

GraphFile readMatrixMarket(const std::string &path, std::istream &in,
                           const std::string &banner) {
  std::istringstream words(banner);
  std::string magic, object, format, field, symmetry;
  words >> magic >> object >> format >> field >> symmetry;
  object = lower(object), format = lower(format), field = lower(field),
  symmetry = lower(symmetry);
  if (object != "matrix")
    fail(path, 1, "a Matrix Market '" + object + "', not a matrix");
  if (format != "coordinate")
    fail(path, 1,
         "a dense Matrix Market '" + format +
             "' file; only the sparse 'coordinate' format is read");
  if (field != "pattern" && field != "real" && field != "integer" &&
      field != "complex" && field != "double")
    fail(path, 1, "unknown Matrix Market field '" + field + "'");
  const bool mirror = symmetry == "symmetric" || symmetry == "skew-symmetric" ||
                      symmetry == "hermitian";
  if (!mirror && symmetry != "general")
    fail(path, 1, "unknown Matrix Market symmetry '" + symmetry + "'");

  std::string line;
  int64_t lineNo = 1, m = -1, n = -1, count = -1;
  while (std::getline(in, line)) {
    ++lineNo;
    if (blankOrComment(line, "%"))
      continue;
    std::istringstream size(line);
    if (!(size >> m >> n >> count) || m <= 0 || n <= 0 || count < 0)
      fail(path, lineNo, "expected the size line 'rows columns entries'");
    break;
  }
  if (count < 0)
    fail(path, lineNo, "no size line");
  if (std::max(m, n) > kMaxId)
    fail(path, lineNo, "more than 2^31 - 1 rows or columns");
  GraphFile g;
  g.rows = std::max(m, n);
  g.entries.reserve(size_t(count) * (mirror ? 2 : 1));
  int64_t read = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (blankOrComment(line, "%"))
      continue;
    int64_t i, j;
    if (!twoIds(line, i, j))
      fail(path, lineNo, "expected an entry 'row column [value]'");
    if (i < 1 || i > m || j < 1 || j > n)
      fail(path, lineNo,
           "entry (" + std::to_string(i) + ", " + std::to_string(j) +
               ") outside the " + std::to_string(m) + " x " +
               std::to_string(n) + " matrix (indices are 1-based)");
    if (++read > count)
      fail(path, lineNo,
           "more entries than the " + std::to_string(count) + " declared");
    g.entries.emplace_back(uint32_t(i - 1), uint32_t(j - 1));
    if (mirror && i != j)
      g.entries.emplace_back(uint32_t(j - 1), uint32_t(i - 1));
  }
  if (read != count)
    fail(path, 0,
         "ends after " + std::to_string(read) + " of the " +
             std::to_string(count) + " declared entries");
  g.params = "Matrix Market " + field + " " + symmetry + ", " +
             std::to_string(m) + " x " + std::to_string(n) + ", " +
             std::to_string(count) + " entries in file" +
             (m != n ? " (held square)" : "");
  return g;
}

GraphFile readEdgeList(const std::string &path, std::istream &in,
                       std::string first) {
  GraphFile g;
  int64_t maxId = -1, lineNo = 0;
  std::string line = std::move(first);
  bool have = true;
  while (have) {
    ++lineNo;
    if (!blankOrComment(line, "#%")) {
      int64_t u, v;
      if (!twoIds(line, u, v))
        fail(path, lineNo,
             "expected an edge 'u v' (two non-negative integers) or a "
             "Matrix Market file (first line %%MatrixMarket)");
      if (std::max(u, v) >= kMaxId)
        fail(path, lineNo, "vertex id of 2^31 - 1 or more");
      maxId = std::max({maxId, u, v});
      g.entries.emplace_back(uint32_t(u), uint32_t(v));
    }
    have = bool(std::getline(in, line));
  }
  if (g.entries.empty())
    fail(path, 0, "no edges");
  g.rows = maxId + 1;
  g.params = "edge list, " + std::to_string(g.entries.size()) +
             " arcs in file, as directed";
  return g;
}

} // namespace

GraphFile readGraphFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    fail(path, 0, "cannot open");
  std::string first;
  if (!std::getline(in, first))
    fail(path, 0, "empty file");
  if (lower(first.substr(0, 14)) == "%%matrixmarket")
    return readMatrixMarket(path, in, first);
  return readEdgeList(path, in, std::move(first));
}

} // namespace autoddl::rt
