// K-FAC's reductions under mpirun (2 and 4 ranks, see CMakeLists.txt): the
// factor all-reduce equals the fp64 mean of every rank's factor; a batch split
// over data-parallel ranks gives the one-rank factors; under tensor
// parallelism (column- and row-parallel, both weight layouts) the gathered
// factors and the preconditioned shards equal the unsplit layer's; LAMB's
// sharded norms equal the whole parameter's. Every rank draws every rank's
// inputs from a seed agreed on rank 0, so each can compute the reference.
#include "backends/cpu/Collectives.h"
#include "backends/host/MpiCheck.h"
#include "backends/cpu/kfac/Kfac.h"
#include "tests/unit/runtime/KfacReference.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

using namespace autoddl::rt;
using namespace kfacref;

namespace {

int worldRank() { return comm_rank(MPI_COMM_WORLD); }
int worldSize() { return comm_size(MPI_COMM_WORLD); }

/// A fresh seed, the same on every rank (rank 0 draws and broadcasts it).
unsigned shared_seed() {
  unsigned s = std::random_device{}();
  MPI_Bcast(&s, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
  if (worldRank() == 0)
    std::printf("KfacMpiTest seed %u\n", s);
  return s;
}

/// Rows [r0, r0+n) x columns [c0, c0+m) of X[S,d].
std::vector<float> block(const std::vector<float> &X, int64_t d, int64_t r0,
                         int64_t n, int64_t c0, int64_t m) {
  std::vector<float> b(size_t(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      b[size_t(i * m + j)] = X[size_t((r0 + i) * d + c0 + j)];
  return b;
}

/// The unsplit layer, its factors from X and dY and refreshed.
KfacLayer whole_layer(const std::vector<float> &X, const std::vector<float> &dY,
                      int64_t S, int64_t in, int64_t out, const KfacConfig &c) {
  KfacLayer l(in, out);
  kfac_accumulate(l.A.data(), X.data(), S, in, 1.0f / float(S));
  kfac_accumulate(l.G.data(), dY.data(), S, out, 1.0f / float(S));
  KfacStats stats;
  kfac_refresh(l, c, stats);
  return l;
}

} // namespace

TEST(KfacMpi, FactorAllReduceIsTheFp64Mean) {
  const int p = worldSize(), r = worldRank();
  std::mt19937 rng(shared_seed());
  const int64_t S = 33, d = 40;
  std::vector<std::vector<float>> X;
  for (int q = 0; q < p; ++q)
    X.push_back(random_floats(rng, S * d));
  std::vector<float> F(size_t(d * d), 0.0f);
  kfac_accumulate(F.data(), X[size_t(r)].data(), S, d, 1.0f / float(S));
  kfac_factor_all_reduce_mean(F.data(), d * d, MPI_COMM_WORLD);
  Mat want(size_t(d * d), 0.0);
  for (int q = 0; q < p; ++q) {
    const Mat g = gram(X[size_t(q)], S, d, 1.0 / (double(S) * p));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] += g[i];
  }
  EXPECT_LT(rel_error(F, want), 1e-5);
  // Identical bits on every rank (the inverses must agree too).
  std::vector<float> first = F;
  MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(F, first);
}

TEST(KfacMpi, DataParallelFactorsEqualTheOneRankFactors) {
  // The global batch of p * S rows in two micro-batches on one rank, against
  // each rank's S rows (same two micro-batches) and the mean over ranks.
  const int p = worldSize(), r = worldRank();
  std::mt19937 rng(shared_seed());
  const int64_t S = 20, d = 24, mb = 2, rows = S / mb;
  const auto X = random_floats(rng, p * S * d);
  std::vector<float> one(size_t(d * d), 0.0f), split(size_t(d * d), 0.0f);
  // One rank: micro-batch m holds rows [m p rows, (m+1) p rows) of the batch.
  const KfacScales all = kfac_factor_scales(p * S, 1.0);
  for (int64_t m = 0; m < mb; ++m)
    kfac_accumulate(one.data(), X.data() + m * p * rows * d, p * rows, d,
                    all.a);
  // Rank r: its share of each micro-batch (rows [r rows, (r+1) rows) of it).
  const KfacScales mine = kfac_factor_scales(S, 1.0);
  for (int64_t m = 0; m < mb; ++m)
    kfac_accumulate(split.data(), X.data() + (m * p + r) * rows * d, rows, d,
                    mine.a);
  kfac_factor_all_reduce_mean(split.data(), d * d, MPI_COMM_WORLD);
  EXPECT_LT(rel_error(split, to_double(one)), 1e-5);
  EXPECT_LT(rel_error(split, gram(X, p * S, d, 1.0 / (p * S))), 1e-5);
}

TEST(KfacMpi, TensorParallelGivesTheUnsplitLayer) {
  // The world is the tp group. Column-parallel (split Out): X whole, dY by
  // columns, G gathered. Row-parallel (split In): X by columns, A gathered.
  const int p = worldSize(), r = worldRank();
  std::mt19937 rng(shared_seed());
  const int64_t S = 50, in = 6 * p, out = 5 * p;
  const auto X = random_floats(rng, S * in);
  const auto dY = random_floats(rng, S * out, 0.05f);
  KfacConfig c;
  c.damping = 1e-2;
  const KfacLayer whole = whole_layer(X, dY, S, in, out, c);
  const auto dW = random_floats(rng, in * out), db = random_floats(rng, out);
  for (KfacSplit split : {KfacSplit::Out, KfacSplit::In}) {
    const bool byOut = split == KfacSplit::Out;
    KfacLayer l(in, out);
    const int64_t inL = byOut ? in : in / p, outL = byOut ? out / p : out;
    const auto xL = block(X, in, 0, S, byOut ? 0 : r * inL, inL);
    const auto yL = block(dY, out, 0, S, byOut ? r * outL : 0, outL);
    kfac_accumulate_gathered(l.A.data(), xL.data(), S, inL, 1.0f / float(S),
                             byOut ? MPI_COMM_SELF : MPI_COMM_WORLD);
    kfac_accumulate_gathered(l.G.data(), yL.data(), S, outL, 1.0f / float(S),
                             byOut ? MPI_COMM_WORLD : MPI_COMM_SELF);
    EXPECT_LT(rel_error(l.A, gram(X, S, in, 1.0 / S)), 1e-5);
    EXPECT_LT(rel_error(l.G, gram(dY, S, out, 1.0 / S)), 1e-5);
    KfacStats stats;
    kfac_refresh(l, c, stats);
    for (bool torchLayout : {true, false}) {
      // The unsplit result, then this rank's block of it.
      std::vector<float> full(size_t(in * out)),
          fullb(static_cast<size_t>(out));
      kfac_precondition(full.data(), dW.data(), fullb.data(), db.data(), whole,
                        torchLayout);
      const int64_t rowsW = torchLayout ? out : in,
                    colsW = torchLayout ? in : out;
      const bool splitRows = byOut == torchLayout;
      const int64_t r0 = splitRows ? r * rowsW / p : 0,
                    nR = splitRows ? rowsW / p : rowsW,
                    c0 = splitRows ? 0 : r * colsW / p,
                    nC = splitRows ? colsW : colsW / p;
      const auto shard = block(dW, colsW, r0, nR, c0, nC);
      const auto want = block(full, colsW, r0, nR, c0, nC);
      const auto dbShard = byOut ? block(db, 1, r * outL, outL, 0, 1) : db;
      const auto wantb = byOut ? block(fullb, 1, r * outL, outL, 0, 1) : fullb;
      std::vector<float> got(shard.size()), gotb(dbShard.size());
      kfac_precondition_split(got.data(), shard.data(), gotb.data(),
                              dbShard.data(), l, torchLayout, split,
                              MPI_COMM_WORLD);
      EXPECT_LT(rel_error(got, to_double(want)), 1e-5)
          << "split " << (byOut ? "out" : "in") << " torch " << torchLayout;
      EXPECT_LT(rel_error(gotb, to_double(wantb)), 1e-5);
    }
  }
}

TEST(KfacMpi, LambOverShardsEqualsTheWholeParameter) {
  const int p = worldSize(), r = worldRank();
  std::mt19937 rng(shared_seed());
  const int64_t part = 101, n = part * p;
  KfacConfig c;
  c.rule = KfacRule::Lamb;
  c.lr = 0.02;
  c.weight_decay = 0.1;
  auto whole = random_floats(rng, n);
  std::vector<float> mine(whole.begin() + r * part,
                          whole.begin() + (r + 1) * part);
  std::vector<float> m(static_cast<size_t>(n)), v(static_cast<size_t>(n)),
      ms(static_cast<size_t>(part)), vs(static_cast<size_t>(part));
  for (int64_t t = 1; t <= 3; ++t) {
    const auto d = random_floats(rng, n, 0.1f);
    kfac_lamb_step(whole.data(), d.data(), m.data(), v.data(), n, c, t,
                   MPI_COMM_NULL);
    kfac_lamb_step(mine.data(), d.data() + r * part, ms.data(), vs.data(), part,
                   c, t, MPI_COMM_WORLD);
  }
  const std::vector<float> want(whole.begin() + r * part,
                                whole.begin() + (r + 1) * part);
  EXPECT_LT(rel_error(mine, to_double(want)), 1e-6);
}
