//===- SearchGraph.cpp - collapsing identical layers ---------------------===//
#include "planner/SearchGraph.h"
#include "planner/ProgramDecisions.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace autoddl::planner {

const char *segmentName(Segment s) {
  switch (s) {
  case Segment::Pre:
    return "pre";
  case Segment::Layer:
    return "layer";
  case Segment::Post:
    return "post";
  }
  return "pre";
}

std::vector<int> CollapsedEdge::endpoints() const {
  std::vector<int> ops;
  if (producer >= 0)
    ops.push_back(producer);
  for (auto [c, slot] : consumers)
    ops.push_back(c);
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  return ops;
}

std::shared_ptr<const GraphUses> usesOf(const SearchGraph &sg) {
  return sg.uses ? sg.uses : std::make_shared<const GraphUses>(*sg.graph);
}

std::vector<int64_t> SearchGraph::shapeAt(int t, int64_t b) const {
  std::vector<int64_t> s = shapes->shape1[t];
  int d = shapes->batchDim[t];
  if (d >= 0)
    s[d] = s[d] + (shapes->shape2[t][d] - s[d]) * (b - 1);
  return s;
}

namespace {

/// A key that says two layers' ops are the same op: kind, attributes' count and
/// operand shapes. Layers are identical when these match position by position.
std::string opKey(const ModelGraph &g, const OpDef &op) {
  std::string k = op.kind + "|" + std::to_string(op.attrs.size());
  for (int t : op.operands) {
    k += "|";
    for (int64_t d : g.tensors[t].shape)
      k += std::to_string(d) + "x";
  }
  return k;
}

} // namespace

namespace {

/// Each tensor's shape at micro-batch 1 and 2 and the dimension that scales
/// with the batch (-1: none); false (error) when a tensor changes rank.
bool batchShapes(const ModelGraph &g1, const ModelGraph &g2,
                 SearchGraph::Shapes &out, std::string &error) {
  const int nt = static_cast<int>(g1.tensors.size());
  out.batchDim.assign(nt, -1);
  for (int t = 0; t < nt; ++t) {
    out.shape1.push_back(g1.tensors[t].shape);
    out.shape2.push_back(g2.tensors[t].shape);
    const auto &a = g1.tensors[t].shape, &b = g2.tensors[t].shape;
    if (a.size() != b.size()) {
      error = "tensor '" + g1.tensors[t].name + "' changes rank with the batch";
      return false;
    }
    for (size_t d = 0; d < a.size(); ++d)
      if (b[d] != a[d]) {
        out.batchDim[t] = static_cast<int>(d);
        break;
      }
  }
  return true;
}

} // namespace

bool buildSearchGraph(const ModelGraph &g1, const ModelGraph &g2,
                      SearchGraph &out, std::string &error) {
  out = SearchGraph{};
  out.graph = &g1;
  if (g1.ops.size() != g2.ops.size() ||
      g1.tensors.size() != g2.tensors.size()) {
    error = "the model imported at two micro-batch sizes has different graphs";
    return false;
  }
  auto shapes = std::make_shared<SearchGraph::Shapes>();
  if (!batchShapes(g1, g2, *shapes, error))
    return false;
  out.shapes = shapes;
  out.uses = std::make_shared<const GraphUses>(g1);

  // Group ops by layer; the layers collapse when every layer has the same op
  // sequence (opKey) and the pre ops precede and post ops follow all layers.
  std::map<int, std::vector<int>> byLayer;
  std::vector<int> pre, post;
  bool seenLayer = false, contiguous = true;
  for (int i = 0; i < static_cast<int>(g1.ops.size()); ++i) {
    int l = g1.ops[i].layer;
    if (l >= 0) {
      if (!post.empty())
        contiguous = false;
      byLayer[l].push_back(i);
      seenLayer = true;
    } else {
      (seenLayer ? post : pre).push_back(i);
    }
  }
  bool identical = contiguous && byLayer.size() >= 1;
  if (identical) {
    const std::vector<int> &first = byLayer.begin()->second;
    for (const auto &[l, list] : byLayer) {
      if (list.size() != first.size()) {
        identical = false;
        break;
      }
      for (size_t k = 0; k < list.size() && identical; ++k)
        identical = opKey(g1, g1.ops[list[k]]) == opKey(g1, g1.ops[first[k]]);
    }
  }
  out.opOf.assign(g1.ops.size(), -1);
  auto addOp = [&](int op, Segment s) {
    CollapsedOp c;
    c.op = op;
    c.segment = s;
    out.ops.push_back(c);
    return static_cast<int>(out.ops.size()) - 1;
  };
  if (identical) {
    out.collapsed = true;
    out.layers = static_cast<int64_t>(byLayer.size());
    for (int i : pre)
      out.opOf[i] = addOp(i, Segment::Pre);
    // The representative is the second layer when there is one, so that its
    // inputs come from a layer (the periodic edge) rather than from "pre".
    auto rep = byLayer.begin();
    if (byLayer.size() >= 2)
      ++rep;
    std::vector<int> base;
    for (int i : rep->second)
      base.push_back(addOp(i, Segment::Layer));
    for (const auto &[l, list] : byLayer)
      for (size_t k = 0; k < list.size(); ++k)
        out.opOf[list[k]] = base[k];
    for (int i : post)
      out.opOf[i] = addOp(i, Segment::Post);
  } else {
    // No identical blocks: every op is its own coordinate, all in "pre" (one
    // pipeline stage).
    out.layers = 0;
    for (int i = 0; i < static_cast<int>(g1.ops.size()); ++i)
      out.opOf[i] = addOp(i, Segment::Pre);
  }
  for (size_t i = 0; i < g1.ops.size(); ++i)
    out.ops[out.opOf[i]].count++;

  // Collapse tensor edges: key = (producer collapsed op or -1, result slot or
  // the first consumer slot for inputs/parameters, consumer set).
  const int nt = static_cast<int>(g1.tensors.size());
  std::vector<int> producerOp(nt, -1);
  std::vector<std::vector<std::pair<int, int>>> consumers(nt);
  for (int i = 0; i < static_cast<int>(g1.ops.size()); ++i) {
    for (int t : g1.ops[i].results)
      producerOp[t] = i;
    for (size_t k = 0; k < g1.ops[i].operands.size(); ++k)
      consumers[g1.ops[i].operands[k]].push_back({i, static_cast<int>(k)});
  }
  std::map<std::tuple<int, std::vector<std::pair<int, int>>, bool>, int> index;
  for (int t = 0; t < nt; ++t) {
    if (consumers[t].empty())
      continue;
    std::vector<std::pair<int, int>> cs;
    for (auto [op, k] : consumers[t])
      cs.push_back({out.opOf[op], k});
    int prod = producerOp[t] >= 0 ? out.opOf[producerOp[t]] : -1;
    bool crosses = false;
    Segment seg = Segment::Pre;
    if (producerOp[t] >= 0 && out.collapsed) {
      int pl = g1.ops[producerOp[t]].layer;
      for (auto [op, k] : consumers[t])
        if (g1.ops[op].layer >= 0 && pl >= 0 && g1.ops[op].layer != pl)
          crosses = true;
    }
    // The stage that pays: the consumers' segment (a layer edge is paid by the
    // consuming layer; the edge into "post" by the last stage).
    for (auto [op, k] : cs)
      seg = std::max(seg, out.ops[op].segment);
    if (seg == Segment::Layer && prod >= 0 &&
        out.ops[prod].segment == Segment::Pre)
      seg = Segment::Pre; // embedding -> first layer: paid once, on stage 0
    // A parameter or input used only by layer ops is per layer; one used by pre
    // and post (a tied embedding) stays one edge.
    const bool isParam = g1.tensors[t].role == TensorRole::Parameter;
    const bool isInput = g1.tensors[t].role == TensorRole::Input;
    auto key = std::make_tuple(prod, cs, crosses);
    if (prod < 0) {
      // Inputs/params: identical only if they stand at the same slots.
      key = std::make_tuple(-1, cs, crosses);
    }
    auto it = index.find(key);
    if (it == index.end()) {
      CollapsedEdge e;
      e.tensor = t;
      e.producer = prod;
      e.consumers = cs;
      e.segment = seg;
      e.crossesLayers = crosses;
      e.parameter = isParam;
      e.input = isInput;
      out.edges.push_back(e);
      it = index.emplace(key, static_cast<int>(out.edges.size()) - 1).first;
    } else if (out.ops[cs.front().first].segment == Segment::Layer &&
               out.edges[it->second].tensor != t && prod >= 0 &&
               producerOp[out.edges[it->second].tensor] >= 0) {
      // Prefer the representative layer's own tensor for names.
      int cur = out.edges[it->second].tensor;
      if (g1.ops[producerOp[t]].layer == g1.ops[out.ops[prod].op].layer &&
          g1.ops[producerOp[cur]].layer != g1.ops[out.ops[prod].op].layer)
        out.edges[it->second].tensor = t;
    }
    out.edges[it->second].weight += 1;
  }
  return true;
}

} // namespace autoddl::planner
