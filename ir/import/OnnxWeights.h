//===- OnnxWeights.h - an ONNX model's parameter values (--weights onnx) -===//
//
// The importers build a model's shapes only; training starts from the
// counter-based initialisation. `--weights onnx` starts it from the values an
// exported model carries instead: each parameter of the imported graph is the
// initializer of the same name (docs/model-format.md "ONNX models").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include <string>
#include <utility>
#include <vector>

namespace autoddl::import {

/// One parameter's values: its name in `g`, row-major float32 of its shape.
struct ParameterValues {
  std::string name;
  ops::Shape shape;
  std::vector<float> values;
};

/// The values of every parameter of `g` (as imported from the ONNX file
/// `path`), read from the initializers of the same name (inline or external
/// data). Throws UserError naming the file and the tensor when one is missing,
/// of another shape or element type, or its data is short.
std::vector<ParameterValues> readOnnxWeights(const std::string &path,
                                             const ModelGraph &g);

} // namespace autoddl::import
