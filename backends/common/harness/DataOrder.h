//===- DataOrder.h - which samples a rank's micro-batch reads -------------===//
//
// The data of a step (docs/runtime.md "Data order"): the global batch is split
// into dp blocks, each into micro-batches; a rank reads its dp block's
// micro-batch mb. Tokens (a file or synthetic), classification samples, and a
// graph model's rows are all selected here, on the host, for both backends.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_DATAORDER_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_DATAORDER_H

#include "backends/common/Data.h"
#include "backends/common/UserGraph.h"
#include "backends/common/harness/Spec.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// The data batch step `step` reads: the step plus the global batches skipped
/// before it (--data-skip, the windows --on-nan rollback skipped; recorded in
/// each checkpoint as `data_skipped`, docs/checkpoints.md). Both backends' data
/// loads go through it; a graph model's data is the same every step.
int64_t data_batch(int64_t step);
/// The global batches skipped so far (0 unless set).
int64_t data_skip();
void set_data_skip(int64_t batches);

/// The first sample of micro-batch `mb` of dp rank `rdp` in the step's global
/// batch of a language model: this dp rank's block, then mb inside it.
int64_t token_block_start(const ProgramSpec &s, int64_t rdp, int64_t mb);

/// The same for a classifier, whose micro-batch is spec.class_batch samples.
int64_t class_block_start(const ProgramSpec &s, int64_t rdp, int64_t mb);

/// Where a language model's tokens come from: --data (a file of token ids,
/// docs/runtime.md) or, without it, synthetic tokens keyed by the seed.
class TokenSource {
public:
  /// Opens `path`; throws std::runtime_error naming the file and the cause.
  void open(const std::string &path, int64_t vocab);
  bool from_file() const { return bool(file_); }
  /// Micro-batch mb's inputs and targets ([micro_batch, seq] each, either
  /// may be null) of dp rank rdp at `step`.
  void read(const ProgramSpec &s, uint64_t seed, int64_t step, int64_t rdp,
            int64_t mb, int32_t *ids, int32_t *targets) const;

private:
  std::unique_ptr<TokenData> file_;
};

/// Per-feature noise of a sample around its class prototype (the prototypes'
/// features are N(0, 1)): docs/runtime.md "Classification samples".
constexpr double kClassNoise = 4.0;

/// Micro-batch mb of dp rank rdp at `step` of a classifier: x is
/// [class_batch, features], labels [class_batch]; either may be null. Keyed by
/// (seed, global sample index). `threads`: synthetic_classes's (the CUDA
/// program's host has cores to spare; a CPU rank has its one).
void class_samples(const ProgramSpec &s, uint64_t seed, int64_t step,
                   int64_t rdp, int64_t mb, float *x, int32_t *labels,
                   int threads = 1);

/// A graph model's data on dp rank rdp: the graph (generated from the seed with
/// the spec's nodes and graph_nnz, docs/runtime.md "Community graph"), and
/// this rank's block of nodes [node0, node0 + rows) with its rows of the
/// adjacency (every node a column, edge indices from 0), features and labels.
struct GraphShard {
  // The whole graph's labels and node count; its adjacency is given up once
  // this rank's rows are copied out, its features are this rank's rows.
  PlantedGraph graph;
  int64_t graph_nnz = 0; // the whole adjacency's stored entries
  std::string source;    // "generated" or the adjacency file
  // Labels for the loss (-1 at held-out nodes) and for the held-out accuracy
  // (-1 at training nodes), of every node: planted_graph_split_labels.
  std::vector<int32_t> train_labels, heldout_labels;
  int64_t node0 = 0, rows = 0;
  std::vector<int32_t> row_ptr, col_idx;                   // rows + 1, nnz
  std::vector<float> values;                               // nnz
  const float *features() const { return graph.x.data(); } // [rows, features]
};
/// The graph is read from `files` when given (UserGraph.h; throws
/// std::runtime_error naming the file and place), else generated (throws
/// std::invalid_argument when the spec's graph_nnz cannot be).
GraphShard graph_shard(const ProgramSpec &s, uint64_t seed, int64_t rdp,
                       const GraphFileNames &files = {});

/// Refuses --data for a graph model and --graph-* for any other
/// (std::invalid_argument naming the flag).
void check_data_flags(const ProgramSpec &s, const std::string &data,
                      const GraphFileNames &graph);

/// metrics.json info entries of the graph a run trains: "graph_nodes",
/// "graph_adjacency_entries" (the whole adjacency's stored entries, self
/// loops included) and "graph_source" ("generated" or the adjacency file).
void graph_info(const GraphShard &shard,
                std::map<std::string, std::string> &info);

/// Rows of logits[N, V] whose largest logit (the first on ties) is the label
/// (labels < 0 never count); rows ld apart when ld > V (a padded vocabulary,
/// the padding skipped).
int64_t count_correct(const float *logits, const int32_t *labels, int64_t N,
                      int64_t V, int64_t ld = 0);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_DATAORDER_H
