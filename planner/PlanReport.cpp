//===- PlanReport.cpp - summary, tables, why-not and the predicted trace -===//
#include "planner/PlanReport.h"

#include "cost_model/pipeline/Simulator.h"
#include "planner/KfacReport.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace autoddl::planner {

namespace {

double gib(double bytes) { return bytes / (1024.0 * 1024 * 1024); }

std::string scheduleText(const Knobs &k) {
  std::string s(pipeline::scheduleName(k.schedule));
  if (k.schedule == pipeline::ScheduleKind::Interleaved)
    s += fmt::format(" (chunks {})", k.chunks);
  return s;
}

std::string opLine(const OpChoice &o) {
  std::string ins;
  for (size_t i = 0; i < o.operands.size(); ++i)
    ins += (i ? "," : "") + o.operands[i];
  return fmt::format("{:<6} {:<28} {:<14} {:<10} {} -> {}", o.segment, o.op,
                     o.kind, o.signature, ins, o.result);
}

/// The activation sets pipeline rank `d` holds per stage it runs (its
/// schedule's micro-batches in flight), in stage order: "2", "4+3".
std::string setsOfRank(const Plan &p, size_t d) {
  const bool chimera = p.knobs.schedule == pipeline::ScheduleKind::Chimera;
  std::string sets;
  for (const StageInfo &st : p.stages)
    if (size_t(st.device) == d ||
        (chimera && size_t(p.knobs.pp - 1 - st.device) == d))
      sets += (sets.empty() ? "" : "+") + std::to_string(st.activationSets);
  return sets;
}

/// "activations in flight ..." for the summary: per pipeline rank its sets
/// beside the bytes they hold; past 8 ranks the first 4 and the last 2.
std::string inFlightLine(const Plan &p) {
  bool counted = false; // plans before per-stage counts have none
  for (const StageInfo &st : p.stages)
    counted |= st.activationSets > 0;
  if (p.devices.empty() || !counted)
    return "";
  std::string s =
      fmt::format("  activations in flight of {} micro-batch{}, "
                  "sets per stage and GiB per pipeline rank:",
                  p.knobs.microbatches, p.knobs.microbatches == 1 ? "" : "es");
  const size_t n = p.devices.size();
  for (size_t d = 0; d < n; ++d) {
    if (n > 8 && d == 4) {
      s += fmt::format(" ... ({} more; inspect lists every rank);", n - 6);
      d = n - 3;
      continue;
    }
    s += fmt::format(" {}: {} ({:.2f} GiB){}", d, setsOfRank(p, d),
                     gib(p.devices[d].memoryParts.activations),
                     d + 1 < n ? "," : "");
  }
  return s + "\n";
}

} // namespace

std::string planSummary(const Plan &p) {
  const Knobs &k = p.knobs;
  const Prediction &pr = p.predicted;
  std::string s;
  s += fmt::format("{} ({:.2f} B parameters, {} layers) on {}: {} x {} {} "
                   "({} GPUs)\n",
                   p.model, p.parameters / 1e9, p.layers, p.cluster, p.nodes,
                   p.gpusPerNode, p.gpu, p.nodes * p.gpusPerNode);
  s +=
      fmt::format("  parallelism: tp={} pp={} dp={}  micro-batch={}  global "
                  "batch={} ({} micro-batches)  schedule={}  recompute={}  "
                  "zero={}\n",
                  k.tp, k.pp, k.dp, k.microbatch, p.globalBatch, k.microbatches,
                  scheduleText(k), recomputeName(k.recompute), k.zero);
  if (p.precision == cost::Precision::FP8)
    s += "  precision: fp8 (the transformer blocks' large linears' GEMMs in "
         "FP8, the rest bf16; MFU against the bf16 peak: docs/fp8.md)\n";
  if (p.axisLinks.size() == 3)
    s += fmt::format("  mesh {} (outermost first): pp on {}, dp on {}, tp on "
                     "{}\n",
                     axisOrderName(k.order), p.axisLinks[0], p.axisLinks[1],
                     p.axisLinks[2]);
  s += fmt::format("  predicted: step {:.4g} s, {:.1f} TFLOP/s per GPU (model "
                   "FLOPs; {:.1f} with recomputation), MFU {:.1f}%, bubble "
                   "{:.1f}%, peak memory {:.1f} GiB of {:.1f} GiB\n",
                   pr.stepTime, pr.tflopsPerGpu, pr.hardwareTflopsPerGpu,
                   100 * pr.mfu, 100 * pr.bubbleFraction, gib(pr.peakMemory),
                   gib(p.memoryCapacity));
  if (pr.memoryMargin > 0)
    s += fmt::format("  memory: {:.2f} GiB allocated by the CUDA program's "
                     "buffers (its metrics' peak_memory_bytes) + estimated "
                     "context, NCCL and allocator overheads; planned with a "
                     "{:.1f} GiB margin below capacity; CPU backend host "
                     "peak {:.2f} GiB\n",
                     gib(pr.peakAllocated), gib(pr.memoryMargin),
                     gib(pr.peakHostMemory));
  s += inFlightLine(p);
  if (!p.devices.empty() && p.devices[0].memoryParts.graph > 0)
    s += fmt::format("  graph: the adjacency's W8 formats hold {:.2f} GiB at "
                     "their peak (A^T's build in the first step; "
                     "docs/sparse-kernels.md \"Memory\")\n",
                     gib(p.devices[0].memoryParts.graph));
  if (k.recompute != cost::Recompute::None) {
    // "r/n" per stage, runs of equal entries as "r/n x count".
    std::string per, last;
    int run = 0;
    auto flush = [&] {
      if (run > 0)
        per += (per.empty() ? "" : ", ") + last +
               (run > 1 ? " x" + std::to_string(run) : "");
    };
    for (const StageInfo &st : p.stages) {
      std::string e = std::to_string(st.recomputeLayers) + "/" +
                      std::to_string(st.endLayer - st.firstLayer);
      if (e != last) {
        flush();
        last = e;
        run = 0;
      }
      ++run;
    }
    flush();
    s += "  recomputed layers per stage: " + per + "\n";
  }
  s += fmt::format("  step breakdown of the critical rank: compute {:.4g} s, "
                   "tp communication {:.4g} s, pipeline bubble and p2p waits "
                   "{:.4g} s, exposed gradient sync {:.4g} s, optimizer "
                   "{:.4g} s\n",
                   pr.compute, pr.tpComm, pr.bubble, pr.gradSync, pr.optimizer);
  if (p.kfac) { // --optimizer kfac
    s += fmt::format("  K-FAC step {:.4g} s (first-order {:.4g} s)\n",
                     pr.stepTime, p.kfac->firstOrderStepTime);
    s += kfacSummary(*p.kfac, 1e3, "ms");
  }
  s += "  SBP on the tp axis (operands -> result), per layer kind:\n";
  for (const OpChoice &o : p.ops)
    s += "    " + opLine(o) + "\n";
  s += fmt::format("  search: {}, {} candidates priced, {} simulated, {} "
                   "descents over {} of {} ops (the rest eliminated "
                   "exactly), {:.2f} s\n",
                   p.search.mode, p.search.candidatesPriced, p.search.simulated,
                   p.search.descents, p.search.descentVariables,
                   p.search.sbpOps, p.search.wallSeconds);
  return s;
}

std::string planTables(const Plan &p) {
  std::string s = planSummary(p);
  s += "\nStage map\n";
  s += fmt::format("  {:>5} {:>13} {:>5} {:>9}  {}\n", "stage", "pipeline rank",
                   "chunk", "layers", "also holds");
  for (const StageInfo &st : p.stages) {
    std::string extra = st.pre && st.post ? "embedding, head + loss"
                        : st.pre          ? "embedding"
                        : st.post         ? "head + loss"
                                          : "";
    s += fmt::format(
        "  {:>5} {:>13} {:>5} {:>4}-{:<4}  {}\n", st.stage, st.device, st.chunk,
        st.firstLayer,
        st.endLayer > st.firstLayer ? st.endLayer - 1 : st.firstLayer, extra);
  }
  s += "\nPer pipeline rank (per micro-batch: forward, backward; per step: "
       "gradient sync, optimizer; memory at its peak)\n";
  // "act sets": the activation sets the programs hold per stage the rank
  // runs (its schedule's micro-batches in flight), in stage order.
  s += fmt::format("  {:>4} {:>10} {:>10} {:>10} {:>10} {:>11} {:>10} "
                   "{:>9} {:>9} {:>9} {:>9} {:>9}\n",
                   "rank", "fwd ms", "bwd ms", "tp-comm ms", "sync ms",
                   "exposed ms", "optim ms", "weights", "grads", "optim",
                   "act sets", "acts GiB");
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const DeviceTimes &t = p.devices[d];
    const std::string sets = setsOfRank(p, d);
    s += fmt::format(
        "  {:>4} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.3f} {:>10.3f} "
        "{:>9.2f} {:>9.2f} {:>9.2f} {:>9} {:>9.2f}\n",
        d, 1e3 * t.forward, 1e3 * t.backward,
        1e3 * (t.forwardComm + t.backwardComm), 1e3 * t.gradSync,
        1e3 * t.gradSyncExposed, 1e3 * t.optimizer,
        gib(t.memoryParts.state.weights), gib(t.memoryParts.state.gradients),
        gib(t.memoryParts.state.optimizer),
        sets.size() > 9 ? sets.substr(0, 8) + "~" : sets,
        gib(t.memoryParts.activations));
  }
  s += "\nCollectives (calls per step are per pipeline replica and tp group)\n";
  s += fmt::format("  {:<14} {:<26} {:<5} {:>12} {:>11} {:>9}  {}\n", "phase",
                   "collective", "axis", "bytes", "time ms", "per step",
                   "where");
  for (const CollectiveUse &c : p.collectives)
    s += fmt::format("  {:<14} {:<26} {:<5} {:>12.0f} {:>11.4f} {:>9}  {}\n",
                     c.phase, c.collective, c.axis, c.bytes, 1e3 * c.time,
                     c.perStep, c.where);
  return s;
}

std::string planWhy(const Plan &p) {
  std::string s = fmt::format(
      "Why this plan: each knob's neighbouring choices, the rest unchanged "
      "(chosen: {}, step {:.4g} s, peak {:.1f} GiB)\n",
      knobsToString(p.knobs), p.predicted.stepTime,
      gib(p.predicted.peakMemory));
  std::string last;
  for (const Alternative &a : p.alternatives) {
    if (a.knob != last) {
      s += "  " + a.knob + "\n";
      last = a.knob;
    }
    if (a.stepTime > 0)
      s += fmt::format("    {:<22} step {:>9.4g} s ({:>+8.2f}%)  memory "
                       "{:>7.1f} GiB ({:>+7.1f})  {}\n",
                       a.value, a.stepTime,
                       100 * a.deltaTime / p.predicted.stepTime,
                       gib(a.peakMemory), gib(a.deltaMemory), a.reason);
    else
      s += fmt::format("    {:<22} {}\n", a.value, a.reason);
  }
  return s;
}

std::string infeasibleReport(const Infeasible &inf) { return inf.message; }

bool planTrace(const Plan &p, int maxRanks, trace::ChromeTrace &out,
               std::string &error) {
  const Knobs &k = p.knobs;
  pipeline::ScheduleConfig sc{k.schedule, k.pp,
                              static_cast<int>(k.microbatches), k.chunks};
  auto schedule = pipeline::generateSchedule(sc);
  if (!schedule) {
    error = schedule.error();
    return false;
  }
  pipeline::StageTimes times;
  times.forward = p.simForward;
  times.backward = p.simBackward;
  times.weightGradient = p.simWeightGradient;
  times.p2p = p.p2pTime;
  auto sim = pipeline::simulate(*schedule, times);
  if (!sim) {
    error = sim.error();
    return false;
  }
  const int world = k.pp * k.dp * k.tp;
  const bool all = world <= maxRanks;
  auto rankOf = [&](int pi, int di, int ti) {
    return k.order == AxisOrder::TensorInner ? (pi * k.dp + di) * k.tp + ti
                                             : (pi * k.tp + ti) * k.dp + di;
  };
  const double us = 1e6;
  for (int pi = 0; pi < k.pp; ++pi) {
    const DeviceTimes &dt = p.devices[pi];
    for (int di = 0; di < (all ? k.dp : 1); ++di)
      for (int ti = 0; ti < (all ? k.tp : 1); ++ti) {
        const int rank = rankOf(pi, di, ti);
        std::string name =
            fmt::format("rank {} (pp {}, dp {}, tp {})", rank, pi, di, ti);
        if (!all)
          name += fmt::format(" - as every rank of pipeline stage {}", pi);
        out.nameProcess(rank, name);
        out.nameThread(rank, 0, "compute");
        out.nameThread(rank, 1, "communication");
        double lastEnd = 0;
        for (const pipeline::ExecutedInstruction &x : sim->timeline) {
          if (x.device != pi)
            continue;
          const double dur = x.end - x.start;
          std::string letter(pipeline::opKindLetter(x.op.kind));
          trace::TraceEvent e;
          e.process = rank;
          e.thread = 0;
          e.name = letter + std::to_string(x.op.microbatch);
          e.category = "compute";
          e.startUs = x.start * us;
          e.durationUs = dur * us;
          e.args = {{"microbatch", static_cast<int64_t>(x.op.microbatch)},
                    {"stage", static_cast<int64_t>(x.op.stage)},
                    {"chunk", static_cast<int64_t>(x.op.chunk)}};
          out.add(e);
          // The tp collectives inside this instruction, drawn at its end in the
          // proportion the plan prices them.
          double share = 0;
          if (x.op.kind == pipeline::OpKind::Forward && dt.forward > 0)
            share = dt.forwardComm / dt.forward;
          else if (x.op.kind != pipeline::OpKind::Forward && dt.backward > 0)
            share = dt.backwardComm / dt.backward;
          if (share > 0) {
            trace::TraceEvent c;
            c.process = rank;
            c.thread = 1;
            c.name = "tp " + letter + std::to_string(x.op.microbatch);
            c.category = "tp";
            c.durationUs = dur * share * us;
            c.startUs = x.end * us - c.durationUs;
            out.add(c);
          }
          lastEnd = std::max(lastEnd, x.end);
        }
        if (dt.gradSync > 0) {
          trace::TraceEvent g;
          g.process = rank;
          g.thread = 1;
          g.name = "gradient sync";
          g.category = "dp";
          g.startUs = (lastEnd + dt.gradSyncExposed - dt.gradSync) * us;
          g.durationUs = dt.gradSync * us;
          out.add(g);
        }
        trace::TraceEvent o;
        o.process = rank;
        o.thread = 0;
        o.name = "optimizer";
        o.category = "compute";
        o.startUs = (lastEnd + dt.gradSyncExposed) * us;
        o.durationUs = dt.optimizer * us;
        out.add(o);
        if (p.kfac) // the K-FAC items in this rank's bubbles, per step
          addKfacEvents(*p.kfac, pi, rank, 2, us, out);
      }
  }
  return true;
}

} // namespace autoddl::planner
