//===- AdjacencyMemory.cpp - a graph model's adjacency on the GPU ------===//
//
// The allocations of backends/cuda/kernels/Sparse.cu and of the W8 builder
// (backends/cuda/sparse/WindowFormat.cu), term by term; docs/sparse-kernels.md
// "Memory" derives them.
//
//===----------------------------------------------------------------------===//
#include "planner/AdjacencyMemory.h"

#include "backends/common/DegreeLaw.h"
#include "cost_model/Compute.h"
#include "cost_model/GraphFeatures.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace autoddl::planner {
namespace {

/// One format's allocations, for the peak.
struct FormatBytes {
  double w8 = 0, positions = 0, values = 0, workspace = 0, staging = 0,
         build = 0;
  double slots = 0; // value slots: tensor-core blocks x 64 + CUDA-core entries
  double held() const { return w8 + positions + values + workspace; }
};

/// Windows the builder cuts into several parts: those holding more than
/// 8 partBlocks entries. It takes the generated graphs' law (DegreeLaw.h:
/// classes communities of equal size, every edge end drawn by rank over one's
/// members; the node of rank k expects (nnz - nodes) / classes * share(k)
/// entries besides its self loop, scaled to this format's mean degree) and rows
/// of like degree sharing a window, as the builder's clustered order groups
/// them (random windows split fewer): the windows of the rows expecting more
/// than partBlocks entries.
double splitWindows(const AdjacencyUse &u, const FormatUse &f,
                    double partBlocks) {
  const double windows = std::ceil(double(f.rows) / 8);
  if (u.nodes <= 0 || u.graphNnz <= u.nodes || f.rows <= 0)
    return 0;
  const int64_t classes = std::max<int64_t>(1, u.classes);
  const int64_t m = std::max<int64_t>(1, u.nodes / classes);
  const double ends = double(u.graphNnz - u.nodes) / double(classes);
  const rt::PowerLaw law =
      rt::community_law(m, rt::kCommunityEdgeFraction * ends);
  const double scale =
      (double(u.nnz) / double(f.rows)) / (double(u.graphNnz) / double(u.nodes));
  auto degree = [&](double k) { return (1 + ends * law.share(k)) * scale; };
  double lo = 0, hi = double(m); // degree(k) > partBlocks for k < lo
  if (degree(0) <= partBlocks)
    return 0;
  while (hi - lo > 0.5) {
    const double mid = std::floor((lo + hi) / 2);
    (degree(mid) > partBlocks ? lo : hi) = mid == lo ? hi : mid;
  }
  return std::ceil(windows * std::min(1.0, lo / double(m)));
}

FormatBytes formatBytes(const AdjacencyUse &u, const FormatUse &f) {
  FormatBytes b;
  if (!f.built)
    return b;
  const double n = double(u.nnz), eb = u.actBytes;
  const double rows = double(f.rows), cols = double(f.cols);
  const double windows = std::ceil(rows / 8);
  // Which windows run on tensor cores: every one in the all-tc variant; in
  // the hybrid one those of fill (entries over 8x1 vectors) >= 1.25. The
  // rows of a window of the natural order are independent random nodes
  // (GraphFeatures.cpp), so its fill is the matrix's, give or take a few
  // shared columns: hybrid sends all windows or none. The --fp32 build sends
  // every window to CUDA cores. A tensor-core window of v vectors fills
  // ceil(v / 8) blocks, v / 8 + 7/16 on average (v mod 8 uniform). The
  // builder's clustered order (taken when it cuts the vectors by 5 %) gathers
  // rows sharing hub columns and sends a few windows more to tensor cores
  // (Reddit-like: 7 % of them, +0.27 GB or 2.6 % of the counted peak):
  // not counted.
  const double fill = std::max(1.0, f.features.windowFill);
  const bool tc =
      eb < 4 && (f.tensorCores || fill >= sparse::kHybridFillThreshold);
  const double blocks = tc ? n / fill / 8 + 7.0 / 16 * windows : 0;
  const double cuda = tc ? 0 : n;
  b.slots = 64 * blocks + cuda;
  // Work is cut into parts of partBlocks blocks (8 entries a block), at
  // least 16 and about work / (128 SMs' warps) (WindowFormat.cu, step 5):
  // one part per window at least. A window cut into several parts holds
  // more than partBlocks units, so no more than work / (partBlocks + 1) are.
  const double work = blocks + std::ceil(cuda / 8);
  const double partBlocks =
      std::max(16.0, std::ceil(work / (128.0 * std::max(1, u.smCount))));
  const double parts = windows + std::ceil(work / partBlocks);
  const double split = std::min({windows, std::floor(work / (partBlocks + 1)),
                                 splitWindows(u, f, partBlocks)});
  // The format's arrays (WindowFormat.h): parts (16 B), split windows and
  // their part counts (4 + 4 B), per block 8 column ids, a 64-bit mask and
  // 64 values, per CUDA-core entry its column/row id and value, the CUDA-core
  // row pointers, and the slot -> row map of a clustered row order (counted
  // whether or not the builder keeps that order: 4 B a row).
  b.w8 = 16 * parts + 8 * split + blocks * (32 + 8 + 64 * eb) +
         cuda * (4 + eb) + 4 * (rows + 1) + 32 * windows;
  // Each CSR entry's value slot (Sparse.cu, build_format): int32 while the
  // slots fit one.
  b.positions = (b.slots <= 2147483647.0 ? 4 : 8) * n;
  b.values = eb * b.slots; // scatter / gather target of CSR-order values
  // spmm's fp32 sums of the split windows' 8 rows, and a counter per 32
  // features (SpmmKernels.cu, spmmWorkspaceBytes), for its widest use.
  const double w = double(f.spmmWidth);
  b.workspace = split * (32 * w + 4 * std::ceil(w / 32));
  // On the device while the format builds: row pointers, columns and act_t
  // values (the fp32 values are cast and freed before the build).
  b.staging = 4 * (rows + 1) + (4 + eb) * n;
  // The builder's scratch (WindowFormat.cu, BuildScratch.cuh), on top of
  // the format's arrays at its peak. Sorting one row order holds 64-bit keys
  // and fp32 values unsorted and sorted and cub's alternate buffers
  // (8 + 4 + 8 + 4 + 12 B an entry); once merged, the keys, values, vector
  // heads and ids (20 B). The program's Auto order sorts the natural and the
  // clustered order (more than one window) with the clustering's per-column
  // (32 B) and per-row (44 B) keys: 20 + 36 B an entry while the second
  // sorts. The order not kept is freed; then per window 40 B of counts and
  // scans, the format's arrays, and the CUDA-core entries re-sorted by row
  // (keys and values in and out, alternates: 36 B each). cub's histograms
  // and tile states (under 1 B an entry) are left out.
  const bool twoOrders = windows > 1 && n > 0;
  const double keys = twoOrders ? 32 * cols + 44 * rows : 0;
  const double sorting = (twoOrders ? 56 * n : 36 * n) + keys;
  const double tail = 20 * n + keys + 40 * windows + 36 * cuda;
  b.build = std::max(sorting - b.w8, tail);
  return b;
}

} // namespace

AdjacencyUse adjacencyUse(const ModelGraph &g, int adj, int dp, double actBytes,
                          const cost::Cluster &c, cost::Precision p) {
  struct Use {
    bool transpose, sddmm;
    int64_t width, scratchRows; // scratchRows: an spmm_add's product rows
  };
  AdjacencyUse u;
  const TensorDef &t = g.tensors[size_t(adj)];
  u.cols = t.shape.empty() ? 0 : t.shape[0];
  u.rows = u.cols / std::max(1, dp);
  u.nnz = (t.nnz + dp - 1) / std::max(1, dp);
  u.actBytes = actBytes;
  u.smCount = c.smCount;
  u.nodes = u.cols;
  u.graphNnz = t.nnz;
  // The generated graph's communities are the model's classes: the width of
  // the loss's logits.
  for (const OpDef &op : g.ops)
    if (op.kind == "cross_entropy" && !op.operands.empty() &&
        !g.tensors[size_t(op.operands[0])].shape.empty())
      u.classes = g.tensors[size_t(op.operands[0])].shape.back();
  std::vector<Use> forward, backward;
  for (const OpDef &op : g.ops) {
    if (op.operands.size() < 2 || g.sparsePattern(op.operands[0]) != adj)
      continue;
    auto width = [&](size_t k) {
      const ops::Shape &sh = g.tensors[size_t(op.operands[k])].shape;
      return sh.empty() ? int64_t(0) : sh.back();
    };
    auto grad = [&](size_t k) {
      return k < op.operands.size() &&
             g.tensors[size_t(op.operands[k])].role == TensorRole::Activation;
    };
    std::vector<Use> back; // this op's backward, in the runtime's order
    if (op.kind == "spmm") {
      const int64_t f = width(1);
      forward.push_back({false, false, f, 0});
      if (attrOf(op, ops::attr::kReduce) == "mean") {
        u.means = true; // spmm_mean builds both formats in the forward
        forward.push_back({true, false, f, 0});
      }
      if (grad(1)) // dx = A^T dy
        back.push_back({true, false, f, u.cols});
      if (grad(0)) // the values' gradient: an SDDMM on A
        back.push_back({false, true, f, 0});
    } else if (op.kind == "sddmm") {
      const int64_t k = width(1);
      forward.push_back({false, true, k, 0});
      if (grad(1)) // dx = D y, D on A's pattern
        back.push_back({false, false, k, u.rows});
      if (grad(2)) // dy = D^T x
        back.push_back({true, false, k, u.cols});
    }
    backward.insert(backward.begin(), back.begin(), back.end());
  }
  forward.insert(forward.end(), backward.begin(), backward.end());
  const cost::Precision bulk = cost::bulkPrecision(p);
  // The graph the program generates (DataOrder.cpp, graph_shard: rank 0's
  // rows [0, nodes / dp)), the seed its default.
  const cost::AdjacencyFeatures features =
      cost::communityGraphFeatures(u.nodes, u.graphNnz, u.classes, u.rows);
  for (const Use &x : forward) {
    FormatUse &f = x.transpose ? u.at : u.a;
    const int64_t r = x.transpose ? u.cols : u.rows,
                  k = x.transpose ? u.rows : u.cols;
    // No features (no classes, fewer entries than nodes, past int32): the
    // power-law assumption of a graph the plan cannot see.
    const sparse::SpmmFeatures &known = x.transpose ? features.at : features.a;
    const sparse::SpmmFeatures xf =
        known.nnz > 0 ? known : sparse::powerLawFeatures(r, k, u.nnz);
    if (!f.built) // the decider's pick at the first use (Sparse.cu)
      f = {true,
           cost::sparseVariant(x.sddmm, xf, double(x.width), bulk) ==
               sparse::SpmmVariant::TensorCore,
           r,
           k,
           0,
           xf};
    if (!x.sddmm)
      f.spmmWidth = std::max(f.spmmWidth, x.width);
    if (x.scratchRows > 0)
      u.scratchElems.push_back(x.scratchRows * x.width);
  }
  return u;
}

AdjacencyBytes adjacencyBytes(const AdjacencyUse &u) {
  AdjacencyBytes r;
  const FormatBytes a = formatBytes(u, u.a), t = formatBytes(u, u.at);
  r.rowPtr = 4 * (double(u.rows) + 1); // edge softmax, GATConv, sage's means
  r.formats = a.w8 + t.w8;
  r.positions = a.positions + t.positions;
  r.values = a.values + t.values;
  r.workspace = a.workspace + t.workspace;
  r.staging = std::max(a.staging, t.staging);
  r.build = std::max(a.build, t.build);
  if (u.means) // D^-1 A's values in both layouts
    r.means = u.actBytes * (a.slots + t.slots);
  // spmm_add's scratch grows to each wider product: the new buffer is made
  // before the old is freed.
  double cur = 0, grown = 0;
  for (int64_t e : u.scratchElems) {
    const double bytes = u.actBytes * double(e);
    if (bytes > cur)
      grown = std::max(grown, cur + bytes), cur = bytes;
  }
  r.scratch = grown;
  // Formats are built at their first use, inside the first step: A first
  // (the forward), then A^T with A held (a scratch sddmm's backward made
  // before it, K wide, is left out: far below the build's bytes an entry);
  // later steps hold everything. sage's means are made in the first forward,
  // before any scratch, through CSR-order values (act_t an entry).
  const double buildA = a.staging + a.w8 + a.build;
  const double buildT = u.at.built ? a.held() + t.staging + t.w8 + t.build : 0;
  const double steady =
      a.held() + t.held() + r.means +
      std::max(r.scratch, u.means ? u.actBytes * double(u.nnz) : 0.0);
  r.peak = r.rowPtr + std::max({buildA, buildT, steady});
  return r;
}

} // namespace autoddl::planner
