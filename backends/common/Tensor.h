// A minimal fp32 tensor: a row-major shape over contiguous storage, owning or a
// view.
//
// Part of the runtime that generated programs compile against
// (docs/runtime.md); C++17 only, nothing from the rest of autoddl. Kernels take
// raw pointers and sizes (llm.c style); Tensor is only the bookkeeping the
// generated code keeps for activations, parameters and gradients.
#ifndef AUTODDL_BACKENDS_COMMON_TENSOR_H
#define AUTODDL_BACKENDS_COMMON_TENSOR_H

#include "backends/common/Dims.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace autoddl::rt {

using Shape = Dims;
using autoddl::numel; // of a Shape (1 for a scalar, shape {})

/// "[2,3,4]": for messages.
inline std::string shape_str(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Contiguous row-major fp32 tensor. An owning tensor holds its storage; a view
/// points into memory owned elsewhere (a slice of a flat parameter buffer, a
/// ZeRO shard). Move-only, so storage is never duplicated by accident; moving
/// keeps `data` valid.
struct Tensor {
  Shape shape;
  float *data = nullptr;
  std::vector<float> storage; // empty for a view

  Tensor() = default;
  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;
  Tensor(Tensor &&) = default;
  Tensor &operator=(Tensor &&) = default;

  /// An owning tensor of `shape`, every element zero.
  static Tensor zeros(Shape shape) {
    for (int64_t d : shape)
      if (d < 0)
        throw std::invalid_argument("tensor shape " + shape_str(shape) +
                                    " has a negative dimension");
    Tensor t;
    t.storage.assign(static_cast<size_t>(autoddl::rt::numel(shape)), 0.0f);
    t.shape = std::move(shape);
    t.data = t.storage.data();
    return t;
  }
  /// A view of `shape` over `data` (not owned).
  static Tensor view(float *data, Shape shape) {
    Tensor t;
    t.shape = std::move(shape);
    t.data = data;
    return t;
  }

  int64_t numel() const { return autoddl::rt::numel(shape); }
  int64_t dim(size_t i) const { return shape.at(i); }
  bool owning() const { return !storage.empty(); }
  float *begin() { return data; }
  float *end() { return data + numel(); }
  const float *begin() const { return data; }
  const float *end() const { return data + numel(); }
  void fill(float v) { std::fill(begin(), end(), v); }

  /// The same memory under another shape of equal element count
  /// (reshape/flatten are free).
  Tensor reshaped(Shape to) const {
    if (autoddl::rt::numel(to) != numel())
      throw std::invalid_argument("cannot reshape " + shape_str(shape) +
                                  " to " + shape_str(to));
    return view(data, std::move(to));
  }
};

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_TENSOR_H
