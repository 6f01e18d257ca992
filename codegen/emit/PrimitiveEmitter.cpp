//===- PrimitiveEmitter.cpp - an ONNX import's unfused primitives ---------===//
//
// An op of kind "primitive" (an ONNX node no sbp-fuse pattern recognised)
// runs through backends/common/OnnxPrimitive.h: the emitter resolves it here
// on the shapes this rank holds (so a form the kernels do not run is refused
// at codegen time, naming the op), and declares at file scope the constants
// it reads and the same resolution for the program. The plan keeps every
// operand and the result whole on the tp axis (codegen/Layout.cpp); under dp
// each rank runs it on its own samples. Registered in OpTable.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpEmitters.h"

#include "ir/import/ResolvePrimitive.h"

namespace autoddl::codegen::emit {

namespace {

/// A float literal that reads back as v rounded to float.
std::string floatLiteral(double v) {
  const float f = float(v);
  if (std::isnan(f))
    return "NAN";
  if (std::isinf(f))
    return f > 0 ? "INFINITY" : "-INFINITY";
  std::string s = fmt::format("{}", f);
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s + "f";
}

/// A double literal (attributes and index values), non-finite ones as the
/// <cmath> macros.
std::string doubleLiteral(double v) {
  if (std::isnan(v))
    return "NAN";
  if (std::isinf(v))
    return v > 0 ? "INFINITY" : "-INFINITY";
  return fmtDouble(v);
}

/// A constant's or buffer's values as float literals, eight a line.
std::string floatValues(const std::vector<double> &v) {
  std::string r;
  for (size_t e = 0; e < v.size(); ++e)
    r += (e ? (e % 8 ? ", " : ",\n    ") : "") + floatLiteral(v[e]);
  return r;
}

std::string listLiteral(const std::vector<int64_t> &v) {
  std::string r = "{";
  for (size_t i = 0; i < v.size(); ++i)
    r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "}";
}

} // namespace

/// A batch norm on batch statistics with buffers for its running mean and
/// var (operands 3 and 4): declares them (their start as the initial
/// values) and the moments of each micro-batch of the step's global order,
/// kDP * kMicroBatches slots of 2C floats; returns this micro-batch's slot
/// (the harness's update_running_stats applies them after the step;
/// docs/checkpoints.md "Buffers"). "" for any other op.
std::string OpEmitters::runningStatistics(const OpCall &c,
                                          const onnx_kernels::Primitive &prim,
                                          const std::string &name) {
  const OpDef &op = c.op;
  if (prim.kind != onnx_kernels::Primitive::Kind::BatchNorm ||
      !prim.batchStats || op.operands.size() != 5 ||
      !cx_.g.tensors[size_t(op.operands[3])].buffer)
    return "";
  const std::string where =
      "codegen: op " + op.name + " (" + kindLabel(op) + ")";
  if (!cx_.layerArrays.empty())
    throw UserError(where + ": running statistics in a model with repeated "
                            "layers' loops are not supported yet");
  // Chimera runs a stage on two devices, each on its own micro-batches,
  // whose moments the dp sum does not join.
  if (cx_.plan.knobs.schedule == pipeline::ScheduleKind::Chimera)
    throw UserError(where + ": running statistics under the Chimera schedule "
                            "are not supported yet (--fix schedule=1f1b)");
  const int64_t C = prim.in[0][1];
  RunningNorm rn{
      c.st, op.operands[3], op.operands[4], "", "", name + "_moments",
      C,    prim.momentum};
  std::string &d = primitiveDecls_;
  for (int t : {rn.mean, rn.var}) {
    const TensorDef &td = cx_.g.tensors[size_t(t)];
    const std::string array = cx_.val(t, TpLayout{});
    (t == rn.mean ? rn.meanArray : rn.varArray) = array;
    d += fmt::format("// {} {}: a module buffer (update_buffers)\nstatic float "
                     "{}[{}] = {{\n    {}}};\n",
                     shapeStr(td.shape), cx_.note(t), array, C,
                     floatValues(td.values));
  }
  d += fmt::format(
      "// [kDP * kMicroBatches][2, {}]: each micro-batch's mean and "
      "unbiased variance\nstatic float {}[kDP * kMicroBatches * "
      "{}];\n",
      C, rn.moments, 2 * C);
  running_.push_back(rn);
  // On the device, the moments' device copy (primitive_buffer).
  const std::string moments =
      cx_.target.devicePrimitives
          ? fmt::format("autoddl::rt::primitive_buffer({}, kDP * "
                        "kMicroBatches * {})",
                        rn.moments, 2 * C)
          : rn.moments;
  return fmt::format("{} + (g.rdp * kMicroBatches + mb) * {}", moments, 2 * C);
}

/// A batch norm whose ReLU runs in its passes (planProducerReluFusion):
/// writes the ReLU's output and takes its gradient, and true; false for any
/// other primitive. `in`, `din`: the operands' and their gradients' list;
/// `store`: ", false" where the norm stores its input's gradient.
bool OpEmitters::normWithRelu(OpCall &c, const std::string &name,
                              const std::string &in, const std::string &din,
                              const std::string &moments, const char *store) {
  const auto it = cx_.reluAfter.find(c.i);
  if (it == cx_.reluAfter.end())
    return false;
  const int out = cx_.g.ops[it->second].results[0];
  const TpLayout lo = cx_.L.ops[it->second].result;
  const std::string relu = cx_.val(out, lo), drelu = cx_.grad(out, lo);
  c.F(fmt::format("autoddl::rt::batchnorm_relu_forward({}, {{{}}}, {}, {}); "
                  "// and {}",
                  name, in, relu, moments.empty() ? "nullptr" : moments,
                  commentText(cx_.g.ops[it->second].name)));
  c.BI(fmt::format("autoddl::rt::batchnorm_relu_backward({}, {{{}}}, {{{}}}, "
                   "{}, {}{});",
                   name, din, in, relu, drelu, store));
  return true;
}

/// The step's calls of primitive `name` (emitPrimitive): `in`, `din` the
/// operands' and their gradients' lists, `moments` a batch norm's running
/// statistics slot ("" : none), `key` a training Dropout's.
void OpEmitters::primitiveCalls(OpCall &c, const onnx_kernels::Primitive &prim,
                                const std::string &name, const std::string &in,
                                const std::string &din,
                                const std::string &moments,
                                const std::string &key) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  // The device's entry points (kernels/Primitive.h) take PrimRefs, the
  // host's templates float pointers: the same arguments.
  const char *call = cx_.target.devicePrimitives ? "autoddl::rt::primitive_"
                                                 : "onnx_prim::primitive_";
  const char *elem = cx_.target.devicePrimitives ? "" : "<float>";
  // The first writer of its input's gradient stores it (the buffer never
  // zeroed) where the device's passes do so (a batch norm, pool, global
  // pool): the entry points say so.
  const bool storeDx = cx_.target.devicePrimitives &&
                       onnx_kernels::primitiveStoresDxInPass(prim) &&
                       cx_.storesGrad(i, op.operands[0], p.operands[0], dx[0]);
  if (storeDx)
    storedGrads_.insert(dx[0]);
  const char *store = storeDx ? ", false" : "";
  if (normWithRelu(c, name, in, din, moments, store))
    return;
  // A norm whose add runs in its normalise pass is called at the add's step
  // (planResidualNormFusion: the shortcut may come later).
  // A batch norm with running statistics also writes its micro-batch's
  // moments: on the device from the forward's own sums.
  if (cx_.normsInAdd.count(i)) {
    F("// at its add's step, the sum in its normalise pass "
      "(batchnorm_add_forward)");
    normsAtAdds_[i] = {name, in, moments};
  } else if (!moments.empty() && cx_.target.devicePrimitives)
    F(fmt::format("autoddl::rt::batchnorm_forward_moments({}, {{{}}}, {}, {});",
                  name, in, y, moments));
  else
    F(fmt::format("{}forward{}({}, {{{}}}, {}{});", call, elem, name, in, y,
                  key));
  if (!moments.empty() && !cx_.target.devicePrimitives)
    F(fmt::format("onnx_prim::batchnorm_moments({}, {}, {}.in[0]);", moments,
                  x[0], name));
  if (storeDx && prim.kind == onnx_kernels::Primitive::Kind::BatchNorm)
    BI(fmt::format("autoddl::rt::batchnorm_backward({}, {{{}}}, {{{}}}, {}{});",
                   name, din, in, dy, store));
  else if (storeDx)
    BI(fmt::format("{}backward({}, {{{}}}, {{{}}}, {}, {}{});", call, name, din,
                   in, y, dy, store));
  else
    BI(fmt::format("{}backward{}({}, {{{}}}, {{{}}}, {}, {});", call, elem,
                   name, din, in, y, dy));
}

/// primitive
void OpEmitters::emitPrimitive(OpCall &c) {
  auto &[i, op, p, st, k, x, dx, xs, r, ys, y, dy, n, s, steps, F, BI, BW,
         sequenceOffset, gatherNodes] = c;
  const std::string type = attrOr(op, ops::attr::kOpType, "");
  const std::string where =
      "codegen: op " + op.name + " (" + kindLabel(op) + ")";
  if (p.result.split())
    throw UserError(where + ": a primitive runs whole on the tp axis, but the "
                            "plan splits its result");
  // A boolean (IsNaN's) is held as 0/1 in a float buffer, as the
  // constants are.
  auto floatHeld = [&](int t) {
    const ops::DType d = cx_.g.tensors[size_t(t)].dtype;
    return d == ops::DType::F32 || (d == ops::DType::Bool && !cx_.isInput(t));
  };
  if (!floatHeld(r))
    throw UserError(where + ": its result is not f32");
  const PrimitiveInputs inputs = primitiveInputs(cx_.g, op);
  const onnx_kernels::PrimitiveAttrs &attrs = inputs.attrs;
  const std::vector<std::vector<double>> &consts = inputs.consts;
  onnx_kernels::Primitive prim;
  if (std::string e =
          onnx_kernels::makePrimitive(prim, type, attrs, xs, ys, consts);
      !e.empty())
    throw UserError(where + ": " + e);

  // A primitive mixing samples under dp or micro-batches: refused by
  // planner/Runnable.h.
  for (size_t j = 0; j < op.operands.size(); ++j)
    if (prim.data[j] && !cx_.isConst(op.operands[j]) &&
        !floatHeld(op.operands[j]))
      throw UserError(where + ": reads " +
                      cx_.g.tensors[size_t(op.operands[j])].name +
                      ", which is not f32, as data");

  // File scope: the constants it reads as data, then its resolution.
  std::string &d = primitiveDecls_;
  if (d.empty())
    d = "// ---- an ONNX import's unfused primitives "
        "(backends/common/OnnxPrimitive.h) ----\nnamespace onnx_prim = "
        "autoddl::onnx_kernels;\n";
  for (size_t j = 0; j < op.operands.size(); ++j) {
    const int t = op.operands[j];
    if (!cx_.isConst(t) || !prim.data[j] || !declaredConsts_.insert(t).second)
      continue;
    const TensorDef &td = cx_.g.tensors[size_t(t)];
    d += fmt::format("// {} {}\nstatic const float {}[{}] = {{\n    {}}};\n",
                     shapeStr(td.shape), cx_.note(t), cx_.val(t, TpLayout{}),
                     std::max<size_t>(1, td.values.size()),
                     floatValues(td.values));
  }
  std::string ints, floats, lists, shapes, constArgs;
  for (const auto &[name, v] : attrs.ints)
    ints += fmt::format("{}{{{}, {}}}", ints.empty() ? "" : ", ",
                        cStringLiteral(name), v);
  for (const auto &[name, v] : attrs.floats)
    floats += fmt::format("{}{{{}, {}}}", floats.empty() ? "" : ", ",
                          cStringLiteral(name), doubleLiteral(v));
  for (const auto &[name, v] : attrs.lists)
    lists += fmt::format("{}{{{}, {}}}", lists.empty() ? "" : ", ",
                         cStringLiteral(name), listLiteral(v));
  for (size_t j = 0; j < xs.size(); ++j) {
    shapes += (j ? ", " : "") + listLiteral(xs[j]);
    // An index input's values resolve the op; written as doubles, as
    // makePrimitive takes them (Slice's INT64_MAX "to the end" included).
    // A buffer (a running mean) is state, not an index: not written.
    std::string index;
    if (!prim.data[j] && !cx_.g.tensors[size_t(op.operands[j])].buffer)
      for (double v : consts[j])
        index += (index.empty() ? "" : ", ") + doubleLiteral(v);
    constArgs += (j ? ", {" : "{") + index + "}";
  }
  // Op names are unique, their identifiers not always ("a.b", "a_b").
  const std::string name = primitiveNames_.add(op.name, "prim_");
  const std::string moments = runningStatistics(c, prim, name);
  // Channels-last (ChannelsLast.cpp): the same resolution, stored NHWC.
  const bool last = cx_.nhwcOps.count(i) > 0;
  d += fmt::format("static const onnx_prim::Primitive {} = {}"
                   "onnx_prim::onnxPrimitive(\n    {}, {{{{{}}}, {{{}}}, "
                   "{{{}}}}},\n    {{{}}}, {},\n    {{{}}}){};\n",
                   name, last ? "onnx_prim::channelsLastPrimitive(" : "",
                   cStringLiteral(type), ints, floats, lists, shapes,
                   listLiteral(ys), constArgs, last ? ")" : "");

  // The step: operands in ONNX order (an index input is not read). On the
  // device a constant is read from its uploaded copy.
  std::string in, din;
  for (size_t j = 0; j < x.size(); ++j) {
    std::string v = prim.data[j] ? x[j] : std::string("nullptr");
    if (prim.data[j] && cx_.target.devicePrimitives &&
        cx_.isConst(op.operands[j]))
      v = fmt::format(
          "primitive_constant({}, {})", v,
          std::max<size_t>(
              1, cx_.g.tensors[size_t(op.operands[j])].values.size()));
    in += (j ? ", " : "") + v;
    din += (j ? ", " : "") +
           (prim.differentiable[j] ? dx[j] : std::string("nullptr"));
  }
  // A training Dropout's mask: keyed by the run's seed, the op and the step,
  // and the global index of this micro-batch's first element (its first
  // sample, as DataOrder.h counts them, times the elements per sample; the
  // samples are the leading dimension), so dp ranks, micro-batches and one
  // rank drop the same elements. A recomputed layer reruns its forward
  // where the step is not known: refused.
  std::string key;
  if (prim.kind == onnx_kernels::Primitive::Kind::Dropout) {
    if (cx_.plan.knobs.recompute != cost::Recompute::None)
      throw UserError(where + ": a training Dropout does not run under "
                              "recomputation yet (--fix recompute=none)");
    const int64_t samples = ys.empty() ? 1 : std::max<int64_t>(1, ys[0]);
    if (samples != cx_.plan.knobs.microbatch)
      throw UserError(where +
                      ": a training Dropout keys its mask by sample, "
                      "but its leading dimension (" +
                      std::to_string(samples) + ") is not the micro-batch's " +
                      std::to_string(cx_.plan.knobs.microbatch) + " samples");
    key = fmt::format(
        ", onnx_prim::DropoutKey{{seed, autoddl::rt::dropout_stream({}, "
        "step), (int64_t(g.rdp) * kMicroBatches + mb) * {} * {}}}",
        cStringLiteral(op.name), samples, onnx_kernels::numel(ys) / samples);
  }
  primitiveCalls(c, prim, name, in, din, moments, key);
}

} // namespace autoddl::codegen::emit
