//===- KfacReport.cpp - K-FAC placements for people and for Perfetto -----===//
#include "planner/KfacReport.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace autoddl::planner {

std::string kfacItemLabel(const KfacPlan &plan, const KfacItemPlacement &it) {
  std::string s = it.item + " " + plan.layers[it.layer].name;
  if (plan.layers[it.layer].direction == "up")
    s += " (up)";
  if (it.microbatch >= 0)
    s += " mb " + std::to_string(it.microbatch);
  return s;
}

std::string kfacPackingText(pipeline::KfacFilling filling) {
  return filling == pipeline::KfacFilling::Fluid
             ? "fluid (a preemptible filling thread; items split across gaps)"
             : "whole items in gaps (PipeFisher)";
}

std::string kfacSummary(const KfacPlan &p, double unit, const char *u) {
  std::string s = fmt::format(
      "  K-FAC: {} layer copies, damping {:g}; refresh interval K = {} "
      "step{} at most, each device on its own K ({})\n",
      p.layers.size(), p.damping, p.refreshSteps,
      p.refreshSteps == 1 ? "" : "s",
      p.refreshPinned ? "pinned by --kfac-refresh"
      : p.overheadBudget > 0
          ? fmt::format("set by bubble capacity, longer where the work they "
                        "do not hold would add more than {:g}% to the "
                        "first-order step: --kfac-overhead",
                        100 * p.overheadBudget)
          : std::string("set by bubble capacity"));
  if (p.factorDecay > 0) // plan --kfac-factor-decay
    s += fmt::format("  factors every {} step{} into a running average "
                     "(decay {:g}), their curvature +{:.4g} {} a step (in the "
                     "step time)\n",
                     p.factorEvery, p.factorEvery == 1 ? "" : "s",
                     p.factorDecay, unit * p.factorOverhead, u);
  if (p.factorStride > 1) // plan --kfac-factor-stride
    s += fmt::format("  factors from 1 sample in {} of each micro-batch "
                     "(--kfac-factor-stride: curvature at 1/{})\n",
                     p.factorStride, p.factorStride);
  s += fmt::format("  packing: {}\n", kfacPackingText(p.filling));
  s += fmt::format("  utilisation: {:.1f}% first-order -> {:.1f}% with K-FAC "
                   "in the bubbles (busy incl. K-FAC / (stages x time))\n",
                   100 * p.utilisationBefore, 100 * p.utilisationAfter);
  s += fmt::format("  {:>6} {:>4} {:>6} {:>12} {:>12} {:>12} {:>8} {:>8} "
                   "{:>12}\n",
                   "device", "K", "steps", fmt::format("work {}", u),
                   fmt::format("precond {}", u), fmt::format("forced {}", u),
                   "util 1st", "util", "K-FAC bytes");
  for (const KfacDevicePlan &d : p.devices)
    s += fmt::format(
        "  {:>6} {:>4} {:>6} {:>12.4g} {:>12.4g} {:>12.4g} {:>7.1f}% "
        "{:>7.1f}% {:>12.4g}\n",
        d.device, d.refreshSteps, d.steps, unit * d.work, unit * d.precondition,
        unit * d.forced, 100 * d.utilisationBefore, 100 * d.utilisationAfter,
        d.savedBytes + d.factorBytes);
  const bool fluid = p.filling == pipeline::KfacFilling::Fluid;
  if (p.unfitted.empty()) {
    s += fluid ? "  every K-FAC item runs in the bubbles\n"
               : "  every K-FAC item fits a bubble\n";
  } else {
    s += fmt::format("  {} ({} item{}, run after the pipeline, lengthening "
                     "the refresh's last step):\n",
                     fluid
                         ? "not run in the bubbles of the refresh, in whole or "
                           "in part"
                         : "did not fit any bubble",
                     p.unfitted.size(), p.unfitted.size() == 1 ? "" : "s");
    const size_t shown = std::min<size_t>(p.unfitted.size(), 20);
    for (size_t i = 0; i < shown; ++i)
      s += "    " + p.unfitted[i] + "\n";
    if (shown < p.unfitted.size())
      s += fmt::format("    ... and {} more\n", p.unfitted.size() - shown);
  }
  return s;
}

namespace {

char itemLetter(const std::string &item, bool forced) {
  char c = item == "curv_A"               ? 'a'
           : item == "curv_G"             ? 'g'
           : item.rfind("reduce", 0) == 0 ? 'r'
           : item.rfind("inv", 0) == 0    ? 'i'
                                          : 'p';
  return forced ? static_cast<char>(std::toupper(c)) : c;
}

/// Where the item ran: a fluid item's pieces, else [start, end) of its step.
std::vector<pipeline::ItemPiece> piecesOf(const KfacItemPlacement &it) {
  if (!it.pieces.empty())
    return it.pieces;
  return {{it.step, it.start, it.end}};
}

} // namespace

std::string kfacTimeline(const pipeline::SimulationResult &sim,
                         const KfacPlan &p, int maxColumns) {
  double shortest = 0, end = sim.makespan;
  auto consider = [&](double len) {
    if (len > 0 && (shortest == 0 || len < shortest))
      shortest = len;
  };
  for (const pipeline::ExecutedInstruction &x : sim.timeline)
    consider(x.end - x.start);
  for (const KfacDevicePlan &d : p.devices)
    for (const KfacItemPlacement &it : d.items) {
      if (it.pieces.empty()) {
        consider(it.end - it.start);
        end = std::max(end, it.end);
      }
      for (const pipeline::ItemPiece &piece : it.pieces) {
        consider(piece.end - piece.start);
        end = std::max(end, piece.end);
      }
    }
  if (shortest == 0)
    return "";
  // Two columns for the shortest span, capped by the width.
  double perUnit = 2 / shortest;
  if (std::ceil(end * perUnit) > maxColumns)
    perUnit = maxColumns / end;
  const auto width = static_cast<size_t>(std::ceil(end * perUnit - 1e-9));
  // Below ~20 columns per step the pipeline's instructions are unreadable.
  if (width == 0 || static_cast<int>(width) > maxColumns ||
      sim.makespan * perUnit < 20)
    return "";
  auto span = [&](double a, double b) {
    auto from = static_cast<size_t>(std::lround(a * perUnit));
    auto to = std::min(static_cast<size_t>(std::lround(b * perUnit)), width);
    return std::make_pair(from, std::max(to, from + (b > a ? 1 : 0)));
  };
  std::string text = fmt::format(
      "filled timeline (1 column = {:.3g} time units; F/B/W + micro-batch; "
      "K-FAC: a/g curvature, r reduction, i inversion, p preconditioning, "
      "upper case = not in a bubble; '.' idle; packing: {}):\n",
      1 / perUnit, pipeline::kfacFillingName(p.filling));
  for (size_t d = 0; d < sim.devices.size() && d < p.devices.size(); ++d)
    for (int step = 0; step < p.devices[d].refreshSteps; ++step) {
      std::string row(width, ' ');
      std::fill(row.begin(),
                row.begin() + std::min(width, static_cast<size_t>(std::lround(
                                                  sim.makespan * perUnit))),
                '.');
      for (const pipeline::ExecutedInstruction &x : sim.timeline) {
        if (x.device != static_cast<int>(d))
          continue;
        auto [from, to] = span(x.start, x.end);
        std::string label = std::string(pipeline::opKindLetter(x.op.kind)) +
                            std::to_string(x.op.microbatch);
        if (x.op.direction == pipeline::Direction::Up)
          label[0] = static_cast<char>(std::tolower(label[0]));
        for (size_t c = from; c < to && c < width; ++c)
          row[c] = c - from < label.size() && to - from > label.size()
                       ? label[c - from]
                       : (c + 1 == to ? ' ' : '=');
      }
      // A fluid item in each of its pieces; only the forced one (after the
      // makespan) in upper case.
      for (const KfacItemPlacement &it : p.devices[d].items) {
        const std::vector<pipeline::ItemPiece> pieces = piecesOf(it);
        for (const pipeline::ItemPiece &piece : pieces) {
          if (piece.step != step)
            continue;
          auto [from, to] = span(piece.start, piece.end);
          // A sliver of a split item (it rounds to no column) would cover
          // the instruction beside it.
          if (pieces.size() > 1 &&
              std::lround(piece.end * perUnit) <= static_cast<long>(from))
            continue;
          const bool forced = it.forced && piece.start >= sim.makespan - 1e-12;
          for (size_t c = from; c < to && c < width; ++c)
            row[c] = itemLetter(it.item, forced);
        }
      }
      text += fmt::format("  stage {:<3} step {:<3}|{}|\n", d, step, row);
    }
  return text;
}

void addKfacEvents(const KfacPlan &p, int device, int process, int firstThread,
                   double us, trace::ChromeTrace &out,
                   const std::string &rowPrefix) {
  if (device < 0 || device >= static_cast<int>(p.devices.size()))
    return;
  const int K = p.devices[device].refreshSteps;
  for (int step = 0; step < K; ++step)
    out.nameThread(process, firstThread + step,
                   rowPrefix +
                       fmt::format("K-FAC, step {} of {}", step + 1, K));
  for (const KfacItemPlacement &it : p.devices[device].items) {
    const std::vector<pipeline::ItemPiece> pieces = piecesOf(it);
    for (const pipeline::ItemPiece &piece : pieces) {
      trace::TraceEvent e;
      e.process = process;
      e.thread = firstThread + piece.step;
      e.name = kfacItemLabel(p, it);
      e.category = it.forced ? "kfac-forced" : "kfac";
      e.startUs = piece.start * us;
      e.durationUs = (piece.end - piece.start) * us;
      e.args = {{"item", it.item},
                {"layer", p.layers[it.layer].name},
                {"step", static_cast<int64_t>(it.step)},
                {"forced", std::string(it.forced ? "true" : "false")}};
      if (it.microbatch >= 0)
        e.args.push_back({"microbatch", static_cast<int64_t>(it.microbatch)});
      if (pieces.size() > 1)
        e.args.push_back({"piece", static_cast<int64_t>(&piece - &pieces[0])});
      out.add(e);
    }
  }
}

} // namespace autoddl::planner
