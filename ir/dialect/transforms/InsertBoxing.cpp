//===- InsertBoxing.cpp - sbp-insert-boxing -------------------------------===//
//
// Converts each value to the layout its consumer reads it in, one mesh axis at
// a time (OneFlow's eager nd-boxing, generic_symmetric_nd_sbp_boxing.cpp, with
// direct 1-D collectives where they are exact).
//
// Nesting: when several mesh axes split one tensor dimension, the earlier axis
// splits first, so a device's piece is a slice of a slice. A 1-D collective on
// axis k is exact only if no later axis also splits a dimension it moves. The
// plan therefore
//   1. marks the axes that change, closed under "a later axis that splits a
//      dimension a marked axis moves is marked too";
//   2. goes from the last mesh axis to the first and brings each marked axis to
//      B (all_gather, all_reduce), or straight to its target (reduce_scatter,
//      all_to_all, or a local S -> P) when no other marked axis moves the same
//      dimensions;
//   3. goes from the first axis to the last and slices B into the remaining
//      targets locally (B -> S, B -> P), in one sbp.local_relayout.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/SbpLayout.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "sbp-insert-boxing"

using namespace mlir;

namespace autoddl::sbp {

#define GEN_PASS_DEF_INSERTBOXINGPASS
#include "ir/dialect/Passes.h.inc"

namespace {

/// One op of a boxing sequence: the collective and the layouts around it.
struct BoxingStep {
  enum class Kind { AllGather, AllReduce, ReduceScatter, AllToAll, Local };
  Kind kind;
  SmallVector<int64_t, 2> axes;
  SmallVector<SbpParallel> from, to; // whole nd layouts before and after
};

/// The dims a layout moves on one axis: its split dims before and after.
SmallVector<int64_t, 2> movedDims(const SbpParallel &from,
                                  const SbpParallel &to) {
  SmallVector<int64_t, 2> dims;
  if (from.isSplit())
    dims.push_back(from.dim);
  if (to.isSplit() && !llvm::is_contained(dims, to.dim))
    dims.push_back(to.dim);
  return dims;
}

/// The steps converting `from` into `to`, or failure with `why` set.
FailureOr<SmallVector<BoxingStep>> planBoxing(ArrayRef<SbpParallel> from,
                                              ArrayRef<SbpParallel> to,
                                              std::string &why) {
  unsigned rank = from.size();
  SmallVector<bool> marked(rank);
  for (unsigned k = 0; k < rank; ++k)
    marked[k] = from[k] != to[k];
  for (bool changed = true; changed;) {
    changed = false;
    for (unsigned k = 0; k < rank; ++k) {
      if (!marked[k])
        continue;
      for (int64_t d : movedDims(from[k], to[k]))
        for (unsigned later = k + 1; later < rank; ++later)
          if (!marked[later] &&
              (from[later].isSplit(d) || to[later].isSplit(d)))
            marked[later] = changed = true;
    }
  }
  auto sharesDims = [&](unsigned k) {
    for (unsigned other = 0; other < rank; ++other) {
      if (other == k || !marked[other])
        continue;
      for (int64_t d : movedDims(from[k], to[k]))
        if (llvm::is_contained(movedDims(from[other], to[other]), d))
          return true;
    }
    return false;
  };

  SmallVector<BoxingStep> steps;
  SmallVector<SbpParallel> cur(from.begin(), from.end());
  auto step = [&](BoxingStep::Kind kind, unsigned k, SbpParallel next) {
    BoxingStep s{kind, {int64_t(k)}, cur, {}};
    cur[k] = next;
    s.to = cur;
    steps.push_back(std::move(s));
  };
  const SbpParallel sum = SbpParallel::partial();
  using Kind = BoxingStep::Kind;

  for (int k = int(rank) - 1; k >= 0; --k) {
    if (!marked[k])
      continue;
    SbpParallel target = to[k];
    if (target.isPartial() && target != sum && cur[k] != target) {
      why = "cannot produce " + toString(target) + " from " + toString(cur[k]);
      return failure();
    }
    bool direct = cur[k] != target && !sharesDims(k);
    if (direct && cur[k].isSplit() && target.isSplit())
      step(Kind::AllToAll, k, target);
    else if (direct && cur[k] == sum && target.isSplit())
      step(Kind::ReduceScatter, k, target);
    else if (direct && cur[k].isSplit() && target == sum)
      step(Kind::Local, k, target);
    else if (cur[k].isSplit())
      step(Kind::AllGather, k, SbpParallel::broadcast());
    else if (cur[k].isPartial() && cur[k] != target)
      step(Kind::AllReduce, k, SbpParallel::broadcast());
  }

  BoxingStep local{Kind::Local, {}, cur, {}};
  for (unsigned k = 0; k < rank; ++k) {
    if (cur[k] == to[k])
      continue;
    assert(isLocalTransition(cur[k], to[k]) && "phase 2 only slices B");
    local.axes.push_back(k);
    cur[k] = to[k];
  }
  if (!local.axes.empty()) {
    local.to = cur;
    steps.push_back(std::move(local));
  }
  return steps;
}

struct InsertBoxingPass : impl::InsertBoxingPassBase<InsertBoxingPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  /// Inserts the steps before `consumer`; returns the converted value.
  Value materialize(OpBuilder &builder, Operation *consumer, Value value,
                    FlatSymbolRefAttr mesh, ArrayRef<BoxingStep> steps);
};

Value InsertBoxingPass::materialize(OpBuilder &builder, Operation *consumer,
                                    Value value, FlatSymbolRefAttr mesh,
                                    ArrayRef<BoxingStep> steps) {
  MLIRContext *context = builder.getContext();
  Location loc = consumer->getLoc();
  for (const BoxingStep &s : steps) {
    auto axes = builder.getDenseI64ArrayAttr(s.axes);
    SbpParallel in = s.from[s.axes[0]], out = s.to[s.axes[0]];
    Operation *op = nullptr;
    switch (s.kind) {
    case BoxingStep::Kind::AllGather:
      op = builder.create<AllGatherOp>(loc, value, mesh, axes,
                                       builder.getI64IntegerAttr(in.dim));
      break;
    case BoxingStep::Kind::AllReduce:
      op = builder.create<AllReduceOp>(
          loc, value, mesh, axes,
          ReductionKindAttr::get(context, in.reduction));
      break;
    case BoxingStep::Kind::ReduceScatter:
      op = builder.create<ReduceScatterOp>(loc, value, mesh, axes,
                                           builder.getI64IntegerAttr(out.dim));
      break;
    case BoxingStep::Kind::AllToAll:
      op = builder.create<AllToAllOp>(loc, value, mesh, axes,
                                      builder.getI64IntegerAttr(out.dim),
                                      builder.getI64IntegerAttr(in.dim));
      break;
    case BoxingStep::Kind::Local:
      op = builder.create<LocalRelayoutOp>(loc, value, mesh, axes);
      break;
    }
    NdSbpAttr fromLayout = NdSbpAttr::get(context, mesh, s.from);
    NdSbpAttr toLayout = NdSbpAttr::get(context, mesh, s.to);
    op->setAttr(kSignatureAttr,
                SignatureAttr::get(context, mesh, {fromLayout}, {toLayout}));
    for (StringRef name : {kPlacementAttr.data(), kLayerAttr.data()})
      if (Attribute attr = consumer->getAttr(name))
        op->setAttr(name, attr);
    LLVM_DEBUG(llvm::dbgs() << "  " << *op << "\n");
    value = op->getResult(0);
  }
  return value;
}

void InsertBoxingPass::runOnOperation() {
  bool anyFailed = false;
  // One conversion per (value, layout) and block, shared by its consumers.
  DenseMap<std::pair<Value, Attribute>, Value> converted;
  getOperation().walk([&](Operation *consumer) {
    if (consumer->getNumOperands() == 0 ||
        !llvm::isa_and_present<SbpDialect>(consumer->getDialect()))
      return;
    if (!consumer->hasAttr(kSignatureAttr)) {
      consumer->emitError() << "expected an sbp.sig on every sbp op before "
                               "boxing, got none (run "
                               "sbp-assign-data-parallel or a planner first)";
      anyFailed = true;
      return;
    }
    for (unsigned i = 0; i < consumer->getNumOperands(); ++i) {
      Value value = consumer->getOperand(i);
      NdSbpAttr read = getReadLayout(consumer, i);
      NdSbpAttr produced = getProducedLayout(value);
      if (!produced) {
        consumer->emitError()
            << "expected a known layout for operand #" << i
            << " (an sbp.sig on its producer or sbp.nd on the argument), "
               "got none";
        anyFailed = true;
        continue;
      }
      if (produced == read)
        continue;
      if (produced.getMesh() != read.getMesh()) {
        consumer->emitError()
            << "expected operand #" << i << " on mesh " << read.getMesh()
            << ", got one on " << produced.getMesh()
            << " (values cross meshes through sbp.send/sbp.recv)";
        anyFailed = true;
        continue;
      }
      auto key = std::make_pair(value, Attribute(read));
      auto cached = converted.find(key);
      if (cached != converted.end() &&
          cached->second.getParentBlock() == consumer->getBlock()) {
        consumer->setOperand(i, cached->second);
        continue;
      }
      SmallVector<SbpParallel> from, to;
      for (unsigned k = 0; k < read.getAxes().size(); ++k) {
        from.push_back(produced.getAxis(k));
        to.push_back(read.getAxis(k));
      }
      std::string why;
      FailureOr<SmallVector<BoxingStep>> steps = planBoxing(from, to, why);
      if (failed(steps)) {
        consumer->emitError()
            << "expected a boxing for operand #" << i << " from " << produced
            << " to " << read << ", got none: " << why;
        anyFailed = true;
        continue;
      }
      LLVM_DEBUG(llvm::dbgs()
                 << "boxing operand #" << i << " of " << consumer->getName()
                 << " at " << consumer->getLoc() << ": " << produced << " -> "
                 << read << "\n");
      OpBuilder builder(consumer);
      Value result =
          materialize(builder, consumer, value, read.getMesh(), *steps);
      converted[key] = result;
      consumer->setOperand(i, result);
    }
  });
  if (anyFailed)
    signalPassFailure();
}

} // namespace
} // namespace autoddl::sbp
