//===- LowerPlan.cpp - plan choices -> annotated sbp module ---------------===//
#include "ir/lower/LowerPlan.h"
#include "ir/lower/BuildSbpModule.h"

#include "ir/dialect/Passes.h"
#include "ir/dialect/SbpConstants.h"
#include "ir/dialect/SbpDialect.h"
#include "ir/dialect/SbpLayout.h"
#include "ir/dialect/Verifiers.h"
#include "ir/ops/SbpRules.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace autoddl {
namespace {

using sbp::SbpParallel;
using sbp::SbpSignature;

/// "B", "P", "S(d)" -> layout; false on anything else.
bool parseLayout(const std::string &s, SbpParallel &out) {
  if (s == "B") {
    out = SbpParallel::broadcast();
    return true;
  }
  if (s == "P") {
    out = SbpParallel::partial();
    return true;
  }
  if (s.size() >= 4 && s.compare(0, 2, "S(") == 0 && s.back() == ')') {
    int64_t d = 0;
    for (size_t i = 2; i + 1 < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9')
        return false;
      d = d * 10 + (s[i] - '0');
    }
    out = SbpParallel::split(d);
    return true;
  }
  return false;
}

std::string meshName(int stage) { return "stage" + std::to_string(stage); }

/// The plan's vocabulary padding, written into `g`: where tp splits the rows
/// of a vocabulary it does not divide (the planner's uneven split), each
/// table so split is padded to ops::paddedVocabulary rows, so is the last
/// dimension of every lm_head's logits that only losses read, and those
/// losses learn their classes (returned per op index: sbp.classes). A table
/// also read otherwise stays as it is, and the verifier names the op.
std::map<int, int64_t> padVocabulary(ModelGraph &g, const PlannedModule &plan) {
  std::map<int, int64_t> classes;
  const int64_t rows = g.vocabularyRows();
  const int64_t padded = ops::paddedVocabulary(rows, plan.tp);
  if (rows == 0 || rows % plan.tp == 0 || padded == 0 ||
      plan.ops.size() != g.ops.size())
    return classes;
  const std::vector<std::vector<size_t>> readers = tensorReaders(g);
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    TensorDef &table = g.tensors[t];
    if (table.role != TensorRole::Parameter || table.shape.size() != 2 ||
        table.shape.front() != rows)
      continue;
    bool split = false, padsCleanly = true;
    for (size_t i : readers[t]) {
      const OpDef &op = g.ops[i];
      const bool asTable = op.operands.size() > 1 && op.operands[1] == int(t);
      padsCleanly &=
          asTable && op.operands[0] != int(t) &&
          (op.kind == "embedding" || logitsOnlyToLoss(g, readers, op));
      const std::vector<std::string> &tp = plan.ops[i].tp;
      split |= asTable && tp.size() > 1 && tp[1] == "S(0)";
    }
    if (!split || !padsCleanly)
      continue;
    table.shape.front() = padded;
    for (size_t i : readers[t]) {
      if (g.ops[i].kind != "linear")
        continue;
      const int logits = g.ops[i].results.front();
      g.tensors[size_t(logits)].shape.back() = padded;
      for (size_t loss : readers[size_t(logits)])
        classes[int(loss)] = rows;
    }
  }
  return classes;
}

struct Builder {
  MLIRContext &ctx;
  ModuleOp module;
  const ModelGraph &graph;
  const PlannedModule &plan;
  std::string error;
  std::map<std::string, int> opIndex;
  std::map<Operation *, int> stageOf;
  /// Losses over a padded vocabulary: their classes (padVocabulary).
  std::map<int, int64_t> classes;

  FlatSymbolRefAttr mesh(int stage) {
    return FlatSymbolRefAttr::get(&ctx, meshName(stage));
  }

  Attribute placement(int stage) {
    return parseAttribute("#sbp.placement<stage = " + std::to_string(stage) +
                              ", mesh = @" + meshName(stage) + ">",
                          &ctx);
  }

  /// The planned 1-D signature of op `i` on one axis.
  bool planned(int i, const std::vector<std::string> &layouts, Operation *op,
               SbpSignature &sig) {
    const size_t n = op->getNumOperands(), r = op->getNumResults();
    if (layouts.size() != n + r) {
      error = "op '" + graph.ops[i].name + "': expected " +
              std::to_string(n + r) + " planned layouts, got " +
              std::to_string(layouts.size());
      return false;
    }
    for (size_t k = 0; k < n + r; ++k) {
      SbpParallel p;
      if (!parseLayout(layouts[k], p)) {
        error = "op '" + graph.ops[i].name + "': unknown layout '" +
                layouts[k] + "'";
        return false;
      }
      if (k < n)
        sig.inputs.push_back(p);
      else
        sig.outputs.push_back(p);
    }
    return true;
  }

  /// A listed signature for `want`: itself, else one with the same result and
  /// the same layouts of every operand that is not a parameter, else one with
  /// the same result.
  SbpSignature repair(Operation *op, const SbpSignature &want) {
    auto iface = dyn_cast<sbp::SbpOpInterface>(op);
    if (!iface)
      return want;
    SmallVector<SbpSignature> valid = sbp::getValidSignatures1D(iface);
    if (llvm::is_contained(valid, want))
      return want;
    auto isParam = [&](unsigned k) {
      Operation *def = op->getOperand(k).getDefiningOp();
      return def && def->getName().getStringRef() == "sbp.parameter";
    };
    for (int pass = 0; pass < 2; ++pass)
      for (const SbpSignature &v : valid) {
        if (v.outputs != want.outputs)
          continue;
        bool same = true;
        for (unsigned k = 0; pass == 0 && k < want.inputs.size(); ++k)
          same &= isParam(k) || v.inputs[k] == want.inputs[k];
        if (same)
          return v;
      }
    return want; // the verifier names the op
  }

  /// A parameter or argument is stored in the layout its first reader reads
  /// it in; never partial (a stored value is whole).
  static SbpParallel stored(SbpParallel p) {
    return p.isPartial() ? SbpParallel::broadcast() : p;
  }

  bool run() {
    for (size_t i = 0; i < graph.ops.size(); ++i)
      opIndex[graph.ops[i].name] = static_cast<int>(i);
    if (plan.ops.size() != graph.ops.size()) {
      error = "expected a planned layout for each of the model's " +
              std::to_string(graph.ops.size()) + " ops, got " +
              std::to_string(plan.ops.size());
      return false;
    }
    if (!addMeshes())
      return false;
    func::FuncOp fn;
    module.walk([&](func::FuncOp f) { fn = f; });
    if (!fn) {
      error = "the lowered module has no function";
      return false;
    }
    Block &body = fn.getBody().front();
    if (!annotateModelOps(body))
      return false;
    storeParameters(body);
    std::map<unsigned, int> argStage = placeInputs(fn, body);
    insertTransfers(body, argStage);
    return true;
  }

  /// One (dp, tp) mesh per stage, on its pipeline rank's devices.
  bool addMeshes() {
    std::string meshes;
    for (int s = 0; s < plan.stages; ++s)
      meshes += "sbp.mesh @" + meshName(s) +
                " [dp = " + std::to_string(plan.dp) +
                ", tp = " + std::to_string(plan.tp) + "] {first_device = " +
                std::to_string((s % std::max(1, plan.pipelineRanks)) * plan.dp *
                               plan.tp) +
                " : i64}\n";
    OwningOpRef<ModuleOp> meshModule =
        parseSourceString<ModuleOp>(meshes, &ctx);
    if (!meshModule) {
      error = "could not build the stage meshes";
      return false;
    }
    Block *top = module.getBody();
    Operation *anchor = &top->front();
    for (Operation &m : llvm::make_early_inc_range(*meshModule->getBody()))
      m.moveBefore(anchor);

    return true;
  }

  /// Model ops: their signatures and placements.
  bool annotateModelOps(Block &body) {
    for (Operation &op : body) {
      auto loc = dyn_cast<NameLoc>(op.getLoc());
      if (!loc || isa<sbp::ParameterOp, sbp::ConstantOp>(op))
        continue;
      auto it = opIndex.find(loc.getName().str());
      if (it == opIndex.end())
        continue;
      const PlannedOpLayout &pl = plan.ops[it->second];
      SbpSignature dp, tp;
      if (!planned(it->second, pl.dp, &op, dp) ||
          !planned(it->second, pl.tp, &op, tp))
        return false;
      SbpSignature axes[] = {repair(&op, dp), repair(&op, tp)};
      op.setAttr(sbp::kSignatureAttr,
                 sbp::buildSignature(&ctx, mesh(pl.stage), axes));
      op.setAttr(sbp::kPlacementAttr, placement(pl.stage));
      if (auto c = classes.find(it->second); c != classes.end())
        op.setAttr(sbp::kClassesAttr,
                   IntegerAttr::get(IntegerType::get(&ctx, 64), c->second));
      stageOf[&op] = pl.stage;
    }
    return true;
  }

  /// The first reader of a value (program order) among the placed ops.
  bool firstReader(Value v, Operation *&user, unsigned &index) {
    user = nullptr;
    for (OpOperand &u : v.getUses())
      if (stageOf.count(u.getOwner()) &&
          (!user || u.getOwner()->isBeforeInBlock(user))) {
        user = u.getOwner();
        index = u.getOperandNumber();
      }
    return user != nullptr;
  }

  /// The layout `user` reads its operand `index` in, stored (never partial).
  SmallVector<SbpParallel> storedLayout(Operation *user, unsigned index) {
    auto sig = user->getAttrOfType<sbp::SignatureAttr>(sbp::kSignatureAttr);
    SmallVector<SbpParallel> axes;
    for (unsigned a = 0; a < 2; ++a)
      axes.push_back(stored(sbp::projectSignature(sig, a).inputs[index]));
    return axes;
  }

  /// Parameters (and an import's constants, read by its primitives): stored
  /// as their first reader reads them, on its stage.
  void storeParameters(Block &body) {
    for (Operation &op : body) {
      if (!isa<sbp::ParameterOp, sbp::ConstantOp>(op))
        continue;
      Operation *user;
      unsigned index = 0;
      if (!firstReader(op.getResult(0), user, index))
        continue;
      SmallVector<SbpParallel> axes = storedLayout(user, index);
      SbpSignature perAxis[2];
      for (unsigned a = 0; a < 2; ++a)
        perAxis[a].outputs.push_back(axes[a]);
      op.setAttr(sbp::kSignatureAttr,
                 sbp::buildSignature(&ctx, mesh(stageOf[user]), perAxis));
      op.setAttr(sbp::kPlacementAttr, placement(stageOf[user]));
      stageOf[&op] = stageOf[user];
    }
  }

  /// Inputs: arrive as their first reader reads them.
  std::map<unsigned, int> placeInputs(func::FuncOp fn, Block &body) {
    std::map<unsigned, int> argStage;
    for (BlockArgument arg : body.getArguments()) {
      Operation *user;
      unsigned index = 0;
      if (!firstReader(arg, user, index))
        continue;
      SmallVector<SbpParallel> axes = storedLayout(user, index);
      fn.setArgAttr(arg.getArgNumber(), sbp::kArgLayoutAttr,
                    sbp::NdSbpAttr::get(&ctx, mesh(stageOf[user]), axes));
      argStage[arg.getArgNumber()] = stageOf[user];
    }
    return argStage;
  }

  /// Values read on another stage travel by send/recv, one per (value, stage).
  void insertTransfers(Block &body, std::map<unsigned, int> &argStage) {
    int64_t channel = 0;
    OpBuilder b(&ctx);
    // sbp.send and sbp.recv carry the same attributes: the peer stage, the
    // channel, their own stage's placement and the layout on the wire (the
    // send's operand, the recv's result).
    auto transfer = [&](StringRef name, Location loc, Value v,
                        sbp::NdSbpAttr layout, int own, int peer,
                        int64_t channel) {
      bool isSend = name == "sbp.send";
      OperationState st(loc, name);
      if (isSend)
        st.addOperands(v);
      else
        st.addTypes(v.getType());
      st.addAttribute("stage", b.getI64IntegerAttr(peer));
      st.addAttribute("channel", b.getI64IntegerAttr(channel));
      st.addAttribute(sbp::kPlacementAttr, placement(own));
      if (layout) {
        SbpSignature perAxis[2];
        for (unsigned a = 0; a < 2; ++a) {
          if (isSend)
            perAxis[a].inputs.push_back(layout.getAxis(a));
          else
            perAxis[a].outputs.push_back(layout.getAxis(a));
        }
        st.addAttribute(sbp::kSignatureAttr,
                        sbp::buildSignature(&ctx, mesh(own), perAxis));
      }
      return b.create(st);
    };
    auto crossStages = [&](Value v, int from, Operation *after) {
      std::map<int, Operation *> firstUse; // stage -> first reader there
      for (OpOperand &u : v.getUses()) {
        auto it = stageOf.find(u.getOwner());
        if (it == stageOf.end() || it->second == from)
          continue;
        Operation *&f = firstUse[it->second];
        if (!f || u.getOwner()->isBeforeInBlock(f))
          f = u.getOwner();
      }
      sbp::NdSbpAttr layout = sbp::getProducedLayout(v);
      for (auto [stage, user] : firstUse) {
        if (after)
          b.setInsertionPointAfter(after);
        else
          b.setInsertionPointToStart(&body);
        Operation *s = transfer("sbp.send", user->getLoc(), v, layout, from,
                                stage, channel);
        b.setInsertionPoint(user);
        Operation *r = transfer("sbp.recv", user->getLoc(), v, layout, stage,
                                from, channel);
        stageOf[r] = stage;
        // A structured binding is captured by copy under its own name: C++17
        // lambdas cannot capture it (clang refuses; the sanitize build is
        // clang).
        v.replaceUsesWithIf(r->getResult(0), [&, at = stage](OpOperand &u) {
          auto it = stageOf.find(u.getOwner());
          return u.getOwner() != s && it != stageOf.end() && it->second == at;
        });
        after = after ? after : s;
        ++channel;
      }
    };
    SmallVector<Operation *> producers;
    for (Operation &op : body)
      if (stageOf.count(&op))
        producers.push_back(&op);
    for (BlockArgument arg : body.getArguments())
      if (argStage.count(arg.getArgNumber()))
        crossStages(arg, argStage[arg.getArgNumber()], nullptr);
    for (Operation *op : producers)
      for (Value r : op->getResults())
        crossStages(r, stageOf[op], op);
  }
};

} // namespace

LowerResult lowerPlanToSbpText(const ModelGraph &model,
                               const PlannedModule &plan) {
  ModelGraph graph = model;
  std::map<int, int64_t> classes = padVocabulary(graph, plan);
  LowerResult lowered = lowerToSbpText(graph);
  if (!lowered.ok())
    return lowered;
  MLIRContext context;
  context.loadDialect<sbp::SbpDialect, func::FuncDialect>();
  DiagnosticText diagnostics(&context);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(lowered.text, &context);
  LowerResult result;
  if (!module) {
    result.error =
        "could not re-read the lowered model: " + diagnostics.str("");
    return result;
  }
  Builder builder{context, *module, graph, plan, "", {}, {}, classes};
  if (!builder.run()) {
    result.error = builder.error;
    return result;
  }
  // Verified once, after the pass, by the dialect's whole-module verifier
  // (linear in the module: a pipeline plan's module has thousands of ops).
  PassManager pm(&context);
  pm.enableVerifier(false);
  pm.addPass(sbp::createInsertBoxingPass());
  if (failed(pm.run(*module)) || failed(sbp::verifyModule(*module))) {
    result.error = diagnostics.str("the planned module failed to verify");
    return result;
  }
  // Verified just above: the printer need not verify it again.
  llvm::raw_string_ostream os(result.text);
  module->print(os, OpPrintingFlags()
                        .enableDebugInfo(/*enable=*/true, /*prettyForm=*/false)
                        .assumeVerified());
  return result;
}

} // namespace autoddl
