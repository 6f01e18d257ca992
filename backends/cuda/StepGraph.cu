// StepGraph (StepGraph.h): eager, then capture, then replay.
#include "backends/cuda/StepGraph.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace autoddl::rt {

namespace {

/// after - before, per kind (kinds with no new calls left out).
CommStats counts_added(const CommStats &before, const CommStats &after) {
  CommStats added;
  for (const auto &[kind, a] : after) {
    CollectiveStat d = a;
    if (auto it = before.find(kind); it != before.end()) {
      d.calls -= it->second.calls;
      d.bytes -= it->second.bytes;
      d.seconds -= it->second.seconds;
    }
    if (d.calls > 0)
      added[kind] = d;
  }
  return added;
}

} // namespace

bool cuda_graph_disabled_by_env() {
  const char *s = std::getenv("AUTODDL_CUDA_GRAPH");
  return s && std::strcmp(s, "0") == 0;
}

void StepGraph::reset() {
  if (exec_)
    cudaGraphExecDestroy(exec_);
  if (graph_)
    cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  nodes_ = 0;
}

void StepGraph::run(const std::function<void()> &body) {
  const int64_t call = calls_++;
  if (exec_) {
    AUTODDL_CUDA_CHECK(cudaGraphLaunch(exec_, compute_stream()));
    for (const auto &[kind, d] : captured_counts_) {
      CollectiveStat &s = (*counts_)[kind];
      s.calls += d.calls;
      s.bytes += d.bytes;
      s.seconds += d.seconds;
    }
    return;
  }
  if (call == 0 || failed_) { // warm-up: workspaces grow, GEMM plans built
    body();
    return;
  }
  // Relaxed: host-only CUDA calls (cudaFuncSetAttribute, cudaGetDevice) do
  // not end the capture. The body must not allocate or wait (device_alloc
  // and scratch growth synchronise the stream: that fails loudly); the eager
  // first call grew every workspace already.
  CommStats unused;
  CommStats &counts = counts_ ? *counts_ : unused;
  const CommStats before = counts;
  AUTODDL_CUDA_CHECK(
      cudaStreamBeginCapture(compute_stream(), cudaStreamCaptureModeRelaxed));
  body();
  captured_counts_ = counts_added(before, counts);
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(compute_stream(), &graph);
  cudaGraphExec_t exec = nullptr;
  if (err == cudaSuccess)
    err = cudaGraphInstantiate(&exec, graph, 0);
  if (err != cudaSuccess) {
    // Nothing of the body ran: it was only recorded (so its collectives'
    // counts go back). Run it eagerly, now and from here on.
    std::fprintf(stderr,
                 "autoddl: note: the step could not be captured as a CUDA "
                 "graph (%s: %s); running it without\n",
                 cudaGetErrorName(err), cudaGetErrorString(err));
    (void)cudaGetLastError();
    if (graph)
      cudaGraphDestroy(graph);
    failed_ = true;
    counts = before;
    captured_counts_.clear();
    body();
    return;
  }
  graph_ = graph;
  exec_ = exec;
  size_t n = 0;
  AUTODDL_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
  nodes_ = int64_t(n);
  AUTODDL_CUDA_CHECK(cudaGraphLaunch(exec_, compute_stream()));
}

} // namespace autoddl::rt
