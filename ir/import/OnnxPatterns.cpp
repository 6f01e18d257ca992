//===- OnnxPatterns.cpp - decomposed GELUs of an ONNX export -------------===//
#include "ir/import/OnnxPatterns.h"

#include <cmath>
#include <map>

namespace autoddl::import {

namespace {

class Matcher {
public:
  Matcher(const onnx::GraphProto &g, const ScalarOf &scalar)
      : g(g), scalar(scalar) {
    for (const auto &n : g.node()) {
      for (const auto &out : n.output())
        producer[out] = &n;
      for (const auto &in : n.input())
        ++uses[in];
    }
    for (const auto &out : g.output())
      ++uses[out.name()];
  }

  /// The node producing `v` if it is `op` and only `user` reads `v`.
  const onnx::NodeProto *only(const std::string &v, const char *op) const {
    auto p = producer.find(v);
    if (p == producer.end() || p->second->op_type() != op ||
        p->second->input_size() != 2 || uses.at(v) != 1)
      return nullptr;
    return p->second;
  }
  /// The single reader of `v` if it is `op` with two inputs and one output
  /// (a malformed export may give a node none: its output(0) is not read).
  const onnx::NodeProto *next(const std::string &v, const char *op) const {
    auto u = uses.find(v);
    if (u == uses.end() || u->second != 1)
      return nullptr;
    for (const auto &n : g.node())
      for (const auto &in : n.input())
        if (in == v)
          return n.op_type() == op && n.input_size() == 2 &&
                         n.output_size() == 1
                     ? &n
                     : nullptr;
    return nullptr;
  }
  /// Of a binary node, the input that is not the constant `c` (within 1e-4
  /// relative), or "" if neither is.
  std::string otherThan(const onnx::NodeProto &n, double c) const {
    for (int i = 0; i < 2; ++i) {
      std::optional<double> v = scalar(n.input(i));
      if (v && std::fabs(*v - c) <= 1e-4 * std::fabs(c))
        return n.input(1 - i);
    }
    return "";
  }
  static std::string other(const onnx::NodeProto &n, const std::string &v) {
    return n.input(0) == v ? n.input(1) : n.input(1) == v ? n.input(0) : "";
  }

  /// From 1 + f(x) (value `onePlus`, made by `add`): x * (1 + f) * 0.5 in
  /// either order of the products; fills m.inner and m.last.
  bool halfProduct(const std::string &onePlus, const std::string &x,
                   GeluMatch &m) const {
    const onnx::NodeProto *mul = next(onePlus, "Mul");
    if (!mul)
      return false;
    std::string o = other(*mul, onePlus);
    if (o == x) { // (x * (1 + f)) * 0.5
      const onnx::NodeProto *half = next(mul->output(0), "Mul");
      if (!half || otherThan(*half, 0.5) != mul->output(0))
        return false;
      m.inner.push_back(mul);
      m.last = half;
      return true;
    }
    const onnx::NodeProto *h = only(o, "Mul"); // (x * 0.5) * (1 + f)
    if (!h || otherThan(*h, 0.5) != x)
      return false;
    m.inner.push_back(h);
    m.last = mul;
    return true;
  }

  std::vector<GeluMatch> run() const {
    std::vector<GeluMatch> out;
    for (const auto &n : g.node()) {
      GeluMatch m;
      if (n.input_size() != 1 || n.output_size() != 1)
        continue;
      if (n.op_type() == "Erf")
        m = erf(n);
      else if (n.op_type() == "Tanh")
        m = tanh(n);
      if (m.last)
        out.push_back(std::move(m));
    }
    return out;
  }

private:
  // 0.5 * x * (1 + erf(x / sqrt(2)))
  GeluMatch erf(const onnx::NodeProto &e) const {
    GeluMatch m;
    std::string x;
    if (const onnx::NodeProto *d = only(e.input(0), "Div"))
      if (scalar(d->input(1)) &&
          std::fabs(*scalar(d->input(1)) - std::sqrt(2.0)) < 1e-4) {
        x = d->input(0);
        m.inner.push_back(d);
      }
    if (x.empty())
      if (const onnx::NodeProto *d = only(e.input(0), "Mul")) {
        x = otherThan(*d, 1 / std::sqrt(2.0));
        m.inner.push_back(d);
      }
    const onnx::NodeProto *add = next(e.output(0), "Add");
    if (x.empty() || !add || otherThan(*add, 1.0) != e.output(0))
      return {};
    m.inner.push_back(&e);
    m.inner.push_back(add);
    m.x = x;
    m.approximate = "none";
    if (!halfProduct(add->output(0), x, m))
      return {};
    return m;
  }

  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
  GeluMatch tanh(const onnx::NodeProto &t) const {
    GeluMatch m;
    const onnx::NodeProto *s = only(t.input(0), "Mul");
    std::string inner = s ? otherThan(*s, std::sqrt(2.0 / M_PI)) : "";
    const onnx::NodeProto *r = inner.empty() ? nullptr : only(inner, "Add");
    if (!r)
      return {};
    for (int i = 0; i < 2 && m.x.empty(); ++i) {
      const onnx::NodeProto *q = only(r->input(i), "Mul");
      std::string cube = q ? otherThan(*q, 0.044715) : "";
      const onnx::NodeProto *p = cube.empty() ? nullptr : only(cube, "Pow");
      std::optional<double> three = p ? scalar(p->input(1)) : std::nullopt;
      if (three && *three == 3.0 && p->input(0) == r->input(1 - i)) {
        m.x = p->input(0);
        m.inner = {p, q, r, s};
      }
    }
    const onnx::NodeProto *add = next(t.output(0), "Add");
    if (m.x.empty() || !add || otherThan(*add, 1.0) != t.output(0))
      return {};
    m.inner.push_back(&t);
    m.inner.push_back(add);
    m.approximate = "tanh";
    if (!halfProduct(add->output(0), m.x, m))
      return {};
    return m;
  }

  const onnx::GraphProto &g;
  const ScalarOf &scalar;
  std::map<std::string, const onnx::NodeProto *> producer;
  std::map<std::string, int> uses;
};

} // namespace

std::vector<GeluMatch> matchDecomposedGelu(const onnx::GraphProto &g,
                                           const ScalarOf &scalar) {
  return Matcher(g, scalar).run();
}

} // namespace autoddl::import
