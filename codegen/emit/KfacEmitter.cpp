//===- KfacEmitter.cpp - K-FAC in the generated programs ------------------===//
//
// A plan of `autoddl plan --optimizer kfac` lists its K-FAC layers (Plan::kfac,
// by op name). Per stage a curvature function hands a layer's saved input or
// output gradient of a micro-batch to kfac_curvature_A / _G (the target's
// KfacRun.h: backends/cpu/harness on host floats, backends/cuda/harness on
// act_t device buffers), called where the plan placed the items
// (KfacEmitter::placement), as are the refresh cycle's reductions and
// inversions (kfac_reduce / kfac_invert, where the target has them); the
// program carries the layer table (weight, bias, unsplit dimensions, the
// layer's refresh interval: its pipeline device's K) and the plan's damping,
// longest refresh interval and rule as the defaults of its flags.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/KfacEmitter.h"
#include "codegen/emit/NumberFold.h"

#include <algorithm>
#include <regex>
#include <set>
#include <tuple>

namespace autoddl::codegen::emit {

namespace {

/// "P.<name>" from a parameter's value expression "P.<name><paramValue>"
/// (the target's: ".value.data()" on the CPU, ".work.data()" on the GPU).
std::string paramOf(const std::string &value, const std::string &tail) {
  if (value.size() <= tail.size() ||
      value.compare(value.size() - tail.size(), tail.size(), tail) != 0 ||
      value.rfind("P.", 0) != 0)
    throw UserError("codegen: K-FAC needs a linear whose weight and bias are "
                    "parameters; got " +
                    value);
  return value.substr(0, value.size() - tail.size());
}

/// A K-FAC entry of a device's instruction table
/// (backends/common/harness/ScheduleTable.h): work, stage, micro-batch,
/// direction (unused), layer row, step of the refresh cycle.
std::string kfacEntry(const std::string &work, int stage, int mb, int row,
                      int phase) {
  return fmt::format("{{{}, {}, {}, kDown, {}{}}}", work, stage, mb, row,
                     phase ? ", " + std::to_string(phase) : "");
}

/// The instruction of `list` after which (stage, micro-batch)'s operand of a
/// K-FAC factor exists: its forward for A; for G its last backward part (B,
/// or W after it). list.size() where the list does not run it.
size_t operandProducer(const std::vector<pipeline::Instruction> &list,
                       int stage, int mb, bool g) {
  size_t dep = list.size();
  for (size_t i = 0; i < list.size(); ++i) {
    const pipeline::Instruction &ins = list[i];
    if (ins.microbatch == mb && ins.stage == stage &&
        (ins.kind == pipeline::OpKind::Forward) != g)
      dep = i;
  }
  return dep;
}

} // namespace

void KfacEmitter::check() const {
  if (!cx_.plan.kfac)
    return;
  if (cx_.plan.kfac->layers.empty())
    throw UserError("codegen: the K-FAC plan lists no linear layer to "
                    "precondition");
}

void KfacEmitter::record(const OpCall &c, const std::string &dy, int64_t rows,
                         int64_t in, int64_t out, bool tw) {
  if (!cx_.plan.kfac)
    return;
  if (c.p.mode != OpMode::Replicated && c.p.mode != OpMode::Column &&
      c.p.mode != OpMode::Row && c.p.mode != OpMode::Local)
    throw UserError("codegen: K-FAC layer " + c.op.name +
                    ": a linear of this tensor-parallel mode is not "
                    "preconditioned by the generated programs");
  const auto &layers = cx_.plan.kfac->layers;
  auto it = std::find_if(
      layers.begin(), layers.end(),
      [&](const planner::KfacLayerPlan &l) { return l.name == c.op.name; });
  if (it == layers.end())
    return;
  auto [pos, isNew] = index_.emplace(c.i, int(rows_.size()));
  if (isNew) {
    const std::string bias = c.op.operands.size() > 2
                                 ? "&" + paramOf(c.x[2], cx_.target.paramValue)
                                 : std::string("nullptr");
    // The unsplit dimensions; a weight read whole on split rows
    // (tpPartialGrads) gives factors of this rank's rows, meaned over tp.
    const bool col = c.p.mode == OpMode::Column, row = c.p.mode == OpMode::Row;
    const bool rowsOverTp =
        cx_.tp > 1 && cx_.L.tpPartialGrads.count(c.op.operands[1]) > 0;
    // The last field: the layer's refresh interval, its device's K_d (every
    // copy of a layer shares it: PipeFisher.h).
    rowNames_.push_back(c.op.name);
    rows_.push_back(fmt::format(
        "&{}, {}, {}, {}, {}, {}, {}, {}",
        paramOf(c.x[1], cx_.target.paramValue), bias, row ? in * cx_.tp : in,
        col ? out * cx_.tp : out, tw ? "true" : "false",
        col   ? "KfacSplit::Out"
        : row ? "KfacSplit::In"
              : "KfacSplit::None",
        rowsOverTp ? "true" : "false", it->refreshSteps));
  }
  if (isNew) {
    byName_[c.op.name] = pos->second;
    stage_.push_back(c.st);
    cases_[c.st].push_back({pos->second, c.x[0], dy, rows});
  }
}

namespace {

/// A K-FAC case with its layer taken out of its operands ("a.layers[7].ln_1"
/// becomes "a.layers[l].ln_1"): the layer, or -1 where the operands name no
/// layer or two.
struct CaseShape {
  int layer = -1;
  std::string x, dy;
};

CaseShape caseShape(const std::string &x, const std::string &dy) {
  static const std::regex layerRef(R"(a\.layers\[(\d+)\])");
  CaseShape shape;
  auto fold = [&](const std::string &in, std::string &out) {
    for (std::sregex_iterator m(in.begin(), in.end(), layerRef), end; m != end;
         ++m) {
      int layer = std::stoi((*m)[1].str());
      if (shape.layer >= 0 && layer != shape.layer)
        return false;
      shape.layer = layer;
    }
    out = std::regex_replace(in, layerRef, "a.layers[l]");
    return true;
  };
  if (!fold(x, shape.x) || !fold(dy, shape.dy))
    shape.layer = -1;
  return shape;
}

} // namespace

/// Per stage, a K-FAC layer's operand for micro-batch mb (factor A's input
/// or G's output gradient), handed to kfac_operand: accumulated now, or
/// with `save` kept for a curvature item the plan put in a later step of
/// the cycle (KfacEmitter::placement). It reads the micro-batch's activation
/// set (kept until its last read: the reads are inputs of
/// pipeline::assignActivationSets). Consecutive layers with the same operands
/// are one block indexed by the layer, so the function does not grow with
/// depth.
std::string KfacEmitter::stageFunction(int st) const {
  auto it = cases_.find(st);
  if (it == cases_.end())
    return "";
  const std::vector<Case> &cases = it->second;
  std::vector<CaseShape> shapes;
  for (const Case &c : cases)
    shapes.push_back(caseShape(c.x, c.dy));
  // Cases i..i+P-1 (one layer) and the P after them match when the next
  // layer has the same operands, rows and consecutive K-FAC rows.
  auto sameGroup = [&](size_t i, size_t j, size_t period) {
    for (size_t k = 0; k < period; ++k) {
      const size_t a = i + k, b = j + k;
      if (b >= cases.size() || shapes[b].layer != shapes[j].layer ||
          shapes[b].x != shapes[a].x || shapes[b].dy != shapes[a].dy ||
          cases[b].rows != cases[a].rows ||
          cases[b].row != cases[a].row + int(j - i))
        return false;
    }
    return true;
  };
  std::string out = fmt::format(
      "// K-FAC on stage {0}: a layer's operand for factor A (its input) or "
      "G (its output gradient).\nstatic void stage{0}_kfac(int mb, int "
      "layer, bool g, bool save) {{\n  Stage{0} &a = "
      "stage{0}[size_t(kSetOf[{0}][mb])];\n",
      st);
  std::string single;
  for (size_t i = 0; i < cases.size();) {
    size_t period = 0;
    while (shapes[i].layer >= 0 && i + period < cases.size() &&
           shapes[i + period].layer == shapes[i].layer)
      ++period;
    size_t groups = 1;
    while (period > 0 && sameGroup(i, i + groups * period, period) &&
           shapes[i + groups * period].layer == shapes[i].layer + int(groups))
      ++groups;
    if (groups < 2) {
      const Case &c = cases[i++];
      single += fmt::format("  case {0}:\n    return kfac_operand(mb, {0}, "
                            "g, save, {1}, {2}, {3});\n",
                            c.row, c.x, c.dy, c.rows);
      continue;
    }
    const int first = cases[i].row;
    out +=
        fmt::format("  if (layer >= {0} && layer < {1}) {{ // layers {2}..{3}\n"
                    "    const int l = {2} + (layer - {0}) / {4};\n"
                    "    switch ((layer - {0}) % {4}) {{\n",
                    first, first + int(groups * period), shapes[i].layer,
                    shapes[i].layer + int(groups) - 1, period);
    for (size_t k = 0; k < period; ++k)
      out +=
          fmt::format("    case {0}:\n      return kfac_operand(mb, layer, "
                      "g, save, {1}, {2}, {3});\n",
                      k, shapes[i + k].x, shapes[i + k].dy, cases[i + k].rows);
    out += "    }\n  }\n";
    i += groups * period;
  }
  if (!single.empty())
    out += "  switch (layer) {\n" + single + "  }\n";
  return out + "  (void)a;\n}\n\n";
}

namespace {

/// The plan's instruction slot of item `it`, never before `from` (where the
/// item's inputs exist on the device): the planner's placement, not
/// re-simulated.
size_t slotAt(const planner::KfacItemPlacement &it, size_t from) {
  return std::max(from, size_t(it.slot));
}

/// fn(device, its list, item) over the plan's items of the schedule's
/// devices.
template <class Fn>
void forEachItem(const planner::KfacPlan &kfac, const pipeline::Schedule &s,
                 Fn fn) {
  for (const planner::KfacDevicePlan &dp : kfac.devices)
    if (dp.device >= 0 && dp.device < s.numDevices())
      for (const planner::KfacItemPlacement &it : dp.items)
        fn(dp.device, s.devices[size_t(dp.device)], it);
}

} // namespace

/// The placement being built: the calls per (device, slot), the curvature
/// items placed so far and, per device, row and factor, the latest (phase,
/// slot) of its curvature (which its reduction waits for).
struct KfacEmitter::Placing {
  Placement at;
  std::set<std::tuple<int, int, int, bool>> done; // device, row, mb, G
  std::map<std::tuple<int, int, bool>, std::pair<int, size_t>> curvAt;
};

/// The layer table's row of the plan's K-FAC layer `layer`, or -1.
int KfacEmitter::rowOf(int layer) const {
  if (layer < 0 || size_t(layer) >= cx_.plan.kfac->layers.size())
    return -1;
  auto r = byName_.find(cx_.plan.kfac->layers[size_t(layer)].name);
  return r == byName_.end() ? -1 : r->second;
}

/// The curvature items: the plan's, then every factor of every micro-batch
/// the plan does not list (placement's comment says where).
void KfacEmitter::placeCurvature(const pipeline::Schedule &s,
                                 Placing &p) const {
  // References, not a structured binding: the lambdas capture them.
  Placement &at = p.at;
  auto &done = p.done;
  auto &curvAt = p.curvAt;
  auto eachItem = [&](auto fn) { forEachItem(*cx_.plan.kfac, s, fn); };
  auto curvature = [&](int d, size_t slot, int st, int mb, int row, bool g) {
    if (!done.insert({d, row, mb, g}).second)
      return;
    auto &c = curvAt[{d, row, g}];
    c = std::max(c, std::pair<int, size_t>{0, slot});
    at[{d, slot}].push_back(
        {0, {0, 0, 0}, kfacEntry(g ? "kCurvG" : "kCurvA", st, mb, row, 0)});
  };
  // A curvature item of step `phase` > 0 of the cycle: its operand kept at
  // `saveSlot` of the refresh step, accumulated at `slot` of that step.
  auto deferred = [&](int d, size_t saveSlot, int phase, size_t slot, int st,
                      int mb, int row, bool g) {
    if (!done.insert({d, row, mb, g}).second)
      return;
    auto &c = curvAt[{d, row, g}];
    c = std::max(c, std::pair<int, size_t>{phase, slot});
    at[{d, saveSlot}].push_back(
        {0, {0, 0, 0}, kfacEntry(g ? "kSaveG" : "kSaveA", st, mb, row, 0)});
    at[{d, slot}].push_back(
        {phase,
         {0, 0, 0},
         kfacEntry(g ? "kSavedG" : "kSavedA", -1, mb, row, phase),
         row});
  };
  eachItem([&](int d, const auto &list, const auto &it) {
    const bool g = it.item == "curv_G";
    const int row = rowOf(it.layer);
    if ((it.item != "curv_A" && !g) || it.microbatch < 0 || row < 0)
      return;
    const int st = stage_[size_t(row)];
    // The instruction after which the item's inputs exist on d.
    const size_t dep = operandProducer(list, st, it.microbatch, g);
    if (dep == list.size()) // not this device's (a copied plan's items)
      return;
    if (it.step > 0 && !it.forced && cx_.target.kfacBubbleItems) {
      deferred(d, dep + 1, it.step, slotAt(it, 0), st, it.microbatch, row, g);
      return;
    }
    // A forced one where its operand is made (PipeFisher.cpp force).
    const size_t slot =
        it.step == 0 || it.forced ? slotAt(it, dep + 1) : list.size();
    // Later in the refresh step than its producer: from a copy made at the
    // producer, so the micro-batch's set is free for the next micro-batch
    // (the sets are those of a first-order plan; the plan's K-FAC memory
    // counts the copies, kfac.devices[].saved_bytes).
    if (slot != dep + 1 && cx_.target.kfacBubbleItems)
      deferred(d, dep + 1, 0, slot, st, it.microbatch, row, g);
    else
      curvature(d, slot, st, it.microbatch, row, g);
  });
  // Every factor of every micro-batch a device runs, whatever the plan
  // lists (a single-rank run of a copied plan): the rest right after the
  // instruction that produces its operand, while the set holds it.
  for (int d = 0; d < s.numDevices(); ++d) {
    const auto &list = s.devices[size_t(d)];
    for (const auto &ins : list)
      for (size_t row = 0; row < stage_.size(); ++row)
        for (bool g : {false, true})
          if (ins.kind == pipeline::OpKind::Forward && stage_[row] == ins.stage)
            curvature(d,
                      operandProducer(list, ins.stage, ins.microbatch, g) + 1,
                      ins.stage, ins.microbatch, int(row), g);
  }
}

/// The reductions and inversions (a target with kfacBubbleItems), after the
/// curvature they read.
void KfacEmitter::placeReductions(const pipeline::Schedule &s,
                                  Placing &p) const {
  Placement &at = p.at;
  const auto &curvAt = p.curvAt;
  auto eachItem = [&](auto fn) { forEachItem(*cx_.plan.kfac, s, fn); };
  // Reductions first, then inversions (which wait for them): per device,
  // row and item, the (phase, slot) it runs at.
  std::map<std::tuple<int, int, int>, std::pair<int, size_t>> placed;
  for (int pass : {0, 1}) {
    eachItem([&](int d, const auto &list, const auto &it) {
      const int kind = it.item == "reduce_A" || it.item == "reduce_G" ? 1
                       : it.item == "inv_A" || it.item == "inv_G"     ? 2
                                                                      : 0;
      const int row = rowOf(it.layer);
      if (kind != pass + 1 || row < 0)
        return;
      const int f = it.item.back() == 'G' ? 1 : 0;
      const int st = stage_[size_t(row)];
      auto holds = [&](const std::vector<pipeline::Instruction> &l) {
        return std::any_of(l.begin(), l.end(),
                           [&](const auto &ins) { return ins.stage == st; });
      };
      if (!holds(list))
        return; // not this device's layer
      // A layer held by two pipeline devices (Chimera's mirrored copies):
      // its reductions run over both, which run different lists, so the
      // runtimes leave them, and the inversions after them, to the cycle's
      // end; no placed call for them.
      if (std::count_if(s.devices.begin(), s.devices.end(), holds) > 1)
        return;
      if (placed.count({d, row, kind * 2 + f}))
        return; // Chimera's second copy of the layer: once a device
      std::pair<int, size_t> where{std::max(it.step, 0),
                                   it.forced ? list.size() : slotAt(it, 0)};
      for (bool g : {false, true}) { // after the layer's curvature on d
        auto c = curvAt.find({d, row, g});
        if (c != curvAt.end())
          where = std::max(where, c->second);
      }
      if (kind == 2)
        for (int h : {0, 1}) {
          auto r = placed.find({d, row, 2 + h});
          if (r != placed.end())
            where = std::max(where, r->second);
        }
      placed[{d, row, kind * 2 + f}] = where;
      at[{d, where.second}].push_back(
          {where.first,
           {kind, row, f},
           kfacEntry(fmt::format("k{}{}", kind == 1 ? "Reduce" : "Invert",
                                 f ? 'G' : 'A'),
                     -1, -1, row, where.first)});
    });
  }
}

/// Where each device runs its K-FAC items: the plan's placement
/// (kfac.devices[].items: the step of the refresh cycle and the instruction
/// slot of the device's list, recorded by the planner; DESIGN.md §5b), moved
/// later only where an item's inputs do not exist yet.
/// - Curvature: in the refresh step, never before the item's micro-batch has
///   run the forward (A) or the backward (G) of the layer's stage. An item the
///   plan spreads over a later step of the cycle (a target with
///   kfacBubbleItems): its operand is copied right after that forward or
///   backward of the refresh step (the micro-batch's buffers are overwritten
///   in the next step; the plan's memory counts the saved operands) and
///   accumulated where the plan placed it (kfac_curvature_saved); a target
///   without it runs such items at the refresh step's end. An item of the
///   refresh step reads the set in place only right after that forward or
///   backward (where a forced one runs); placed later, it reads a copy
///   taken there, so a K-FAC plan keeps a first-order plan's activation
///   sets. Either way every
///   plan's factors come from the refresh step's micro-batches, as on one
///   rank.
/// - Reductions and inversions (a target with kfacBubbleItems): in the step
///   of the cycle the plan says, at its place; in the refresh step not before
///   the layer's curvature on this device, an inversion not before its
///   layer's reductions (π reads both factors); forced ones at their step's
///   end. None for a layer two pipeline devices hold (Chimera's mirrored
///   copies): the runtimes reduce it over both devices, which run different
///   lists, at the cycle's end only, and invert it after. Within a slot:
///   curvature, then reductions, then inversions, each in layer-table order, A
///   before G, so every rank of a communicator (dp and tp replicas run the same
///   list) issues its collectives in one order.
KfacEmitter::Placement
KfacEmitter::placement(const pipeline::Schedule &s) const {
  if (!cx_.plan.kfac)
    return {};
  Placing p;
  placeCurvature(s, p);
  if (!cx_.target.kfacBubbleItems)
    return p.at;
  placeReductions(s, p);
  Placement &at = p.at;
  for (auto &[slot, calls] : at)
    std::stable_sort(
        calls.begin(), calls.end(), [](const Call &a, const Call &b) {
          return std::tie(a.phase, a.key) < std::tie(b.phase, b.key);
        });
  return at;
}

std::string KfacEmitter::programText(bool layerTables) const {
  if (!cx_.plan.kfac)
    return "";
  std::string out =
      "// K-FAC (the plan's optimizer): damping, refresh interval K and rule "
      "(the defaults of\n// --kfac-damping, --kfac-refresh, --kfac-rule), "
      "and per layer: name, weight, bias,\n// unsplit in and out features, "
      "weight [out,in] (else [in,out]), tp split, rows over tp\n// and its "
      "refresh interval (its pipeline device's K; k.refresh is the "
      "longest).\nstatic KfacProgram kfac_program() {\n  KfacProgram k;\n";
  out += fmt::format("  k.damping = {};\n  k.refresh = {};\n  k.rule = "
                     "{};\n",
                     fmtDouble(cx_.plan.kfac->damping),
                     cx_.plan.kfac->refreshSteps,
                     cStringLiteral(cx_.plan.kfac->rule));
  if (cx_.plan.kfac->factorDecay > 0) // the defaults of --kfac-factor-*
    out += fmt::format("  k.factor_every = {};\n  k.factor_decay = {};\n",
                       cx_.plan.kfac->factorEvery,
                       fmtDouble(cx_.plan.kfac->factorDecay));
  if (cx_.plan.kfac->factorStride > 1) // --kfac-factor-stride's default
    out +=
        fmt::format("  k.factor_stride = {};\n", cx_.plan.kfac->factorStride);
  if (!layerTables) {
    out += "  k.layers = {\n";
    for (size_t r = 0; r < rows_.size(); ++r)
      out += fmt::format("      {{{}, {}}},\n", cStringLiteral(rowNames_[r]),
                         rows_[r]);
    out += "  };\n";
  } else {
    // Rows by index, a layer's name from its index (param_name keeps it):
    // a layer table's rows, alike but for their layer, as loops.
    std::vector<std::string> rows, plain;
    for (size_t r = 0; r < rows_.size(); ++r) {
      plain.push_back(fmt::format("  k.layers[{}] = {{{}, {}}};\n", r,
                                  cStringLiteral(rowNames_[r]), rows_[r]));
      const LayerName n = splitLayerIndex(rowNames_[r]);
      const std::string name =
          n.index < 0 ? cStringLiteral(rowNames_[r])
                      : fmt::format("param_name({} + std::to_string({}) + {})",
                                    cStringLiteral(n.before), n.index,
                                    cStringLiteral(n.after));
      rows.push_back(
          fmt::format("  k.layers[{}] = {{{}, {}}};\n", r, name, rows_[r]));
    }
    out += fmt::format("  k.layers.resize({});\n", rows.size()) +
           foldBlocks(rows, "  ", true, &plain);
  }
  if (cx_.target.kfacBubbleItems) // Schedule.cpp
    out += "  k.items_at = kfac_items_at;\n  k.saves = kfac_saves;\n"
           "  k.tail_phase = kfac_tail_phase;\n";
  out += "  return k;\n}\n\n";
  return out;
}

} // namespace autoddl::codegen::emit
