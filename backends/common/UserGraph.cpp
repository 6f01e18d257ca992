// A user's graph from .npy/.npz/.mtx files (see UserGraph.h).
#include "backends/common/UserGraph.h"

#include "backends/common/FileIo.h"
#include "backends/common/GraphFile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#ifdef AUTODDL_HAVE_ZLIB
#include <zlib.h>
#endif

namespace autoddl::rt {

namespace {

[[noreturn]] void fail(const std::string &where, const std::string &cause) {
  throw std::runtime_error(where + ": " + cause);
}

bool ends_with(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// One numpy array inside a file's bytes (little-endian, C order).
struct NpyArray {
  std::string where; // "FILE" or "FILE: member NAME"
  char kind = 0;     // 'f', 'i', 'u', 'b'
  int size = 0;      // bytes of one element
  std::vector<int64_t> shape;
  const unsigned char *data = nullptr;
  int64_t count = 1;
  // An .npz member this reader cannot take (scipy's "format" string, say):
  // why, reported only if the member is used.
  std::string error;
  const NpyArray &used() const {
    if (!error.empty())
      throw std::runtime_error(error);
    return *this;
  }

  double real(int64_t i) const {
    const unsigned char *p = data + i * size;
    if (kind == 'f' && size == 4) {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    if (kind == 'f') {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    return double(integer(i));
  }
  int64_t integer(int64_t i) const {
    const unsigned char *p = data + i * size;
    uint64_t u = 0;
    std::memcpy(&u, p, size_t(size)); // little-endian hosts only
    if (kind == 'i' && size < 8 && (u >> (8 * size - 1)) & 1)
      u |= ~uint64_t(0) << (8 * size); // sign-extend
    return int64_t(u);
  }
};

uint64_t le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = v << 8 | p[i];
  return v;
}

/// Parses a .npy (format 1.0 to 3.0) at [p, p + n).
NpyArray parse_npy(const std::string &where, const unsigned char *p,
                   uint64_t n) {
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    fail(where, "not a .npy array (no \\x93NUMPY magic)");
  const int major = p[6];
  const uint64_t hlen = major == 1 ? le(p + 8, 2) : le(p + 8, 4);
  const uint64_t hstart = major == 1 ? 10 : 12;
  if (hstart + hlen > n)
    fail(where, "header runs past the end");
  const std::string h(reinterpret_cast<const char *>(p + hstart), hlen);
  NpyArray a;
  a.where = where;
  auto field = [&](const char *key) {
    const size_t at = h.find(std::string("'") + key + "'");
    if (at == std::string::npos)
      fail(where, std::string("header has no '") + key + "'");
    return h.find(':', at) + 1;
  };
  const size_t d = h.find('\'', field("descr")),
               dEnd = d == std::string::npos ? d : h.find('\'', d + 1);
  if (dEnd == std::string::npos)
    fail(where, "header's 'descr' is not a quoted dtype");
  const std::string descr = h.substr(d + 1, dEnd - d - 1);
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|') ||
      !std::strchr("fiub", descr[1]))
    fail(where, "dtype '" + descr +
                    "' not supported (little-endian float, int or uint)");
  a.kind = descr[1];
  a.size = std::atoi(descr.c_str() + 2);
  if (!(a.size == 1 || a.size == 2 || a.size == 4 || a.size == 8) ||
      (a.kind == 'f' && a.size < 4))
    fail(where, "dtype '" + descr + "' not supported");
  if (h.find("True", field("fortran_order")) ==
      h.find_first_not_of(' ', field("fortran_order")))
    fail(where, "Fortran-ordered array (save it C-ordered)");
  const size_t s0 = h.find('(', field("shape")),
               s1 = s0 == std::string::npos ? s0 : h.find(')', s0);
  if (s1 == std::string::npos)
    fail(where, "header's 'shape' is not a tuple");
  std::stringstream dims(h.substr(s0 + 1, s1 - s0 - 1));
  for (std::string tok; std::getline(dims, tok, ',');) {
    if (tok.find_first_not_of(" ") == std::string::npos)
      continue;
    char *end = nullptr;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (end == tok.c_str() || v < 0 || v > (int64_t(1) << 40))
      fail(where, "header's 'shape' holds '" + tok + "'");
    a.shape.push_back(v);
    a.count *= v;
    if (a.count > (int64_t(1) << 40))
      fail(where, "shape too large");
  }
  const uint64_t dataStart = hstart + hlen;
  if (a.count < 0 || uint64_t(a.count) * uint64_t(a.size) != n - dataStart)
    fail(where, "holds " + std::to_string(n - dataStart) +
                    " data bytes, its shape needs " +
                    std::to_string(a.count * a.size));
  a.data = p + dataStart;
  return a;
}

/// The members of a .npz (a zip of .npy files, ZIP64 included), by name
/// without ".npy"; each must be stored, not deflated.
#ifdef AUTODDL_HAVE_ZLIB
/// Inflates a raw DEFLATE stream of `csize` bytes into exactly `size` bytes
/// (zlib; the stream may exceed zlib's 32-bit counts, so it is fed in parts).
std::vector<unsigned char> inflate_member(const std::string &where,
                                          const unsigned char *in,
                                          uint64_t csize, uint64_t size) {
  std::vector<unsigned char> out(size);
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
    fail(where, "zlib could not start inflating");
  z.next_in = const_cast<unsigned char *>(in);
  z.next_out = out.data();
  uint64_t inLeft = csize, outLeft = size;
  int rc = Z_OK;
  while (rc == Z_OK) {
    const uInt ai = uInt(std::min<uint64_t>(inLeft, 1u << 30)),
               ao = uInt(std::min<uint64_t>(outLeft, 1u << 30));
    z.avail_in = ai;
    z.avail_out = ao;
    rc = inflate(&z, Z_NO_FLUSH);
    inLeft -= ai - z.avail_in;
    outLeft -= ao - z.avail_out;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END || outLeft != 0)
    fail(where, "deflated data corrupt or shorter than its " +
                    std::to_string(size) + " bytes");
  return out;
}
#endif

std::map<std::string, NpyArray>
parse_npz(const std::string &path, const std::string &bytes,
          std::deque<std::vector<unsigned char>> &inflated) {
  const auto *b = reinterpret_cast<const unsigned char *>(bytes.data());
  const uint64_t n = bytes.size();
  int64_t eocd = int64_t(n) - 22;
  while (eocd >= 0 && le(b + eocd, 4) != 0x06054b50)
    --eocd;
  if (eocd < 0)
    fail(path, "not a .npz (no zip directory)");
  uint64_t entries = le(b + eocd + 10, 2), dir = le(b + eocd + 16, 4);
  if (dir == 0xffffffffu || entries == 0xffff) { // ZIP64: its own record
    if (eocd < 20 || le(b + eocd - 20, 4) != 0x07064b50)
      fail(path, "ZIP64 directory locator missing");
    const uint64_t rec = le(b + eocd - 20 + 8, 8);
    if (rec + 56 > n || le(b + rec, 4) != 0x06064b50)
      fail(path, "ZIP64 directory record missing");
    entries = le(b + rec + 32, 8);
    dir = le(b + rec + 48, 8);
  }
  std::map<std::string, NpyArray> out;
  uint64_t at = dir;
  for (uint64_t k = 0; k < entries; ++k) {
    if (at + 46 > n || le(b + at, 4) != 0x02014b50)
      fail(path, "zip directory entry " + std::to_string(k) + " malformed");
    const uint64_t method = le(b + at + 10, 2), nameLen = le(b + at + 28, 2),
                   extraLen = le(b + at + 30, 2),
                   commentLen = le(b + at + 32, 2);
    uint64_t size = le(b + at + 24, 4), csize = le(b + at + 20, 4),
             local = le(b + at + 42, 4);
    const std::string name(reinterpret_cast<const char *>(b + at + 46),
                           nameLen);
    // ZIP64 extra field: the 64-bit values of the fields saturated above.
    for (uint64_t e = at + 46 + nameLen; e + 4 <= at + 46 + nameLen + extraLen;
         e += 4 + le(b + e + 2, 2)) {
      if (le(b + e, 2) != 1)
        continue;
      uint64_t f = e + 4;
      for (uint64_t *v : {&size, &csize, &local})
        if (*v == 0xffffffffu) {
          *v = le(b + f, 8);
          f += 8;
        }
    }
    const std::string where = path + ": member " + name;
    if (local + 30 > n || le(b + local, 4) != 0x04034b50)
      fail(where, "local header missing");
    const uint64_t data =
        local + 30 + le(b + local + 26, 2) + le(b + local + 28, 2);
    if (data + csize > n || (method == 0 && csize != size))
      fail(where, "runs past the end of the file");
    const unsigned char *array = b + data;
    if (method == 8) { // np.savez_compressed, scipy's save_npz by default
#ifdef AUTODDL_HAVE_ZLIB
      array = inflated.emplace_back(inflate_member(where, array, csize, size))
                  .data();
#else
      (void)inflated;
      fail(where, "deflated (np.savez_compressed, scipy's save_npz default) "
                  "and this program was built without zlib; save with "
                  "np.savez or save_npz(..., compressed=False)");
#endif
    } else if (method != 0) {
      fail(where, "zip method " + std::to_string(method) +
                      " (neither stored nor deflated)");
    }
    std::string key = name;
    if (ends_with(key, ".npy"))
      key.resize(key.size() - 4);
    try {
      out.emplace(key, parse_npy(where, array, size));
    } catch (const std::runtime_error &e) {
      NpyArray unusable;
      unusable.where = where;
      unusable.error = e.what();
      out.emplace(key, std::move(unusable));
    }
    at += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

/// A file read whole and the arrays in it.
struct ArrayFile {
  std::string bytes;
  std::deque<std::vector<unsigned char>> inflated; // deflated members, inflated
  std::map<std::string, NpyArray> arrays;          // into bytes or inflated
};

ArrayFile open_arrays(const std::string &path, const char *what) {
  require_regular_file(path, what);
  ArrayFile f;
  f.bytes = read_file(path);
  if (ends_with(path, ".npz"))
    f.arrays = parse_npz(path, f.bytes, f.inflated);
  else
    f.arrays.emplace(
        "",
        parse_npy(path, reinterpret_cast<const unsigned char *>(f.bytes.data()),
                  f.bytes.size()));
  if (f.arrays.empty())
    fail(path, "holds no array");
  return f;
}

/// The one array of a features or labels file.
const NpyArray &only_array(const ArrayFile &f, const std::string &path) {
  if (f.arrays.size() != 1)
    fail(path, "expected one array, found " + std::to_string(f.arrays.size()));
  return f.arrays.begin()->second.used();
}

void check_shape(const NpyArray &a, const std::vector<int64_t> &want) {
  if (a.shape != want) {
    auto str = [](const std::vector<int64_t> &s) {
      std::string r = "[";
      for (size_t i = 0; i < s.size(); ++i)
        r += (i ? ", " : "") + std::to_string(s[i]);
      return r + "]";
    };
    fail(a.where, "expected shape " + str(want) + ", got " + str(a.shape));
  }
}

/// Rows' column lists from (row, column) pairs, each index checked; `where()`
/// names the place only when one is out of range.
struct Entries {
  std::vector<std::vector<int32_t>> rows;
  template <class Where>
  void add(const Where &where, int64_t i, int64_t j, int64_t nodes) {
    if (i < 0 || i >= nodes || j < 0 || j >= nodes)
      fail(where(), "index (" + std::to_string(i) + ", " + std::to_string(j) +
                        ") out of range [0, " + std::to_string(nodes) + ")");
    rows[size_t(i)].push_back(int32_t(j));
  }
};

void read_npz_adjacency(const std::string &path, int64_t nodes, Entries &e) {
  const ArrayFile f = open_arrays(path, "graph adjacency");
  auto get = [&](const char *k) -> const NpyArray * {
    const auto it = f.arrays.find(k);
    return it == f.arrays.end() ? nullptr : &it->second.used();
  };
  auto integers = [&](const NpyArray &a) {
    if (a.kind == 'f' || a.kind == 'b')
      fail(a.where, "expected integer indices");
  };
  if (const NpyArray *shape = get("shape")) {
    if (shape->count != 2 || shape->integer(0) != nodes ||
        shape->integer(1) != nodes)
      fail(shape->where, "expected [" + std::to_string(nodes) + ", " +
                             std::to_string(nodes) + "] (the model's nodes)");
  }
  if (const NpyArray *ptr = get("indptr")) {
    const NpyArray *idx = get("indices");
    if (!idx)
      fail(path, "indptr without indices");
    integers(*ptr);
    integers(*idx);
    check_shape(*ptr, {nodes + 1});
    if (idx->shape.size() != 1)
      fail(idx->where, "expected one dimension");
    for (int64_t i = 0; i < nodes; ++i) {
      const int64_t b = ptr->integer(i), en = ptr->integer(i + 1);
      if (b < 0 || en < b || en > idx->count)
        fail(ptr->where, "entry " + std::to_string(i) + ": row [" +
                             std::to_string(b) + ", " + std::to_string(en) +
                             ") outside [0, " + std::to_string(idx->count) +
                             ") or decreasing");
      for (int64_t k = b; k < en; ++k)
        e.add([&] { return idx->where + ": entry " + std::to_string(k); }, i,
              idx->integer(k), nodes);
    }
    return;
  }
  const NpyArray *row = get("row"), *col = get("col");
  int64_t count = 0, stride = 0; // edge_index [2, E]: col at offset E
  if (const NpyArray *ei = get("edge_index")) {
    if (ei->shape.size() != 2 || ei->shape[0] != 2)
      fail(ei->where, "expected shape [2, E]");
    row = col = ei;
    count = ei->shape[1];
    stride = count;
  } else if (row && col) {
    if (row->shape.size() != 1 || row->shape != col->shape)
      fail(col->where, "expected one dimension, as long as row");
    count = row->count;
  } else {
    fail(path, "expected arrays indptr and indices (CSR), row and col (COO) "
               "or edge_index [2, E]");
  }
  integers(*row);
  integers(*col);
  for (int64_t k = 0; k < count; ++k)
    e.add([&] { return row->where + ": edge " + std::to_string(k); },
          row->integer(k), col->integer(stride + k), nodes);
}

/// A Matrix Market file or an edge list (GraphFile.h) as the adjacency.
void read_pattern_adjacency(const std::string &path, int64_t nodes,
                            Entries &e) {
  require_regular_file(path, "graph adjacency");
  GraphFile f = readGraphFile(path);
  // A Matrix Market file's size line is the graph's; an edge list's largest
  // id + 1 may fall short of it (isolated nodes at the end).
  const bool mtx = f.params.rfind("Matrix Market", 0) == 0;
  if (mtx ? f.rows != nodes : f.rows > nodes)
    fail(path, (mtx ? "a " + std::to_string(f.rows) + " x " +
                          std::to_string(f.rows) + " matrix"
                    : "node ids up to " + std::to_string(f.rows - 1)) +
                   ", the model has " + std::to_string(nodes) + " nodes");
  for (const auto &[i, j] : f.entries)
    e.rows[i].push_back(int32_t(j));
  f.entries = {};
}

} // namespace

PlantedGraph read_graph_files(const GraphFileNames &files, int64_t nodes,
                              int64_t features, int64_t classes,
                              int64_t x_node0, int64_t x_rows) {
  PlantedGraph g;
  g.nodes = nodes;
  g.features = features;
  g.classes = classes;
  // Labels first: a missing or short label file fails before the big reads.
  {
    const ArrayFile f = open_arrays(files.labels, "graph labels");
    const NpyArray &a = only_array(f, files.labels);
    check_shape(a, {nodes});
    if (a.kind == 'f' || a.kind == 'b')
      fail(a.where, "expected integer labels");
    g.labels.resize(size_t(nodes));
    for (int64_t i = 0; i < nodes; ++i) {
      const int64_t l = a.integer(i);
      if (l < 0 || l >= classes)
        fail(a.where, "entry " + std::to_string(i) + ": label " +
                          std::to_string(l) + " outside [0, " +
                          std::to_string(classes) + ")");
      g.labels[size_t(i)] = int32_t(l);
    }
  }
  {
    const ArrayFile f = open_arrays(files.features, "graph features");
    const NpyArray &a = only_array(f, files.features);
    check_shape(a, {nodes, features});
    if (a.kind != 'f')
      fail(a.where, "expected float32 or float64 features");
    g.x_node0 = x_node0;
    g.x.resize(size_t(x_rows * features));
    // Every value is checked, not only this rank's: each rank refuses alike.
    for (int64_t k = 0; k < nodes * features; ++k) {
      const double v = a.real(k);
      if (!std::isfinite(v) || std::fabs(v) > 3.4e38)
        fail(a.where, "row " + std::to_string(k / features) + ", feature " +
                          std::to_string(k % features) + ": non-finite " +
                          "value (as float32)");
      const int64_t r = k / features - x_node0;
      if (r >= 0 && r < x_rows)
        g.x[size_t(r * features + k % features)] = float(v);
    }
  }
  Entries e;
  e.rows.resize(size_t(nodes));
  if (ends_with(files.adjacency, ".npz"))
    read_npz_adjacency(files.adjacency, nodes, e);
  else // .mtx, or an edge list
    read_pattern_adjacency(files.adjacency, nodes, e);
  g.row_ptr.assign(size_t(nodes + 1), 0);
  for (int64_t i = 0; i < nodes; ++i) {
    std::vector<int32_t> &r = e.rows[size_t(i)];
    // A CSR file's rows come sorted: checked, not sorted again (a Reddit-sized
    // adjacency's sorts were a fifth of the read).
    if (!std::is_sorted(r.begin(), r.end()))
      std::sort(r.begin(), r.end());
    const auto self = std::lower_bound(r.begin(), r.end(), int32_t(i));
    if (self == r.end() || *self != int32_t(i))
      r.insert(self, int32_t(i)); // A + I
    r.erase(std::unique(r.begin(), r.end()), r.end());
    if (int64_t(g.row_ptr[size_t(i)]) + int64_t(r.size()) >
        std::numeric_limits<int32_t>::max())
      fail(files.adjacency, "more than 2^31 - 1 entries");
    g.row_ptr[size_t(i + 1)] = g.row_ptr[size_t(i)] + int32_t(r.size());
  }
  g.col_idx.reserve(size_t(g.row_ptr[size_t(nodes)]));
  for (std::vector<int32_t> &r : e.rows) {
    g.col_idx.insert(g.col_idx.end(), r.begin(), r.end());
    r = {};
  }
  gcn_normalise(g);
  return g;
}

} // namespace autoddl::rt
