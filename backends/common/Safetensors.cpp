// safetensors checkpoints (see Safetensors.h).
#include "backends/common/Safetensors.h"

#include "backends/common/FileIo.h"
#include "backends/common/MiniJson.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace autoddl::rt {

static bool hostIsLittleEndian() {
  const uint32_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

SafetensorsIndex
safetensors_layout(const std::string &path,
                   const std::vector<std::pair<std::string, Shape>> &tensors,
                   const std::map<std::string, std::string> &metadata) {
  if (!hostIsLittleEndian())
    throw std::runtime_error(
        path + ": safetensors writing assumes a little-endian host");
  std::vector<const std::pair<std::string, Shape> *> order;
  for (const auto &t : tensors)
    order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](auto *a, auto *b) { return a->first < b->first; });
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i]->first == "__metadata__" || order[i]->first.empty())
      throw std::runtime_error(path + ": invalid tensor name \"" +
                               order[i]->first + "\"");
    if (i > 0 && order[i]->first == order[i - 1]->first)
      throw std::runtime_error(path + ": tensor \"" + order[i]->first +
                               "\" given twice");
  }
  Json header = Json::obj();
  if (!metadata.empty()) {
    Json meta = Json::obj();
    for (const auto &kv : metadata)
      meta.set(kv.first, Json::of(kv.second));
    header.set("__metadata__", std::move(meta));
  }
  SafetensorsIndex out;
  out.metadata = metadata;
  int64_t offset = 0;
  for (const auto *t : order) {
    const int64_t bytes = numel(t->second) * int64_t(sizeof(float));
    Json shape = Json::arr();
    for (int64_t d : t->second)
      shape.push(Json::of(d));
    Json entry = Json::obj();
    entry.set("dtype", Json::of(std::string("F32")));
    entry.set("shape", std::move(shape));
    entry.set(
        "data_offsets",
        std::move(
            Json::arr().push(Json::of(offset)).push(Json::of(offset + bytes))));
    header.set(t->first, std::move(entry));
    out.tensors[t->first] = {t->second, uint64_t(offset)};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  out.head.resize(8);
  for (int i = 0; i < 8; ++i)
    out.head[size_t(i)] = char((uint64_t(text.size()) >> (8 * i)) & 0xFF);
  out.head += text;
  for (auto &kv : out.tensors)
    kv.second.offset += out.head.size();
  out.size = out.head.size() + uint64_t(offset);
  return out;
}

void safetensors_write(const std::string &path,
                       const std::vector<NamedTensor> &tensors,
                       const std::map<std::string, std::string> &metadata) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const NamedTensor &t : tensors)
    shapes.push_back({t.name, t.shape});
  const SafetensorsIndex index = safetensors_layout(path, shapes, metadata);
  std::vector<const NamedTensor *> order;
  for (const NamedTensor &t : tensors)
    order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](auto *a, auto *b) { return a->name < b->name; });
  std::vector<FileChunk> chunks{{index.head.data(), index.head.size()}};
  for (const NamedTensor *t : order)
    if (numel(t->shape) > 0)
      chunks.push_back({t->data, size_t(numel(t->shape)) * sizeof(float)});
  write_file_atomically(path, chunks);
}

namespace {

/// Parses the header of a safetensors file of `size` bytes whose first
/// bytes are `head` (at least the 8-byte length and the header, or the whole
/// file when shorter) and checks every tensor's offsets against the data the
/// file holds. With `data` (the bytes after the header) the tensors are
/// copied into `file`; without, only checked.
void parseFile(const std::string &path, std::string_view head, uint64_t size,
               const char *data, SafetensorsFile &file,
               SafetensorsIndex *index = nullptr) {
  auto bad = [&](const std::string &cause) {
    return std::runtime_error(path + ": " + cause);
  };
  if (size < 8)
    throw bad("too short for a safetensors file (" + std::to_string(size) +
              " bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(head[size_t(i)]);
  if (n > size - 8)
    throw bad("header length " + std::to_string(n) + " exceeds the file size " +
              std::to_string(size) + " (a truncated file?)");
  const Json header =
      json_parse(head.substr(8, n), path + " (safetensors header)");
  if (header.kind != Json::Kind::Object)
    throw bad("header is not a JSON object");
  const uint64_t dataBytes = size - 8 - n;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto &[name, entry] : header.object) {
    if (name == "__metadata__") {
      if (entry.kind != Json::Kind::Object)
        throw bad("__metadata__ is not an object");
      for (const auto &[k, v] : entry.object) {
        if (v.kind != Json::Kind::String)
          throw bad("metadata value of \"" + k + "\" is not a string");
        file.metadata[k] = v.string;
      }
      continue;
    }
    const Json *dtype = entry.find("dtype");
    const Json *shape = entry.find("shape");
    const Json *offsets = entry.find("data_offsets");
    if (!dtype || !shape || !offsets || dtype->kind != Json::Kind::String ||
        shape->kind != Json::Kind::Array ||
        offsets->kind != Json::Kind::Array || offsets->array.size() != 2)
      throw bad("tensor \"" + name + "\" needs dtype, shape and data_offsets");
    if (dtype->string != "F32")
      throw bad("tensor \"" + name + "\" has dtype " + dtype->string +
                ", only F32 is supported");
    Shape dims;
    for (const Json &d : shape->array) {
      if (!d.integral || d.integer < 0)
        throw bad("tensor \"" + name + "\" has a bad shape entry");
      dims.push_back(d.integer);
    }
    const Json &b = offsets->array[0], &e = offsets->array[1];
    if (!b.integral || !e.integral || b.integer < 0 || e.integer < b.integer ||
        uint64_t(e.integer) > dataBytes)
      throw bad("tensor \"" + name + "\" has data_offsets outside the data (" +
                std::to_string(dataBytes) + " bytes; a truncated file?)");
    if (e.integer - b.integer != numel(dims) * int64_t(sizeof(float)))
      throw bad("tensor \"" + name + "\" of shape " + shape_str(dims) +
                " has " + std::to_string(e.integer - b.integer) +
                " bytes of data");
    ranges.push_back({b.integer, e.integer});
    if (index)
      index->tensors[name] = {dims, 8 + n + uint64_t(b.integer)};
    Tensor t = Tensor::zeros(data ? dims : Shape{0});
    if (data && t.numel() > 0)
      std::memcpy(t.data, data + b.integer, size_t(e.integer - b.integer));
    file.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw bad("tensors' data_offsets overlap");
}

} // namespace

SafetensorsFile safetensors_read(const std::string &path) {
  const std::string bytes = read_file(path);
  SafetensorsFile file;
  uint64_t n = 0;
  for (int i = 7; i >= 0 && bytes.size() >= 8; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[size_t(i)]);
  parseFile(path, bytes, bytes.size(),
            bytes.size() >= 8 && n <= bytes.size() - 8 ? bytes.data() + 8 + n
                                                       : nullptr,
            file);
  return file;
}

SafetensorsIndex safetensors_index(const std::string &path) {
  require_regular_file(path, "safetensors file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw std::runtime_error(path + ": cannot open");
  const uint64_t size = uint64_t(in.tellg());
  std::string head(size < 8 ? size_t(size) : 8, '\0');
  in.seekg(0);
  in.read(head.data(), std::streamsize(head.size()));
  uint64_t n = 0;
  for (int i = 7; i >= 0 && size >= 8; --i)
    n = (n << 8) | static_cast<unsigned char>(head[size_t(i)]);
  if (size >= 8 && n <= size - 8) {
    head.resize(size_t(8 + n));
    in.read(head.data() + 8, std::streamsize(n));
  }
  if (!in)
    throw std::runtime_error(path + ": read error");
  SafetensorsFile file;
  SafetensorsIndex index;
  parseFile(path, head, size, nullptr, file, &index);
  index.metadata = std::move(file.metadata);
  index.head = std::move(head);
  index.size = size;
  return index;
}

std::map<std::string, std::string> safetensors_check(const std::string &path) {
  return safetensors_index(path).metadata;
}

} // namespace autoddl::rt
