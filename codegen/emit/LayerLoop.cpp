//===- LayerLoop.cpp - identical layers as a loop over a table ------------===//
//
// A model's repeated blocks (OpDef::layer) become, in train.cpp, a table of
// per-layer parameters (P.transformer_h[l]) and, per stage, a table of
// per-layer activation buffers (a.layers[l]), and the stage's forward and
// backward run the layers after the first one as a loop, so the program's
// size does not grow with the number of identical layers. The ops are
// emitted layer by layer as before; the fold renames each layer's buffers
// and parameters to their table entries and loops over the layers whose
// lines then read the same. A layer whose lines differ stays unrolled.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/LayerLoops.h"
#include "codegen/emit/NumberFold.h" // identChar, numbersOut

#include <functional>

namespace autoddl::codegen::emit {

namespace {

/// Splits identifier `id` at the first "_<l>_": "transformer_h_3_ln_1_weight"
/// with l = 3 -> {"transformer_h", "ln_1_weight"}; empty when absent.
std::pair<std::string, std::string> splitAtLayer(const std::string &id, int l) {
  const std::string tok = "_" + std::to_string(l) + "_";
  const size_t p = id.find(tok);
  if (p == std::string::npos || p == 0)
    return {};
  return {id.substr(0, p), id.substr(p + tok.size())};
}

/// Replaces each whole-word occurrence of `from` in `s` by `to`.
void replaceWord(std::string &s, const std::string &from,
                 const std::string &to) {
  size_t p = 0;
  while ((p = s.find(from, p)) != std::string::npos) {
    const size_t e = p + from.size();
    if ((p == 0 || !identChar(s[p - 1])) &&
        (e == s.size() || !identChar(s[e]) || !identChar(from.back()))) {
      s.replace(p, from.size(), to);
      p += to.size();
    } else {
      p = e;
    }
  }
}

/// Layer 1's loop form `second` with each read of the layer before's
/// member (a.layers[l - 1].<m>) that layer 0's form `first` reads from the
/// stage (a.<x>, the same x for every such m) as
/// `(l == 0 ? a.<x> : a.layers[l - 1].<m>)` (`.data()` inside the branches
/// where it follows); "" where the two forms differ otherwise.
std::string withStageInput(const std::string &first,
                           const std::string &second) {
  static const std::string prev = "a.layers[l - 1].";
  std::map<std::string, std::string> inputOf; // member -> stage buffer
  std::string out;
  size_t p0 = 0, p1 = 0;
  while (true) {
    const size_t m = second.find(prev, p1);
    const std::string plain =
        second.substr(p1, m == std::string::npos ? std::string::npos : m - p1);
    if (first.compare(p0, plain.size(), plain) != 0)
      return "";
    out += plain;
    p0 += plain.size();
    if (m == std::string::npos)
      break;
    size_t e1 = m + prev.size(), e0 = p0;
    while (e1 < second.size() && identChar(second[e1]))
      ++e1;
    if (first.compare(p0, 2, "a.") != 0)
      return "";
    e0 = p0 + 2;
    while (e0 < first.size() && identChar(first[e0]))
      ++e0;
    const std::string member =
        second.substr(m + prev.size(), e1 - m - prev.size());
    const std::string input = first.substr(p0 + 2, e0 - p0 - 2);
    if (input.empty() || input == "layers" ||
        inputOf.emplace(member, input).first->second != input)
      return "";
    // Each branch reads its pointer: the two buffers may differ in type (a
    // per-set input gradient, a gradient the sets share: StageSets.h).
    std::string read;
    if (second.compare(e1, 7, ".data()") == 0 &&
        first.compare(e0, 7, ".data()") == 0) {
      read = ".data()";
      e1 += 7;
      e0 += 7;
    }
    out += fmt::format("(l == 0 ? a.{0}{2} : a.layers[l - 1].{1}{2})", input,
                       member, read);
    p0 = e0;
    p1 = e1;
  }
  return p0 == first.size() && !inputOf.empty() ? out : "";
}

/// The runs [b, e) of consecutive indices of [begin, end) whose `keys` are
/// equal, in order or last first.
template <class Key>
std::vector<std::pair<size_t, size_t>> equalRuns(size_t begin, size_t end,
                                                 bool lastFirst,
                                                 const std::vector<Key> &keys) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t j = begin; j < end; ++j)
    if (!runs.empty() && keys[j] == keys[runs.back().first])
      runs.back().second = j + 1;
    else
      runs.push_back({j, j + 1});
  if (lastFirst)
    std::reverse(runs.begin(), runs.end());
  return runs;
}

} // namespace

void EmitContext::planLayerParams() {
  // A parameter belongs to layer l when only ops of layer l read it.
  std::vector<int> layerOf(g.tensors.size(), -2);
  for (const OpDef &op : g.ops)
    for (int t : op.operands)
      if (isParam(t)) {
        int &lo = layerOf[size_t(t)];
        lo = lo == -2 ? op.layer : (lo == op.layer ? lo : -1);
      }
  // Per array name, per layer, its parameters in tensor order.
  std::map<std::string, std::map<int, std::vector<int>>> groups;
  std::vector<int> order; // the parameters in tensor order
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (!isParam(int(t)))
      continue;
    order.push_back(int(t));
    if (layerOf[t] < 0)
      continue;
    auto [a, b] = splitAtLayer(names[t], layerOf[t]);
    if (!a.empty() && !b.empty())
      groups[a][layerOf[t]].push_back(int(t));
  }
  for (auto &[array, byLayer] : groups) {
    if (byLayer.size() < 2)
      continue;
    // Every layer the same parameters (names, shapes, layouts, inits), and
    // the array one run of the parameter order: the table keeps that order.
    const std::vector<int> &first = byLayer.begin()->second;
    bool same = true;
    std::vector<int> flat;
    for (auto &[l, ts] : byLayer) {
      same = same && ts.size() == first.size();
      for (size_t k = 0; same && k < ts.size(); ++k) {
        const TensorDef &x = g.tensors[size_t(ts[k])],
                        &y = g.tensors[size_t(first[k])];
        same = splitAtLayer(names[size_t(ts[k])], l).second ==
                   splitAtLayer(names[size_t(first[k])], byLayer.begin()->first)
                       .second &&
               x.shape == y.shape && x.init == y.init &&
               x.initStd == y.initStd &&
               L.tensors[size_t(ts[k])] == L.tensors[size_t(first[k])] &&
               !padRows.count(ts[k]);
      }
      flat.insert(flat.end(), ts.begin(), ts.end());
    }
    auto at = std::find(order.begin(), order.end(), flat.front());
    same = same && size_t(order.end() - at) >= flat.size() &&
           std::equal(flat.begin(), flat.end(), at);
    // The table and its members become C++ names (P.<array>[j].<member>):
    // not another parameter's, a keyword's or a macro's, nor one twice.
    IdentTable cxx;
    for (int t : order)
      if (std::find(flat.begin(), flat.end(), t) == flat.end())
        cxx.take(names[size_t(t)]);
    same = same && cxx.free(array);
    IdentTable memberNames;
    for (int t : first) {
      const std::string m =
          splitAtLayer(names[size_t(t)], byLayer.begin()->first).second;
      same = same && memberNames.free(m);
      memberNames.take(m);
    }
    if (!same)
      continue;
    LayerArray arr;
    arr.name = array;
    for (auto &[l, ts] : byLayer) {
      arr.layers.push_back(l);
      arr.params.push_back(ts);
    }
    for (int t : first)
      arr.members.push_back(
          splitAtLayer(names[size_t(t)], byLayer.begin()->first).second);
    for (size_t j = 0; j < arr.params.size(); ++j)
      for (size_t k = 0; k < arr.members.size(); ++k)
        names[size_t(arr.params[j][k])] =
            fmt::format("{}[{}].{}", array, j, arr.members[k]);
    arrayOfParam[arr.params.front().front()] = int(layerArrays.size());
    layerArrays.push_back(std::move(arr));
  }
}

std::string LayerLoops::paramsText(const std::vector<uint64_t> &mask) const {
  std::string types, params, table;
  auto spec = [&](size_t t, const std::string &ref, const std::string &name,
                  const std::string &devices) {
    const auto &td = cx_.g.tensors[t];
    // A packed q|k|v split per segment names its segment count last.
    const std::string segments =
        cx_.L.tensors[t].segments > 1
            ? fmt::format(", {}", cx_.L.tensors[t].segments)
            : std::string();
    return fmt::format("{{&P.{}, {}, {}, {}, {}, {}, {}{}}}", ref, name,
                       shapeInit(td.shape), cx_.L.tensors[t].dim,
                       cStringLiteral(td.init.empty() ? "normal" : td.init),
                       fmtDouble(td.initStd), devices, segments);
  };
  std::set<int> inArray;
  for (const LayerArray &arr : cx_.layerArrays)
    for (const auto &ts : arr.params)
      inArray.insert(ts.begin(), ts.end());
  for (size_t t = 0; t < cx_.g.tensors.size(); ++t) {
    if (!cx_.isParam(int(t)))
      continue;
    const auto &td = cx_.g.tensors[t];
    auto ai = cx_.arrayOfParam.find(int(t));
    if (ai != cx_.arrayOfParam.end()) {
      const LayerArray &arr = cx_.layerArrays[size_t(ai->second)];
      const std::string type = "LayerParams_" + arr.name;
      types += fmt::format("// The parameters of one of the layers {}[0..{}].\n"
                           "struct {} {{\n",
                           arr.name, arr.layers.size() - 1, type);
      std::string masks;
      for (size_t j = 0; j < arr.params.size(); ++j)
        masks += fmt::format("{}{:#x}", j ? ", " : "",
                             mask[size_t(arr.params[j].front())]);
      table +=
          fmt::format("  {{ // {0}[l]: model layer {1} + l\n"
                      "    const uint64_t devices[] = {{{2}}};\n"
                      "    for (size_t l = 0; l < {3}; ++l) {{\n",
                      arr.name, arr.layers.front(), masks, arr.params.size());
      for (size_t k = 0; k < arr.members.size(); ++k) {
        const size_t p0 = size_t(arr.params[0][k]);
        const auto &d0 = cx_.g.tensors[p0];
        types += fmt::format("  Param {}; // {} {}\n", arr.members[k],
                             shapeStr(d0.shape), cx_.L.tensors[p0].str());
        // The full name with the layer's number in place of layer 0's.
        const std::string tok = "." + std::to_string(arr.layers.front()) + ".";
        const size_t at = d0.name.find(tok);
        if (at == std::string::npos)
          throw UserError("codegen: parameter " + d0.name +
                          " of a layer table names no layer number");
        const std::string name = fmt::format(
            "param_name({} + std::to_string({} + l) + {})",
            cStringLiteral(d0.name.substr(0, at + 1)), arr.layers.front(),
            cStringLiteral(d0.name.substr(at + tok.size() - 1)));
        table += "      specs.push_back(" +
                 spec(p0, fmt::format("{}[l].{}", arr.name, arr.members[k]),
                      name, "devices[l]") +
                 ");\n";
      }
      types += "};\n\n";
      params +=
          fmt::format("  {} {}[{}]; // model layers {}..{}\n", type, arr.name,
                      arr.layers.size(), arr.layers.front(), arr.layers.back());
      table += "    }\n  }\n";
      continue;
    }
    if (inArray.count(int(t)))
      continue;
    params += fmt::format("  Param {}; // {} {}\n", cx_.names[t],
                          shapeStr(td.shape), cx_.L.tensors[t].str());
    table += "  specs.push_back(" +
             spec(t, cx_.names[t], cStringLiteral(td.name),
                  fmt::format("{:#x}", mask[t])) +
             ");\n";
  }
  std::string out = types;
  out += "// Every parameter of the model; a rank holds those of the stages it "
         "runs.\nstruct Params {\n" +
         params + "};\nstatic Params P;\n\n";
  if (!cx_.layerArrays.empty())
    out +=
        "// A layer parameter's name, kept for the program's run (a char\n"
        "// vector's buffer stays where it is when the outer vector grows).\n"
        "static const char *param_name(const std::string &name) {\n"
        "  static std::vector<std::vector<char>> names;\n"
        "  names.emplace_back(name.c_str(), name.c_str() + name.size() + 1);\n"
        "  return names.back().data();\n}\n\n";
  out += "// name, full shape, tp split dimension (-1: B), init, std, "
         "pipeline devices holding it (bits)\nstatic std::vector<ParamSpec> "
         "param_specs() {\n  std::vector<ParamSpec> specs;\n" +
         table + "  return specs;\n}\n\n";
  return out;
}

std::vector<int> LayerLoops::paramOrder() const {
  std::set<int> inArray;
  for (const LayerArray &arr : cx_.layerArrays)
    for (const auto &ts : arr.params)
      inArray.insert(ts.begin(), ts.end());
  std::vector<int> order;
  for (size_t t = 0; t < cx_.g.tensors.size(); ++t) {
    auto ai = cx_.arrayOfParam.find(int(t));
    if (ai !=
        cx_.arrayOfParam.end()) // the layer loop: a layer's rows at a time
      for (const auto &layer : cx_.layerArrays[size_t(ai->second)].params)
        order.insert(order.end(), layer.begin(), layer.end());
    else if (cx_.isParam(int(t)) && !inArray.count(int(t)))
      order.push_back(int(t));
  }
  return order;
}

std::string StageLayers::rename(const std::string &text) const {
  if (memberOf.empty())
    return text;
  std::string r;
  r.reserve(text.size() + text.size() / 8);
  size_t i = 0;
  while (i < text.size()) {
    // "a.<identifier>", not inside a longer identifier or member chain.
    if (text.compare(i, 2, "a.") == 0 &&
        (i == 0 || (!identChar(text[i - 1]) && text[i - 1] != '.'))) {
      size_t e = i + 2;
      while (e < text.size() && identChar(text[e]))
        ++e;
      auto it = memberOf.find(text.substr(i + 2, e - i - 2));
      if (it != memberOf.end()) {
        r += fmt::format("a.layers[{}].{}", it->second.first,
                         canon[it->second.second]);
        i = e;
        continue;
      }
    }
    r += text[i++];
  }
  return r;
}

StageLayers
LayerLoops::planStageLayers(int stage,
                            const std::vector<LayerSpan> &spans) const {
  StageLayers sl;
  // One layer is a table too where it recomputes (Recompute.cpp).
  if (spans.empty() || (spans.size() < 2 && cx_.recomputedLayers(stage) == 0))
    return sl;
  const std::vector<Member> &ms = members_.of(stage);
  auto canonOf = [](const std::string &m, int l, std::string &group) {
    auto [a, b] = splitAtLayer(m, l);
    if (a.empty() || b.empty())
      return std::string();
    const bool d = a.rfind("d_", 0) == 0;
    const std::string g = d ? a.substr(2) : a;
    if (!group.empty() && group != g)
      return std::string();
    group = g;
    return (d ? "d_" : "") + b;
  };
  std::string group;
  std::vector<std::vector<std::string>> canon(spans.size());
  for (size_t j = 0; j < spans.size(); ++j) {
    const LayerSpan &sp = spans[j];
    if (j && spans[j].layer != spans[j - 1].layer + 1)
      return {};
    for (size_t m = sp.memberBegin; m < sp.memberEnd; ++m) {
      std::string c = canonOf(ms[m].name, sp.layer, group);
      if (c.empty())
        return {};
      canon[j].push_back(c);
      const Member &a = ms[m],
                   &b = ms[spans[0].memberBegin + (m - sp.memberBegin)];
      if (j && (m - sp.memberBegin >= canon[0].size() ||
                c != canon[0][m - sp.memberBegin] || a.size != b.size ||
                a.i32 != b.i32 || a.grad != b.grad || a.stat != b.stat ||
                a.sizeExpr != b.sizeExpr))
        return {};
    }
    if (canon[j].size() != canon[0].size())
      return {};
  }
  // The members of struct Stage<k>Layer: C++ names, each once ("h_0_d_x"
  // and the gradient of "h_0_x" are both "d_x").
  IdentTable memberNames;
  for (const std::string &c : canon[0]) {
    if (!memberNames.free(c))
      return {};
    memberNames.take(c);
  }
  sl.spans = spans;
  sl.canon = canon[0];
  sl.group = group;
  for (size_t j = 0; j < spans.size(); ++j)
    for (size_t m = spans[j].memberBegin; m < spans[j].memberEnd; ++m)
      sl.memberOf[ms[m].name] = {int(j), m - spans[j].memberBegin};
  return sl;
}

std::string LayerLoops::canonicalLayerText(const StageLayers &sl, size_t j,
                                           const std::string &text) const {
  std::string r = text;
  const int layer = sl.spans[j].layer;
  replaceWord(r, fmt::format("a.layers[{}].", j), "a.layers[l].");
  replaceWord(r, fmt::format("a.layers[{}])", j), "a.layers[l])");
  if (j)
    replaceWord(r, fmt::format("a.layers[{}].", j - 1), "a.layers[l - 1].");
  for (const LayerArray &arr : cx_.layerArrays) {
    const int J = layer - arr.layers.front();
    if (J < 0 || J >= int(arr.layers.size()))
      continue;
    const int off = layer - int(j) - arr.layers.front();
    replaceWord(r, fmt::format("P.{}[{}].", arr.name, J),
                fmt::format("P.{}[l{}].", arr.name,
                            off ? fmt::format(" + {}", off) : ""));
  }
  // Comments name the layer's ops and tensors: "h.3.ln_1" -> "h[l].ln_1"
  // (and the layer before's, "h[l - 1]").
  for (int back = 0; back <= (j ? 1 : 0); ++back) {
    const std::string dotted = fmt::format(".{}.", layer - back);
    const std::string to = back ? "[l - 1]." : "[l].";
    size_t p = 0;
    while ((p = r.find(dotted, p)) != std::string::npos) {
      const size_t nl = r.rfind('\n', p);
      const size_t comment = r.find("//", nl == std::string::npos ? 0 : nl + 1);
      if (comment < p && identChar(r[p - 1])) {
        r.replace(p, dotted.size(), to);
        p += to.size();
      } else {
        p += dotted.size();
      }
    }
  }
  return r;
}

std::string LayerLoops::foldLayers(const StageLayers &sl,
                                   const std::vector<std::string> &stepText,
                                   bool backward,
                                   const StageRecompute *rc) const {
  std::string out;
  // Per layer, its lines (renamed), and from the second layer on their
  // canonical form: equal forms run as one loop.
  const size_t n = sl.spans.size();
  std::vector<std::string> text(n), form(n);
  for (size_t j = 0; j < n; ++j) {
    const LayerSpan &sp = sl.spans[j];
    for (size_t k = sp.stepBegin; k < sp.stepEnd; ++k)
      text[j] += stepText[backward ? sp.stepEnd - 1 - (k - sp.stepBegin) : k];
    if (rc && j < rc->layers) // in the scratch; rerun before the backward
      text[j] = rc->before[j] + (backward ? rc->rerun[j] : "") + text[j] +
                rc->after[j];
    text[j] = sl.rename(text[j]);
    form[j] = canonicalLayerText(sl, j, text[j]);
  }
  // The forms with their standalone numbers as marks: layers whose forms
  // differ in numbers that are lines of l only (a gradient bucket's index)
  // read the same.
  std::vector<std::vector<long>> numbers(n);
  for (size_t j = 0; j < n; ++j)
    form[j] = numbersOut(form[j], numbers[j]);
  std::function<void(size_t, size_t)> emitRun = [&](size_t b,
                                                    size_t e) { // [b, e)
    std::vector<int> xs;
    for (size_t j = b; j < e; ++j)
      xs.push_back(int(j));
    const std::string body =
        e - b == 1
            ? std::string()
            : numbersIn(form[b], xs,
                        {numbers.begin() + long(b), numbers.begin() + long(e)},
                        "l");
    if (e - b == 1) {
      out += text[b];
      return;
    }
    if (body.empty()) { // numbers that follow no line: the runs of equal ones
      for (auto [b2, e2] : equalRuns(b, e, backward, numbers))
        emitRun(b2, e2);
      return;
    }
    out += backward
               ? fmt::format("  for (size_t l = {}; l-- > {};) {{ // "
                             "layers {}..{}, last first\n",
                             e, b, sl.spans[b].layer, sl.spans[e - 1].layer)
               : fmt::format("  for (size_t l = {}; l < {}; ++l) {{ // "
                             "layers {}..{}\n",
                             b, e, sl.spans[b].layer, sl.spans[e - 1].layer);
    out += indent(body) + "  }\n";
  };
  // Layer 0 reads the stage's input where the others read the layer
  // before's: where that is the only difference, the loop's form reads
  // `(l == 0 ? a.<input> : a.layers[l - 1].<member>)` and layer 0 joins it.
  if (n >= 2) {
    const std::string second = form[1];
    const std::string merged = withStageInput(form[0], second);
    for (size_t j = 1; j < n && !merged.empty() && form[j] == second; ++j)
      form[j] = merged;
    if (!merged.empty())
      form[0] = merged;
  }
  for (auto [b, e] : equalRuns(0, n, backward, form)) // runs of equal forms
    emitRun(b, e);
  return out;
}

std::string LayerLoops::layerOrdered(const StageLayers &sl,
                                     const std::vector<std::string> &stepText,
                                     bool backward,
                                     const StageRecompute *rc) const {
  std::string before, after;
  const size_t b = sl.folded() ? sl.spans.front().stepBegin : stepText.size();
  const size_t e = sl.folded() ? sl.spans.back().stepEnd : stepText.size();
  for (size_t i = 0; i < b; ++i)
    before = backward ? stepText[i] + before : before + stepText[i];
  for (size_t i = e; i < stepText.size(); ++i)
    after = backward ? stepText[i] + after : after + stepText[i];
  const std::string layers =
      sl.folded() ? foldLayers(sl, stepText, backward, rc) : std::string();
  return backward ? after + layers + before : before + layers + after;
}

} // namespace autoddl::codegen::emit
