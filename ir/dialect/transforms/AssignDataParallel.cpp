//===- AssignDataParallel.cpp - sbp-assign-data-parallel ------------------===//
//
// The baseline plan: data parallelism on one mesh axis, everything broadcast on
// the others. Each op, in program order, takes the 1-D signature on the data
// axis that agrees with the most already-known operand layouts (function
// arguments start split by batch, parameters broadcast), so batch splits flow
// from the inputs to the loss and no boxing is needed in between.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/SbpLayout.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "sbp-assign-data-parallel"

using namespace mlir;

namespace autoddl::sbp {

#define GEN_PASS_DEF_ASSIGNDATAPARALLELPASS
#include "ir/dialect/Passes.h.inc"

namespace {

struct AssignDataParallelPass
    : impl::AssignDataParallelPassBase<AssignDataParallelPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  FailureOr<MeshOp> findMesh();
};

FailureOr<MeshOp> AssignDataParallelPass::findMesh() {
  ModuleOp module = getOperation();
  if (!meshName.empty()) {
    auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
        module, StringAttr::get(module.getContext(), meshName));
    if (!mesh)
      return module.emitError()
             << "expected --mesh to name an sbp.mesh, got '" << meshName << "'";
    return mesh;
  }
  SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
  if (meshes.size() != 1) {
    Location at = meshes.size() > 1 ? meshes[1].getLoc() : module.getLoc();
    return emitError(at) << "expected one sbp.mesh (or --mesh=<name>), got "
                         << meshes.size();
  }
  return meshes.front();
}

/// How many of the op's operands `row` reads in the layout (on the data axis)
/// they are already produced in.
unsigned agreement(Operation *op, const SbpSignature &row, unsigned axis) {
  unsigned score = 0;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (NdSbpAttr produced = getProducedLayout(operand))
      score += produced.getAxis(axis) == row.inputs[i];
  return score;
}

void AssignDataParallelPass::runOnOperation() {
  FailureOr<MeshOp> mesh = findMesh();
  if (failed(mesh))
    return signalPassFailure();
  int64_t dataAxis = 0;
  if (!axisName.empty()) {
    dataAxis = mesh->getAxisIndex(axisName);
    if (dataAxis < 0) {
      mesh->emitError() << "expected --axis to name an axis of @"
                        << mesh->getSymName() << ", got '" << axisName << "'";
      return signalPassFailure();
    }
  }
  MLIRContext *context = &getContext();
  auto meshRef = FlatSymbolRefAttr::get(mesh->getSymNameAttr());
  unsigned rank = mesh->getRank();

  // Arguments: split along the batch dimension on the data axis when it
  // divides, else broadcast.
  getOperation().walk([&](FunctionOpInterface function) {
    for (unsigned i = 0; i < function.getNumArguments(); ++i) {
      if (function.getArgAttr(i, kArgLayoutAttr))
        continue;
      SmallVector<SbpParallel> axes(rank, SbpParallel::broadcast());
      auto type = dyn_cast<RankedTensorType>(function.getArgumentTypes()[i]);
      if (type && type.getRank() > 0 && !type.isDynamicDim(0) &&
          type.getDimSize(0) % mesh->getShape()[dataAxis] == 0)
        axes[dataAxis] = SbpParallel::split(0);
      function.setArgAttr(i, kArgLayoutAttr,
                          NdSbpAttr::get(context, meshRef, axes));
    }
  });

  getOperation().walk([&](SbpOpInterface op) {
    if (op->hasAttr(kSignatureAttr))
      return;
    SmallVector<SbpSignature> rows = getValidSignatures1D(op);
    SbpSignature broadcast =
        allBroadcast(op->getNumOperands(), op->getNumResults());
    // Best agreement first; ties keep table order, except that all-broadcast
    // wins a tie (a parameter, with no operands, stays whole).
    SmallVector<std::pair<unsigned, unsigned>> ranked; // (score, row index)
    for (auto [index, row] : llvm::enumerate(rows))
      ranked.push_back({agreement(op, row, dataAxis) * 2 + (row == broadcast),
                        unsigned(index)});
    llvm::stable_sort(ranked, [](auto a, auto b) { return a.first > b.first; });

    SmallVector<SbpSignature> perAxis(rank, broadcast);
    SignatureAttr chosen = buildSignature(context, meshRef, perAxis);
    for (auto [score, index] : ranked) {
      perAxis[dataAxis] = rows[index];
      SignatureAttr candidate = buildSignature(context, meshRef, perAxis);
      if (signatureFits(op, candidate, *mesh)) {
        chosen = candidate;
        break;
      }
    }
    LLVM_DEBUG(llvm::dbgs() << op->getName() << " @ " << op->getLoc() << ": "
                            << chosen << "\n");
    op->setAttr(kSignatureAttr, chosen);
  });
}

} // namespace
} // namespace autoddl::sbp
