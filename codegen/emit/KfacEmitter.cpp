//===- KfacEmitter.cpp - K-FAC in the generated programs ------------------===//
//
// A plan of `autoddl plan --optimizer kfac` lists its K-FAC layers (Plan::kfac,
// by op name). Each one's weight-gradient backward also hands its input and
// output gradient to kfac_curvature (backends/cpu/harness/KfacRun.h), and the
// program carries the layer table (weight, bias, unsplit dimensions) and the
// plan's damping, refresh interval and rule as the defaults of its flags.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"

namespace autoddl::codegen::emit {

namespace {

/// "P.<name>" from a parameter's value expression "P.<name>.value.data()".
std::string paramOf(const std::string &value) {
  const std::string tail = ".value.data()";
  if (value.size() <= tail.size() ||
      value.compare(value.size() - tail.size(), tail.size(), tail) != 0 ||
      value.rfind("P.", 0) != 0)
    throw UserError("codegen: K-FAC needs a linear whose weight and bias are "
                    "parameters; got " +
                    value);
  return value.substr(0, value.size() - tail.size());
}

} // namespace

void Emitter::checkKfac() const {
  if (!plan_.kfac)
    return;
  const auto &k = plan_.knobs;
  if (cuda_)
    throw UserError("codegen: a K-FAC plan (optimizer kfac) generates the cpu "
                    "program only so far (use --backend cpu)");
  if (k.zero > 0)
    throw UserError("codegen: a K-FAC plan with ZeRO is refused: the rule "
                    "runs on whole optimizer state (plan with --fix zero=0)");
  if (plan_.kfac->layers.empty())
    throw UserError("codegen: the K-FAC plan lists no linear layer to "
                    "precondition");
}

void Emitter::emitKfacCurvature(OpCall &c, const std::string &dy, int64_t rows,
                                int64_t in, int64_t out, bool tw) {
  if (!plan_.kfac)
    return;
  if (c.p.mode != OpMode::Replicated && c.p.mode != OpMode::Column &&
      c.p.mode != OpMode::Row && c.p.mode != OpMode::Local)
    throw UserError("codegen: K-FAC layer " + c.op.name +
                    ": a linear of this tensor-parallel mode is not "
                    "preconditioned by the generated programs");
  const auto &layers = plan_.kfac->layers;
  auto it = std::find_if(layers.begin(), layers.end(),
                         [&](const planner::KfacLayerPlan &l) {
                           return l.name == c.op.name;
                         });
  if (it == layers.end())
    return;
  auto [pos, isNew] = kfacIndex_.emplace(c.i, int(kfacRows_.size()));
  if (isNew) {
    const std::string bias = c.op.operands.size() > 2
                                 ? "&" + paramOf(c.x[2])
                                 : std::string("nullptr");
    // The unsplit dimensions; a weight read whole on split rows
    // (tpPartialGrads) gives factors of this rank's rows, meaned over tp.
    const bool col = c.p.mode == OpMode::Column, row = c.p.mode == OpMode::Row;
    const bool rowsOverTp =
        tp_ > 1 && L_.tpPartialGrads.count(c.op.operands[1]) > 0;
    kfacRows_.push_back(fmt::format(
        "{{\"{}\", &{}, {}, {}, {}, {}, {}, {}}}", c.op.name, paramOf(c.x[1]),
        bias, row ? in * tp_ : in, col ? out * tp_ : out, tw ? "true" : "false",
        col   ? "KfacSplit::Out"
        : row ? "KfacSplit::In"
              : "KfacSplit::None",
        rowsOverTp ? "true" : "false"));
  }
  c.BW(fmt::format("kfac_curvature({}, {}, {}, {}); // K-FAC factors of {}",
                   pos->second, c.x[0], dy, rows, c.op.name));
}

std::string Emitter::kfacProgramText() const {
  if (!plan_.kfac)
    return "";
  std::string out =
      "// K-FAC (the plan's optimizer): damping, refresh interval K and rule "
      "(the defaults of\n// --kfac-damping, --kfac-refresh, --kfac-rule), "
      "and per layer: name, weight, bias,\n// unsplit in and out features, "
      "weight [out,in] (else [in,out]).\nstatic KfacProgram kfac_program() "
      "{\n  KfacProgram k;\n";
  out += fmt::format("  k.damping = {};\n  k.refresh = {};\n  k.rule = "
                     "\"{}\";\n  k.layers = {{\n",
                     fmtDouble(plan_.kfac->damping), plan_.kfac->refreshSteps,
                     plan_.kfac->rule);
  for (const std::string &row : kfacRows_)
    out += "      " + row + ",\n";
  out += "  };\n  return k;\n}\n\n";
  return out;
}

} // namespace autoddl::codegen::emit
