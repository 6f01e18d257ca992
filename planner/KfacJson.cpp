//===- KfacJson.cpp - the "kfac" object of plan.json ---------------------===//
#include "planner/KfacJson.h"

#include "planner/JsonReader.h"

#include "backends/common/KfacRules.h" // kfac_rule_named

namespace autoddl::planner {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using Pointer = json::json_pointer;

namespace {

// A device's times and memory (JsonReader.h's Member): writer and reader.
const Member<KfacDevicePlan> kDeviceFields[] = {
    {"work_s", &KfacDevicePlan::work},
    {"precondition_s", &KfacDevicePlan::precondition},
    {"forced_s", &KfacDevicePlan::forced},
    {"utilisation_first_order", &KfacDevicePlan::utilisationBefore},
    {"utilisation", &KfacDevicePlan::utilisationAfter},
    {"saved_bytes", &KfacDevicePlan::savedBytes},
    {"factor_bytes", &KfacDevicePlan::factorBytes}};

} // namespace

ojson kfacToJson(const KfacPlan &p) {
  ojson layers = ojson::array();
  for (const KfacLayerPlan &l : p.layers)
    layers.push_back({{"name", l.name},
                      {"stage", l.stage},
                      {"direction", l.direction},
                      {"curvature_s", {l.curvature[0], l.curvature[1]}},
                      {"reduce_s", {l.reduce[0], l.reduce[1]}},
                      {"invert_s", {l.invert[0], l.invert[1]}},
                      {"precondition_s", l.precondition}});
  ojson devices = ojson::array();
  for (const KfacDevicePlan &d : p.devices) {
    ojson items = ojson::array();
    for (const KfacItemPlacement &it : d.items) {
      ojson x = {{"item", it.item}, {"layer", it.layer}};
      if (it.microbatch >= 0)
        x["microbatch"] = it.microbatch;
      x["step"] = it.step;
      x["start_s"] = it.start;
      x["end_s"] = it.end;
      if (it.forced)
        x["forced"] = true;
      x["slot"] = it.slot;
      if (it.pieces.size() > 1) { // fluid: an item run in several gaps
        ojson pieces = ojson::array();
        for (const pipeline::ItemPiece &piece : it.pieces)
          pieces.push_back({piece.step, piece.start, piece.end});
        x["pieces"] = pieces;
      }
      items.push_back(x);
    }
    ojson dj = {{"device", d.device},
                {"steps", d.steps},
                {"refresh_steps", d.refreshSteps}};
    writeMembers(dj, d, kDeviceFields);
    dj["items"] = items;
    devices.push_back(dj);
  }
  ojson out = {{"damping", p.damping},
               {"rule", p.rule},
               {"refresh_steps", p.refreshSteps},
               {"refresh_pinned", p.refreshPinned},
               {"overhead_budget", p.overheadBudget},
               {"fill", std::string(pipeline::kfacFillingName(p.filling))},
               {"first_order_step_time_s", p.firstOrderStepTime},
               {"utilisation_first_order", p.utilisationBefore},
               {"utilisation", p.utilisationAfter},
               {"layers", layers},
               {"devices", devices},
               {"unfitted", p.unfitted}};
  if (p.factorDecay > 0) { // absent: no running average (plans before it)
    out["factor_decay"] = p.factorDecay;
    out["factor_every"] = p.factorEvery;
    out["factor_overhead_s"] = p.factorOverhead;
  }
  if (p.factorStride > 1) // absent: every sample (plans before it)
    out["factor_stride"] = p.factorStride;
  return out;
}

namespace {

/// plan.json's reader with K-FAC's own fields.
struct In : Reader {
  int integer(const json &j, const Pointer &at, const char *key) const {
    const json &v = this->at(j, at, key);
    // Every integer here is an int: a larger one is refused, not wrapped.
    if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN ||
        v.get<int64_t>() > INT32_MAX)
      fail(at / key, "expected an integer of at most 32 bits");
    return v.get<int>();
  }
  /// A layer's or device's K_d: optional (plans before per-device K had one
  /// K), defaulting to the plan's K, which is the largest.
  int refresh(const json &j, const Pointer &at, int planK) const {
    if (!j.is_object() || !j.contains("refresh_steps"))
      return planK;
    const int k = integer(j, at, "refresh_steps");
    if (k < 1 || k > planK)
      fail(at / "refresh_steps",
           "expected 1.." + std::to_string(planK) +
               " steps (kfac.refresh_steps is the largest), got " +
               std::to_string(k));
    return k;
  }
  void pair(const json &j, const Pointer &at, const char *key,
            double out[2]) const {
    const json &v = array(j, at, key);
    if (v.size() != 2 || !v[0].is_number() || !v[1].is_number())
      fail(at / key, "expected [A, G]: two numbers");
    out[0] = v[0].get<double>();
    out[1] = v[1].get<double>();
  }
};

/// Each layer's K, read from its device's items (kfacFromJson): a layer no
/// item names takes the plan's K; the copies of a layer (Chimera's two
/// pipelines), which reduce together, must share one.
void layerRefresh(KfacPlan &p, const In &r, const Pointer &at) {
  for (size_t i = 0; i < p.layers.size(); ++i) {
    KfacLayerPlan &l = p.layers[i];
    if (l.refreshSteps == 0)
      l.refreshSteps = p.refreshSteps;
    for (size_t o = 0; o < i; ++o)
      if (p.layers[o].name == l.name &&
          p.layers[o].refreshSteps != l.refreshSteps)
        r.fail(at / "layers" / i,
               "a copy of layer " + l.name + " refreshes every " +
                   std::to_string(p.layers[o].refreshSteps) +
                   " steps, this one every " + std::to_string(l.refreshSteps));
  }
}

/// A layer of kfac.layers; `planK`: the plan's K.
KfacLayerPlan readLayer(const In &r, const json &lj, const Pointer &lp,
                        int planK) {
  KfacLayerPlan l;
  l.name = r.str(lj, lp, "name");
  l.stage = r.integer(lj, lp, "stage");
  l.direction = r.str(lj, lp, "direction");
  if (l.direction != "down" && l.direction != "up")
    r.fail(lp / "direction", "expected \"down\" or \"up\"");
  r.pair(lj, lp, "curvature_s", l.curvature);
  r.pair(lj, lp, "reduce_s", l.reduce);
  r.pair(lj, lp, "invert_s", l.invert);
  l.precondition = r.num(lj, lp, "precondition_s");
  // K is stored once, per device: a layer's is its device's (from the
  // items naming it, readItem). Plans written before kept one per layer.
  l.refreshSteps = lj.contains("refresh_steps") ? r.refresh(lj, lp, planK) : 0;
  return l;
}

/// An item of device d, whose K it gives the layer it names (p.layers read).
KfacItemPlacement readItem(const In &r, const json &ij, const Pointer &ip,
                           KfacPlan &p, const KfacDevicePlan &d) {
  KfacItemPlacement it;
  it.item = r.str(ij, ip, "item");
  it.layer = r.integer(ij, ip, "layer");
  if (it.layer < 0 || it.layer >= static_cast<int>(p.layers.size()))
    r.fail(ip / "layer", "expected an index into kfac.layers");
  // The programs run a device's items in its cycle: its layers' K.
  int &layerK = p.layers[size_t(it.layer)].refreshSteps;
  if (layerK == 0)
    layerK = d.refreshSteps;
  if (layerK != d.refreshSteps)
    r.fail(ip / "layer",
           "layer " + p.layers[size_t(it.layer)].name + " refreshes every " +
               std::to_string(p.layers[size_t(it.layer)].refreshSteps) +
               " steps, its device every " + std::to_string(d.refreshSteps));
  if (ij.contains("microbatch"))
    it.microbatch = r.integer(ij, ip, "microbatch");
  it.step = r.integer(ij, ip, "step");
  if (it.step < 0 || it.step >= d.refreshSteps)
    r.fail(ip / "step", "expected a step of the device's refresh, 0.." +
                            std::to_string(d.refreshSteps - 1) + ", got " +
                            std::to_string(it.step));
  it.start = r.num(ij, ip, "start_s");
  it.end = r.num(ij, ip, "end_s");
  it.forced = ij.value("forced", false);
  it.slot = r.integer(ij, ip, "slot");
  if (it.slot < 0)
    r.fail(ip / "slot", "expected an instruction index >= 0, got " +
                            std::to_string(it.slot));
  // "pieces" is optional (an item that ran in one piece has none).
  if (ij.contains("pieces")) {
    const json &pieces = r.array(ij, ip, "pieces");
    for (size_t q = 0; q < pieces.size(); ++q) {
      const json &v = pieces[q];
      if (!v.is_array() || v.size() != 3 || !v[0].is_number_integer() ||
          !v[1].is_number() || !v[2].is_number() || v[0].get<int>() < 0 ||
          v[0].get<int>() >= d.refreshSteps ||
          v[2].get<double>() < v[1].get<double>())
        r.fail(ip / "pieces" / q,
               "expected [step, start_s, end_s]: a step of the device's "
               "refresh, 0.." +
                   std::to_string(d.refreshSteps - 1) +
                   ", and end_s >= start_s");
      it.pieces.push_back(
          {v[0].get<int>(), v[1].get<double>(), v[2].get<double>()});
    }
  }
  return it;
}

/// A device of kfac.devices and its items (p.layers read).
KfacDevicePlan readDevice(const In &r, const json &dj, const Pointer &dp,
                          KfacPlan &p) {
  KfacDevicePlan d;
  d.device = r.integer(dj, dp, "device");
  d.steps = r.integer(dj, dp, "steps");
  // The programs run the device's leftover K-FAC work at the end of its
  // step steps - 1 (kfac_tail_phase).
  if (d.steps < 1)
    r.fail(dp / "steps",
           "expected at least 1 step, got " + std::to_string(d.steps));
  d.refreshSteps = r.refresh(dj, dp, p.refreshSteps);
  if (d.refreshSteps < d.steps)
    r.fail(dp / "refresh_steps", "expected at least the device's steps (" +
                                     std::to_string(d.steps) + "), got " +
                                     std::to_string(d.refreshSteps));
  readMembers(r, dj, dp, kDeviceFields, d);
  d.items = r.each<KfacItemPlacement>(dj, dp, "items",
                                      [&](const json &ij, const Pointer &ip) {
                                        return readItem(r, ij, ip, p, d);
                                      });
  return d;
}

} // namespace

KfacPlan kfacFromJson(const json &j, const std::string &origin,
                      const Pointer &at) {
  In r{{origin}};
  KfacPlan p;
  p.damping = r.num(j, at, "damping");
  if (!(p.damping > 0))
    r.fail(at / "damping", "expected a damping > 0");
  // "rule" is optional (plans before it ran the default, sgd).
  if (j.contains("rule")) {
    p.rule = r.str(j, at, "rule");
    rt::KfacRule rule;
    if (!rt::kfac_rule_named(p.rule, rule))
      r.fail(at / "rule", "expected " + rt::kfac_rule_choices(true));
  }
  p.refreshSteps = r.integer(j, at, "refresh_steps");
  if (p.refreshSteps < 1)
    r.fail(at / "refresh_steps", "expected at least 1 step");
  if (j.contains("refresh_pinned")) {
    if (!j["refresh_pinned"].is_boolean())
      r.fail(at / "refresh_pinned", "expected true or false");
    p.refreshPinned = j["refresh_pinned"].get<bool>();
  }
  // "overhead_budget" is optional (plans before --kfac-overhead: 0).
  if (j.contains("overhead_budget")) {
    p.overheadBudget = r.num(j, at, "overhead_budget");
    if (!(p.overheadBudget >= 0 && p.overheadBudget < 1))
      r.fail(at / "overhead_budget", "expected a fraction in [0, 1)");
  }
  // "fill" is optional (plans before it packed whole items).
  if (j.contains("fill")) {
    auto filling = pipeline::parseKfacFilling(r.str(j, at, "fill"));
    if (!filling)
      r.fail(at / "fill", "expected \"items\" or \"fluid\"");
    p.filling = *filling;
  }
  // The running average (optional: none when absent).
  if (j.contains("factor_decay")) {
    p.factorDecay = r.num(j, at, "factor_decay");
    if (!(p.factorDecay > 0 && p.factorDecay < 1))
      r.fail(at / "factor_decay", "expected a decay in (0, 1)");
    p.factorEvery = r.integer(j, at, "factor_every");
    if (p.factorEvery < 1 || p.factorEvery > p.refreshSteps)
      r.fail(at / "factor_every", "expected 1 .. refresh_steps (" +
                                      std::to_string(p.refreshSteps) +
                                      ") steps");
    p.factorOverhead = r.num(j, at, "factor_overhead_s");
  }
  if (j.contains("factor_stride")) {
    p.factorStride = r.integer(j, at, "factor_stride");
    if (p.factorStride < 1)
      r.fail(at / "factor_stride", "expected a stride >= 1 samples");
  }
  p.firstOrderStepTime = r.num(j, at, "first_order_step_time_s");
  p.utilisationBefore = r.num(j, at, "utilisation_first_order");
  p.utilisationAfter = r.num(j, at, "utilisation");
  p.layers = r.each<KfacLayerPlan>(
      j, at, "layers", [&](const json &lj, const Pointer &lp) {
        return readLayer(r, lj, lp, p.refreshSteps);
      });
  p.devices = r.each<KfacDevicePlan>(j, at, "devices",
                                     [&](const json &dj, const Pointer &dp) {
                                       return readDevice(r, dj, dp, p);
                                     });
  layerRefresh(p, r, at);
  const json &unfitted = r.array(j, at, "unfitted");
  for (size_t i = 0; i < unfitted.size(); ++i) {
    if (!unfitted[i].is_string())
      r.fail(at / "unfitted" / i, "expected a string");
    p.unfitted.push_back(unfitted[i].get<std::string>());
  }
  return p;
}

} // namespace autoddl::planner
