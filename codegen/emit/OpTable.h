//===- OpTable.h - the op kinds the programs run ---------------*- C++ -*-===//
//
// The one table of op kinds (OpTable.cpp): per kind its emitter, what the
// CUDA program runs of it, and what it asks of the program beyond its
// stage's code. Adding an op: docs/codegen.md "Adding an op".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"

#include <functional>
#include <map>
#include <string>

namespace autoddl::codegen::emit {

class OpEmitters;

/// What the CUDA program runs of an op kind: nothing yet (image ops), the
/// op on activations only, or also with parameter operands (the ops of
/// layers with weights, which take the act_t working copy and the fp32
/// gradient).
enum class CudaRuns { No, OnActivations, WithWeights };

/// What an op kind asks of the program beyond its stage's code.
enum OpTrait : unsigned {
  // A loss over labelled rows: operand 0 the scores [N, classes], operand 1
  // the labels (a classifier's targets; the program's kClasses).
  kLabelledLoss = 1u << 0,
  kImageKernels = 1u << 1, // the target's image kernels (imageIncludes)
  kPrimitives = 1u << 2,   // backends/common/OnnxPrimitive.h
  kGraphColumns = 1u << 3, // the graph's columns (ProgramSpec graph_columns)
};

struct OpEntry {
  std::function<void(OpEmitters &, OpCall &)> emit; // appends the op's step
  CudaRuns cuda;
  unsigned traits = 0; // OpTrait bits
};

/// Every op kind the programs run, with its emitter: the one table.
const std::map<std::string, OpEntry> &opTable();
/// Whether op kind `kind` has `trait` (false for a kind not in the table).
bool opHas(const std::string &kind, OpTrait trait);
/// Whether an op of g has `trait`.
bool anyOpHas(const ModelGraph &g, OpTrait trait);
/// Why `backend` does not run model `g` whatever the plan (an op kind, an
/// op reading a parameter where the CUDA kernels take none, a model it does
/// not feed), or "" (codegen::backendRefusal).
std::string opsRefusal(const ModelGraph &g, Backend backend);

} // namespace autoddl::codegen::emit
