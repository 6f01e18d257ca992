//===- OnnxConstants.h - evaluating ONNX nodes on constants (internal) ---===//
//
// Once --batch and --seq pin an export's shapes, every value an exporter
// computes from constants and shapes (the causal mask from Range, CumSum,
// LessOrEqual and Where; the rotary tables from inv_freq by MatMul, Cos and
// Sin; reshape targets from Shape and Concat) is a constant. The ONNX reader
// evaluates those nodes here, on the host, with ONNX's semantics
// (multidirectional broadcasting, negative axes, Slice's clamping and steps),
// so the graph it lowers holds only the ops that touch activations.
// Errors throw std::invalid_argument; the reader names the node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/common/OnnxKernels.h" // Window

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::import {

/// A constant tensor of an ONNX element type. Values are held as long double,
/// which holds every int64 exactly (ONNX's INT64_MAX slice ends) and every
/// float and double; results are rounded to their element type after each op.
struct HostTensor {
  int32_t type = onnx::TensorProto::FLOAT; // onnx::TensorProto::DataType
  std::vector<int64_t> shape;
  std::vector<long double> data; // row-major
  int64_t numel() const;
};

/// The values of an initializer or a Constant's tensor; `raw` holds the
/// bytes of external data (t.raw_data() otherwise). Float, double, bool and
/// 8- to 64-bit integers; other types are refused.
HostTensor tensorFromProto(const onnx::TensorProto &t, const std::string &raw);

/// The value of a Constant node in any of its forms (value, value_float(s),
/// value_int(s)); sparse and string constants are refused.
HostTensor constantValue(const onnx::NodeProto &n);

/// Shape(x) of a value of static shape `shape`, with the node's start/end.
HostTensor shapeValue(const onnx::NodeProto &n,
                      const std::vector<int64_t> &shape);

/// Whether evaluate() knows op `op` (of the default domain).
bool canEvaluate(const std::string &op);

/// Node n applied to constant inputs (null for an omitted optional input).
HostTensor evaluate(const onnx::NodeProto &n,
                    const std::vector<const HostTensor *> &in);

/// Node n's attribute `name` (null when absent), an int one's value (`dflt`
/// when absent) and an ints one's (empty when absent): the one accessor of
/// ONNX attributes.
const onnx::AttributeProto *onnxAttr(const onnx::NodeProto &n,
                                     const std::string &name);
int64_t onnxAttrInt(const onnx::NodeProto &n, const std::string &name,
                    int64_t dflt);
std::vector<int64_t> onnxAttrInts(const onnx::NodeProto &n,
                                  const std::string &name);

// Shape rules shared with the reader's primitives (OnnxPrimitives.cpp).

/// numpy's multidirectional broadcast of two shapes.
std::vector<int64_t> broadcastShapes(const std::vector<int64_t> &a,
                                     const std::vector<int64_t> &b);
/// A possibly negative axis of a tensor of rank `rank`, in [0, rank).
int64_t onnxAxis(int64_t axis, int64_t rank);
/// Unsqueeze's and Squeeze's result shapes (axes possibly negative; Squeeze
/// with no axes drops every dimension of 1).
std::vector<int64_t> unsqueezedShape(const std::vector<int64_t> &x,
                                     const std::vector<int64_t> &axes);
std::vector<int64_t> squeezedShape(const std::vector<int64_t> &x,
                                   const std::vector<int64_t> &axes);
/// What Slice reads of a tensor of shape `in`: per dimension the first
/// index, the step and the count (axes and steps may be empty: defaults).
using SliceWindow = onnx_kernels::Window;
SliceWindow sliceWindow(const std::vector<int64_t> &in,
                        const std::vector<int64_t> &starts,
                        const std::vector<int64_t> &ends,
                        std::vector<int64_t> axes, std::vector<int64_t> steps);

/// The name of an ONNX element type ("FLOAT", "INT64", ...), for messages.
std::string typeName(int32_t type);

} // namespace autoddl::import
