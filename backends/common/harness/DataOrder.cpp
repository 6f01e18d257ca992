//===- DataOrder.cpp - which samples a rank's micro-batch reads -----------===//
#include "backends/common/harness/DataOrder.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace autoddl::rt::harness {

namespace {
// Set by the run (ProgramRun.cpp) at its start and at each rollback; read by
// the data loads of the generated code's steps.
int64_t gDataSkip = 0;
} // namespace

int64_t data_batch(int64_t step) { return step + gDataSkip; }
int64_t data_skip() { return gDataSkip; }
void set_data_skip(int64_t batches) { gDataSkip = batches; }

int64_t token_block_start(const ProgramSpec &s, int64_t rdp, int64_t mb) {
  return rdp * (s.micro_batches * s.micro_batch) + mb * s.micro_batch;
}

int64_t class_block_start(const ProgramSpec &s, int64_t rdp, int64_t mb) {
  return (rdp * s.micro_batches + mb) * s.class_batch;
}

void TokenSource::open(const std::string &path, int64_t vocab) {
  file_ = std::make_unique<TokenData>(TokenData::open(path, vocab));
}

void TokenSource::read(const ProgramSpec &s, uint64_t seed, int64_t step,
                       int64_t rdp, int64_t mb, int32_t *ids,
                       int32_t *targets) const {
  const int64_t b0 = token_block_start(s, rdp, mb);
  std::vector<int32_t> in(size_t(s.micro_batch * s.seq)), out(in.size());
  if (file_)
    file_->batch(step, s.global_batch, s.seq, b0, s.micro_batch, in.data(),
                 out.data());
  else
    synthetic_tokens(seed, step, s.global_batch, s.seq, s.vocab, b0,
                     s.micro_batch, in.data(), out.data());
  if (ids)
    std::copy(in.begin(), in.end(), ids);
  if (targets)
    std::copy(out.begin(), out.end(), targets);
}

void class_samples(const ProgramSpec &s, uint64_t seed, int64_t step,
                   int64_t rdp, int64_t mb, float *x, int32_t *labels,
                   int threads) {
  const int64_t b0 = class_block_start(s, rdp, mb);
  std::vector<float> xs(size_t(s.class_batch * s.features));
  std::vector<int32_t> ys(static_cast<size_t>(s.class_batch));
  synthetic_classes(seed, step, s.dp * s.micro_batches * s.class_batch,
                    s.features, s.classes, kClassNoise, b0, s.class_batch,
                    xs.data(), ys.data(), threads);
  if (x)
    std::copy(xs.begin(), xs.end(), x);
  if (labels)
    std::copy(ys.begin(), ys.end(), labels);
}

GraphShard graph_shard(const ProgramSpec &s, uint64_t seed, int64_t rdp,
                       const GraphFileNames &files) {
  GraphShard r;
  // dp splits the nodes: this rank's block of rows (all of them when dp is
  // 1), its adjacency the CSR of those rows with every node as a column.
  r.rows = s.nodes / s.dp;
  r.node0 = rdp * r.rows;
  r.source = files.given() ? files.adjacency : "generated";
  r.graph = files.given()
                ? read_graph_files(files, s.nodes, s.features, s.classes,
                                   r.node0, r.rows)
                : community_graph(seed, s.nodes, s.graph_nnz, s.features,
                                  s.classes, r.node0, r.rows);
  r.train_labels = planted_graph_split_labels(r.graph, false);
  r.heldout_labels = planted_graph_split_labels(r.graph, true);
  PlantedGraph &g = r.graph;
  r.graph_nnz = g.nnz();
  if (r.rows == s.nodes) { // one rank: the whole adjacency, not copied
    r.row_ptr = std::move(g.row_ptr);
    r.col_idx = std::move(g.col_idx);
    r.values = std::move(g.values);
    return r;
  }
  const int32_t e0 = g.row_ptr[size_t(r.node0)],
                e1 = g.row_ptr[size_t(r.node0 + r.rows)];
  r.row_ptr.assign(g.row_ptr.begin() + r.node0,
                   g.row_ptr.begin() + r.node0 + r.rows + 1);
  for (int32_t &p : r.row_ptr)
    p -= e0;
  r.col_idx.assign(g.col_idx.begin() + e0, g.col_idx.begin() + e1);
  r.values.assign(g.values.begin() + e0, g.values.begin() + e1);
  g.row_ptr = {};
  g.col_idx = {};
  g.values = {};
  return r;
}

void graph_info(const GraphShard &shard,
                std::map<std::string, std::string> &info) {
  info["graph_nodes"] = std::to_string(shard.graph.nodes);
  info["graph_adjacency_entries"] = std::to_string(shard.graph_nnz);
  info["graph_source"] = shard.source;
}

void check_data_flags(const ProgramSpec &s, const std::string &data,
                      const GraphFileNames &graph) {
  if (s.graph_model() && !data.empty())
    throw std::invalid_argument("--data: a graph model trains on a graph "
                                "generated from --seed or read with "
                                "--graph-adjacency/--graph-features/"
                                "--graph-labels");
  if (!s.graph_model() && graph.given())
    throw std::invalid_argument("--graph-adjacency/--graph-features/"
                                "--graph-labels: only a graph model (gcn, "
                                "gat, sage) trains on a graph");
}

int64_t count_correct(const float *logits, const int32_t *labels, int64_t N,
                      int64_t V, int64_t ld) {
  ld = ld ? ld : V;
  int64_t correct = 0;
  for (int64_t i = 0; i < N; ++i) {
    const float *row = logits + i * ld;
    correct +=
        labels[i] >= 0 && std::max_element(row, row + V) - row == labels[i];
  }
  return correct;
}

} // namespace autoddl::rt::harness
