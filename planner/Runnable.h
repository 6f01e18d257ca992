//===- Runnable.h - what the generated programs run: the one contract -----===//
//
// DESIGN.md §5b "One predicate decides what runs": whether the generated
// training programs (both backends) run a configuration, and if not why. The
// planner's enumeration skips what this refuses (Search.cpp) and codegen's
// refusals of a configuration are this answer, nothing else
// (codegen/CpuCodegen.cpp), so a plan the planner returns always generates
// (tests/e2e/plans_generate.sh holds it over a grid).
//
// What a backend cannot run whatever the plan (an op kind, a model it does
// not feed) is the model's property, not the configuration's: codegen's
// backendRefusal (codegen/CpuCodegen.h) answers it; no plan changes it.
//
// Plain C++ (no exceptions), at the planner's layer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "planner/Plan.h"

#include <string>

namespace autoddl {
struct ModelGraph;
} // namespace autoddl

namespace autoddl::planner {

/// The highest ZeRO stage the generated programs run: 1 shards the optimizer
/// state (reduce-scatter, AdamW on the shard, all-gather). ZeRO-2 (gradients
/// sharded per micro-batch) is priced by the cost model but not generated:
/// its plan would hold full gradients and use more memory than priced.
constexpr int kMaxGeneratedZero = 1;

/// The facts of one model graph the contract reads, computed once (the
/// planner asks for every candidate).
class RunnableConfigurations {
public:
  explicit RunnableConfigurations(const ModelGraph &g);

  /// Why the generated programs do not run `k` (with K-FAC as the optimizer
  /// when `kfac`), as one lower-case clause naming the knobs; "" when they
  /// do. Holds for both backends. `k.dp`, `k.microbatches` as the plan has
  /// them.
  std::string refusal(const Knobs &k, bool kfac) const;

  /// Why the generated programs of a backend (CUDA, or the CPU's when
  /// `cpuBackend`) do not run a plan priced in precision `p`; "" when they
  /// do. The CPU programs compute in fp32 (a bf16 plan runs there in fp32,
  /// within verify's tolerance); an fp8 plan prices FP8 GEMMs only the CUDA
  /// programs run. The planner knows no backend and plans for GPUs: it
  /// returns fp8 only when asked (`--precision fp8` or `auto`), and codegen
  /// refuses such a plan for the CPU with this one reason.
  static std::string precisionRefusal(cost::Precision p, bool cpuBackend);

private:
  int64_t graphNodes_ = 0;   // a graph model's nodes (dp splits them), else 0
  std::string sampleMixing_; // the first primitive mixing samples, or ""
  std::string dropout_;      // the first training Dropout primitive, or ""
};

} // namespace autoddl::planner
