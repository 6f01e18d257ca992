//===- EmitContext.cpp - the emitter's read-only context ------------------===//
//
// The facts every part of the emitter reads, derived once from the plan and
// its model (EmitContext.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/EmitContext.h"
#include "codegen/emit/OpTable.h"

#include <regex>

namespace autoddl::codegen::emit {

namespace {

/// Each tensor's identifier: unique, and none another's derived buffer name.
std::vector<std::string> tensorNames(const ModelGraph &g) {
  // A tensor's buffers are <name>, d_<name> (its gradient), kc_<name> (a
  // constant) and <name> with a suffix below (converted and saved copies).
  // No tensor is named like another's derived buffer: a name of that form
  // is changed first ("d_x" -> "t_d_x", "x_full" -> "x_full_t"), then made
  // unique by a "_<k>" (the numbers no suffix ends in).
  static const std::regex derived(
      "_(s[0-9]+(x[0-9]+)?|full|whole|dx_partial|dvalues_partial|nodes|lse|"
      "att|rstd|mean|received|nhwc|nchw)$");
  // The stage structs' own members (Stage.cpp, LossEmitter.cpp).
  IdentTable ids({"layers", "held", "loss_sum", "correct", "correct_heldout",
                  "grad_zeros", "losses", "loss_max", "loss_sums", "loss_lse"});
  std::vector<std::string> names(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    std::string n = ident(g.tensors[t].name);
    if (n.rfind("d_", 0) == 0)
      n = "t_" + n;
    if (std::regex_search(n, derived))
      n += "_t";
    names[t] = ids.addIdent(n);
  }
  return names;
}

std::vector<int> producers(const ModelGraph &g) {
  std::vector<int> producer(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (int r : g.ops[i].results)
      producer[size_t(r)] = int(i);
  return producer;
}

} // namespace

EmitContext::EmitContext(const planner::Plan &plan, const ModelGraph &g,
                         Backend backend)
    : plan(plan), g(g),
      L(chooseLayout(plan, g, backend == Backend::Cuda ? "cuda" : "cpu")),
      tp(plan.knobs.tp), cuda(backend == Backend::Cuda),
      target(cuda ? cudaTarget() : cpuTarget()), names(tensorNames(g)),
      producer(producers(g)), tokenModel(findInput(g, "input_ids") >= 0),
      graphModel(findInput(g, "adjacency") >= 0),
      classInput(tokenModel || graphModel ? -1 : classifierInputs(g).first),
      classTargets(tokenModel || graphModel ? -1 : classifierInputs(g).second),
      classModel(classInput >= 0 && classTargets >= 0) {
  users = readers();
  planVocabPadding();
  planGeluFusion();
  planResidualFusion();
  planBiasReluFusion();
  planChannelsLast();
  planProducerReluFusion(); // after: an op and its ReLU share a layout
  planResidualNormFusion();
  planLayerParams();
}

std::pair<int, int> EmitContext::classifierInputs(const ModelGraph &g) {
  int input = -1, targets = -1;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const TensorDef &td = g.tensors[t];
    if (td.role != TensorRole::Input || td.sparse ||
        td.dtype != ops::DType::F32)
      continue;
    if (input >= 0) // several: not a classifier this program feeds
      return {-1, -1};
    input = int(t);
  }
  for (const OpDef &op : g.ops)
    if (opHas(op.kind, kLabelledLoss) && op.operands.size() == 2 &&
        g.tensors[size_t(op.operands[1])].role == TensorRole::Input)
      targets = op.operands[1];
  return {input, targets};
}

int EmitContext::findInput(const ModelGraph &g, const std::string &name) {
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].role == TensorRole::Input && g.tensors[t].name == name)
      return int(t);
  return -1;
}

std::string EmitContext::val(int t, TpLayout l) const {
  if (isConst(t))
    return "kc_" + names[size_t(t)];
  if (isParam(t)) // the kernels read the act_t working copy on cuda
    return "P." + names[size_t(t)] + target.paramValue;
  if (isInput(t)) {
    const std::string &n = g.tensors[size_t(t)].name;
    if (graphModel) {
      if (n == "adjacency")
        return "graph_adjacency()";
      if (n == "features")
        return "graph_features()";
      return "graph_labels()";
    }
    return "a." + names[size_t(t)] + ".data()";
  }
  return "a." + bufName(t, l) + ".data()";
}

std::string EmitContext::grad(int t, TpLayout l) const {
  if (isParam(t))
    return "P." + names[size_t(t)] + ".grad.data()";
  if (isInput(t) || isConst(t))
    return "nullptr";
  if (auto a = gradAlias.find(t); a != gradAlias.end())
    return grad(a->second, L.tensors[size_t(a->second)]);
  return "a.d_" + bufName(t, l) + ".data()";
}

} // namespace autoddl::codegen::emit
