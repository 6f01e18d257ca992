// MPI collectives under mpirun (2 and 4 ranks, see CMakeLists.txt): every S(i)
// collective equals the corresponding operation on the full tensor, backward
// transposes equal the transposed operation, and per-axis communicators follow
// the documented row-major rank order.
#include "backends/cpu/Collectives.h"
#include "backends/common/FileIo.h"
#include "backends/common/Init.h"
#include "backends/common/MiniJson.h"
#include "backends/common/Safetensors.h"
#include "backends/host/Checkpoint.h"
#include "backends/host/Mesh.h"
#include "backends/host/RunReport.h"
#include "backends/cpu/Zero.h"
#include "backends/cpu/kernels/CrossEntropy.h"

#include <gtest/gtest.h>

#include <mpi.h>

using namespace autoddl::rt;

namespace {

int worldRank() { return comm_rank(MPI_COMM_WORLD); }
int worldSize() { return comm_size(MPI_COMM_WORLD); }

/// The full tensor every rank can compute: element i is a small exact value
/// depending on `tag`.
std::vector<float> fullTensor(const Shape &shape, int tag) {
  std::vector<float> t(numel(shape));
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = float(int((i * 7 + tag * 13) % 23) - 11) * 0.5f;
  return t;
}

std::vector<float> shardOf(const std::vector<float> &full, const Shape &shape,
                           int64_t dim, int p, int r) {
  std::vector<float> s(full.size() / p);
  slice_forward(s.data(), full.data(), shape, dim, p, r);
  return s;
}

} // namespace

TEST(Collectives, SliceLayoutIsTheSbpSplit) {
  // slice_forward's S(dim) part r is Slice::split's block (the layout init
  // uses).
  const Shape shape = {4, 6, 2};
  const auto full = fullTensor(shape, 1);
  const Slice s = Slice::whole(shape).split(1, 3, 2);
  const auto shard = shardOf(full, shape, 1, 3, 2);
  for (int64_t k = 0; k < s.numel(); ++k)
    ASSERT_EQ(shard[k], full[slice_global_index(s, k)]);
}

TEST(Collectives, AllReduceSumsOverTheGroup) {
  const int p = worldSize(), r = worldRank();
  std::vector<float> buf = {float(r + 1), float(2 * r)};
  all_reduce_forward(buf.data(), 2, MPI_COMM_WORLD);
  EXPECT_EQ(buf[0], float(p * (p + 1) / 2)); // 1 + 2 + ... + p
  EXPECT_EQ(buf[1], float(p * (p - 1)));     // 2 (0 + ... + p-1)
  std::vector<float> mx = {float(r), float(-r)};
  all_reduce_max(mx.data(), 2, MPI_COMM_WORLD);
  EXPECT_EQ(mx[0], float(p - 1));
  EXPECT_EQ(mx[1], 0.0f);
}

TEST(Collectives, AllGatherOfShardEqualsFullTensorOnEveryDim) {
  const int p = worldSize(), r = worldRank();
  const Shape shape = {2 * int64_t(p), 3, int64_t(p)};
  const auto full = fullTensor(shape, 2);
  for (int64_t dim : {0, 1, 2}) {
    if (shape[dim] % p)
      continue;
    Shape shardShape = shape;
    shardShape[dim] /= p;
    const auto shard = shardOf(full, shape, dim, p, r);
    std::vector<float> gathered(full.size());
    all_gather_forward(gathered.data(), shard.data(), shardShape, dim,
                       MPI_COMM_WORLD);
    EXPECT_EQ(gathered, full) << "dim " << dim;
  }
}

TEST(Collectives, ReduceScatterEqualsShardOfTheSum) {
  const int p = worldSize(), r = worldRank();
  const Shape shape = {3, 2 * int64_t(p), 2};
  // Rank q holds the partial full(q); the sum over q is known to every rank.
  std::vector<float> sum(numel(shape), 0.0f);
  for (int q = 0; q < p; ++q) {
    const auto part = fullTensor(shape, q);
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += part[i];
  }
  for (int64_t dim : {0, 1}) {
    if (shape[dim] % p)
      continue;
    const auto mine = fullTensor(shape, r);
    std::vector<float> shard(sum.size() / p);
    reduce_scatter_forward(shard.data(), mine.data(), shape, dim,
                           MPI_COMM_WORLD);
    EXPECT_EQ(shard, shardOf(sum, shape, dim, p, r)) << "dim " << dim;
    // all_gather's backward is reduce_scatter, added to the gradient already
    // there.
    Shape shardShape = shape;
    shardShape[dim] /= p;
    std::vector<float> dshard(shard.size(), 1.0f);
    all_gather_backward(dshard.data(), mine.data(), shardShape, dim,
                        MPI_COMM_WORLD);
    const auto want = shardOf(sum, shape, dim, p, r);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(dshard[i], want[i] + 1.0f);
    // reduce_scatter's backward is all_gather: every rank's dfull += the
    // gathered gradient.
    std::vector<float> dfull(sum.size(), 0.0f);
    reduce_scatter_backward(dfull.data(), want.data(), shape, dim,
                            MPI_COMM_WORLD);
    EXPECT_EQ(dfull, sum);
  }
}

TEST(Collectives, AllToAllMovesTheSplitBetweenDims) {
  const int p = worldSize(), r = worldRank();
  const Shape shape = {2 * int64_t(p), int64_t(p), 3 * int64_t(p)};
  const auto full = fullTensor(shape, 5);
  for (auto [i, j] :
       {std::pair<int64_t, int64_t>{0, 2}, {2, 0}, {1, 2}, {2, 1}}) {
    Shape inShape = shape;
    inShape[i] /= p;
    const auto in = shardOf(full, shape, i, p, r);
    std::vector<float> out(in.size());
    all_to_all_forward(out.data(), in.data(), inShape, i, j, MPI_COMM_WORLD);
    EXPECT_EQ(out, shardOf(full, shape, j, p, r))
        << "S(" << i << ") -> S(" << j << ")";
    // Backward: the gradient of the S(j) output goes back to S(i), added.
    std::vector<float> din(in.size(), 0.5f);
    all_to_all_backward(din.data(), out.data(), inShape, i, j, MPI_COMM_WORLD);
    for (size_t k = 0; k < in.size(); ++k)
      ASSERT_EQ(din[k], in[k] + 0.5f);
  }
}

TEST(Collectives, SendRecvAroundARing) {
  const int p = worldSize(), r = worldRank();
  std::vector<float> out = {float(r), float(r * r)}, in(2);
  // Non-blocking both ways, then blocking: even ranks send first to avoid a
  // cycle.
  std::vector<MPI_Request> reqs;
  reqs.push_back(irecv(in.data(), 2, (r + p - 1) % p, 7, MPI_COMM_WORLD));
  reqs.push_back(isend(out.data(), 2, (r + 1) % p, 7, MPI_COMM_WORLD));
  wait_all(reqs);
  const int prev = (r + p - 1) % p;
  EXPECT_EQ(in[0], float(prev));
  EXPECT_EQ(in[1], float(prev * prev));
  if (r % 2 == 0) {
    send(out.data(), 2, (r + 1) % p, 8, MPI_COMM_WORLD);
    recv(in.data(), 2, prev, 8, MPI_COMM_WORLD);
  } else {
    recv(in.data(), 2, prev, 8, MPI_COMM_WORLD);
    send(out.data(), 2, (r + 1) % p, 8, MPI_COMM_WORLD);
  }
  EXPECT_EQ(in[0], float(prev));
  EXPECT_GE(comm_stats()["send"].calls, 2);
}

TEST(Collectives, VocabParallelCrossEntropyEqualsFull) {
  const int p = worldSize(), r = worldRank();
  const int64_t N = 3, V = 4 * p, Vl = V / p;
  std::vector<float> logits(N * V);
  for (int64_t i = 0; i < N * V; ++i)
    logits[i] = float((i * 5) % 11) * 0.3f - 1.0f;
  std::vector<int32_t> targets = {0, int32_t(V - 1), int32_t(V / 2)};
  std::vector<float> losses(N), lse(N), local(N * Vl);
  crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(),
                       N, V);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < Vl; ++v)
      local[n * Vl + v] = logits[n * V + r * Vl + v];
  std::vector<float> vp(N), gmax(N), sums(2 * N);
  crossentropy_vocab_parallel_forward(vp.data(), gmax.data(), sums.data(),
                                      local.data(), targets.data(), N, Vl,
                                      r * Vl, MPI_COMM_WORLD);
  for (int64_t n = 0; n < N; ++n)
    EXPECT_NEAR(vp[n], losses[n], 1e-5);
}

TEST(Mesh, RowMajorCoordinatesAndAxisCommunicators) {
  const int p = worldSize(), r = worldRank();
  if (p != 4)
    GTEST_SKIP() << "the 2x2 mesh needs 4 ranks";
  Mesh mesh({2, 2}, MPI_COMM_WORLD);
  // rank = c0 * 2 + c1: the last axis varies fastest.
  EXPECT_EQ(mesh.coord(0), r / 2);
  EXPECT_EQ(mesh.coord(1), r % 2);
  EXPECT_EQ(mesh.rank_of({1, 0}), 2);
  EXPECT_EQ(mesh.rank_with(0, 1 - mesh.coord(0)), (r + 2) % 4);
  for (size_t a = 0; a < 2; ++a) {
    EXPECT_EQ(comm_size(mesh.axis(a)), 2);
    EXPECT_EQ(comm_rank(mesh.axis(a)), mesh.coord(a));
  }
  // all_gather along axis 1 joins ranks {0,1} and {2,3}; along axis 0, {0,2}
  // and {1,3}.
  float mine = float(r), got[2];
  all_gather_forward(got, &mine, {1}, 0, mesh.axis(1));
  EXPECT_EQ(got[0], float(r - r % 2));
  EXPECT_EQ(got[1], float(r - r % 2 + 1));
  all_gather_forward(got, &mine, {1}, 0, mesh.axis(0));
  EXPECT_EQ(got[0], float(r % 2));
  EXPECT_EQ(got[1], float(r % 2 + 2));
  MPI_Comm both = mesh.group({0, 1});
  EXPECT_EQ(comm_size(both), 4);
  EXPECT_EQ(comm_rank(both), r);
  EXPECT_THROW(Mesh({3, 2}, MPI_COMM_WORLD), std::runtime_error);
}

TEST(RunReport, MetricsAndTraceGatherEveryRank) {
  const int p = worldSize(), r = worldRank();
  const std::string dir = "/tmp/autoddl-runreport-" + std::to_string(p);
  make_directories(dir);
  RunMetrics m;
  m.loss = {3.0, 2.5};
  m.step_seconds = {0.2, 0.1};
  m.items_per_step = 40;
  write_run_metrics(m, dir + "/metrics.json", MPI_COMM_WORLD);
  TraceRecorder trace;
  const double t0 = trace.now_us();
  trace.end("step", 0, t0);
  write_run_trace(trace, dir + "/trace.json", MPI_COMM_WORLD);
  const Json metrics = json_parse(read_file(dir + "/metrics.json"), "metrics");
  EXPECT_EQ(metrics.find("peak_memory_bytes")->array.size(), size_t(p));
  EXPECT_GT(metrics.find("peak_memory_bytes")->array[size_t(p - 1)].integer, 0);
  // AllReduceSumsOverTheGroup and others ran before: the stats carry their
  // calls.
  EXPECT_GE(
      metrics.find("collectives")->find("all_reduce")->find("calls")->integer,
      1);
  const Json doc = json_parse(read_file(dir + "/trace.json"), "trace");
  const auto &events = doc.find("traceEvents")->array;
  ASSERT_EQ(events.size(), size_t(p)); // one event per rank, pid = rank
  EXPECT_EQ(events[size_t(r)].find("pid")->integer, r);
}

TEST(Checkpoint, ShardedSaveLoadsUnderAnotherSharding) {
  const int p = worldSize(), r = worldRank();
  const std::string path =
      "/tmp/autoddl-ckpt-" + std::to_string(p) + ".safetensors";
  const Shape aShape = {4, 2 * int64_t(p)}, bShape = {3, 2};
  const auto a = fullTensor(aShape, 1), b = fullTensor(bShape, 2);
  // a is S(1) over all ranks; b lives on rank 0 only (a pipeline stage's
  // parameter).
  auto aShard = shardOf(a, aShape, 1, p, r);
  std::vector<float> bCopy = b;
  std::vector<CheckpointEntry> saved = {
      {"a", Slice::whole(aShape).split(1, p, r), aShard.data()},
      {"b", Slice::whole(bShape), r == 0 ? bCopy.data() : nullptr}};
  checkpoint_save(path, saved, {{"step", "5"}}, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  // Load a as S(0) instead, and b everywhere.
  std::vector<float> aRows(a.size() / p), bAll(b.size());
  const auto meta = checkpoint_load(
      path, {{"a", Slice::whole(aShape).split(0, p, r), aRows.data()},
             {"b", Slice::whole(bShape), bAll.data()}});
  EXPECT_EQ(meta.at("step"), "5");
  EXPECT_EQ(aRows, shardOf(a, aShape, 0, p, r));
  EXPECT_EQ(bAll, b);
  // A checkpoint of another model: a missing tensor, a tensor of another shape.
  std::vector<float> other(8);
  EXPECT_THROW(checkpoint_load(path, {{"c", Slice::whole({8}), other.data()}}),
               std::runtime_error);
  EXPECT_THROW(
      checkpoint_load(path, {{"b", Slice::whole({2, 3}), other.data()}}),
      std::runtime_error);
  // A tensor no rank holds whole: rank 0 refuses to write, the old file stays.
  std::vector<CheckpointEntry> partial = {{"a",
                                           Slice::whole(aShape).split(1, p, r),
                                           r == 0 ? aShard.data() : nullptr}};
  if (r == 0) {
    EXPECT_THROW(checkpoint_save(path, partial, {}, MPI_COMM_WORLD),
                 std::runtime_error);
  } else {
    checkpoint_save(path, partial, {}, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(safetensors_read(path).metadata.at("step"), "5");
}

TEST(Zero, ShardedAdamWEqualsReplicatedAdamW) {
  // ZeRO: reduce-scatter + AdamW on the owned range + all-gather equals every
  // rank running AdamW on all-reduced gradients (element-wise update, same
  // inputs): exactly, bit for bit.
  const int p = worldSize(), r = worldRank();
  const int64_t n = 11, padded = zero_padded_size(n, p);
  EXPECT_EQ(padded % p, 0);
  std::vector<float> zp(size_t(padded), 0.0f), rp(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    zp[size_t(i)] = rp[size_t(i)] = 0.1f * float(i) - 0.4f;
  std::vector<float> zm(size_t(padded / p), 0.0f), zv = zm;
  std::vector<float> rm(size_t(n), 0.0f), rv = rm;
  AdamWConfig c;
  c.lr = 0.05;
  for (int64_t t = 1; t <= 3; ++t) {
    std::vector<float> g(size_t(padded), 0.0f);
    for (int64_t i = 0; i < n; ++i) // rank r's partial gradient
      g[size_t(i)] = float((i * 3 + r * 5 + t) % 7) - 3.0f;
    std::vector<float> gsum(g.begin(), g.begin() + n);
    all_reduce_forward(gsum.data(), n, MPI_COMM_WORLD);
    adamw_step(rp.data(), gsum.data(), rm.data(), rv.data(), n, c, t);
    zero_adamw_step(zp.data(), g.data(), zm.data(), zv.data(), padded, c, t,
                    MPI_COMM_WORLD);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(zp[size_t(i)], rp[size_t(i)])
          << "step " << t << " element " << i;
  }
}
