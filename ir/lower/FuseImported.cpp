//===- FuseImported.cpp - lower, run the sbp-fuse-* passes, read back -----===//
//
// The fused module is read back op by op. Values are matched to the tensors of
// the graph given through what the lowering wrote: the function's arguments
// are its inputs in order, sbp.parameter carries the parameter's name, and
// every other op is located by the name of the op (or constant) it came
// from. A fused op is located at the root of the form it replaced (the
// patterns' choice), so it takes that op's name, result tensor and layer;
// when one pattern leaves several ops at one location (sbp-fuse-rotary's
// rotary, reshape and transpose), the last, if it computes a value of the
// replaced op's type, keeps the name and the others get ".<kind>" appended.
//
//===----------------------------------------------------------------------===//
#include "ir/lower/FuseImported.h"

#include "ir/dialect/OpSemanticsAdapter.h"
#include "ir/dialect/Passes.h"
#include "ir/dialect/SbpDialect.h"
#include "ir/lower/BuildSbpModule.h"

#include "ir/import/ResolvePrimitive.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include "llvm/ADT/DenseMap.h"
#include <cstdlib>

#include <map>
#include <set>

using namespace mlir;

namespace autoddl {
namespace {

/// The name a location gives an op: a NameLoc's, or the first inside a
/// FusedLoc; "" for any other.
std::string locName(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string n = locName(inner); !n.empty())
        return n;
  return "";
}

/// An op of the fused module to read back, with the name it gets.
struct Read {
  Operation *op;
  std::string name;
  int from; // the graph-given op named by its location, or -1
};

/// `reads` in a structural order: depth-first from `root` (the loss),
/// operands in order, each op after its operands (ops not reached keep their
/// place at the end). Identical layers then list their ops alike whatever
/// the exporter's node order, as the planner's layer collapse (and so
/// pipelining) needs; fused ops hide that order, unfused primitives do not.
std::vector<Read> structuralOrder(std::vector<Read> reads, Value root) {
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, r] : llvm::enumerate(reads))
    index[r.op] = i;
  std::vector<Read> out;
  std::vector<bool> done(reads.size());
  // Iterative post-order: (op, next operand to visit).
  std::vector<std::pair<size_t, unsigned>> stack;
  auto push = [&](Value v) {
    Operation *def = v.getDefiningOp();
    auto it = def ? index.find(def) : index.end();
    if (it != index.end() && !done[it->second]) {
      done[it->second] = true; // entered: not pushed twice
      stack.push_back({it->second, 0});
    }
  };
  push(root);
  while (!stack.empty()) {
    auto &[i, next] = stack.back();
    Operation *op = reads[i].op;
    if (next < op->getNumOperands()) {
      push(op->getOperand(next++));
      continue;
    }
    out.push_back(reads[i]);
    stack.pop_back();
  }
  for (auto [i, r] : llvm::enumerate(reads))
    if (!done[i])
      out.push_back(r);
  return out;
}

/// Reads the fused function back into `out.graph`; on a problem sets
/// `out.error` or the leftover primitive and returns.
class Reader {
public:
  Reader(const ModelGraph &g, FusedGraph &out) : g(g), out(out) {
    for (auto [i, op] : llvm::enumerate(g.ops)) {
      opByName[op.name] = i;
      for (int t : op.results)
        producerOf[t] = i;
    }
    for (auto [i, t] : llvm::enumerate(g.tensors))
      tensorByName[t.name] = i;
  }

  void run(func::FuncOp function);
  bool addOp(const Read &r, llvm::DenseMap<Value, int> &tensorOf,
             const std::vector<bool> &survived);

private:
  /// The graph-given tensor a value stands for (-1 for a new one).
  int original(Value v) const {
    auto it = origOf.find(v);
    return it == origOf.end() ? -1 : it->second;
  }
  std::string uniqueTensorName(const std::string &base);
  int replacedLayer(int root, const std::vector<bool> &survived) const;
  /// What a message names graph-given op `from` by: its position in the
  /// file, or its index in the graph given (-1 for a new op).
  int positionOf(int from) const {
    return from < 0 ? -1
                    : (g.ops[from].position >= 0 ? g.ops[from].position : from);
  }
  /// Whether `v` has the type of the result of the graph-given op `from`.
  bool sameType(Value v, int from) const {
    std::optional<ops::ValueType> t = sbp::toValueType(v.getType());
    const OpDef &op = g.ops[from];
    if (!t || op.results.empty())
      return false;
    const TensorDef &r = g.tensors[op.results[0]];
    return t->shape == r.shape && t->dtype == r.dtype;
  }

  const ModelGraph &g;
  FusedGraph &out;
  std::map<std::string, int> opByName, tensorByName;
  std::map<int, int> producerOf;     // graph-given tensor -> op
  llvm::DenseMap<Value, int> origOf; // value -> graph-given tensor
  std::set<std::string> takenTensorNames;
};

std::string Reader::uniqueTensorName(const std::string &base) {
  std::string name = base;
  for (int n = 2; tensorByName.count(name) || takenTensorNames.count(name); ++n)
    name = base + "#" + std::to_string(n);
  takenTensorNames.insert(name);
  return name;
}

/// The layer of the ops a fused op at `root` replaced: the root's, or where
/// the front end left it -1, the first set among the ops gone with the form
/// (what the root reads through graph-given ops that did not survive).
int Reader::replacedLayer(int root, const std::vector<bool> &survived) const {
  std::vector<int> stack{root};
  std::set<int> seen;
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (!seen.insert(i).second)
      continue;
    if (g.ops[i].layer >= 0)
      return g.ops[i].layer;
    for (int t : g.ops[i].operands)
      if (auto p = producerOf.find(t);
          p != producerOf.end() && !survived[p->second])
        stack.push_back(p->second);
  }
  return -1;
}

/// The op of read `r` in the fused graph, its operands and result tensors
/// (`tensorOf`, new results added); false with out's error or refused
/// primitive set.
bool Reader::addOp(const Read &r, llvm::DenseMap<Value, int> &tensorOf,
                   const std::vector<bool> &survived) {
  OpDef def;
  def.kind = sbp::getOpKind(r.op).str();
  def.name = r.name;
  std::string error;
  std::optional<ops::Attrs> attrs = sbp::getOpsAttrs(r.op, &error);
  if (!attrs) {
    out.error = "op '" + r.name + "': " + error;
    return false;
  }
  def.attrs = std::move(*attrs);
  std::vector<ops::ValueType> operandTypes;
  for (Value v : r.op->getOperands()) {
    def.operands.push_back(tensorOf.lookup(v));
    operandTypes.push_back(*sbp::toValueType(v.getType()));
  }
  // Checked as GraphBuilder checks a front end's ops: the shared rules
  // infer the result the module has. A primitive has no shared rule (its
  // type is the front end's); its kernels must run it, on these shapes.
  const bool primitive = def.kind == "primitive";
  ops::InferResult inferred =
      primitive ? ops::InferResult{}
                : ops::inferResultTypes(def.kind, operandTypes, def.attrs);
  std::optional<ops::ValueType> type =
      sbp::toValueType(r.op->getResult(0).getType());
  if (!type || (!primitive && (!inferred.ok() || inferred.results.size() != 1 ||
                               inferred.results[0].shape != type->shape ||
                               inferred.results[0].dtype != type->dtype))) {
    out.error = "op '" + r.name + "' (" + def.kind +
                "): the fused op does not follow its shape rule" +
                (inferred.ok() ? "" : ": " + inferred.error);
    return false;
  }
  if (primitive) {
    std::vector<ops::Shape> shapes;
    for (const ops::ValueType &t : operandTypes)
      shapes.push_back(t.shape);
    onnx_kernels::Primitive p;
    if (std::string why =
            resolvePrimitive(p, out.graph, def, shapes, type->shape);
        !why.empty()) {
      out.primitiveName = locName(r.op->getLoc());
      out.primitiveType = cast<sbp::PrimitiveOp>(r.op).getOpType().str();
      out.primitivePosition = positionOf(r.from);
      out.primitiveWhy = why;
      return false;
    }
  }
  Value result = r.op->getResult(0);
  if (!tensorOf.count(result)) {
    TensorDef t;
    t.name = uniqueTensorName(r.name);
    t.shape = type->shape;
    t.dtype = type->dtype;
    tensorOf[result] = out.graph.tensors.size();
    out.graph.tensors.push_back(std::move(t));
  }
  def.results = {tensorOf[result]};
  if (auto layer = r.op->getAttrOfType<IntegerAttr>(sbp::kLayerAttr))
    def.layer = layer.getInt();
  else if (r.from >= 0)
    def.layer = survived[r.from] ? g.ops[r.from].layer
                                 : replacedLayer(r.from, survived);
  if (r.from >= 0)
    def.position = g.ops[r.from].position;
  out.graph.ops.push_back(std::move(def));
  return true;
}

void Reader::run(func::FuncOp function) {
  Block &body = function.getBody().front();
  int arg = 0;
  for (auto [i, t] : llvm::enumerate(g.tensors))
    if (t.role == TensorRole::Input)
      origOf[body.getArgument(arg++)] = i;

  // Names: each op's location, the last op at a location keeping it.
  SmallVector<Operation *> computing;
  std::map<std::string, int> atLocation;
  for (Operation &op : body.without_terminator()) {
    if (auto p = dyn_cast<sbp::ParameterOp>(op)) {
      origOf[p.getResult()] = tensorByName.at(p.getName().str());
      continue;
    }
    if (isa<sbp::ConstantOp>(op)) {
      origOf[op.getResult(0)] = tensorByName.at(locName(op.getLoc()));
      continue;
    }
    computing.push_back(&op);
    ++atLocation[locName(op.getLoc())];
  }

  std::vector<Read> reads;
  std::set<std::string> opNames;
  for (auto [i, op] : llvm::enumerate(computing)) {
    std::string loc = locName(op->getLoc());
    auto known = opByName.find(loc);
    int from = known == opByName.end() ? -1 : known->second;
    std::string kind = sbp::getOpKind(op).str();
    std::string name = loc.empty() ? kind + "#" + std::to_string(i) : loc;
    // The replaced op's name (and tensor) go to the op computing its value:
    // the last at the location, of the same type.
    bool sameValue = from < 0 || sameType(op->getResult(0), from);
    if (--atLocation[loc] > 0 || !sameValue || opNames.count(name))
      name = loc + "." + kind;
    for (int n = 2; opNames.count(name); ++n)
      name = loc + "." + kind + "#" + std::to_string(n);
    opNames.insert(name);
    // A primitive with a kernel (backends/common/OnnxPrimitive.h) stays, to
    // run as it is; any other refuses the model.
    auto p = dyn_cast<sbp::PrimitiveOp>(op);
    if (p && !onnx_kernels::primitiveSupported(p.getOpType().str())) {
      if (out.primitiveName.empty()) {
        out.primitiveName = loc;
        out.primitiveType = p.getOpType().str();
        out.primitivePosition = positionOf(from);
      }
      continue;
    }
    // The name kept: the result is the replaced op's result tensor.
    if (from >= 0 && name == loc)
      origOf[op->getResult(0)] = g.ops[from].results[0];
    reads.push_back({op, name, from});
  }
  if (!out.primitiveName.empty())
    return;
  if (llvm::any_of(reads,
                   [](const Read &r) { return isa<sbp::PrimitiveOp>(r.op); }))
    reads =
        structuralOrder(std::move(reads), body.getTerminator()->getOperand(0));
  // A graph-given op survived when an op of its kind still has its name.
  std::vector<bool> survived(g.ops.size());
  for (const Read &r : reads)
    if (r.from >= 0 && r.name == g.ops[r.from].name &&
        sbp::getOpKind(r.op) == g.ops[r.from].kind)
      survived[r.from] = true;

  // Tensors: the graph-given ones still read or produced, in their order,
  // then the new results.
  llvm::DenseMap<Value, int> tensorOf;
  std::vector<int> kept(g.tensors.size(), -1);
  auto keep = [&](int i) {
    if (kept[i] < 0) {
      kept[i] = out.graph.tensors.size();
      out.graph.tensors.push_back(g.tensors[i]);
    }
  };
  std::vector<bool> live(g.tensors.size());
  for (const Read &r : reads)
    for (Value v : r.op->getResults())
      if (int i = original(v); i >= 0)
        live[i] = true;
  for (auto &[value, i] : origOf)
    if (g.tensors[i].role == TensorRole::Constant && !value.use_empty())
      live[i] = true;
  for (auto [i, t] : llvm::enumerate(g.tensors))
    if (t.role == TensorRole::Input || t.role == TensorRole::Parameter ||
        live[i])
      keep(i);
  for (auto &[value, i] : origOf)
    if (kept[i] >= 0)
      tensorOf[value] = kept[i];

  for (const Read &r : reads)
    if (!addOp(r, tensorOf, survived))
      return;
  Value loss = body.getTerminator()->getOperand(0);
  out.graph.loss = tensorOf.count(loss) ? tensorOf[loss] : -1;
}

/// The passes in the order fuseImported runs them.
using PassFactory = std::unique_ptr<Pass> (*)();
const std::vector<std::pair<std::string, PassFactory>> &fusePasses() {
  static const std::vector<std::pair<std::string, PassFactory>> passes = {
      {"sbp-fuse-linear", sbp::createFuseLinearPass},
      {"sbp-fuse-norms", sbp::createFuseNormsPass},
      {"sbp-fuse-activations", sbp::createFuseActivationsPass},
      {"sbp-fuse-rotary", sbp::createFuseRotaryPass},
      {"sbp-fuse-attention", sbp::createFuseAttentionPass}};
  return passes;
}

} // namespace

bool hasImportedPrimitives(const ModelGraph &g) {
  for (const TensorDef &t : g.tensors)
    if (t.role == TensorRole::Constant)
      return true;
  for (const OpDef &op : g.ops)
    if (op.kind == "primitive")
      return true;
  return false;
}

const std::vector<std::string> &fusePassNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto &pass : fusePasses())
      n.push_back(pass.first);
    return n;
  }();
  return names;
}

FusedGraph fuseImported(const ModelGraph &g,
                        const std::set<std::string> &skip) {
  FusedGraph out;
  MLIRContext context(MLIRContext::Threading::DISABLED);
  context.loadDialect<sbp::SbpDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = lowerToSbpModule(g, context, out.error);
  if (!module)
    return out;
  DiagnosticText diagnostics(&context);
  // As tests/lit/passes/fuse_pipeline.mlir runs them: rotary before
  // attention, whose Q and K it turns into sbp.rotary results.
  PassManager pm(&context);
  for (const auto &[name, create] : fusePasses())
    if (!skip.count(name))
      pm.addPass(create());
  // AUTODDL_FUSE_DUMP=PREFIX writes PREFIX.before.mlir and PREFIX.after.mlir:
  // the primitives a pattern did not match, as the passes saw them.
  const char *dump = std::getenv("AUTODDL_FUSE_DUMP");
  auto write = [&](const char *suffix) {
    std::error_code ec;
    llvm::raw_fd_ostream os(std::string(dump) + suffix, ec);
    if (!ec)
      module->print(os);
  };
  if (dump)
    write(".before.mlir");
  if (failed(pm.run(*module))) {
    out.error = diagnostics.str("the sbp-fuse passes failed");
    return out;
  }
  if (dump)
    write(".after.mlir");
  out.graph.name = g.name;
  out.graph.family = g.family;
  out.graph.numLayers = g.numLayers;
  out.graph.batch = g.batch;
  out.graph.seq = g.seq;
  out.graph.staticBatch = g.staticBatch;
  out.graph.staticBatchInput = g.staticBatchInput;
  out.graph.hfConfig = g.hfConfig;
  func::FuncOp function;
  module->walk([&](func::FuncOp f) { function = f; });
  Reader(g, out).run(function);
  if (out.error.empty() && out.primitiveName.empty() && out.graph.loss < 0)
    out.error = "the fused module does not return the loss of a model op";
  return out;
}

} // namespace autoddl
