//===- ChannelsLast.cpp - the CUDA program's NHWC activations -------------===//
//
// Which image activations the CUDA program stores channels-last (NHWC), and
// the transposes at the edges (docs/onnx-lowering.md "Channels-last images").
// cuDNN's NHWC convolutions are 1.5x its NCHW ones on an H100 (PyTorch's, at
// ResNet-50's 53 shapes: bench/results/onnx/2026-12-07-h100-resnet50/), so
// every op between two convolutions that computes the same function on NHWC
// storage runs on it: conv2d, pool2d, elementwise ops on equal shapes, and
// the primitives of onnx_kernels::channelsLastRuns (batch norm, pools,
// global pools). AUTODDL_LAYOUT=nchw at generation keeps everything NCHW
// (nhwc or unset: as above; anything else is refused).
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/StageBuffers.h"

#include "ir/import/ResolvePrimitive.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace autoddl::codegen::emit {

namespace {

/// The elementwise kinds of the model vocabulary (ElementwiseEmitter.cpp):
/// one pass over n elements in storage order, any layout.
bool elementwiseKind(const std::string &k) {
  for (const char *e : {"add", "mul", "relu", "silu", "elu", "gelu"})
    if (k == e)
      return true;
  return false;
}

/// Disjoint sets of ops (path halving).
struct OpSets {
  std::vector<size_t> parent;
  explicit OpSets(size_t n) : parent(n) {
    std::iota(parent.begin(), parent.end(), size_t(0));
  }
  size_t find(size_t i) {
    while (parent[i] != i)
      i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(size_t a, size_t b) { parent[find(a)] = find(b); }
};

} // namespace

bool EmitContext::imageTensor(int t) const {
  const std::vector<int64_t> &s = full(t);
  return s.size() == 4 && s[1] > 1 && s[2] * s[3] > 1 && !isParam(t) &&
         !isConst(t);
}

/// Whether op i computes the same function with its image operands and
/// result stored NHWC (the layouts of tp kept to B or a batch split, which
/// cut NHWC tensors as they cut NCHW ones).
bool EmitContext::runsChannelsLast(size_t i) const {
  const OpDef &op = g.ops[i];
  const OpPlan &p = L.ops[i];
  for (const TpLayout &l : p.operands)
    if (l.dim > 0)
      return false;
  if (p.result.dim > 0 || op.results.size() != 1)
    return false;
  const int r = op.results[0];
  if (full(r).size() != 4)
    return false;
  const std::string &k = op.kind;
  if (k == "conv2d" || k == "pool2d")
    return true;
  if (elementwiseKind(k)) {
    if (fusedRelus.count(i) || fusedGelus.count(i) ||
        linearOperandOfAdd.count(i))
      return false;
    for (int t : op.operands)
      if (full(t) != full(r) || isParam(t) || isConst(t))
        return false;
    return true;
  }
  if (k != "primitive")
    return false;
  std::vector<ops::Shape> in;
  for (int t : op.operands)
    in.push_back(full(t));
  onnx_kernels::Primitive prim;
  if (!resolvePrimitive(prim, g, op, in, full(r)).empty() ||
      !onnx_kernels::channelsLastRuns(prim))
    return false;
  // An operand of the image's shape is read element by element: it must be
  // an activation stored alike, not a constant or parameter.
  for (size_t j = 0; j < op.operands.size(); ++j) {
    const int t = op.operands[j];
    if (prim.data[j] && full(t).size() == 4 && (isParam(t) || isConst(t)))
      return false;
  }
  return true;
}

/// Groups the ops that can run channels-last and are joined by image
/// tensors; a group holding a convolution runs channels-last, so a
/// transpose sits only where a group meets an op that runs NCHW.
void EmitContext::planChannelsLast() {
  // Read by codegen (the layout is the generated program's), so checked
  // here rather than by the program's check_environment.
  const char *env = std::getenv("AUTODDL_LAYOUT");
  const std::string layout = env ? env : "";
  if (!layout.empty() && layout != "nchw" && layout != "nhwc")
    throw UserError("AUTODDL_LAYOUT=" + layout +
                    ": expected nchw or nhwc (the default)");
  if (!cuda || layout == "nchw")
    return;
  std::vector<char> can(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i)
    can[i] = runsChannelsLast(i);
  OpSets sets(g.ops.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const int from = producer[t];
    if (from < 0 || !can[size_t(from)] || !imageTensor(int(t)))
      continue;
    for (size_t i : users[t])
      if (can[i])
        sets.join(i, size_t(from));
  }
  std::set<size_t> convGroups;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (can[i] && g.ops[i].kind == "conv2d")
      convGroups.insert(sets.find(i));
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (can[i] && convGroups.count(sets.find(i)))
      nhwcOps.insert(i);
}

/// A tensor is stored as its producer runs; a classifier's images as their
/// readers run when they all run channels-last (the sample draw writes them
/// so: Spec.h images_channels_last), so no transpose precedes the first
/// convolution.
bool EmitContext::storedChannelsLast(int t) const {
  if (!imageTensor(t))
    return false;
  const int from = producer[size_t(t)];
  if (from >= 0)
    return nhwcOps.count(size_t(from)) > 0;
  const std::vector<size_t> &readers = users[size_t(t)];
  return t == classInput && !readers.empty() &&
         std::all_of(readers.begin(), readers.end(),
                     [&](size_t i) { return nhwcOps.count(i) > 0; });
}

/// Tensor t (layout l) as op `reader` reads it: itself, or (an image tensor
/// stored in the other layout) its transposed copy, made once per stage.
/// The copy's gradient goes back through the inverse transpose.
std::pair<std::string, std::string>
StageBuffers::ensureFormat(int stage, int t, TpLayout l, size_t reader,
                           const std::string &value, const std::string &grad,
                           std::vector<Step> &steps) {
  const bool want = cx_.nhwcOps.count(reader) > 0;
  if (!cx_.imageTensor(t) || cx_.storedChannelsLast(t) == want)
    return {value, grad};
  const std::string name = cx_.bufName(t, l) + (want ? "_nhwc" : "_nchw"),
                    copyGrad =
                        cx_.isInput(t) ? "nullptr" : "a.d_" + name + ".data()";
  if (!converted_[{stage, name}]) {
    converted_[{stage, name}] = true;
    const std::vector<int64_t> s = cx_.local(t, l);
    // The stored shape and the permutation to the other layout.
    const std::vector<int64_t> stored =
        want ? s : std::vector<int64_t>{s[0], s[2], s[3], s[1]};
    const std::vector<int64_t> perm = want ? std::vector<int64_t>{0, 2, 3, 1}
                                           : std::vector<int64_t>{0, 3, 1, 2};
    const char *to = want ? "NHWC" : "NCHW";
    members_.add(stage, {name, numel(s),
                         shapeStr(s) + " " + l.str() + " stored " + to +
                             ", a copy of " + cx_.note(t),
                         false, false});
    Step st;
    st.fwd.push_back(fmt::format("  // {}: to {} for its readers (transpose)",
                                 cx_.note(t), to));
    st.fwd.push_back(
        fmt::format("  transpose_forward(a.{}.data(), {}, {}, {});", name,
                    value, shapeInit(stored), shapeInit(perm)));
    if (!cx_.isInput(t)) {
      members_.add(stage, {"d_" + name, numel(s), "gradient", false, true});
      st.bwdInput.push_back(
          fmt::format("  // {}: the copy's gradient back (inverse transpose)",
                      cx_.note(t)));
      st.bwdInput.push_back(fmt::format("  transpose_backward({}, {}, {}, {});",
                                        grad, copyGrad, shapeInit(stored),
                                        shapeInit(perm)));
    }
    if (cx_.target.opProfiling)
      profileScopes(st, "transpose");
    steps.push_back(std::move(st));
  }
  return {"a." + name + ".data()", copyGrad};
}

} // namespace autoddl::codegen::emit
