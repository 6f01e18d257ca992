//===- OnnxPatterns.h - decomposed ops of an ONNX export (internal) ------===//
//
// Exporters write some ops as several primitive nodes (GELU before opset 20:
// Div, Erf, Add, Mul, Mul; GPT-2's tanh GELU: Pow, Mul, Add, Mul, Tanh, Add,
// Mul, Mul). The ONNX reader finds them here, before lowering, and lowers
// each match as the one op of the vocabulary.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace autoddl::import {

struct GeluMatch {
  std::string x;                              // the GELU's input value
  std::string approximate;                    // "none" (erf) or "tanh"
  std::vector<const onnx::NodeProto *> inner; // folded into `last`
  const onnx::NodeProto *last = nullptr;      // its output is the GELU's
};

/// A scalar float constant's value (initializer or Constant node), if `name`
/// is one.
using ScalarOf = std::function<std::optional<double>(const std::string &)>;

std::vector<GeluMatch> matchDecomposedGelu(const onnx::GraphProto &g,
                                           const ScalarOf &scalar);

} // namespace autoddl::import
