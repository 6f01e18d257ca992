// .npy and stored .npz writing (see NpyWriter.h).
#include "tools/autoddl-graph/NpyWriter.h"

#include "backends/common/FileIo.h"

#include <stdexcept>

#include <zlib.h> // crc32_z: the member's zip CRC

namespace autoddl::graphtool {

namespace {

void put16(std::string &s, uint32_t v) {
  s += char(v & 0xFF);
  s += char((v >> 8) & 0xFF);
}
void put32(std::string &s, uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}

} // namespace

std::string npyHeader(const NpyArray &a) {
  std::string shape;
  for (int64_t d : a.shape)
    shape += std::to_string(d) + (a.shape.size() == 1 ? "," : ", ");
  if (a.shape.size() > 1)
    shape.resize(shape.size() - 2);
  std::string dict = "{'descr': '" + a.descr +
                     "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Magic (6) + version (2) + length (2) + dict + '\n', a multiple of 64.
  dict += std::string(63 - (dict.size() + 10) % 64, ' ') + "\n";
  std::string h = "\x93NUMPY";
  h += char(1);
  h += char(0);
  put16(h, uint32_t(dict.size()));
  return h + dict;
}

void writeNpy(const std::string &path, const NpyArray &a) {
  const std::string h = npyHeader(a);
  rt::write_file_atomically(path, {{h.data(), h.size()}, {a.data, a.bytes}});
}

void writeNpz(const std::string &path,
              const std::vector<std::pair<std::string, NpyArray>> &members) {
  // Local header + .npy header + data per member, then the central directory
  // and its end record (PKWARE APPNOTE 4.3); no compression, no data
  // descriptor, DOS time 0.
  std::vector<std::string> heads; // local header + npy header, per member
  std::string central;
  uint64_t offset = 0;
  for (const auto &[name, a] : members) {
    const std::string file = name + ".npy", npy = npyHeader(a);
    const uint64_t size = npy.size() + a.bytes;
    if (size >= 0xFFFFFFFFull || offset >= 0xFFFFFFFFull)
      throw std::runtime_error(path + ": member " + file +
                               ": 4 GiB or more (no ZIP64 here)");
    const uint32_t crc = uint32_t(crc32_z(
        crc32_z(0, reinterpret_cast<const Bytef *>(npy.data()), npy.size()),
        static_cast<const Bytef *>(a.data), a.bytes));
    auto common = [&](std::string &s) { // version .. name length
      put16(s, 20);                     // version needed: 2.0
      put16(s, 0);                      // flags
      put16(s, 0);                      // stored
      put16(s, 0);                      // time
      put16(s, 0x21);                   // date: 1980-01-01
      put32(s, crc);
      put32(s, uint32_t(size));
      put32(s, uint32_t(size));
      put16(s, uint32_t(file.size()));
      put16(s, 0); // extra length
    };
    std::string local;
    put32(local, 0x04034b50);
    common(local);
    local += file;
    central += std::string("\x50\x4b\x01\x02", 4);
    put16(central, 20); // version made by
    common(central);
    put16(central, 0); // comment length
    put16(central, 0); // disk
    put16(central, 0); // internal attributes
    put32(central, 0); // external attributes
    put32(central, uint32_t(offset));
    central += file;
    offset += local.size() + size;
    heads.push_back(local + npy);
  }
  if (offset >= 0xFFFFFFFFull)
    throw std::runtime_error(path + ": 4 GiB or more (no ZIP64 here)");
  std::string end;
  put32(end, 0x06054b50);
  put16(end, 0);
  put16(end, 0);
  put16(end, uint32_t(members.size()));
  put16(end, uint32_t(members.size()));
  put32(end, uint32_t(central.size()));
  put32(end, uint32_t(offset));
  put16(end, 0);
  std::vector<rt::FileChunk> chunks;
  for (size_t i = 0; i < members.size(); ++i) {
    chunks.emplace_back(heads[i].data(), heads[i].size());
    chunks.emplace_back(members[i].second.data, members[i].second.bytes);
  }
  chunks.emplace_back(central.data(), central.size());
  chunks.emplace_back(end.data(), end.size());
  rt::write_file_atomically(path, chunks);
}

} // namespace autoddl::graphtool
