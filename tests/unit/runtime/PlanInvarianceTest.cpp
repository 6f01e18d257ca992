// The runtime's numerics contract end to end (DESIGN §6), on a small residual
// MLP language model trained for a few steps under mpirun: data parallel x
// tensor parallel (Megatron column/row linears, vocab-parallel head and
// cross-entropy) must give the same loss at every step as the single-rank run
// of the same model, and parameter shards must stay slices of its parameters.
//
// The single-rank reference is the same code on MPI_COMM_SELF (dp = tp = 1),
// run on every rank. Tolerance: fp32 sums in a different order (all-reduce,
// sharded GEMMs): relative error of the loss <= 1e-5 (DESIGN §6); parameters
// within 1e-4 after AdamW steps of lr 1e-2.
#include "backends/common/Data.h"
#include "backends/common/Init.h"
#include "backends/cpu/Collectives.h"
#include "backends/cpu/Mesh.h"
#include "backends/cpu/Optimizer.h"
#include "backends/cpu/kernels/CrossEntropy.h"
#include "backends/cpu/kernels/Elementwise.h"
#include "backends/cpu/kernels/Embedding.h"
#include "backends/cpu/kernels/Linear.h"
#include "backends/cpu/kernels/Norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mpi.h>

using namespace autoddl::rt;

namespace {

constexpr int64_t V = 16, C = 8, H = 32, B = 4, T = 5;
constexpr uint64_t kSeed = 1234;

struct Param {
  Shape full;
  int64_t splitDim; // -1: replicated over tp (B); else S(splitDim) over tp
  std::vector<float> value, grad, m, v;
};

/// One rank's share of the model: x = wte[ids]; y = x + fc2(gelu(fc1(ln(x)))) +
/// b2; loss = cross_entropy(lm(y)). fc1 is column-parallel (w1 S(0)), fc2
/// row-parallel (w2 S(1)), lm vocab-parallel (wlm S(0)); the batch is split
/// over dp.
class TinyModel {
public:
  TinyModel(MPI_Comm dp, MPI_Comm tp) : dp_(dp), tp_(tp) {
    ndp_ = comm_size(dp);
    ntp_ = comm_size(tp);
    rdp_ = comm_rank(dp);
    rtp_ = comm_rank(tp);
    add("wte", {V, C}, -1, 0.0f, 0.5f);
    add("ln.gamma", {C}, -1, 1.0f, 0.1f);
    add("ln.beta", {C}, -1, 0.0f, 0.1f);
    add("fc1.weight", {H, C}, 0, 0.0f, 0.3f);
    add("fc1.bias", {H}, 0, 0.0f, 0.1f);
    add("fc2.weight", {C, H}, 1, 0.0f, 0.3f);
    add("fc2.bias", {C}, -1, 0.0f, 0.1f);
    add("lm.weight", {V, C}, 0, 0.0f, 0.3f);
  }

  Param &p(const std::string &n) { return params_.at(n); }

  /// One training step; returns the global mean loss, computed before the
  /// update.
  double step(int64_t s) {
    const int64_t Bl = B / ndp_, N = Bl * T, Hl = H / ntp_, Vl = V / ntp_;
    std::vector<int32_t> ids(N), tg(N);
    synthetic_tokens(kSeed, s, B, T, V, rdp_ * Bl, Bl, ids.data(), tg.data());
    // forward
    std::vector<float> x(N * C), ln(N * C), mean(N), rstd(N), h(N * Hl),
        a(N * Hl), o(N * C), y(N * C), logits(N * Vl), losses(N), gmax(N),
        sums(2 * N);
    embedding_forward(x.data(), ids.data(), p("wte").value.data(), N, C, 0, V);
    layernorm_forward(ln.data(), mean.data(), rstd.data(), x.data(),
                      p("ln.gamma").value.data(), p("ln.beta").value.data(), N,
                      C, 1e-5f);
    linear_forward(h.data(), ln.data(), p("fc1.weight").value.data(),
                   p("fc1.bias").value.data(), N, C, Hl, true);
    gelu_forward(a.data(), h.data(), N * Hl, true);
    linear_forward(o.data(), a.data(), p("fc2.weight").value.data(), nullptr, N,
                   Hl, C, true);
    all_reduce_forward(o.data(), N * C, tp_); // P -> B
    bias_add_forward(o.data(), o.data(), p("fc2.bias").value.data(), N, C);
    add_forward(y.data(), x.data(), o.data(), N * C);
    linear_forward(logits.data(), y.data(), p("lm.weight").value.data(),
                   nullptr, N, C, Vl, true);
    crossentropy_vocab_parallel_forward(losses.data(), gmax.data(), sums.data(),
                                        logits.data(), tg.data(), N, Vl,
                                        rtp_ * Vl, tp_);
    float lossSum = 0;
    for (float l : losses)
      lossSum += l;
    all_reduce_forward(&lossSum, 1, dp_);
    // backward (gradients accumulate from zero)
    for (auto &kv : params_)
      std::fill(kv.second.grad.begin(), kv.second.grad.end(), 0.0f);
    const float scale = 1.0f / float(B * T);
    std::vector<float> dlogits(N * Vl, 0.0f), dy(N * C, 0.0f), da(N * Hl, 0.0f),
        dh(N * Hl, 0.0f), dln(N * C, 0.0f);
    crossentropy_vocab_parallel_backward(dlogits.data(), logits.data(),
                                         tg.data(), gmax.data(), sums.data(), N,
                                         Vl, rtp_ * Vl, scale);
    linear_backward(dy.data(), p("lm.weight").grad.data(), nullptr,
                    dlogits.data(), y.data(), p("lm.weight").value.data(), N, C,
                    Vl, true);
    all_reduce_forward(dy.data(), N * C,
                       tp_);    // grad of a B input of a split layer: P -> B
    std::vector<float> dx = dy; // residual branch
    bias_add_backward(nullptr, p("fc2.bias").grad.data(), dy.data(), N, C);
    all_reduce_backward(dy.data(), N * C, tp_); // transpose of the P -> B above
    linear_backward(da.data(), p("fc2.weight").grad.data(), nullptr, dy.data(),
                    a.data(), p("fc2.weight").value.data(), N, Hl, C, true);
    gelu_backward(dh.data(), h.data(), da.data(), N * Hl, true);
    linear_backward(dln.data(), p("fc1.weight").grad.data(),
                    p("fc1.bias").grad.data(), dh.data(), ln.data(),
                    p("fc1.weight").value.data(), N, C, Hl, true);
    all_reduce_forward(dln.data(), N * C, tp_);
    layernorm_backward(dx.data(), p("ln.gamma").grad.data(),
                       p("ln.beta").grad.data(), dln.data(), x.data(),
                       p("ln.gamma").value.data(), mean.data(), rstd.data(), N,
                       C);
    embedding_backward(p("wte").grad.data(), dx.data(), ids.data(), N, C, 0, V);
    // gradient synchronisation over dp, then AdamW on each local shard
    AdamWConfig cfg;
    cfg.lr = 1e-2;
    for (auto &kv : params_) {
      Param &q = kv.second;
      all_reduce_forward(q.grad.data(), int64_t(q.grad.size()), dp_);
      adamw_step(q.value.data(), q.grad.data(), q.m.data(), q.v.data(),
                 int64_t(q.value.size()), cfg, s + 1);
    }
    return double(lossSum) / double(B * T);
  }

  int tpRank() const { return rtp_; }
  int tpSize() const { return ntp_; }

private:
  void add(const std::string &name, Shape full, int64_t splitDim, float mean,
           float std) {
    Slice s = Slice::whole(full);
    if (splitDim >= 0)
      s = s.split(splitDim, ntp_, rtp_);
    Param q{full, splitDim, std::vector<float>(s.numel()), {}, {}, {}};
    init_normal(q.value.data(), s, kSeed, name, mean, std);
    q.grad.assign(q.value.size(), 0.0f);
    q.m.assign(q.value.size(), 0.0f);
    q.v.assign(q.value.size(), 0.0f);
    params_.emplace(name, std::move(q));
  }

  MPI_Comm dp_, tp_;
  int ndp_, ntp_, rdp_, rtp_;
  std::map<std::string, Param> params_;
};

void expectSameTraining(int64_t dp, int64_t tp) {
  Mesh mesh({dp, tp}, MPI_COMM_WORLD);
  TinyModel sharded(mesh.axis(0), mesh.axis(1));
  TinyModel single(MPI_COMM_SELF, MPI_COMM_SELF);
  for (int64_t s = 0; s < 4; ++s) {
    const double got = sharded.step(s), want = single.step(s);
    ASSERT_NEAR(got, want, 1e-5 * std::fabs(want))
        << "dp=" << dp << " tp=" << tp << " step " << s;
  }
  for (const char *name : {"wte", "fc1.weight", "fc2.weight", "lm.weight",
                           "fc2.bias", "ln.gamma"}) {
    Param &full = single.p(name), &shard = sharded.p(name);
    std::vector<float> want = full.value;
    if (shard.splitDim >= 0) {
      want.resize(full.value.size() / tp);
      slice_forward(want.data(), full.value.data(), full.full, shard.splitDim,
                    tp, sharded.tpRank());
    }
    ASSERT_EQ(shard.value.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(shard.value[i], want[i], 1e-4) << name << "[" << i << "]";
  }
}

} // namespace

TEST(PlanInvariance, DataParallelOnly) {
  expectSameTraining(comm_size(MPI_COMM_WORLD), 1);
}

TEST(PlanInvariance, TensorParallelOnly) {
  expectSameTraining(1, comm_size(MPI_COMM_WORLD));
}

TEST(PlanInvariance, DataTimesTensorParallel) {
  const int p = comm_size(MPI_COMM_WORLD);
  if (p != 4)
    GTEST_SKIP() << "dp x tp = 2 x 2 needs 4 ranks";
  expectSameTraining(2, 2);
}
