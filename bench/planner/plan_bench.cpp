//===- plan_bench.cpp - planning time at scale (issue 4, "Scale") --------===//
//
//   autoddl_plan_bench OUT.json [MEGATRON.json]
//
// Plans GPT-3 175B on 1,024 A100s, LLaMA-2-70B on 512 H100s and a 1-trillion-
// parameter GPT (Narayanan et al. SC'21 Table 1 shape) on 3,072 A100s, each
// with the free search (coordinate descent) and the "why" table, and records
// wall and CPU seconds of plan() (model import excluded: it is done once per
// model) with the chosen configuration. Run it pinned to one core (run.sh
// does).
//
// With a second file: the GPT rows of Narayanan et al. SC'21 Table 1 (A100,
// full recomputation), each priced with its published tp/pp pinned
// (recompute=full, micro-batch 1; the rest searched) and with the free search
// on the same cluster, next to the published per-GPU throughput. The published
// numbers count recomputation (their FLOP formula has the factor 4 = fwd + bwd
// + recompute), so they compare with "hardware_tflops_per_gpu". Nothing here is
// fitted to them.
//
//===----------------------------------------------------------------------===//
#include "cost_model/io/ClusterJson.h"
#include "ir/import/ModelImporter.h"
#include "planner/Search.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>

using namespace autoddl;

namespace {

/// The model at micro-batch 1 and 2: plan() prices from both.
std::pair<ModelGraph, ModelGraph> importPair(const std::string &model,
                                             int64_t seq) {
  import::ImportOptions io;
  io.seq = seq;
  io.batch = 1;
  ModelGraph g1 = import::importModel(model, io);
  io.batch = 2;
  return {std::move(g1), import::importModel(model, io)};
}

/// What plan() returned, into j: the plan's knobs, step time, throughput and
/// peak memory (with the search's effort), or the error, or why no plan fits.
const planner::Plan *
putOutcome(nlohmann::ordered_json &j,
           const pipeline::OrError<planner::PlanOutcome> &r) {
  if (!r) {
    j["error"] = r.error();
    return nullptr;
  }
  const auto *p = std::get_if<planner::Plan>(&*r);
  if (!p) {
    j["infeasible"] = std::get<planner::Infeasible>(*r).message;
    return nullptr;
  }
  j["plan"] = planner::knobsToString(p->knobs);
  j["step_time_s"] = p->predicted.stepTime;
  j["tflops_per_gpu"] = p->predicted.tflopsPerGpu;
  j["hardware_tflops_per_gpu"] = p->predicted.hardwareTflopsPerGpu;
  j["mfu"] = p->predicted.mfu;
  j["peak_memory_GiB"] = p->predicted.peakMemory / (1 << 30);
  j["search_wall_s"] = p->search.wallSeconds;
  j["candidates_priced"] = p->search.candidatesPriced;
  j["simulated"] = p->search.simulated;
  return p;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: autoddl_plan_bench OUT.json [MEGATRON.json]\n";
    return 2;
  }
  struct Case {
    const char *name, *model, *cluster;
    int gpus;
    int64_t batch, seq;
  } cases[] = {
      {"gpt3-175b on 1024 A100", "gpt3-175b", "dgx-a100-hdr", 1024, 1536, 2048},
      {"llama-2-70b on 512 H100", "llama-2-70b", "dgx-h100-ndr", 512, 1024,
       4096},
      {"gpt-1t on 3072 A100", "bench/planner/models/gpt-1t.json",
       "dgx-a100-hdr", 3072, 3072, 2048},
  };
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Case &c : cases) {
    const auto [g1, g2] = importPair(c.model, c.seq);
    cost::Cluster cl = cost::loadCluster(c.cluster);
    cl = cost::withNodes(cl, c.gpus / cl.gpusPerNode);
    for (bool explain : {false, true}) {
      planner::PlannerOptions o;
      o.globalBatch = c.batch;
      o.explain = explain;
      auto w0 = std::chrono::steady_clock::now();
      std::clock_t c0 = std::clock();
      auto r = planner::plan(g1, g2, cl, o);
      double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
      double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - w0)
              .count();
      nlohmann::ordered_json j;
      j["case"] = c.name;
      j["explain"] = explain;
      j["wall_s"] = wall;
      j["cpu_s"] = cpu;
      putOutcome(j, r);
      std::cout << j.dump() << std::endl;
      out.push_back(j);
    }
  }
  std::ofstream(argv[1]) << out.dump(2) << "\n";
  if (argc < 3)
    return 0;
  // Recalled from Narayanan et al. SC'21 Table 1 (weak scaling, 80 GB A100s,
  // vocabulary 51200, sequence 2048): model, tp, pp, GPUs, batch, TFLOP/s/GPU.
  struct Row {
    const char *model;
    int tp, pp, gpus;
    int64_t batch;
    double published;
  } rows[] = {{"gpt-18b", 8, 1, 256, 1024, 135},
              {"gpt-39b", 8, 2, 512, 1536, 138},
              {"gpt-76b", 8, 4, 1024, 1792, 140},
              {"gpt-146b", 8, 8, 1536, 2304, 148},
              {"gpt-310b", 8, 16, 1920, 2160, 155},
              {"gpt-530b", 8, 35, 2520, 2520, 163},
              {"gpt-1t", 8, 64, 3072, 3072, 163}};
  nlohmann::ordered_json mt = nlohmann::ordered_json::array();
  for (const Row &r : rows) {
    const auto [g1, g2] = importPair(
        std::string("bench/planner/models/") + r.model + ".json", 2048);
    cost::Cluster cl = cost::loadCluster("dgx-a100-hdr");
    cl = cost::withNodes(cl, r.gpus / cl.gpusPerNode);
    nlohmann::ordered_json j;
    j["model"] = r.model;
    j["gpus"] = r.gpus;
    j["global_batch"] = r.batch;
    j["published_tflops_per_gpu"] = r.published;
    // Megatron-LM as it ran then (planner::applyStack "megatron-2021": unfused
    // attention with dropout 0.1, FlashAttention came in 2022; fp32 gradients
    // all-reduced after the pipeline flush; pinned also without a distributed
    // optimizer, which came to Megatron-LM in 2023): "pinned" and "free" on
    // that stack; "free_modern" is the free search on the modern stack.
    enum Kind { Pinned, Free, FreeFlash };
    for (Kind kind : {Pinned, Free, FreeFlash}) {
      planner::PlannerOptions o;
      o.globalBatch = r.batch;
      o.explain = false;
      planner::applyStack(kind == FreeFlash ? "modern" : "megatron-2021", o);
      if (kind == Pinned) {
        o.fixed.tp = r.tp;
        o.fixed.pp = r.pp;
        o.fixed.microbatch = 1;
        o.fixed.recompute = cost::Recompute::Full;
        o.fixed.zero = 0;
      }
      auto res = planner::plan(g1, g2, cl, o);
      nlohmann::ordered_json k;
      if (const planner::Plan *p = putOutcome(k, res)) {
        const planner::Prediction &q = p->predicted;
        k["breakdown_s"] = {{"compute", q.compute},
                            {"tp_comm", q.tpComm},
                            {"bubble", q.bubble},
                            {"grad_sync_exposed", q.gradSync},
                            {"optimizer", q.optimizer}};
      }
      j[kind == Pinned ? "pinned" : kind == Free ? "free" : "free_modern"] = k;
    }
    std::cout << j.dump() << std::endl;
    mt.push_back(j);
  }
  std::ofstream(argv[2]) << mt.dump(2) << "\n";
  return 0;
}
