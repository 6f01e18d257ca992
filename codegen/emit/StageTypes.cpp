//===- StageTypes.cpp - identical stages as one template over S ----------===//
//
// A pipeline of many stages (interleaved chunks, deep models) has stages
// whose code reads the same but for numbers: their layers' indices, the
// boundaries and peers of their transfers, their gradient buckets and K-FAC
// rows. Such stages become one struct and one set of functions, templates
// over the stage S, where each number that differs is an expression of S
// (a * S + c, fitted to every stage of the group and so exact for each), and
// each stage runs its instance (stage1_forward<5>). The per-stage data stay
// per stage: the activation sets as a variable template (stage1<5>), a
// micro-batch's set from kSetOf[S]. A number that follows no such line,
// or one in a place a template cannot vary (a struct's member, a string, a
// float literal, an identifier the fold does not know), leaves the stages
// apart. The instances run the calls of the stages they replace, in the same
// order, so the program computes the same.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"
#include "codegen/emit/NumberFold.h"

namespace autoddl::codegen::emit {

namespace {

/// The functions a stage defines (Stage.cpp, KfacEmitter.cpp): a template
/// instance is called as stage<r>_<name><S>(...).
bool stageFunction(const std::string &suffix) {
  static const std::set<std::string> names = {"forward",
                                              "backward",
                                              "backward_input",
                                              "backward_weight",
                                              "forward_compute",
                                              "backward_compute",
                                              "backward_input_compute",
                                              "backward_weight_compute",
                                              "zero_grads",
                                              "reuse",
                                              "kfac",
                                              "load_inputs",
                                              "allocate",
                                              "free"};
  return names.count(suffix) > 0;
}

/// One edit of the representative's text: replace [at, at + len) by `with`.
struct Edit {
  size_t at, len;
  std::string with;
  bool operator<(const Edit &o) const { return at > o.at; } // last first
};

/// The template over S of `group`'s stages (their texts `texts`, the first
/// the representative r), or "" where they cannot share one.
std::string templateOf(const std::vector<int> &group,
                       const std::vector<Segments> &segs,
                       const std::string &text,
                       const std::set<std::string> &members) {
  const int r = group.front();
  const Segments &rs = segs[size_t(r)];
  std::vector<Edit> edits;
  std::set<size_t> templateLines; // line starts that become templates
  // The struct bodies: numbers there cannot follow S.
  std::vector<std::pair<size_t, size_t>> structs;
  for (size_t p = text.find("\nstruct "); p != std::string::npos;
       p = text.find("\nstruct ", p + 1))
    structs.push_back({p, text.find("\n};", p)});
  auto inStruct = [&](size_t at) {
    return std::any_of(structs.begin(), structs.end(),
                       [&](auto s) { return at > s.first && at < s.second; });
  };
  for (size_t i = 0; i < rs.runs.size(); ++i) {
    if (!rs.digits(i))
      continue;
    std::vector<long> values;
    for (int s : group)
      values.push_back(std::stol(segs[size_t(s)].runs[i]));
    if (std::all_of(values.begin(), values.end(),
                    [&](long v) { return v == values.front(); }))
      continue;
    const size_t at = rs.offset[i], len = rs.runs[i].size();
    const size_t lineStart = text.rfind('\n', at) + 1; // npos + 1 = 0
    const std::string before = text.substr(lineStart, at - lineStart);
    if (before.find("//") != std::string::npos) { // a comment: say how
      const std::string e = linearIn(group, values, "S", true);
      edits.push_back({at, len, e.empty() ? "*" : e});
      continue;
    }
    if (std::count(before.begin(), before.end(), '"') % 2 == 1)
      return ""; // in a string
    size_t b = at, e = at + len;
    while (b > 0 && identChar(text[b - 1]))
      --b;
    while (e < text.size() && identChar(text[e]))
      ++e;
    const std::string ident = text.substr(b, e - b);
    const std::string rs_ = std::to_string(r);
    if (ident.size() == len) { // a number
      const bool floatLit =
          (b > 0 && text[b - 1] == '.') ||
          (e + 1 < text.size() && text[e] == '.' &&
           std::isdigit(static_cast<unsigned char>(text[e + 1])));
      const std::string ex = linearIn(group, values, "S", false);
      if (floatLit || ex.empty() || inStruct(at))
        return "";
      edits.push_back({at, len, ex});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ident[0])))
      return ""; // a literal with a suffix (0x3, 2u)
    // An identifier: a name of the shared struct or functions keeps the
    // representative's; the per-stage data are reached through S.
    if (members.count(ident) || ident == "Stage" + rs_ ||
        ident == "Stage" + rs_ + "Layer")
      continue;
    const std::string fnPrefix = "stage" + rs_ + "_";
    if (ident.rfind(fnPrefix, 0) == 0 &&
        stageFunction(ident.substr(fnPrefix.size()))) {
      const std::string lead = text.substr(lineStart, b - lineStart);
      if (lead.size() >= 12 &&
          lead.compare(lead.size() - 12, 12, "static void ") == 0)
        templateLines.insert(lineStart);
      else if (e < text.size() && text[e] == '(')
        edits.push_back({e, 0, "<S>"});
      else
        return "";
      continue;
    }
    if (ident == "stage" + rs_) { // the activation sets
      if (e < text.size() && text[e] == ';')
        templateLines.insert(lineStart);
      else
        edits.push_back({e, 0, "<S>"});
      continue;
    }
    return "";
  }
  for (size_t line : templateLines) {
    const std::string prev = "template <class A>\n";
    if (line >= prev.size() &&
        text.compare(line - prev.size(), prev.size(), prev) == 0)
      edits.push_back(
          {line - prev.size(), prev.size(), "template <int S, class A>\n"});
    else
      edits.push_back({line, 0, "template <int S>\n"});
  }
  std::stable_sort(edits.begin(), edits.end());
  std::string out = text;
  for (const Edit &ed : edits)
    out.replace(ed.at, ed.len, ed.with);
  return out;
}

} // namespace

StageTypes foldStages(const std::vector<std::string> &texts,
                      const std::vector<std::set<std::string>> &members,
                      const std::vector<bool> &eligible) {
  const int n = int(texts.size());
  StageTypes st;
  st.typeOf.resize(size_t(n));
  for (int s = 0; s < n; ++s)
    st.typeOf[size_t(s)] = s;
  st.templated.assign(size_t(n), false);
  std::vector<Segments> segs;
  for (const std::string &t : texts)
    segs.emplace_back(t);
  std::map<std::string, std::vector<int>> byShape;
  for (int s = 0; s < n; ++s)
    if (eligible[size_t(s)])
      byShape[segs[size_t(s)].shape()].push_back(s);
  // The groups of one shape; where one cannot share a template (a number
  // in the struct, such as its layer count, or one that follows no line of
  // S), its stages split by the value of one number (stages of 4 layers
  // apart from those of 3), each part a template where it can.
  std::vector<std::vector<int>> groups;
  auto templates = [&](const std::vector<int> &g) {
    return !templateOf(g, segs, texts[size_t(g.front())],
                       members[size_t(g.front())])
                .empty();
  };
  for (const auto &[shape, group] : byShape) {
    if (group.size() < 2)
      continue;
    if (templates(group)) {
      groups.push_back(group);
      continue;
    }
    for (auto &part : splitByNumber(group, segs, templates))
      groups.push_back(std::move(part));
  }
  std::map<int, std::string> shared; // representative -> its template
  for (const std::vector<int> &group : groups) {
    const int r = group.front();
    std::string t =
        templateOf(group, segs, texts[size_t(r)], members[size_t(r)]);
    std::string list;
    for (int s : group) {
      list += (list.empty() ? "" : ", ") + std::to_string(s);
      st.typeOf[size_t(s)] = r;
      st.templated[size_t(s)] = true;
    }
    shared[r] =
        fmt::format(
            "// ==== stages {}: one struct and one set of functions, templates "
            "over the stage S; the\n// numbers that differ between these "
            "stages "
            "are expressions of S, the names stage {}'s ====\n",
            list, r) +
        t;
  }
  for (int s = 0; s < n; ++s) {
    if (!st.templated[size_t(s)])
      st.text += texts[size_t(s)];
    else if (st.typeOf[size_t(s)] == s)
      st.text += shared[s];
  }
  return st;
}

} // namespace autoddl::codegen::emit
