//===- SbpOps.cpp - hand-written parts of the sbp ops ---------------------===//
#include "ir/dialect/SbpDialect.h"

#include "ir/dialect/Verifiers.h"

using namespace mlir;

namespace autoddl::sbp {

//===- sbp.mesh -----------------------------------------------------------===//

int64_t MeshOp::getNumDevices() {
  int64_t count = 1;
  for (int64_t size : getShape())
    count *= size;
  return count;
}

int64_t MeshOp::getAxisIndex(StringRef name) {
  for (unsigned axis = 0; axis < getAxisNames().size(); ++axis)
    if (getAxisName(axis) == name)
      return axis;
  return -1;
}

StringRef MeshOp::getAxisName(unsigned axis) {
  return cast<StringAttr>(getAxisNames()[axis]).getValue();
}

LogicalResult MeshOp::verify() { return verifyMesh(*this); }

//===- sbp.primitive -----------------------------------------------------===//

LogicalResult PrimitiveOp::verify() {
  StringRef name = getOpType();
  if (name.empty() || !(name.front() >= 'A' && name.front() <= 'Z'))
    return emitOpError() << "expected an ONNX operator name as op_type, got '"
                         << name << "'";
  return success();
}

//===- collectives
//---------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  SbpParallel from = SbpParallel::partial(getReduction());
  std::string expected = toString(from) + " -> B";
  return verifyCollective(*this, getMeshAttr(), getMeshAxes(), expected,
                          [&](const SbpParallel &in, const SbpParallel &out) {
                            return in == from && out.isBroadcast();
                          });
}

LogicalResult AllGatherOp::verify() {
  int64_t dim = getGatherDim();
  std::string expected = "S(" + std::to_string(dim) + ") -> B";
  return verifyCollective(*this, getMeshAttr(), getMeshAxes(), expected,
                          [&](const SbpParallel &in, const SbpParallel &out) {
                            return in.isSplit(dim) && out.isBroadcast();
                          });
}

LogicalResult ReduceScatterOp::verify() {
  int64_t dim = getScatterDim();
  std::string expected = "P -> S(" + std::to_string(dim) + ")";
  return verifyCollective(*this, getMeshAttr(), getMeshAxes(), expected,
                          [&](const SbpParallel &in, const SbpParallel &out) {
                            return in == SbpParallel::partial() &&
                                   out.isSplit(dim);
                          });
}

LogicalResult AllToAllOp::verify() {
  int64_t from = getConcatDim(), to = getSplitDim();
  if (from == to)
    return emitOpError() << "expected split_dim and concat_dim to differ, got "
                         << from << " for both";
  std::string expected =
      "S(" + std::to_string(from) + ") -> S(" + std::to_string(to) + ")";
  return verifyCollective(*this, getMeshAttr(), getMeshAxes(), expected,
                          [&](const SbpParallel &in, const SbpParallel &out) {
                            return in.isSplit(from) && out.isSplit(to);
                          });
}

LogicalResult LocalRelayoutOp::verify() {
  return verifyCollective(*this, getMeshAttr(), getMeshAxes(),
                          "B -> S, B -> P or S -> P", isLocalTransition);
}

//===- send / recv
//---------------------------------------------------------===//

LogicalResult SendOp::verify() { return verifySend(*this); }
LogicalResult RecvOp::verify() { return verifyRecv(*this); }

} // namespace autoddl::sbp
