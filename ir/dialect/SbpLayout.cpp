//===- SbpLayout.cpp - layouts of values, signatures over a mesh ----------===//
#include "ir/dialect/SbpLayout.h"

#include "ir/dialect/Verifiers.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace autoddl::sbp {

//===----------------------------------------------------------------------===//
// SbpParallel.h
//===----------------------------------------------------------------------===//

SbpParallel dual(const SbpParallel &layout) {
  if (layout.isBroadcast())
    return SbpParallel::partial();
  if (layout.isPartial())
    return SbpParallel::broadcast();
  return layout;
}

SbpSignature dualSignature(const SbpSignature &forward) {
  SbpSignature backward;
  for (const SbpParallel &out : forward.outputs)
    backward.inputs.push_back(dual(out));
  for (const SbpParallel &in : forward.inputs)
    backward.outputs.push_back(dual(in));
  return backward;
}

SbpSignature allBroadcast(unsigned numInputs, unsigned numOutputs) {
  SbpSignature sig;
  sig.inputs.assign(numInputs, SbpParallel::broadcast());
  sig.outputs.assign(numOutputs, SbpParallel::broadcast());
  return sig;
}

bool isLocalTransition(const SbpParallel &in, const SbpParallel &out) {
  if (in.isBroadcast())
    return out.isSplit() || out == SbpParallel::partial();
  return in.isSplit() && out == SbpParallel::partial();
}

void print(llvm::raw_ostream &os, const SbpParallel &layout) {
  switch (layout.kind) {
  case SbpParallel::Kind::Split:
    os << "S(" << layout.dim << ")";
    return;
  case SbpParallel::Kind::Broadcast:
    os << "B";
    return;
  case SbpParallel::Kind::Partial:
    os << "P";
    if (layout.reduction != ReductionKind::Sum)
      os << "(" << stringifyReductionKind(layout.reduction) << ")";
    return;
  }
}

void print(llvm::raw_ostream &os, const SbpSignature &signature) {
  auto list = [&](ArrayRef<SbpParallel> layouts) {
    os << "(";
    llvm::interleaveComma(layouts, os,
                          [&](const SbpParallel &l) { print(os, l); });
    os << ")";
  };
  list(signature.inputs);
  os << " -> ";
  list(signature.outputs);
}

std::string toString(const SbpParallel &layout) {
  std::string s;
  llvm::raw_string_ostream os(s);
  print(os, layout);
  return s;
}

std::string toString(const SbpSignature &signature) {
  std::string s;
  llvm::raw_string_ostream os(s);
  print(os, signature);
  return s;
}

//===----------------------------------------------------------------------===//
// Attributes <-> values
//===----------------------------------------------------------------------===//

Attribute toAttr(MLIRContext *context, const SbpParallel &layout) {
  switch (layout.kind) {
  case SbpParallel::Kind::Split:
    return SplitAttr::get(context, layout.dim);
  case SbpParallel::Kind::Broadcast:
    return BroadcastAttr::get(context);
  case SbpParallel::Kind::Partial:
    return PartialAttr::get(context, layout.reduction);
  }
  return {};
}

SbpParallel fromAttr(Attribute attr) {
  if (auto split = dyn_cast<SplitAttr>(attr))
    return SbpParallel::split(split.getDim());
  if (auto partial = dyn_cast<PartialAttr>(attr))
    return SbpParallel::partial(partial.getReduction());
  return SbpParallel::broadcast();
}

SbpParallel NdSbpAttr::getAxis(unsigned axis) const {
  return fromAttr(getAxes()[axis]);
}

NdSbpAttr NdSbpAttr::get(MLIRContext *context, FlatSymbolRefAttr mesh,
                         ArrayRef<SbpParallel> axes) {
  SmallVector<Attribute> attrs;
  for (const SbpParallel &axis : axes)
    attrs.push_back(toAttr(context, axis));
  return get(context, mesh, attrs);
}

//===----------------------------------------------------------------------===//
// Layouts of values
//===----------------------------------------------------------------------===//

NdSbpAttr getProducedLayout(Value value) {
  if (auto result = dyn_cast<OpResult>(value)) {
    auto sig = result.getOwner()->getAttrOfType<SignatureAttr>(kSignatureAttr);
    if (!sig || result.getResultNumber() >= sig.getOutputs().size())
      return {};
    return sig.getOutputs()[result.getResultNumber()];
  }
  auto arg = cast<BlockArgument>(value);
  auto function = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!function || arg.getOwner() != &function.getFunctionBody().front())
    return {};
  return function.getArgAttrOfType<NdSbpAttr>(arg.getArgNumber(),
                                              kArgLayoutAttr);
}

NdSbpAttr getReadLayout(Operation *user, unsigned index) {
  auto sig = user->getAttrOfType<SignatureAttr>(kSignatureAttr);
  if (!sig || index >= sig.getInputs().size())
    return {};
  return sig.getInputs()[index];
}

//===----------------------------------------------------------------------===//
// Signatures
//===----------------------------------------------------------------------===//

SmallVector<SbpSignature> getValidSignatures1D(SbpOpInterface op) {
  SmallVector<SbpSignature> valid;
  for (SbpSignature &sig : op.getSbpSignatures())
    if (!llvm::is_contained(valid, sig))
      valid.push_back(std::move(sig));
  SbpSignature broadcast =
      allBroadcast(op->getNumOperands(), op->getNumResults());
  if (!llvm::is_contained(valid, broadcast))
    valid.push_back(broadcast);
  return valid;
}

SbpSignature projectSignature(SignatureAttr sig, unsigned axis) {
  SbpSignature projected;
  for (NdSbpAttr in : sig.getInputs())
    projected.inputs.push_back(in.getAxis(axis));
  for (NdSbpAttr out : sig.getOutputs())
    projected.outputs.push_back(out.getAxis(axis));
  return projected;
}

SignatureAttr buildSignature(MLIRContext *context, FlatSymbolRefAttr mesh,
                             ArrayRef<SbpSignature> perAxis) {
  assert(!perAxis.empty() && "a mesh has at least one axis");
  auto layoutOf = [&](auto member, unsigned index) {
    SmallVector<SbpParallel> axes;
    for (const SbpSignature &sig : perAxis)
      axes.push_back((sig.*member)[index]);
    return NdSbpAttr::get(context, mesh, axes);
  };
  SmallVector<NdSbpAttr> inputs, outputs;
  for (unsigned i = 0; i < perAxis[0].inputs.size(); ++i)
    inputs.push_back(layoutOf(&SbpSignature::inputs, i));
  for (unsigned i = 0; i < perAxis[0].outputs.size(); ++i)
    outputs.push_back(layoutOf(&SbpSignature::outputs, i));
  return SignatureAttr::get(context, mesh, inputs, outputs);
}

bool signatureFits(SbpOpInterface op, SignatureAttr sig, MeshOp mesh) {
  auto fits = [&](NdSbpAttr layout, Type type, unsigned valueIndex) {
    auto granule = [&](int64_t dim) {
      return op.getSplitGranule(valueIndex, dim);
    };
    return !checkLayoutFits(layout, type, mesh, granule);
  };
  Operation *raw = op.getOperation();
  for (auto [i, layout] : llvm::enumerate(sig.getInputs()))
    if (!fits(layout, raw->getOperand(i).getType(), i))
      return false;
  for (auto [i, layout] : llvm::enumerate(sig.getOutputs()))
    if (!fits(layout, raw->getResult(i).getType(), raw->getNumOperands() + i))
      return false;
  return true;
}

SmallVector<SignatureAttr> enumerateNdSignatures(SbpOpInterface op,
                                                 MeshOp mesh) {
  SmallVector<SbpSignature> oneD = getValidSignatures1D(op);
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  unsigned rank = mesh.getRank();
  SmallVector<SignatureAttr> result;
  // Odometer over the 1-D signature chosen on each axis; the last axis varies
  // fastest.
  SmallVector<unsigned> choice(rank, 0);
  SmallVector<SbpSignature> perAxis(rank);
  while (true) {
    for (unsigned axis = 0; axis < rank; ++axis)
      perAxis[axis] = oneD[choice[axis]];
    SignatureAttr sig = buildSignature(op->getContext(), meshRef, perAxis);
    if (signatureFits(op, sig, mesh))
      result.push_back(sig);
    int axis = int(rank) - 1;
    while (axis >= 0 && ++choice[axis] == oneD.size())
      choice[axis--] = 0;
    if (axis < 0)
      break;
  }
  return result;
}

SignatureAttr getBackwardSignature(SbpOpInterface op, SignatureAttr forward) {
  unsigned rank = forward.getInputs().empty()
                      ? forward.getOutputs()[0].getAxes().size()
                      : forward.getInputs()[0].getAxes().size();
  SmallVector<SbpSignature> perAxis;
  for (unsigned axis = 0; axis < rank; ++axis)
    perAxis.push_back(op.getBackwardSignature(projectSignature(forward, axis)));
  return buildSignature(op->getContext(), forward.getMesh(), perAxis);
}

} // namespace autoddl::sbp
