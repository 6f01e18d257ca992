//===- NumberFold.cpp - code that differs in numbers only, folded ---------===//
#include "codegen/emit/NumberFold.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace autoddl::codegen::emit {

Segments::Segments(const std::string &text) {
  for (size_t b = 0; b < text.size();) {
    const bool digit = std::isdigit(static_cast<unsigned char>(text[b]));
    size_t e = b;
    while (e < text.size() &&
           bool(std::isdigit(static_cast<unsigned char>(text[e]))) == digit)
      ++e;
    runs.push_back(text.substr(b, e - b));
    offset.push_back(b);
    b = e;
  }
}

std::string Segments::shape() const {
  std::string s;
  for (size_t i = 0; i < runs.size(); ++i)
    s += digits(i) ? "#" : runs[i];
  return s;
}

std::string linearIn(const std::vector<int> &xs,
                     const std::vector<long> &values, const std::string &var,
                     bool comment) {
  const long dx = xs[1] - xs[0], dv = values[1] - values[0];
  if (dx == 0 || dv % dx != 0)
    return "";
  const long a = dv / dx, c = values[0] - a * xs[0];
  for (size_t i = 0; i < xs.size(); ++i)
    if (a * xs[i] + c != values[i])
      return "";
  std::string e = a == 0 ? "" : a == 1 ? var : fmt::format("{} * {}", a, var);
  if (a == -1 && c > 0)
    e = fmt::format("{} - {}", c, var);
  else if (c != 0 || e.empty())
    e += e.empty() ? std::to_string(c)
                   : fmt::format(" {} {}", c < 0 ? '-' : '+', c < 0 ? -c : c);
  if (comment)
    return "{" + e + "}";
  return e == var ? e : "(" + e + ")";
}

namespace {

/// The body of a loop over i that runs `group`'s blocks, or "" where one of
/// their differing numbers cannot be an expression of i.
std::string loopBody(const std::vector<const Segments *> &group,
                     const std::string &text, const std::string &var = "i") {
  std::vector<int> xs;
  for (size_t i = 0; i < group.size(); ++i)
    xs.push_back(int(i));
  const Segments &s0 = *group.front();
  std::string out;
  for (size_t k = 0; k < s0.runs.size(); ++k) {
    if (!s0.digits(k)) {
      out += s0.runs[k];
      continue;
    }
    std::vector<long> values;
    for (const Segments *s : group)
      values.push_back(std::stol(s->runs[k]));
    if (std::all_of(values.begin(), values.end(),
                    [&](long v) { return v == values.front(); })) {
      out += s0.runs[k];
      continue;
    }
    const size_t at = s0.offset[k], e = at + s0.runs[k].size();
    const size_t lineStart = text.rfind('\n', at) + 1; // npos + 1 = 0
    const std::string before = text.substr(lineStart, at - lineStart);
    const bool comment = before.find("//") != std::string::npos;
    const bool inString = std::count(before.begin(), before.end(), '"') % 2;
    const bool inIdent = (at > 0 && identChar(text[at - 1])) ||
                         (e < text.size() && identChar(text[e]));
    const bool inTemplateArg = at > 0 && text[at - 1] == '<';
    const bool inFloat =
        (at > 0 && text[at - 1] == '.') ||
        (e + 1 < text.size() && text[e] == '.' &&
         std::isdigit(static_cast<unsigned char>(text[e + 1])));
    const std::string ex = linearIn(xs, values, var, comment);
    if (!comment &&
        (inString || inIdent || inFloat || inTemplateArg || ex.empty()))
      return "";
    out += ex.empty() ? "*" : ex;
  }
  return out;
}

} // namespace

std::string foldBlocks(const std::vector<std::string> &blocks,
                       const std::string &indent, bool anyOrder,
                       const std::vector<std::string> *asIs) {
  std::vector<Segments> segs;
  for (const std::string &b : blocks)
    segs.emplace_back(b);
  std::map<std::string, std::vector<size_t>> byShape;
  for (size_t b = 0; b < blocks.size(); ++b)
    byShape[segs[b].shape()].push_back(b);
  std::vector<bool> folded(blocks.size(), false);
  // The groups to fold: each shape's blocks, or where their numbers follow
  // no line, its blocks split by the value of one number (a layer's
  // ln_1 / ln_2 blocks apart, each then linear in the layer).
  std::vector<std::vector<size_t>> groups;
  for (const auto &[shape, members] : byShape) {
    if (members.size() < 2)
      continue;
    auto folds = [&](const std::vector<size_t> &g) {
      std::vector<const Segments *> group;
      for (size_t b : g)
        group.push_back(&segs[b]);
      return !loopBody(group, blocks[g.front()]).empty();
    };
    if (folds(members)) {
      groups.push_back(members);
      continue;
    }
    for (auto &part : splitByNumber(members, segs, folds))
      groups.push_back(std::move(part));
  }
  std::sort(groups.begin(), groups.end()); // by their first block
  // Per loop (its first block): its trip count and body; with anyOrder,
  // the groups of one trip count share the loop of the first of them.
  std::map<size_t, std::pair<size_t, std::string>> loops;
  std::map<size_t, size_t> loopOfCount;
  for (const std::vector<size_t> &members : groups) {
    std::vector<const Segments *> group;
    for (size_t b : members)
      group.push_back(&segs[b]);
    const std::string body = loopBody(group, blocks[members.front()]);
    size_t at = members.front();
    if (anyOrder) {
      auto [it, fresh] = loopOfCount.emplace(members.size(), at);
      at = it->second;
    }
    auto &loop = loops[at];
    loop.first = members.size();
    for (size_t b = 0; b < body.size();) {
      size_t e = body.find('\n', b);
      e = e == std::string::npos ? body.size() : e + 1;
      loop.second += "  " + body.substr(b, e - b);
      b = e;
    }
    for (size_t b : members)
      folded[b] = true;
  }
  std::string out;
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (!folded[b])
      out += asIs ? (*asIs)[b] : blocks[b];
    auto it = loops.find(b);
    if (it != loops.end())
      out += fmt::format("{}for (int i = 0; i < {}; ++i) {{\n{}{}}}\n", indent,
                         it->second.first, it->second.second, indent);
  }
  return out;
}

std::string numbersOut(const std::string &text, std::vector<long> &numbers) {
  std::string out;
  bool comment = false, quoted = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n')
      comment = quoted = false;
    else if (!comment && c == '"')
      quoted = !quoted;
    else if (!quoted && text.compare(i, 2, "//") == 0)
      comment = true;
    size_t e = i;
    while (e < text.size() && std::isdigit(static_cast<unsigned char>(text[e])))
      ++e;
    const bool alone = e > i && !quoted &&
                       (i == 0 || !identChar(text[i - 1])) &&
                       (e == text.size() || !identChar(text[e])) &&
                       (i == 0 || (text[i - 1] != '.' && text[i - 1] != '<')) &&
                       (e == text.size() || text[e] != '.') &&
                       (i < 4 || (text.compare(i - 4, 4, "l - ") != 0 &&
                                  text.compare(i - 4, 4, "l + ") != 0));
    if (!alone) {
      out.append(text, i, std::max(e, i + 1) - i);
      i = std::max(e, i + 1);
      continue;
    }
    numbers.push_back(std::stol(text.substr(i, e - i)));
    out += comment ? '\2' : '\1';
    i = e;
  }
  return out;
}

std::string numbersIn(const std::string &marked, const std::vector<int> &xs,
                      const std::vector<std::vector<long>> &values,
                      const std::string &var) {
  std::string out;
  size_t k = 0;
  for (char c : marked) {
    if (c != '\1' && c != '\2') {
      out += c;
      continue;
    }
    std::vector<long> vs;
    for (const auto &v : values)
      vs.push_back(v[k]);
    ++k;
    if (std::all_of(vs.begin(), vs.end(),
                    [&](long v) { return v == vs.front(); })) {
      out += std::to_string(vs.front());
      continue;
    }
    // In a comment too as "(5 - l)": a stage template's "{...}" may
    // surround its numbers.
    const std::string ex = linearIn(xs, vs, var, false);
    if (ex.empty() && c == '\1')
      return "";
    out += ex.empty() ? "*" : ex;
  }
  return out;
}

LayerName splitLayerIndex(const std::string &name) {
  size_t b = 0;
  while (b <= name.size()) {
    size_t e = name.find('.', b);
    if (e == std::string::npos)
      e = name.size();
    if (e > b && e - b < 9 &&
        std::all_of(name.begin() + long(b), name.begin() + long(e),
                    [](char c) { return std::isdigit((unsigned char)c); }))
      return {name.substr(0, b), name.substr(e),
              std::stol(name.substr(b, e - b))};
    b = e + 1;
  }
  return {name, "", -1};
}

std::string foldRuns(const std::vector<std::string> &lines,
                     const std::string &indent, const std::string &var) {
  const size_t n = lines.size();
  std::vector<std::string> shape;
  std::vector<Segments> segs;
  for (const std::string &l : lines) {
    segs.emplace_back(l);
    shape.push_back(segs.back().shape());
  }
  // The body of a loop over `count` windows of `p` lines from line i, or "".
  auto body = [&](size_t i, size_t p, size_t count) {
    std::string first;
    for (size_t k = 0; k < p; ++k)
      first += lines[i + k];
    std::vector<Segments> windows;
    for (size_t w = 0; w < count; ++w) {
      std::string text;
      for (size_t k = 0; k < p; ++k)
        text += lines[i + w * p + k];
      windows.emplace_back(text);
    }
    std::vector<const Segments *> group;
    for (const Segments &w : windows)
      group.push_back(&w);
    return loopBody(group, first, var);
  };
  std::string out;
  for (size_t i = 0; i < n;) {
    size_t bestP = 0, bestCount = 1;
    std::string bestBody;
    for (size_t p = 1; p <= 64 && i + 2 * p <= n; ++p) {
      size_t count = 1;
      while (i + (count + 1) * p <= n &&
             std::equal(shape.begin() + long(i), shape.begin() + long(i + p),
                        shape.begin() + long(i + count * p)))
        ++count;
      if (count < 2 || count * p <= bestCount * bestP)
        continue;
      std::string b = body(i, p, count);
      if (b.empty())
        continue;
      bestP = p, bestCount = count, bestBody = std::move(b);
    }
    if (bestP == 0) {
      out += lines[i++];
      continue;
    }
    out += fmt::format("{}for (int {} = 0; {} < {}; ++{}) {{\n", indent, var,
                       var, bestCount, var);
    for (size_t b = 0; b < bestBody.size();) {
      size_t e = bestBody.find('\n', b);
      e = e == std::string::npos ? bestBody.size() : e + 1;
      out += "  " + bestBody.substr(b, e - b);
      b = e;
    }
    out += indent + "}\n";
    i += bestP * bestCount;
  }
  return out;
}

} // namespace autoddl::codegen::emit
