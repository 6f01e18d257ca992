//===- OnnxHostTensor.cpp - host tensors of the constant evaluator -------===//
//
// HostTensor's element types (ONNX's float, double, bool and 8- to 64-bit
// integers, held as long double), reading them from a TensorProto or a
// Constant node, and Shape's value.
//
//===----------------------------------------------------------------------===//
#include "ir/import/OnnxHostTensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace autoddl::import {

using T = onnx::TensorProto;
using Value = long double;

namespace host {

[[noreturn]] void bad(const std::string &m) { throw std::invalid_argument(m); }

int64_t product(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0)
      bad("negative dimension");
    if (d && n > INT64_MAX / d)
      bad("element count overflows int64");
    n *= d;
  }
  return n;
}

// Evaluated constants are masks and tables of an export's own sizes; a
// larger one means the graph computes something this reader should not
// materialise on the host.
constexpr int64_t kMaxElements = int64_t(1) << 26;

HostTensor make(int32_t type, std::vector<int64_t> shape) {
  HostTensor t;
  t.type = type;
  t.shape = std::move(shape);
  int64_t n = product(t.shape);
  if (n > kMaxElements)
    bad("a constant of " + std::to_string(n) +
        " elements is too large to "
        "evaluate");
  t.data.assign(n, 0);
  return t;
}

bool isFloat(int32_t type) {
  return type == T::FLOAT || type == T::DOUBLE || type == T::FLOAT16 ||
         type == T::BFLOAT16;
}

/// f(V{}) with V the C++ type an element of ONNX `type` holds in raw bytes
/// (bool as a uint8_t); `otherwise` for a type that has none here (float16,
/// strings, ...). One list of the element types for width, load and wrap.
template <class F, class R> R byElementType(int32_t type, F f, R otherwise) {
  switch (type) {
  case T::FLOAT:
    return f(float{});
  case T::DOUBLE:
    return f(double{});
  case T::INT64:
    return f(int64_t{});
  case T::UINT64:
    return f(uint64_t{});
  case T::INT32:
    return f(int32_t{});
  case T::UINT32:
    return f(uint32_t{});
  case T::INT16:
    return f(int16_t{});
  case T::UINT16:
    return f(uint16_t{});
  case T::INT8:
    return f(int8_t{});
  case T::UINT8:
  case T::BOOL:
    return f(uint8_t{});
  default:
    return otherwise;
  }
}

// Rounds v to what an element of `type` holds (ONNX Cast: floats to
// integers truncate toward zero, integers wrap to their width).
Value fit(int32_t type, Value v) {
  switch (type) {
  case T::FLOAT:
    return (float)v;
  case T::DOUBLE:
    return (double)v;
  case T::BOOL:
    return v != 0;
  default:
    break;
  }
  if (std::isnan(v))
    return 0;
  Value t = std::trunc(v);
  // Out-of-range conversions are undefined in ONNX; saturate at int64.
  if (t >= 9223372036854775807.0L)
    t = 9223372036854775807.0L;
  if (t <= -9223372036854775808.0L)
    t = -9223372036854775808.0L;
  int64_t i = (int64_t)t;
  // Integers wrap to their width (ONNX Cast).
  return byElementType(
      type, [&](auto e) -> Value { return (decltype(e))i; }, Value(i));
}

int64_t width(int32_t type) {
  return byElementType(
      type, [](auto e) { return int64_t(sizeof e); }, int64_t(0));
}

} // namespace host

using namespace host;

namespace {

template <typename V> Value load(const char *p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Value fromBytes(int32_t type, const char *p) {
  return byElementType(
      type, [&](auto e) { return load<decltype(e)>(p); }, load<uint8_t>(p));
}

} // namespace

int64_t HostTensor::numel() const { return product(shape); }

std::string typeName(int32_t type) {
  return onnx::TensorProto::DataType_IsValid(type)
             ? onnx::TensorProto::DataType_Name(
                   (onnx::TensorProto::DataType)type)
             : "type " + std::to_string(type);
}

HostTensor tensorFromProto(const onnx::TensorProto &t, const std::string &raw) {
  int64_t w = width(t.data_type());
  if (!w)
    bad("a " + typeName(t.data_type()) + " tensor is not evaluated");
  HostTensor out = make(t.data_type(),
                        std::vector<int64_t>(t.dims().begin(), t.dims().end()));
  int64_t n = out.numel();
  if (!raw.empty() || n == 0) {
    if ((int64_t)raw.size() != n * w)
      bad("tensor '" + t.name() + "' holds " + std::to_string(raw.size()) +
          " bytes, expected " + std::to_string(n * w));
    for (int64_t i = 0; i < n; ++i)
      out.data[i] = fromBytes(t.data_type(), raw.data() + i * w);
    return out;
  }
  // Typed fields: float_data, double_data, int64_data, uint64_data, and
  // int32_data for every narrower integer and bool.
  auto take = [&](const auto &field) {
    if (field.size() != n)
      bad("tensor '" + t.name() + "' holds " + std::to_string(field.size()) +
          " values, expected " + std::to_string(n));
    for (int64_t i = 0; i < n; ++i)
      out.data[i] = fit(t.data_type(), field.Get(i));
  };
  switch (t.data_type()) {
  case T::FLOAT:
    take(t.float_data());
    break;
  case T::DOUBLE:
    take(t.double_data());
    break;
  case T::INT64:
    take(t.int64_data());
    break;
  case T::UINT64:
  case T::UINT32:
    take(t.uint64_data());
    break;
  default:
    take(t.int32_data());
  }
  return out;
}

HostTensor constantValue(const onnx::NodeProto &n) {
  if (n.attribute_size() != 1)
    bad("a Constant has exactly one value attribute");
  const onnx::AttributeProto &a = n.attribute(0);
  HostTensor out;
  auto list = [&](int32_t type, const auto &field, bool scalar) {
    out = make(type, scalar ? std::vector<int64_t>{}
                            : std::vector<int64_t>{(int64_t)field.size()});
    for (int64_t i = 0; i < out.numel(); ++i)
      out.data[i] = fit(type, field.Get(i));
  };
  if (a.name() == "value") {
    if (a.t().data_location() == onnx::TensorProto::EXTERNAL)
      bad("a Constant with external data is not supported");
    return tensorFromProto(a.t(), a.t().raw_data());
  }
  google::protobuf::RepeatedField<float> f;
  google::protobuf::RepeatedField<int64_t> i;
  if (a.name() == "value_float") {
    f.Add(a.f());
    list(T::FLOAT, f, true);
  } else if (a.name() == "value_floats") {
    list(T::FLOAT, a.floats(), false);
  } else if (a.name() == "value_int") {
    i.Add(a.i());
    list(T::INT64, i, true);
  } else if (a.name() == "value_ints") {
    list(T::INT64, a.ints(), false);
  } else {
    bad("a Constant '" + a.name() +
        "' is not supported (value, "
        "value_float(s) and value_int(s) are)");
  }
  return out;
}

HostTensor shapeValue(const onnx::NodeProto &n,
                      const std::vector<int64_t> &shape) {
  int64_t r = shape.size();
  // ONNX Shape: start/end as in Slice, clamped to [0, rank].
  auto clampAxis = [&](int64_t a) {
    if (a < 0)
      a += r;
    return std::clamp<int64_t>(a, 0, r);
  };
  int64_t s = clampAxis(onnxAttrInt(n, "start", 0)),
          e = clampAxis(onnxAttrInt(n, "end", r));
  HostTensor out = make(T::INT64, {std::max<int64_t>(e - s, 0)});
  for (int64_t k = s; k < e; ++k)
    out.data[k - s] = shape[k];
  return out;
}

const onnx::AttributeProto *onnxAttr(const onnx::NodeProto &n,
                                     const std::string &name) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t onnxAttrInt(const onnx::NodeProto &n, const std::string &name,
                    int64_t dflt) {
  const onnx::AttributeProto *a = onnxAttr(n, name);
  return a ? a->i() : dflt;
}

std::vector<int64_t> onnxAttrInts(const onnx::NodeProto &n,
                                  const std::string &name) {
  const onnx::AttributeProto *a = onnxAttr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end())
           : std::vector<int64_t>{};
}

} // namespace autoddl::import
