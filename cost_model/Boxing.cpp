//===- Boxing.cpp - nd-SBP transitions as shortest paths (docs/cost-model.md §3)
#include "cost_model/Boxing.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>

namespace autoddl::cost {

std::string sbpToString(const Sbp &s) {
  switch (s.kind) {
  case Sbp::Split:
    return "S(" + std::to_string(s.dim) + ")";
  case Sbp::Broadcast:
    return "B";
  case Sbp::Partial:
    return "P";
  }
  return "?";
}

std::string ndSbpToString(const NdSbp &s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + sbpToString(s[i]);
  return out + ")";
}

bool parseSbp(const std::string &text, Sbp &out) {
  if (text == "B") {
    out = Sbp::broadcast();
    return true;
  }
  if (text == "P") {
    out = Sbp::partial();
    return true;
  }
  std::string digits;
  if (text.size() >= 4 && text.rfind("S(", 0) == 0 && text.back() == ')')
    digits = text.substr(2, text.size() - 3);
  else if (text.size() >= 2 && text[0] == 'S')
    digits = text.substr(1);
  else
    return false;
  if (digits.empty() || digits.size() > 3 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char ch) { return ch >= '0' && ch <= '9'; }))
    return false;
  out = Sbp::split(std::stoi(digits));
  return true;
}

bool placeMesh(const Cluster &c, const std::vector<int64_t> &shape,
               MeshOnCluster &out, std::string &error) {
  out.shape = shape;
  out.axes.assign(shape.size(), GroupPlacement{});
  for (size_t a = 0; a < shape.size(); ++a)
    if (!placeMeshAxis(c, shape, static_cast<int>(a), out.axes[a], error))
      return false;
  return true;
}

BoxingCost oneAxisTransition(const Cluster &c, const MeshOnCluster &mesh,
                             double tensorBytes, const NdSbp &state, int axis,
                             const Sbp &to) {
  BoxingCost out;
  const Sbp &from = state[axis];
  BoxingStep step;
  step.axis = axis;
  step.from = from;
  step.to = to;
  if (from == to || mesh.shape[axis] == 1) {
    out.possible = true;
    return out; // nothing to do, no step
  }
  // The groups of this axis each hold the tensor divided by every *other* axis
  // that splits it (B and P on another axis leave the size whole): the S of the
  // collective below is that slice (docs/cost-model.md §3.2).
  double s = tensorBytes;
  for (size_t e = 0; e < state.size(); ++e)
    if (static_cast<int>(e) != axis && state[e].kind == Sbp::Split)
      s /= static_cast<double>(mesh.shape[e]);
  double n = static_cast<double>(mesh.shape[axis]);
  if (from.kind == Sbp::Broadcast) { // B->S: take a slice; B->P: keep one copy
    step.free = true;
  } else if (from.kind == Sbp::Split && to.kind == Sbp::Broadcast) {
    step.collective = Collective::AllGather; // gathered output: s
    step.bytes = s;
  } else if (from.kind == Sbp::Split && to.kind == Sbp::Split) {
    step.collective = Collective::AllToAll; // each rank's buffer: s/n
    step.bytes = s / n;
  } else if (from.kind == Sbp::Partial && to.kind == Sbp::Broadcast) {
    step.collective = Collective::AllReduce; // each rank's buffer: s
    step.bytes = s;
  } else if (from.kind == Sbp::Partial && to.kind == Sbp::Split) {
    step.collective = Collective::ReduceScatter; // each rank's input: s
    step.bytes = s;
  } else { // S->P
    return out;
  }
  if (!step.free) {
    step.estimate =
        collectiveCost(c, step.collective, step.bytes, mesh.axes[axis]).best;
  }
  out.possible = true;
  out.time = step.estimate.time;
  out.steps.push_back(step);
  return out;
}

namespace {

// Candidate values of one axis on a path.
std::vector<Sbp> axisValues(const NdSbp &from, const NdSbp &to, size_t axis) {
  // S(0) is always a candidate: P->S(0)->...->B is how a partial tensor is
  // reduced hierarchically (reduce-scatter, reduce on 1/n of it, all-gather).
  std::vector<Sbp> vals{Sbp::broadcast(), from[axis], to[axis], Sbp::split(0)};
  for (const NdSbp *s : {&from, &to})
    for (const Sbp &x : *s)
      if (x.kind == Sbp::Split)
        vals.push_back(x);
  std::vector<Sbp> unique;
  for (const Sbp &v : vals)
    if (std::find(unique.begin(), unique.end(), v) == unique.end())
      unique.push_back(v);
  return unique;
}

} // namespace

BoxingCost ndTransition(const Cluster &c, const MeshOnCluster &mesh,
                        double tensorBytes, const NdSbp &from,
                        const NdSbp &to) {
  size_t axes = mesh.shape.size();
  BoxingCost none;
  if (from.size() != axes || to.size() != axes)
    return none;
  // State = index per axis into that axis's candidate values (mixed radix).
  std::vector<std::vector<Sbp>> vals(axes);
  for (size_t a = 0; a < axes; ++a)
    vals[a] = axisValues(from, to, a);
  // The state space is the product of the candidate counts (at most 5^axes
  // states for 2 split dims): refuse meshes whose search would not end quickly.
  double states = 1;
  for (const std::vector<Sbp> &v : vals)
    states *= static_cast<double>(v.size());
  if (states > kMaxBoxingStates) {
    none.searchTooLarge = true;
    return none;
  }
  auto encode = [&](const std::vector<int> &idx) {
    long code = 0;
    for (size_t a = 0; a < axes; ++a)
      code = code * static_cast<long>(vals[a].size()) + idx[a];
    return code;
  };
  auto decode = [&](long code) {
    std::vector<int> idx(axes);
    for (size_t a = axes; a-- > 0;) {
      idx[a] = static_cast<int>(code % static_cast<long>(vals[a].size()));
      code /= static_cast<long>(vals[a].size());
    }
    return idx;
  };
  auto indexOf = [&](const NdSbp &s) {
    std::vector<int> idx(axes);
    for (size_t a = 0; a < axes; ++a)
      idx[a] = static_cast<int>(
          std::find(vals[a].begin(), vals[a].end(), s[a]) - vals[a].begin());
    return idx;
  };
  auto toSbp = [&](const std::vector<int> &idx) {
    NdSbp s(axes);
    for (size_t a = 0; a < axes; ++a)
      s[a] = vals[a][idx[a]];
    return s;
  };
  long start = encode(indexOf(from)), goal = encode(indexOf(to));
  std::map<long, double> dist{{start, 0.0}};
  std::map<long, std::pair<long, BoxingStep>> prev;
  using Item = std::pair<double, long>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  queue.push({0.0, start});
  while (!queue.empty()) {
    auto [d, code] = queue.top();
    queue.pop();
    if (d > dist[code])
      continue;
    if (code == goal)
      break;
    std::vector<int> idx = decode(code);
    NdSbp state = toSbp(idx);
    for (size_t a = 0; a < axes; ++a) {
      for (size_t v = 0; v < vals[a].size(); ++v) {
        if (static_cast<int>(v) == idx[a])
          continue;
        BoxingCost edge = oneAxisTransition(c, mesh, tensorBytes, state,
                                            static_cast<int>(a), vals[a][v]);
        if (!edge.possible)
          continue;
        std::vector<int> next = idx;
        next[a] = static_cast<int>(v);
        long nc = encode(next);
        double nd = d + edge.time;
        auto it = dist.find(nc);
        if (it == dist.end() || nd < it->second) {
          dist[nc] = nd;
          BoxingStep step;
          if (!edge.steps.empty())
            step = edge.steps.front();
          else { // size-1 axis: a free relabelling
            step.axis = static_cast<int>(a);
            step.from = state[a];
            step.to = vals[a][v];
            step.free = true;
          }
          prev[nc] = {code, step};
          queue.push({nd, nc});
        }
      }
    }
  }
  if (!dist.count(goal))
    return none;
  BoxingCost out;
  out.possible = true;
  out.time = dist[goal];
  for (long code = goal; code != start; code = prev[code].first)
    out.steps.push_back(prev[code].second);
  std::reverse(out.steps.begin(), out.steps.end());
  return out;
}

} // namespace autoddl::cost
