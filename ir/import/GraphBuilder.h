//===- GraphBuilder.h - building a ModelGraph with shape inference -------===//
//
// Templates and the explicit-graph reader add inputs, parameters and ops
// through this class; every op's result type comes from ops::inferResultTypes,
// so a template cannot build an op the vocabulary would reject. Errors throw
// UserError prefixed with the place given at construction ("gpt.json: at
// /config: ").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"

#include <map>
#include <set>
#include <string>

namespace autoddl::import {

class GraphBuilder {
public:
  GraphBuilder(std::string name, std::string family, std::string place);

  /// Data fed per step. Sizes must be positive and their product fit in int64.
  int input(const std::string &name, ops::Shape shape,
            ops::DType dtype = ops::DType::F32);
  /// A sparse matrix input (adjacency) with `nnz` stored entries.
  int sparseInput(const std::string &name, ops::Shape shape, int64_t nnz);
  /// A trainable tensor; `init` is "normal" (with `std`), "zeros" or "ones".
  int param(const std::string &name, ops::Shape shape, const std::string &init,
            double std = 0.0);

  /// A buffer of an imported graph (TensorRole::Constant): `values` row-major,
  /// as many as the shape's product; dtype F32, I32, I64 or Bool.
  int constant(const std::string &name, ops::Shape shape, ops::DType dtype,
               std::vector<double> values);
  /// A module buffer (TensorDef::buffer): an f32 constant whose `values` are
  /// its start, which the program updates and checkpoints.
  int buffer(const std::string &name, ops::Shape shape,
             std::vector<double> values);
  /// Appends an ONNX operator outside the vocabulary (kind "primitive", see
  /// ModelGraph.h): `opType` ("Erf"), its ONNX attributes, and the result's
  /// type, which no shape rule infers. `position` is the node's index in the
  /// source file.
  int primitive(const std::string &opType, const std::string &name,
                std::vector<int> operands, ops::Attrs attrs,
                const ops::ValueType &result, const std::string &resultName,
                int position = -1);

  /// Appends op `kind` named `name` (also the name of its result unless
  /// `result` is given), fills defaults of optional attributes, infers and
  /// returns the result tensor.
  int op(const std::string &kind, const std::string &name,
         std::vector<int> operands, ops::Attrs attrs = {},
         const std::string &result = "");

  /// Layer index given to ops added from now on (-1: outside repeated blocks).
  void setLayer(int layer) { layer_ = layer; }
  /// Changes the error prefix (e.g. to the JSON pointer of the op being read).
  void setPlace(std::string place) { place_ = std::move(place); }

  const ModelGraph &graph() const { return g; }
  const ops::Shape &shape(int tensor) const { return g.tensors[tensor].shape; }
  /// Index of the tensor called `name`, or -1.
  int find(const std::string &name) const;

  /// Checks the loss is a scalar produced by an op and hands the graph over.
  ModelGraph finish(int loss, int64_t numLayers, int64_t batch, int64_t seq);

private:
  int addTensor(TensorDef t);
  int append(const std::string &kind, const std::string &name,
             std::vector<int> operands, ops::Attrs attrs, ops::Shape shape,
             ops::DType dtype, const std::string &result);
  [[noreturn]] void fail(const std::string &message) const;

  ModelGraph g;
  std::string place_;
  std::map<std::string, int> byName;
  std::set<std::string> opNames;
  int layer_ = -1;
};

} // namespace autoddl::import
