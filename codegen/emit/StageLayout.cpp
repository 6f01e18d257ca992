//===- StageLayout.cpp - buffers and tensor layouts of a stage ------------===//
//
// StageBuffers (StageBuffers.h): a stage's struct members (activations,
// gradients, converted copies) and the tp layout conversions between them;
// the names ops read them by are the context's (EmitContext.cpp).
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/StageBuffers.h"

namespace autoddl::codegen::emit {

/// The CUDA program's op profiling (`--profile`, backends/cuda/OpProfile.h):
/// each call of an op's step is wrapped in a scope naming the op kind
/// (`{ OpScope op_scope("linear", kOpBackward); linear_backward(...); }`).
/// The tensor-parallel collectives, which run on compute_stream() too, are
/// scopes of their own, "comm:all_reduce", "comm:all_gather",
/// "comm:reduce_scatter"; a layout conversion's local slice "comm:slice"
/// (kind empty: every call is a collective or a slice); an ONNX primitive
/// "primitive:<op type>". Comments, declarations and block braces stay as
/// they are.
void profileScopes(Step &s, const std::string &kind) {
  auto scopeOf = [&](const std::string &call) -> std::string {
    for (const char *c :
         {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"})
      if (call.rfind(c, 0) == 0)
        return std::string("comm:") + c;
    if (call == "slice_backward_gather")
      return "comm:all_gather";
    if (call == "all_gather_backward")
      return "comm:reduce_scatter";
    if (kind.empty())
      return "comm:slice";
    return kind;
  };
  auto wrap = [&](std::vector<std::string> &lines, const char *phase) {
    for (std::string &l : lines) {
      const size_t b = l.find_first_not_of(' ');
      if (b == std::string::npos)
        continue;
      // A call, qualified or not: name(...) or autoddl::rt::name(...).
      size_t e = b, name = b;
      for (;;) {
        while (e < l.size() &&
               (std::islower(static_cast<unsigned char>(l[e])) ||
                std::isdigit(static_cast<unsigned char>(l[e])) || l[e] == '_'))
          ++e;
        if (e + 1 < l.size() && e > name && l.compare(e, 2, "::") == 0)
          name = e += 2;
        else
          break;
      }
      const size_t semi = l.rfind(';');
      if (e == name || e >= l.size() || l[e] != '(' ||
          semi == std::string::npos)
        continue;
      l.insert(semi + 1, " }");
      l.insert(b, fmt::format("{{ OpScope op_scope({}, {}); ",
                              cStringLiteral(scopeOf(l.substr(name, e - name))),
                              phase));
    }
  };
  wrap(s.fwd, "kOpForward");
  wrap(s.bwdInput, "kOpBackward");
  wrap(s.bwdWeight, "kOpBackward");
}

void StageBuffers::addTensor(int stage, int t, TpLayout l, bool withGrad,
                             bool withValue) {
  if (cx_.isParam(t) || cx_.isConst(t))
    return;
  const auto &td = cx_.g.tensors[size_t(t)];
  if (cx_.isInput(t)) {
    if (cx_.graphModel)
      return;
    const bool i32 = td.dtype == ops::DType::I32;
    members_.add(stage, {cx_.names[size_t(t)], numel(td.shape),
                         shapeStr(td.shape) + (i32 ? " i32, " : " f32, ") +
                             cx_.note(t) +
                             (cx_.storedChannelsLast(t) ? ", stored NHWC" : ""),
                         i32, false});
    return;
  }
  if (td.shape.empty())
    return; // the scalar loss: kept as a sum in the struct
  if (cx_.g.sparsePattern(t) >= 0) { // values at the adjacency's stored entries
    const std::string c =
        "[nnz] " + cx_.note(t) + " at the stored entries of " +
        cx_.note(cx_.g.sparsePattern(t)) + " (" + l.str() + ")";
    members_.add(
        stage, {cx_.bufName(t, l), 0, c, false, false, false, cx_.elems(t, l)});
    if (withGrad)
      members_.add(stage, {"d_" + cx_.bufName(t, l), 0, "gradient", false, true,
                           false, cx_.elems(t, l)});
    return;
  }
  std::vector<int64_t> ls = cx_.local(t, l);
  std::string c = shapeStr(ls) + " " + l.str() + " of " + shapeStr(td.shape) +
                  (cx_.storedChannelsLast(t) ? ", stored NHWC" : "");
  auto pad = cx_.padCols.find(t);
  if (pad != cx_.padCols.end()) { // rows of the padded vocabulary
    ls.back() = pad->second;
    c = shapeStr(ls) + " " + l.str() + " of " + shapeStr(td.shape) +
        ", the vocabulary padded (zero columns)";
  }
  if (withValue)
    members_.add(stage, {cx_.bufName(t, l), numel(ls), c, false, false});
  if (withGrad)
    members_.add(
        stage, {"d_" + cx_.bufName(t, l), numel(ls), "gradient", false, true});
}

/// Under a node split, the rows of every node of tensor t (which each dp rank
/// holds for its own nodes): all-gathered over dp once, before spmm or sddmm
/// reads them; the gradient of the gathered copy is partial on every rank and
/// is reduce-scattered back. Otherwise t as it is.
std::string StageBuffers::allNodes(int stage, int t, TpLayout l,
                                   std::vector<Step> &steps) {
  if (!cx_.nodeSplit() || !cx_.g.nodeRows(t) || cx_.g.sparsePattern(t) >= 0)
    return cx_.val(t, l);
  const std::string name = cx_.bufName(t, l) + "_nodes";
  const std::vector<int64_t> ls = cx_.local(t, l);
  const int64_t cols = numel(ls) / ls[0], rows = ls[0] * cx_.plan.knobs.dp;
  if (!converted_[{stage, name}]) {
    converted_[{stage, name}] = true;
    members_.add(stage, {name, rows * cols,
                         shapeStr({rows, cols}) + " " + cx_.note(t) +
                             " of every node (gathered over dp)",
                         false, false});
    Step s;
    s.fwd.push_back(fmt::format(
        "  // {}: every node's rows for spmm/sddmm: all-gather over dp",
        cx_.note(t)));
    s.fwd.push_back(fmt::format("  all_gather_forward(a.{}.data(), {}, {}, 0, "
                                "g.dp);",
                                name, cx_.val(t, l), shapeInit(ls)));
    if (!cx_.isInput(t)) {
      members_.add(
          stage, {"d_" + name, rows * cols, "gradient (partial)", false, true});
      s.bwdInput.push_back(fmt::format(
          "  // {}: the gathered copy's gradient is partial on every dp rank: "
          "reduce-scatter",
          cx_.note(t)));
      s.bwdInput.push_back(
          fmt::format("  all_gather_backward({}, a.d_{}.data(), {}, 0, g.dp);",
                      cx_.grad(t, l), name, shapeInit(ls)));
    }
    if (cx_.target.opProfiling)
      profileScopes(s, "");
    steps.push_back(std::move(s));
  }
  return "a." + name + ".data()";
}

/// Makes tensor t available in layout `want` on `stage`, emitting the
/// conversion once (a converted copy shared by every consumer).
std::string StageBuffers::ensureLayout(int stage, int t, TpLayout want,
                                       std::vector<Step> &steps) {
  TpLayout have = cx_.L.tensors[size_t(t)];
  if (cx_.isInput(t) && want.split() && !cx_.graphModel) {
    // An input read on split rows (batch or sequence): this rank's slice of
    // the loaded micro-batch, taken once per forward.
    const auto &td = cx_.g.tensors[size_t(t)];
    const std::string name =
        cx_.names[size_t(t)] + "_s" + std::to_string(want.dim);
    auto key = std::make_pair(stage, name);
    if (!converted_[key]) {
      converted_[key] = true;
      const bool i32 = td.dtype == ops::DType::I32;
      members_.add(stage,
                   {name, numel(cx_.local(t, want)),
                    shapeStr(cx_.local(t, want)) + (i32 ? " i32, " : " f32, ") +
                        cx_.note(t) + " " + want.str() +
                        (cx_.storedChannelsLast(t) ? ", stored NHWC" : ""),
                    i32, false});
      Step s;
      s.fwd.push_back(fmt::format("  // {}: this tp rank's {} (local slice)",
                                  cx_.note(t), want.str()));
      s.fwd.push_back(fmt::format("  slice_forward(a.{}.data(), {}, {}, {}, "
                                  "kTP, g.rtp);",
                                  name, cx_.val(t, TpLayout{}),
                                  shapeInit(cx_.local(t, TpLayout{})),
                                  want.dim));
      if (cx_.target.opProfiling)
        profileScopes(s, "");
      steps.push_back(std::move(s));
    }
    return "a." + name + ".data()";
  }
  if (have == want || cx_.isParam(t) || cx_.isInput(t) || cx_.isConst(t))
    return cx_.val(t, want);
  const auto &fs = cx_.full(t);
  if (have.split() && want.split() &&
      (fs[size_t(have.dim)] % cx_.tp != 0 ||
       fs[size_t(want.dim)] % cx_.tp != 0 || have.dim == want.dim)) {
    ensureLayout(stage, t, TpLayout{}, steps); // uneven parts: through B
    have = TpLayout{};
  }
  // The collectives see a split "per segments" (a packed q|k|v: rank r holds
  // part r of every segment) as a plain split of a view with that dimension
  // cut in two, [segments, size / segments], split on the second.
  const std::vector<int64_t> whole = cx_.local(t, TpLayout{});
  std::vector<int64_t> view;
  std::vector<int> viewIndex(whole.size());
  for (size_t d = 0; d < whole.size(); ++d) {
    int seg = 1;
    for (const TpLayout &l : {have, want})
      if (l.dim == int(d))
        seg = std::max(seg, l.segments);
    if (seg > 1)
      view.push_back(seg);
    viewIndex[d] = int(view.size());
    view.push_back(whole[d] / seg);
  }
  auto viewDim = [&](TpLayout l) { return viewIndex[size_t(l.dim)]; };
  auto localView = [&](TpLayout l) { // ceil: a padded vocabulary's parts
    std::vector<int64_t> v = view;
    v[size_t(viewDim(l))] = (v[size_t(viewDim(l))] + cx_.tp - 1) / cx_.tp;
    return shapeInit(v);
  };
  auto key = std::make_pair(stage, cx_.bufName(t, want));
  if (!converted_[key]) {
    converted_[key] = true;
    addTensor(stage, t, want, true);
    Step s;
    const std::string n = cx_.note(t);
    if (have.split() && want.split()) { // S(a) -> S(b)
      s.fwd.push_back(
          fmt::format("  // {}: {} -> {} for its consumers: all-to-all over tp",
                      n, have.str(), want.str()));
      s.fwd.push_back(fmt::format(
          "  all_to_all_forward({}, {}, {}, {}, {}, g.tp);", cx_.val(t, want),
          cx_.val(t, have), localView(have), viewDim(have), viewDim(want)));
      s.bwdInput.push_back(fmt::format(
          "  // {}: the gradient goes back the same way (all-to-all)", n));
      s.bwdInput.push_back(fmt::format(
          "  all_to_all_backward({}, {}, {}, {}, {}, g.tp);", cx_.grad(t, have),
          cx_.grad(t, want), localView(have), viewDim(have), viewDim(want)));
    } else if (have.split()) { // S(d) -> B
      s.fwd.push_back(
          fmt::format("  // {}: {} -> B for its consumers: all-gather over tp",
                      n, have.str()));
      s.fwd.push_back(fmt::format("  all_gather_forward({}, {}, {}, {}, g.tp);",
                                  cx_.val(t, want), cx_.val(t, have),
                                  localView(have), viewDim(have)));
      const bool partial = cx_.gathersPartialGrads(t);
      s.bwdInput.push_back(fmt::format(
          "  // {}: {}", n,
          partial ? "the gathered copy's gradient is partial (column-parallel "
                    "readers): reduce-scatter"
                  : "the gradient of the gathered copy is equal on every tp "
                    "rank; keep this rank's part"));
      s.bwdInput.push_back(
          partial ? fmt::format("  all_gather_backward({}, {}, {}, {}, g.tp);",
                                cx_.grad(t, have), cx_.grad(t, want),
                                localView(have), viewDim(have))
                  : fmt::format("  gather_backward_local({}, {}, {}, {});",
                                cx_.grad(t, have), cx_.grad(t, want),
                                shapeInit(view), viewDim(have)));
    } else { // B -> S(d)
      s.fwd.push_back(fmt::format(
          "  // {}: B -> {} for its consumers: local slice", n, want.str()));
      s.fwd.push_back(fmt::format(
          "  slice_forward({}, {}, {}, {}, kTP, g.rtp);", cx_.val(t, want),
          cx_.val(t, have), shapeInit(view), viewDim(want)));
      s.bwdInput.push_back(fmt::format(
          "  // {}: each tp rank holds the gradient of its slice: all-gather",
          n));
      s.bwdInput.push_back(fmt::format(
          "  slice_backward_gather({}, {}, {}, {});", cx_.grad(t, have),
          cx_.grad(t, want), localView(want), viewDim(want)));
    }
    if (cx_.target.opProfiling)
      profileScopes(s, "");
    steps.push_back(std::move(s));
  }
  return cx_.val(t, want);
}

} // namespace autoddl::codegen::emit
