//===- OpEmitters.h - the op emitters of train.cpp -------------*- C++ -*-===//
//
// One function per op kind, in one file per family (EmbeddingEmitter.cpp,
// LinearEmitter.cpp, ...), called through the op table (OpTable.h) with the
// op's OpCall, whose step they fill. They read the EmitContext; what else
// they write is named here: the stage members their ops keep, the gradient
// buffers they store, K-FAC's layer table (the linears), the loss's state
// (LossEmitter) and the ONNX primitives' file-scope declarations.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/emit/EmitContext.h"
#include "codegen/emit/KfacEmitter.h"
#include "codegen/emit/LossEmitter.h"
#include "codegen/emit/OpTable.h"
#include "codegen/emit/StageMembers.h"

#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace autoddl::onnx_kernels {
struct Primitive;
} // namespace autoddl::onnx_kernels

namespace autoddl::codegen::emit {

class OpEmitters {
public:
  OpEmitters(const EmitContext &cx, StageMembers &members,
             std::set<std::string> &storedGrads, KfacEmitter &kfac)
      : cx_(cx), members_(members), storedGrads_(storedGrads), kfac_(kfac),
        loss_(cx, members, storedGrads) {}

  /// The loss's row count and the accuracy's texts (LossEmitter.h).
  const LossEmitter &loss() const { return loss_; }
  /// File-scope declarations of the ONNX primitives (PrimitiveEmitter.cpp):
  /// the constants they read and each op's resolved Primitive.
  const std::string &primitiveDecls() const { return primitiveDecls_; }
  /// A batch norm whose running statistics the program updates (module
  /// buffers, docs/checkpoints.md "Buffers"): the file-scope arrays of its
  /// buffers and of its micro-batches' moments.
  struct RunningNorm {
    int stage;
    int mean, var; // the buffer tensors
    std::string meanArray, varArray, moments;
    int64_t channels;
    double momentum;
  };
  const std::vector<RunningNorm> &runningNorms() const { return running_; }

private:
  // The op table's entries call the emitters.
  friend const std::map<std::string, OpEntry> &opTable();
  void emitEmbedding(OpCall &c);
  void emitPositional(OpCall &c);
  void emitRotary(OpCall &c);
  void emitLinear(OpCall &c);
  void emitMatmul(OpCall &c);
  void emitBiasAdd(OpCall &c);
  void emitAdd(OpCall &c);
  void emitMul(OpCall &c);
  void emitGelu(OpCall &c);
  void emitReluSilu(OpCall &c);
  void emitSwiglu(OpCall &c);
  void emitNorm(OpCall &c);
  void emitSoftmax(OpCall &c);
  void emitAttention(OpCall &c);
  void emitConv2d(OpCall &c);
  void emitPool2d(OpCall &c);
  void emitFlatten(OpCall &c);
  void emitTranspose(OpCall &c);
  void emitSpmm(OpCall &c);
  void emitSddmm(OpCall &c);
  void emitEdgeSoftmax(OpCall &c);
  void emitHeadDot(OpCall &c);
  void emitGatAggregate(OpCall &c);
  void emitPrimitive(OpCall &c);
  std::string runningStatistics(const OpCall &c,
                                const onnx_kernels::Primitive &prim,
                                const std::string &name);
  void primitiveCalls(OpCall &c, const onnx_kernels::Primitive &prim,
                      const std::string &name, const std::string &in,
                      const std::string &din, const std::string &moments,
                      const std::string &key);
  bool normWithRelu(OpCall &c, const std::string &name, const std::string &in,
                    const std::string &din, const std::string &moments,
                    const char *store);

  /// cuda: a backward call's trailing accumulate flags for the gradients of
  /// operands ks, false where the call stores one (EmitContext::storesGrad;
  /// recorded in storedGrads_); "" where it adds to all (OpTable.cpp).
  std::string storeFlags(const OpCall &c, std::initializer_list<size_t> ks);

  /// A batch norm run at its add's step (planResidualNormFusion): its
  /// primitive's name, operand list and moments slot ("": none).
  struct NormAtAdd {
    std::string name, in, moments;
  };
  std::map<size_t, NormAtAdd> normsAtAdds_; // by the norm's op

  const EmitContext &cx_;
  StageMembers &members_;
  // cuda: the gradient buffers one backward call writes whole (storesGrad).
  std::set<std::string> &storedGrads_;
  KfacEmitter &kfac_; // the linears record their K-FAC rows
  LossEmitter loss_;
  std::string primitiveDecls_;
  std::vector<RunningNorm> running_;
  std::set<int> declaredConsts_; // the constants declared so far
  IdentTable primitiveNames_;    // their resolutions' names (prim_<op>)
};

} // namespace autoddl::codegen::emit
