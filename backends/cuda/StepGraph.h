// The device work of a training step replayed as one CUDA graph.
//
// A generated program launches a few thousand small kernels a step (GPT-2
// 1.5B: ~2,500); each costs the host several microseconds (cuBLASLt's
// dispatch, the launch itself), longer than many of the kernels run, so the
// device idles between them (the fitted cluster's gpu.op_overhead_us, ~10 us a
// launch on an H200: ~15% of the step). Captured once into a graph, the same
// work is one launch a step and the kernels run back to back.
//
// What may be captured: work on compute_stream(), and on other streams forked
// from it by an event and joined back before the body returns (the gradient
// buckets' all-reduces on the sync stream, the pipeline links' transfers);
// NCCL collectives among it (NCCL records them as graph nodes; every rank
// captures the same ones in the same order). The same buffers every step and
// nothing that waits for the device (no synchronisation, no copy to the host,
// no allocation). The generated program decides statically which steps
// qualify (all but those reading the accuracy back on the host) and loads
// each step's inputs before the graph runs. Buffers grow on first use
// (attention and scratch workspaces, cuBLASLt plans, NCCL's connections), so
// the first step runs eagerly and the second is captured.
//
// The collectives count their calls and bytes on the host (comm_stats()) as
// they are enqueued; a replay enqueues nothing, so it adds what the captured
// body counted once more (set_counts), and metrics.json's totals stay those
// of the steps that ran.
#ifndef AUTODDL_BACKENDS_CUDA_STEPGRAPH_H
#define AUTODDL_BACKENDS_CUDA_STEPGRAPH_H

#include "backends/common/Metrics.h" // CommStats
#include "backends/cuda/Runtime.h"

#include <functional>
#include <string>

namespace autoddl::rt {

class StepGraph {
public:
  StepGraph() = default;
  StepGraph(const StepGraph &) = delete;
  StepGraph &operator=(const StepGraph &) = delete;
  ~StepGraph() { reset(); }

  /// Runs `body` (which only enqueues work on compute_stream()): eagerly on
  /// the first call, captured and launched on the second, replayed from the
  /// graph after that. `body` must enqueue the same work every call.
  void run(const std::function<void()> &body);

  /// The host counters the body adds to as it enqueues (the program's
  /// comm_stats()); each replay adds the captured body's part again.
  void set_counts(CommStats *counts) { counts_ = counts; }

  /// Calls of run() so far; whether the graph exists; whether its capture
  /// failed (the step then runs eagerly).
  int64_t calls() const { return calls_; }
  bool captured() const { return exec_ != nullptr; }
  bool failed() const { return failed_; }
  /// Kernel and memset nodes of the captured graph (0 before the capture).
  int64_t nodes() const { return nodes_; }

  /// Frees the graph (before the CUDA context goes).
  void reset();

private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  int64_t calls_ = 0, nodes_ = 0;
  bool failed_ = false;
  CommStats *counts_ = nullptr;
  CommStats captured_counts_; // what the captured body added to *counts_
};

/// Whether the environment turns graphs off (AUTODDL_CUDA_GRAPH=0).
bool cuda_graph_disabled_by_env();

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_CUDA_STEPGRAPH_H
