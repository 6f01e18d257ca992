// safetensors checkpoints (the Hugging Face format), fp32 tensors.
//
// File layout: 8-byte little-endian header length N; N bytes of JSON header
// {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]}} padded with spaces to a multiple of 8; then
// the raw little-endian data, offsets relative to the end of the header.
// Tensors are written in name order, each right after the previous.
#ifndef AUTODDL_BACKENDS_COMMON_SAFETENSORS_H
#define AUTODDL_BACKENDS_COMMON_SAFETENSORS_H

#include "backends/common/Tensor.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace autoddl::rt {

/// A tensor to write: name, shape and numel(shape) floats at `data` (not
/// owned).
struct NamedTensor {
  std::string name;
  Shape shape;
  const float *data = nullptr;
};

/// Writes `tensors` (names unique, not "__metadata__") and string `metadata` to
/// `path`, atomically (FileIo.h). Throws std::runtime_error("PATH: cause"); on
/// error the old file is left intact.
void safetensors_write(const std::string &path,
                       const std::vector<NamedTensor> &tensors,
                       const std::map<std::string, std::string> &metadata = {});

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors; // owning
  std::map<std::string, std::string> metadata;
};

/// Reads a safetensors file of F32 tensors. Throws std::runtime_error("PATH:
/// cause") on a missing or truncated file, a malformed header, another dtype,
/// or offsets that do not match the shapes.
SafetensorsFile safetensors_read(const std::string &path);

/// Reads only the header of `path` and checks it as safetensors_read does
/// (a truncated file, offsets outside the data) without reading the tensors;
/// returns the metadata. Throws std::runtime_error("PATH: cause").
std::map<std::string, std::string> safetensors_check(const std::string &path);

/// Where each tensor of a file lies: what a rank reads or writes its block of
/// a tensor by (pread/pwrite at `offset` + 4 * element), without the rest.
struct SafetensorsIndex {
  struct Entry {
    Shape shape;
    uint64_t offset = 0; // of its first byte in the file
  };
  std::map<std::string, Entry> tensors;
  std::map<std::string, std::string> metadata;
  std::string head;  // the file's first bytes: the length and the header
  uint64_t size = 0; // of the whole file
};

/// The index of `path`, its header read and checked as safetensors_check
/// does. Throws std::runtime_error("PATH: cause").
SafetensorsIndex safetensors_index(const std::string &path);

/// The index of the file safetensors_write would write for tensors of these
/// names and shapes (its `head` the bytes before the data, the same on every
/// rank that computes it). Throws std::runtime_error("PATH: cause") on an
/// invalid or repeated name.
SafetensorsIndex
safetensors_layout(const std::string &path,
                   const std::vector<std::pair<std::string, Shape>> &tensors,
                   const std::map<std::string, std::string> &metadata);

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_SAFETENSORS_H
