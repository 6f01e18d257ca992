//===- Verifiers.cpp - every check of the sbp dialect, as small helpers ---===//
//
// Follows openxla/shardy's verifiers.cc: one helper per constraint, lower-case
// messages saying what was expected and what was got.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Verifiers.h"

#include "ir/dialect/OpSemanticsAdapter.h"
#include "ir/dialect/SbpLayout.h"
#include "ir/ops/SbpRules.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <mutex>
#include <type_traits>

using namespace mlir;

namespace autoddl::sbp {

//===----------------------------------------------------------------------===//
// One walk of a module for all its ops' lookups (verifyModule)
//===----------------------------------------------------------------------===//

namespace {

/// What an op's verifier looks up in the symbol table around it, gathered by
/// one walk. Without it each op scans the table for its mesh and counts the
/// meshes, and each send or recv walks the whole module for its peers:
/// O(ops x (meshes + transfers)) for a pipeline plan's module.
struct ScopeIndex {
  /// The first op of each symbol name in the table's block, as
  /// SymbolTable::lookupSymbolIn finds it.
  llvm::DenseMap<StringAttr, Operation *> symbols;
  int64_t meshes = 0; // sbp.mesh ops in that block (stageBound)
  /// Every send and recv under the table, by channel, in the order of
  /// Operation::walk (the order findPeers reports them in).
  llvm::DenseMap<int64_t, SmallVector<SendOp, 1>> sends;
  llvm::DenseMap<int64_t, SmallVector<RecvOp, 1>> recvs;

  template <typename PeerOp> const auto &byChannel() const {
    if constexpr (std::is_same_v<PeerOp, SendOp>)
      return sends;
    else
      return recvs;
  }
};

ScopeIndex indexScope(Operation *scope) {
  ScopeIndex index;
  if (scope->getNumRegions() > 0 && !scope->getRegion(0).empty()) {
    const StringAttr nameAttr =
        StringAttr::get(scope->getContext(), SymbolTable::getSymbolAttrName());
    for (Operation &top : scope->getRegion(0).front()) {
      index.meshes += isa<MeshOp>(top) ? 1 : 0;
      if (auto name = top.getAttrOfType<StringAttr>(nameAttr))
        index.symbols.try_emplace(name, &top);
    }
  }
  scope->walk([&](Operation *op) {
    if (auto send = dyn_cast<SendOp>(op))
      index.sends[int64_t(send.getChannel())].push_back(send);
    else if (auto recv = dyn_cast<RecvOp>(op))
      index.recvs[int64_t(recv.getChannel())].push_back(recv);
  });
  return index;
}

/// The indexes of the modules verifyModule is verifying, by module. MLIR
/// verifies functions on several threads, hence the lock; an index is
/// immutable while registered.
class ActiveIndexes {
public:
  static ActiveIndexes &get() {
    static ActiveIndexes instance;
    return instance;
  }
  void add(Operation *scope, const ScopeIndex *index) {
    std::lock_guard<std::mutex> lock(mutex_);
    byScope_[scope] = index;
  }
  void remove(Operation *scope) {
    std::lock_guard<std::mutex> lock(mutex_);
    byScope_.erase(scope);
  }
  const ScopeIndex *find(Operation *scope) {
    std::lock_guard<std::mutex> lock(mutex_);
    return byScope_.lookup(scope);
  }

private:
  std::mutex mutex_;
  llvm::DenseMap<Operation *, const ScopeIndex *> byScope_;
};

/// The index of the symbol table around `op` while verifyModule verifies it;
/// null otherwise (the verifiers then scan, as a lone mlir::verify does).
const ScopeIndex *indexAround(Operation *op, Operation *&scope) {
  scope = SymbolTable::getNearestSymbolTable(op);
  return scope ? ActiveIndexes::get().find(scope) : nullptr;
}

} // namespace

LogicalResult verifyModule(ModuleOp module) {
  const ScopeIndex index = indexScope(module);
  ActiveIndexes::get().add(module, &index);
  const LogicalResult verified = verify(module);
  ActiveIndexes::get().remove(module);
  return verified;
}

//===----------------------------------------------------------------------===//
// Attributes on their own
//===----------------------------------------------------------------------===//

LogicalResult verifySplitDim(EmitErrorFn emitError, int64_t dim) {
  if (dim < 0)
    return emitError() << "expected a split dimension >= 0, got " << dim;
  return success();
}

LogicalResult verifyAxisLayouts(EmitErrorFn emitError,
                                ArrayRef<Attribute> axes) {
  if (axes.empty())
    return emitError() << "expected at least one mesh-axis layout, got none";
  for (auto [i, axis] : llvm::enumerate(axes))
    if (!isa<SplitAttr, BroadcastAttr, PartialAttr>(axis))
      return emitError() << "expected layout #" << i
                         << " to be #sbp.split, #sbp.broadcast or "
                            "#sbp.partial, got "
                         << axis;
  return success();
}

LogicalResult verifySameMesh(EmitErrorFn emitError, FlatSymbolRefAttr mesh,
                             ArrayRef<NdSbpAttr> layouts) {
  for (NdSbpAttr layout : layouts)
    if (layout.getMesh() != mesh)
      return emitError() << "expected every layout of a signature on " << mesh
                         << ", got one on " << layout.getMesh();
  return success();
}

LogicalResult verifyStage(EmitErrorFn emitError, int64_t stage) {
  if (stage < 0)
    return emitError() << "expected a pipeline stage >= 0, got " << stage;
  return success();
}

//===----------------------------------------------------------------------===//
// Layouts in context
//===----------------------------------------------------------------------===//

std::optional<std::string>
checkLayoutFits(NdSbpAttr layout, Type type, MeshOp mesh,
                llvm::function_ref<int64_t(int64_t dim)> granule) {
  std::string message;
  llvm::raw_string_ostream os(message);
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor) {
    os << "expected a ranked tensor to lay out, got " << type;
    return message;
  }
  if (int64_t(layout.getAxes().size()) != mesh.getRank()) {
    os << "expected " << mesh.getRank() << " layout entries (one per axis of @"
       << mesh.getSymName() << "), got " << layout.getAxes().size();
    return message;
  }
  // The rule itself is plain C++ (ir/ops/SbpRules.h), shared with the plan
  // validator; dynamic sizes are passed as -1 (not checked).
  ops::Shape shape;
  for (int64_t dim = 0; dim < tensor.getRank(); ++dim)
    shape.push_back(tensor.isDynamicDim(dim) ? -1 : tensor.getDimSize(dim));
  std::vector<ops::AxisLayout> axes;
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  for (unsigned axis = 0; axis < mesh.getRank(); ++axis) {
    SbpParallel entry = layout.getAxis(axis);
    axes.push_back(entry.isSplit()     ? ops::AxisLayout::split(entry.dim)
                   : entry.isPartial() ? ops::AxisLayout::partial()
                                       : ops::AxisLayout::broadcast());
    sizes.push_back(mesh.getShape()[axis]);
    names.push_back(mesh.getAxisName(axis).str());
  }
  std::function<int64_t(int64_t)> unit;
  if (granule)
    unit = [&](int64_t dim) { return granule(dim); };
  std::string why = ops::layoutFitProblem(shape, axes, sizes, names, unit);
  if (why.empty())
    return std::nullopt;
  return why;
}

FailureOr<MeshOp> resolveMesh(Operation *from, FlatSymbolRefAttr symbol) {
  Operation *scope = nullptr;
  MeshOp mesh;
  if (const ScopeIndex *index = indexAround(from, scope))
    mesh = dyn_cast_or_null<MeshOp>(index->symbols.lookup(symbol.getAttr()));
  else
    mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(from, symbol);
  if (!mesh)
    return from->emitError()
           << "expected " << symbol << " to name an sbp.mesh, got no such mesh";
  return mesh;
}

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//

/// The op's split granule per value, or none for ops without the interface or
/// whose own invariants fail (their verifier reports that).
static std::optional<SbpOpInterface> verifiedInterface(Operation *op) {
  auto iface = dyn_cast<SbpOpInterface>(op);
  if (!iface || !checkOpSemantics(op).empty())
    return std::nullopt;
  return iface;
}

static LogicalResult verifySignatureOnOp(Operation *op, SignatureAttr sig) {
  if (sig.getInputs().size() != op->getNumOperands() ||
      sig.getOutputs().size() != op->getNumResults())
    return op->emitError() << "expected sbp.sig with " << op->getNumOperands()
                           << " operand and " << op->getNumResults()
                           << " result layouts, got " << sig.getInputs().size()
                           << " and " << sig.getOutputs().size();
  FailureOr<MeshOp> mesh = resolveMesh(op, sig.getMesh());
  if (failed(mesh))
    return failure();
  std::optional<SbpOpInterface> iface = verifiedInterface(op);

  auto checkValue = [&](NdSbpAttr layout, Type type, unsigned valueIndex,
                        StringRef what, unsigned index) -> LogicalResult {
    auto granule = [&](int64_t dim) {
      return iface ? iface->getSplitGranule(valueIndex, dim) : int64_t(1);
    };
    if (std::optional<std::string> why =
            checkLayoutFits(layout, type, *mesh, granule))
      return op->emitError()
             << "sbp.sig " << what << " #" << index << ": " << *why;
    return success();
  };
  for (auto [i, layout] : llvm::enumerate(sig.getInputs()))
    if (failed(
            checkValue(layout, op->getOperand(i).getType(), i, "operand", i)))
      return failure();
  for (auto [i, layout] : llvm::enumerate(sig.getOutputs()))
    if (failed(checkValue(layout, op->getResult(i).getType(),
                          op->getNumOperands() + i, "result", i)))
      return failure();

  if (!iface)
    return success();
  SmallVector<SbpSignature> valid = getValidSignatures1D(*iface);
  for (unsigned axis = 0; axis < mesh->getRank(); ++axis) {
    SbpSignature got = projectSignature(sig, axis);
    if (llvm::is_contained(valid, got))
      continue;
    InFlightDiagnostic diag = op->emitError()
                              << "expected a signature of " << op->getName()
                              << " on mesh axis '" << mesh->getAxisName(axis)
                              << "', got " << toString(got);
    std::string list;
    llvm::raw_string_ostream os(list);
    llvm::interleave(
        valid, os, [&](const SbpSignature &s) { print(os, s); }, "; ");
    diag.attachNote(mesh->getLoc()) << "valid on one axis: " << list;
    return diag;
  }
  return success();
}

/// The pipeline stages the module around `op` can hold: each stage runs on a
/// mesh of its own, so there are at most as many as sbp.mesh ops in the
/// nearest symbol table; 0 when it declares none (a module of ops alone).
static int64_t stageBound(Operation *op) {
  Operation *scope = nullptr;
  if (const ScopeIndex *index = indexAround(op, scope))
    return index->meshes;
  if (!scope || scope->getNumRegions() == 0 || scope->getRegion(0).empty())
    return 0;
  int64_t meshes = 0;
  for (Operation &top : scope->getRegion(0).front())
    meshes += isa<MeshOp>(top) ? 1 : 0;
  return meshes;
}

/// `stage` (of `what`: "pipeline stage", "peer stage") beyond stageBound.
static LogicalResult verifyStageInMesh(Operation *op, int64_t stage,
                                       StringRef what) {
  const int64_t bound = stageBound(op);
  if (bound > 0 && stage >= bound)
    return op->emitOpError()
           << "expected a " << what << " below " << bound
           << " (the module declares " << bound
           << " sbp.mesh, one per pipeline stage), got " << stage;
  return success();
}

static LogicalResult verifyPlacementOnOp(Operation *op,
                                         PlacementAttr placement) {
  if (failed(resolveMesh(op, placement.getMesh())))
    return failure();
  if (failed(verifyStageInMesh(op, placement.getStage(), "pipeline stage")))
    return failure();
  if (auto sig = op->getAttrOfType<SignatureAttr>(kSignatureAttr))
    if (sig.getMesh() != placement.getMesh())
      return op->emitError()
             << "expected sbp.sig on the placement's mesh "
             << placement.getMesh() << ", got " << sig.getMesh();
  return success();
}

/// sbp.classes: on a cross_entropy, at least one class and at most its logits'
/// last dimension; fewer only as a padded vocabulary of some tensor-parallel
/// degree (ops::paddedVocabulary, the one rule of the planner and programs).
static LogicalResult verifyClassesOnOp(Operation *op, Attribute value) {
  auto classes = dyn_cast<IntegerAttr>(value);
  if (!classes || isa<BoolAttr>(value) || classes.getInt() < 1)
    return op->emitError() << "expected " << kClassesAttr
                           << " to be an integer >= 1, got " << value;
  if (op->getName().getStringRef() != "sbp.cross_entropy")
    return op->emitError() << "expected " << kClassesAttr
                           << " on an sbp.cross_entropy, got it on "
                           << op->getName();
  auto logits = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!logits || logits.getRank() < 1 ||
      logits.isDynamicDim(logits.getRank() - 1))
    return success(); // the op's own verifier reports its operands
  const int64_t columns = logits.getShape().back(), n = classes.getInt();
  if (n == columns)
    return success();
  if (n > columns)
    return op->emitError() << "expected " << kClassesAttr << " at most the "
                           << columns << " columns of the logits, got " << n;
  for (int64_t parts = 2; n < columns && parts <= columns; ++parts)
    if (columns % parts == 0 && ops::paddedVocabulary(n, parts) == columns)
      return success();
  return op->emitError() << "expected " << kClassesAttr << " = " << n
                         << " to be the logits' " << columns
                         << " columns, or a vocabulary that tensor "
                            "parallelism pads to them (ops::paddedVocabulary)";
}

/// Attribute `name` of op, `value`, is an AttrT (printed as `syntax`) that
/// `verifyOnOp` accepts.
template <typename AttrT>
static LogicalResult verifyTypedAttr(Operation *op, StringRef name,
                                     Attribute value, StringRef syntax,
                                     LogicalResult (*verifyOnOp)(Operation *,
                                                                 AttrT)) {
  auto typed = dyn_cast<AttrT>(value);
  if (!typed)
    return op->emitError() << "expected " << name << " to be a " << syntax
                           << ", got " << value;
  return verifyOnOp(op, typed);
}

LogicalResult verifyDiscardableAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  Attribute value = attr.getValue();
  if (name == kSignatureAttr)
    return verifyTypedAttr<SignatureAttr>(op, name, value, "#sbp.sig",
                                          verifySignatureOnOp);
  if (name == kPlacementAttr)
    return verifyTypedAttr<PlacementAttr>(op, name, value, "#sbp.placement",
                                          verifyPlacementOnOp);
  if (name == kLayerAttr) {
    auto layer = dyn_cast<IntegerAttr>(value);
    if (!layer || isa<BoolAttr>(value) || layer.getInt() < 0)
      return op->emitError() << "expected " << kLayerAttr
                             << " to be an integer >= 0, got " << value;
    return success();
  }
  if (name == kClassesAttr)
    return verifyClassesOnOp(op, value);
  if (name == kArgLayoutAttr)
    return op->emitError() << "expected " << kArgLayoutAttr
                           << " on a function argument, got it on an op";
  return op->emitError()
         << "expected a discardable attribute of the sbp "
            "dialect (sbp.sig, sbp.placement, sbp.layer, sbp.classes), got '"
         << name << "'";
}

LogicalResult verifyArgumentAttribute(Operation *op, unsigned argIndex,
                                      NamedAttribute attr) {
  if (attr.getName() != kArgLayoutAttr)
    return op->emitError() << "expected " << kArgLayoutAttr
                           << " as the only sbp argument attribute, got '"
                           << attr.getName().strref() << "'";
  auto layout = dyn_cast<NdSbpAttr>(attr.getValue());
  if (!layout)
    return op->emitError() << "expected " << kArgLayoutAttr
                           << " to be a #sbp.nd, got " << attr.getValue();
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError() << "expected " << kArgLayoutAttr
                           << " on an argument of a function, got "
                           << op->getName();
  FailureOr<MeshOp> mesh = resolveMesh(op, layout.getMesh());
  if (failed(mesh))
    return failure();
  if (std::optional<std::string> why =
          checkLayoutFits(layout, function.getArgumentTypes()[argIndex], *mesh))
    return op->emitError() << kArgLayoutAttr << " of argument #" << argIndex
                           << ": " << *why;
  return success();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult verifyMesh(MeshOp mesh) {
  ArrayAttr names = mesh.getAxisNames();
  ArrayRef<int64_t> shape = mesh.getShape();
  if (names.size() != shape.size())
    return mesh.emitOpError()
           << "expected one size per axis name, got " << names.size()
           << " names and " << shape.size() << " sizes";
  if (shape.empty())
    return mesh.emitOpError() << "expected at least one axis, got none";
  llvm::SmallSet<StringRef, 4> seen;
  for (unsigned axis = 0; axis < shape.size(); ++axis) {
    StringRef name = mesh.getAxisName(axis);
    if (name.empty())
      return mesh.emitOpError()
             << "expected a name for axis #" << axis << ", got an empty string";
    if (!seen.insert(name).second)
      return mesh.emitOpError()
             << "expected distinct axis names, got '" << name << "' twice";
    if (shape[axis] < 1)
      return mesh.emitOpError() << "expected axis '" << name
                                << "' of size >= 1, got " << shape[axis];
  }
  if (std::optional<int64_t> first = mesh.getFirstDevice(); first && *first < 0)
    return mesh.emitOpError() << "expected first_device >= 0, got " << *first;
  return success();
}

LogicalResult verifyCollective(Operation *op, FlatSymbolRefAttr meshSymbol,
                               ArrayRef<int64_t> meshAxes, StringRef expected,
                               AxisTransitionCheck check) {
  auto sig = op->getAttrOfType<SignatureAttr>(kSignatureAttr);
  if (!sig)
    return op->emitOpError()
           << "expected an sbp.sig giving the layouts it converts between, "
              "got none";
  if (sig.getMesh() != meshSymbol)
    return op->emitOpError() << "expected sbp.sig on " << meshSymbol
                             << ", got one on " << sig.getMesh();
  if (sig.getInputs().size() != 1 || sig.getOutputs().size() != 1)
    return op->emitOpError() << "expected sbp.sig with one operand and one "
                                "result layout";
  FailureOr<MeshOp> mesh = resolveMesh(op, meshSymbol);
  if (failed(mesh))
    return failure();
  if (meshAxes.empty())
    return op->emitOpError() << "expected at least one mesh axis, got none";
  llvm::SmallSet<int64_t, 4> listed;
  for (int64_t axis : meshAxes) {
    if (axis < 0 || axis >= mesh->getRank())
      return op->emitOpError() << "expected mesh axes in [0, "
                               << mesh->getRank() << "), got " << axis;
    if (!listed.insert(axis).second)
      return op->emitOpError()
             << "expected distinct mesh axes, got " << axis << " twice";
  }
  NdSbpAttr in = sig.getInputs()[0], out = sig.getOutputs()[0];
  for (unsigned axis = 0; axis < mesh->getRank(); ++axis) {
    SbpParallel from = in.getAxis(axis), to = out.getAxis(axis);
    if (listed.contains(axis)) {
      if (!check(from, to))
        return op->emitOpError() << "expected " << expected << " on mesh axis '"
                                 << mesh->getAxisName(axis) << "', got "
                                 << toString(from) << " -> " << toString(to);
    } else if (from != to) {
      return op->emitOpError()
             << "expected mesh axis '" << mesh->getAxisName(axis)
             << "' (not in mesh_axes) unchanged, got " << toString(from)
             << " -> " << toString(to);
    }
  }
  return success();
}

/// Checks what send and recv share: stage and channel ids, and a peer stage
/// other than the op's own.
static LogicalResult verifyStageTransfer(Operation *op, int64_t stage,
                                         int64_t channel) {
  if (stage < 0)
    return op->emitOpError() << "expected a peer stage >= 0, got " << stage;
  if (channel < 0)
    return op->emitOpError() << "expected a channel >= 0, got " << channel;
  if (failed(verifyStageInMesh(op, stage, "peer stage")))
    return failure();
  if (auto placement = op->getAttrOfType<PlacementAttr>(kPlacementAttr))
    if (placement.getStage() == stage)
      return op->emitOpError() << "expected a peer stage other than its own ("
                               << stage << "), got " << stage;
  return success();
}

/// The ops of kind `PeerOp` on `channel` in the symbol table around `op`.
template <typename PeerOp>
static SmallVector<PeerOp> findPeers(Operation *op, int64_t channel) {
  SmallVector<PeerOp> peers;
  Operation *scope = nullptr;
  if (const ScopeIndex *index = indexAround(op, scope)) {
    const auto &byChannel = index->byChannel<PeerOp>();
    auto it = byChannel.find(channel);
    if (it != byChannel.end())
      peers.append(it->second.begin(), it->second.end());
    return peers;
  }
  if (scope)
    scope->walk([&](PeerOp peer) {
      if (int64_t(peer.getChannel()) == channel)
        peers.push_back(peer);
    });
  return peers;
}

LogicalResult verifySend(SendOp op) {
  if (failed(verifyStageTransfer(op, op.getStage(), op.getChannel())))
    return failure();
  SmallVector<RecvOp> receivers = findPeers<RecvOp>(op, op.getChannel());
  if (receivers.size() != 1)
    return op.emitOpError() << "expected one sbp.recv on channel "
                            << op.getChannel() << ", got " << receivers.size();
  if (receivers[0].getType() != op.getInput().getType()) {
    InFlightDiagnostic diag = op.emitOpError()
                              << "expected the sbp.recv on channel "
                              << op.getChannel() << " to have type "
                              << op.getInput().getType() << ", got "
                              << receivers[0].getType();
    diag.attachNote(receivers[0].getLoc()) << "the sbp.recv";
    return diag;
  }
  return success();
}

// The types are compared from the send's side.
LogicalResult verifyRecv(RecvOp op) {
  if (failed(verifyStageTransfer(op, op.getStage(), op.getChannel())))
    return failure();
  size_t senders = findPeers<SendOp>(op, op.getChannel()).size();
  if (senders != 1)
    return op.emitOpError() << "expected one sbp.send on channel "
                            << op.getChannel() << ", got " << senders;
  return success();
}

LogicalResult verifyOpSemantics(Operation *op) {
  std::string error = checkOpSemantics(op);
  if (!error.empty())
    return op->emitOpError() << error;
  return success();
}

} // namespace autoddl::sbp
