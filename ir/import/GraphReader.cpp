//===- GraphReader.cpp - {"graph": {...}}: an explicit op graph ----------===//
//
// Inputs, parameters and ops named by the user; ops refer to tensors by name
// and may be listed in any order. The reader resolves names (refusing dangling
// and duplicate ones), orders the ops topologically (refusing cycles, naming
// the ops on the cycle), and infers every shape through ops::inferResultTypes.
//
//===----------------------------------------------------------------------===//
#include "ir/import/GraphBuilder.h"
#include "ir/import/Readers.h"

#include "support/JsonFile.h"
#include "support/UserError.h"

#include <map>
#include <set>

namespace autoddl::import {

namespace {

struct RawOp {
  std::string kind, name;
  std::vector<std::string> inputs;
  std::string output;
  ops::Attrs attrs;
  int layer = -1;
  json::json_pointer where;
};

const json &array(JsonFields &f, const std::string &key, bool required) {
  static const json empty = json::array();
  const json *v = f.find(key);
  if (!v) {
    if (required)
      f.fail(key, "missing required field");
    return empty;
  }
  if (!v->is_array())
    f.fail(key, "expected an array, got " + describe(*v));
  return *v;
}

/// Each element of f's array `key`, read by `read(element, index)` as a strict
/// (no nulls, no unknown fields) JsonFields.
template <class Read>
void eachObject(JsonFields &f, const std::string &key, bool required,
                Read read) {
  const json &a = array(f, key, required);
  for (size_t i = 0; i < a.size(); ++i) {
    JsonFields e(a[i], f.pointer() / key / i, f.originName(), true);
    read(e, i);
  }
}

ops::Shape readShape(JsonFields &f) {
  const json *v = f.find("shape");
  if (!v)
    f.fail("shape", "missing required field");
  if (!v->is_array())
    f.fail("shape",
           "expected an array of positive integers, got " + describe(*v));
  if (v->size() > 8)
    f.fail("shape",
           "expected at most 8 dimensions, got " + std::to_string(v->size()));
  ops::Shape s;
  for (size_t i = 0; i < v->size(); ++i)
    s.push_back(positiveSize(
        (*v)[i], jsonPlace(f.originName(), f.pointer() / "shape" / i)));
  return s;
}

std::vector<std::string> names(JsonFields &f, const std::string &key) {
  const json &a = array(f, key, true);
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_string() || a[i].get<std::string>().empty())
      throw UserError(jsonPlace(f.originName(), f.pointer() / key / i) +
                      "expected a tensor name, got " + describe(a[i]));
    out.push_back(a[i].get<std::string>());
  }
  return out;
}

ops::AttrValue readAttr(const json &v, ops::AttrKind kind,
                        const std::string &place) {
  auto integer = [&](const json &x, const std::string &where) -> int64_t {
    if (x.is_number_integer() &&
        !(x.is_number_unsigned() && x.get<uint64_t>() > INT64_MAX))
      return x.get<int64_t>();
    throw UserError(where + "expected an integer (i64), got " + describe(x));
  };
  switch (kind) {
  case ops::AttrKind::I64:
    return integer(v, place);
  case ops::AttrKind::F64:
    if (!v.is_number())
      throw UserError(place + "expected a number (f64), got " + describe(v));
    return v.get<double>();
  case ops::AttrKind::Bool:
    if (!v.is_boolean())
      throw UserError(place + "expected true or false, got " + describe(v));
    return v.get<bool>();
  case ops::AttrKind::Str:
    if (!v.is_string())
      throw UserError(place + "expected a string, got " + describe(v));
    return v.get<std::string>();
  case ops::AttrKind::I64Array: {
    if (!v.is_array())
      throw UserError(place + "expected an array of integers, got " +
                      describe(v));
    std::vector<int64_t> out;
    for (const json &x : v)
      out.push_back(integer(x, place));
    return out;
  }
  }
  return int64_t{0};
}

RawOp readOp(JsonFields &f) {
  RawOp op;
  op.where = f.pointer();
  op.kind = f.string("op");
  const ops::OpInfo *info = ops::lookupOp(op.kind);
  if (!info || op.kind == "parameter")
    f.fail("op",
           "unknown op '" + op.kind + "' (see docs/ir.md for the vocabulary)");
  op.name = f.string("name");
  if (op.name.empty())
    f.fail("name", "expected a non-empty op name");
  op.inputs = names(f, "inputs");
  std::vector<std::string> outputs = names(f, "outputs");
  if (outputs.size() != 1)
    f.fail("outputs",
           "expected 1 output name, got " + std::to_string(outputs.size()));
  op.output = outputs[0];
  op.layer = f.integer("layer", -1, -1, kMaxLayers - 1);
  if (const json *attrs = f.find("attrs")) {
    JsonFields a(*attrs, f.pointer() / "attrs", f.originName());
    for (auto it = attrs->begin(); it != attrs->end(); ++it) {
      std::optional<ops::AttrKind> kind = ops::attrKind(op.kind, it.key());
      if (!kind) {
        std::string known;
        for (auto list : {info->requiredAttrs, info->optionalAttrs})
          for (std::string_view n : list)
            known += (known.empty() ? "" : ", ") + std::string(n);
        a.fail(it.key(), "unknown attribute '" + it.key() + "' for op " +
                             op.kind +
                             (known.empty() ? " (it takes none)"
                                            : " (expected: " + known + ")"));
      }
      op.attrs[it.key()] = readAttr(*it, *kind, a.place(it.key()));
    }
  }
  f.rejectUnknown();
  return op;
}

// Kahn's algorithm, taking ready ops in file order so the output is stable.
// On a cycle, walks back through unplaced producers to name the ops on it.
std::vector<size_t>
topologicalOrder(const std::vector<RawOp> &ops,
                 const std::map<std::string, size_t> &producer,
                 const std::string &origin) {
  size_t n = ops.size();
  std::vector<std::vector<size_t>> users(n);
  std::vector<size_t> pending(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (const std::string &in : ops[i].inputs)
      if (auto it = producer.find(in); it != producer.end()) {
        users[it->second].push_back(i);
        ++pending[i];
      }
  std::set<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0)
      ready.insert(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0)
        ready.insert(u);
  }
  if (order.size() == n)
    return order;
  std::vector<bool> placed(n, false);
  for (size_t i : order)
    placed[i] = true;
  size_t start = 0;
  while (placed[start])
    ++start;
  // Every unplaced op has an unplaced producer; following them must revisit.
  std::vector<size_t> path;
  std::map<size_t, size_t> seen;
  size_t cur = start;
  while (!seen.count(cur)) {
    seen[cur] = path.size();
    path.push_back(cur);
    for (const std::string &in : ops[cur].inputs)
      if (auto it = producer.find(in);
          it != producer.end() && !placed[it->second]) {
        cur = it->second;
        break;
      }
  }
  // path runs from consumers to producers and path.back()'s producer is cur:
  // in the direction data flows, the cycle is cur -> path.back() -> ... ->
  // path[seen[cur]] (= cur).
  std::string cycle = "'" + ops[cur].name + "'";
  for (size_t k = path.size(); k-- > seen[cur];)
    cycle += " -> '" + ops[path[k]].name + "'";
  throw UserError(jsonPlace(origin, ops[cur].where) +
                  "cycle in the graph: " + cycle);
}

} // namespace

ModelGraph readGraph(JsonFields &doc, const BuildOptions &options) {
  doc.refuseNulls(); // our format: a null is a mistake, not a default
  BuildOptions o = options;
  o.name = doc.string("name", o.name);
  doc.string("description", "");
  int64_t batch = doc.positive("batch", 1);
  int64_t seq = doc.integer("seq", 0, 0, INT64_MAX);
  JsonFields g = doc.object("graph");
  doc.rejectUnknown();
  const std::string &origin = doc.originName();

  GraphBuilder b(o.name, "graph", g.place());
  eachObject(g, "inputs", true, [&](JsonFields &f, size_t) {
    std::string name = f.string("name");
    ops::Shape shape = readShape(f);
    std::string dtype = f.string("dtype", "f32");
    std::optional<ops::DType> t = ops::parseDType(dtype);
    if (!t)
      f.fail("dtype", "unknown dtype '" + dtype +
                          "' (expected f32, bf16, f16, i32 or i64)");
    bool sparse = f.flag("sparse", false);
    int64_t nnz = sparse ? f.integer("nnz", 0, 0, INT64_MAX) : 0;
    if (sparse && !f.has("nnz"))
      f.fail(
          "nnz",
          "missing required field (sparse inputs give their stored entries)");
    f.rejectUnknown();
    b.setPlace(f.place());
    if (sparse) {
      if (shape.size() != 2)
        f.fail("shape", "expected a 2-d shape for a sparse input");
      b.sparseInput(name, shape, nnz);
    } else {
      b.input(name, shape, *t);
    }
  });
  eachObject(g, "params", false, [&](JsonFields &f, size_t) {
    std::string name = f.string("name");
    ops::Shape shape = readShape(f);
    std::string init = f.string("init", "normal");
    double std = f.real("init_std", 0.02);
    f.rejectUnknown();
    b.setPlace(f.place());
    b.param(name, shape, init, std);
  });

  if (array(g, "ops", true).empty())
    g.fail("ops", "expected at least one op");
  std::vector<RawOp> raw;
  std::map<std::string, size_t> producer;
  std::set<std::string> opNames;
  eachObject(g, "ops", true, [&](JsonFields &f, size_t i) {
    raw.push_back(readOp(f));
    const RawOp &op = raw.back();
    if (!opNames.insert(op.name).second)
      f.fail("name", "duplicate op name '" + op.name + "'");
    if (b.find(op.output) >= 0 || producer.count(op.output))
      f.fail("outputs", "tensor '" + op.output + "' is already defined");
    producer[op.output] = i;
  });
  for (const RawOp &op : raw)
    for (size_t k = 0; k < op.inputs.size(); ++k)
      if (b.find(op.inputs[k]) < 0 && !producer.count(op.inputs[k]))
        throw UserError(jsonPlace(origin, op.where / "inputs" / k) + "op '" +
                        op.name + "' reads tensor '" + op.inputs[k] +
                        "', which no input, parameter or op defines");
  std::string lossName = g.string("loss");
  int64_t layers = g.integer("layers", -1, 0, kMaxLayers);
  g.rejectUnknown();

  int64_t maxLayer = -1;
  for (size_t i : topologicalOrder(raw, producer, origin)) {
    const RawOp &op = raw[i];
    std::vector<int> operands;
    for (const std::string &in : op.inputs)
      operands.push_back(b.find(in));
    b.setPlace(jsonPlace(origin, op.where));
    b.setLayer(op.layer);
    b.op(op.kind, op.name, operands, op.attrs, op.output);
    maxLayer = std::max<int64_t>(maxLayer, op.layer);
  }
  int loss = b.find(lossName);
  b.setPlace(g.place("loss"));
  if (loss < 0)
    g.fail("loss", "no tensor named '" + lossName + "'");
  return b.finish(loss, layers >= 0 ? layers : maxLayer + 1, batch, seq);
}

} // namespace autoddl::import
