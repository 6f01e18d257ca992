// KernelCheck's loss cases: cross-entropy in its three forms, squared error.
#include "tests/unit/cuda/KernelCheck.h" // first: see there

#include "backends/cuda/kernels/CrossEntropy.h"

#include <algorithm>

namespace kcheck {

namespace {

/// Random labels of N rows of V classes: row 0's is 0, the last row's V - 1
/// (both ends of a row), row 1's -1 (outside the loss: loss 0, no gradient).
std::vector<int32_t> loss_targets(int64_t N, int64_t V) {
  std::uniform_int_distribution<int32_t> pick(0, int32_t(V - 1));
  std::vector<int32_t> targets(static_cast<size_t>(N));
  for (auto &t : targets)
    t = pick(gRng);
  targets[0] = 0;
  targets[size_t(N - 1)] = int32_t(V - 1);
  if (N > 2)
    targets[1] = -1;
  return targets;
}

} // namespace

// Squared error against the one-hot label (--loss squared_error).

void check_squared_error(int64_t N, int64_t C) {
  const std::string tag = "squared_error " + shape({N, C});
  auto scores = random_values(gRng, N * C, -2, 2);
  const std::vector<int32_t> targets = loss_targets(N, C);
  std::vector<float> losses(static_cast<size_t>(N));
  ref::squared_error_forward(losses.data(), scores.data(), targets.data(), N,
                             C);
  DevAct ds(scores);
  rt::DeviceBuffer<int32_t> dt(N);
  upload(dt.data(), targets);
  DevFloat dloss(N);
  rt::squared_error_forward(dloss.p, ds.p, dt.data(), N, C);
  gOk &= report(tag + " losses", rel_error(download_float(dloss.p, N), losses),
                kFloatTol);
  const float scale = 1.0f / float(N);
  check_backward(
      tag + " backward", {{"dscores", N * C}},
      [&](std::vector<float *> &g) {
        ref::squared_error_backward(g[0], scores.data(), targets.data(), N, C,
                                    scale);
      },
      [&](std::vector<void *> &g) {
        rt::squared_error_backward(static_cast<act_t *>(g[0]), ds.p, dt.data(),
                                   N, C, scale);
      });
}

// The accuracy count (count_correct into a device counter, set not added):
// rows ld apart, ties (the first maximum wins), labels outside the count.

void check_count_correct(int64_t N, int64_t V, int64_t ld) {
  const std::string tag = "count_correct " + shape({N, V}) + " ld " +
                          std::to_string(ld);
  // Few distinct values: ties in most rows.
  std::vector<float> logits(size_t(N * ld), -100.0f);
  std::uniform_int_distribution<int> level(0, 3);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < V; ++v)
      logits[size_t(n * ld + v)] = float(level(gRng));
  std::vector<int32_t> labels = loss_targets(N, V);
  for (int64_t n = 0; n < N; n += 3) // rows with a right answer
    if (labels[size_t(n)] >= 0)
      logits[size_t(n * ld + labels[size_t(n)])] = 9.0f;
  int64_t want = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float *row = logits.data() + n * ld;
    if (labels[size_t(n)] >= 0 &&
        std::max_element(row, row + V) - row == labels[size_t(n)])
      ++want;
  }
  DevAct dl(logits);
  rt::DeviceBuffer<int32_t> dt(N);
  upload(dt.data(), labels);
  rt::DeviceBuffer<unsigned long long> count(1);
  rt::count_correct(count.data(), dl.p, dt.data(), N, V, ld);
  rt::count_correct(count.data(), dl.p, dt.data(), N, V, ld); // set, not add
  const int64_t got = rt::counter_to_host(count.data());
  const bool ok = got == want;
  std::printf("%s %s: %lld of %lld rows (want %lld)\n", ok ? "ok  " : "FAIL",
              tag.c_str(), (long long)got, (long long)N, (long long)want);
  gOk &= ok;
}

// ---- cross-entropy ----

void check_crossentropy(int64_t N, int64_t V) {
  const std::string tag = "crossentropy " + shape({N, V});
  auto logits = random_values(gRng, N * V, -4, 4);
  const std::vector<int32_t> targets = loss_targets(N, V);
  std::vector<float> losses(static_cast<size_t>(N)),
      lse(static_cast<size_t>(N));
  ref::crossentropy_forward(losses.data(), lse.data(), logits.data(),
                            targets.data(), N, V);
  DevAct dl(logits);
  rt::DeviceBuffer<int32_t> dt(N);
  upload(dt.data(), targets);
  DevFloat dloss(N), dlse(N);
  rt::crossentropy_forward(dloss.p, dlse.p, dl.p, dt.data(), N, V);
  gOk &= report(tag + " losses", rel_error(download_float(dloss.p, N), losses),
                kFloatTol);
  gOk &= report(tag + " lse", rel_error(download_float(dlse.p, N), lse),
                kFloatTol);
  DevFloat clse(lse);
  const float scale = 1.0f / float(N);
  check_backward(
      tag + " backward", {{"dlogits", N * V}},
      [&](std::vector<float *> &g) {
        ref::crossentropy_backward(g[0], logits.data(), lse.data(),
                                   targets.data(), N, V, scale);
      },
      [&](std::vector<void *> &g) {
        rt::crossentropy_backward(static_cast<act_t *>(g[0]), dl.p, clse.p,
                                  dt.data(), N, V, scale);
      });

  // Vocab-parallel pieces on two shards [0, V0) and [V0, V), the all-reduces
  // done on the host: every piece against the CPU piece on the same inputs.
  const int64_t V0 = V / 2;
  std::vector<std::vector<float>> shard(2);
  const int64_t v0s[2] = {0, V0}, vls[2] = {V0, V - V0};
  for (int s = 0; s < 2; ++s)
    for (int64_t n = 0; n < N; ++n)
      shard[s].insert(shard[s].end(), logits.begin() + n * V + v0s[s],
                      logits.begin() + n * V + v0s[s] + vls[s]);
  std::vector<float> gmax(size_t(N), -INFINITY), sums(size_t(2 * N), 0.0f);
  std::vector<std::vector<float>> localSums(2);
  for (int s = 0; s < 2; ++s) {
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s);
    std::vector<float> mx(static_cast<size_t>(N));
    ref::crossentropy_vocab_parallel_max(mx.data(), shard[s].data(), N, vls[s]);
    DevAct ds(shard[s]);
    DevFloat dmx(N);
    rt::crossentropy_vocab_parallel_max(dmx.p, ds.p, N, vls[s]);
    gOk &= report(st + " max", rel_error(download_float(dmx.p, N), mx), 0.0);
    for (int64_t n = 0; n < N; ++n)
      gmax[size_t(n)] = std::max(gmax[size_t(n)], mx[size_t(n)]);
  }
  DevFloat dgmax(gmax);
  for (int s = 0; s < 2; ++s) {
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s);
    localSums[s].assign(size_t(2 * N), 0.0f);
    ref::crossentropy_vocab_parallel_sums(localSums[s].data(), shard[s].data(),
                                          targets.data(), gmax.data(), N,
                                          vls[s], v0s[s]);
    DevAct ds(shard[s]);
    DevFloat dsums(2 * N);
    rt::crossentropy_vocab_parallel_sums(dsums.p, ds.p, dt.data(), dgmax.p, N,
                                         vls[s], v0s[s]);
    gOk &= report(st + " sums",
                  rel_error(download_float(dsums.p, 2 * N), localSums[s]),
                  kFloatTol);
    for (int64_t i = 0; i < 2 * N; ++i)
      sums[size_t(i)] += localSums[s][size_t(i)];
  }
  std::vector<float> vpLoss(static_cast<size_t>(N));
  ref::crossentropy_vocab_parallel_loss(vpLoss.data(), gmax.data(), sums.data(),
                                        targets.data(), N);
  DevFloat dsums(sums), dvl(N);
  rt::crossentropy_vocab_parallel_loss(dvl.p, dgmax.p, dsums.p, dt.data(), N);
  gOk &= report(tag + " vocab-parallel loss",
                rel_error(download_float(dvl.p, N), vpLoss), kFloatTol);
  // And the split loss is the whole-vocabulary loss.
  gOk &= report(tag + " vocab-parallel loss = whole loss",
                rel_error(download_float(dvl.p, N), losses), kFloatTol);
  for (int s = 0; s < 2; ++s) {
    DevAct ds(shard[s]);
    check_backward(
        tag + " vocab-parallel shard " + std::to_string(s) + " backward",
        {{"dlogits", N * vls[s]}},
        [&](std::vector<float *> &g) {
          ref::crossentropy_vocab_parallel_backward(
              g[0], shard[s].data(), targets.data(), gmax.data(), sums.data(),
              N, vls[s], v0s[s], scale);
        },
        [&](std::vector<void *> &g) {
          rt::crossentropy_vocab_parallel_backward(
              static_cast<act_t *>(g[0]), ds.p, dt.data(), dgmax.p, dsums.p, N,
              vls[s], v0s[s], scale);
        });
  }
}

/// Rows `ld` apart (the CUDA program's padded vocabulary: logits [N, ld] with
/// the first V columns real). The padding columns of logits hold 1e4, which
/// would dominate every log-sum-exp if read; those of dlogits hold 0.5 (exact
/// in bf16), which the backward must leave unchanged bit for bit. The real
/// columns must match the CPU kernels on the dense rows within the bounds of
/// check_crossentropy. The vocab-parallel pieces likewise, each shard padded
/// to its own multiple of 64 columns.
void check_crossentropy_strided(int64_t N, int64_t V) {
  // The row stride for w columns: rounded up to 64, or 64 more if aligned
  // (there is always a padding column to check).
  const auto strideOf = [](int64_t w) { return (w + 64) / 64 * 64; };
  const std::string tag = "crossentropy strided " + shape({N, V});
  auto logits = random_values(gRng, N * V, -4, 4);
  const std::vector<int32_t> targets = loss_targets(N, V);
  rt::DeviceBuffer<int32_t> dt(N);
  upload(dt.data(), targets);
  const float scale = 1.0f / float(N);
  constexpr float kPadLogit = 1e4f, kPadGrad = 0.5f;
  // Copies columns [c0, c0 + w) of the dense rows into rows ld apart, the
  // rest filled with `fill`.
  auto padded = [&](const std::vector<float> &dense, int64_t c0, int64_t w,
                    int64_t ld, float fill) {
    std::vector<float> r(size_t(N * ld), fill);
    for (int64_t n = 0; n < N; ++n)
      std::copy(dense.begin() + n * V + c0, dense.begin() + n * V + c0 + w,
                r.begin() + n * ld);
    return r;
  };
  // Checks a strided dlogits against the dense CPU gradient `want` [N, w]:
  // real columns within kActTol, padding columns exactly kPadGrad.
  // stored: the storing backward (accumulate = false) ran over a buffer full
  // of kStale, so its padding columns must be exactly zero instead (and rows
  // outside the loss zero, as in `want`).
  constexpr float kStale = 7.0f;
  auto checkGrad = [&](const std::string &what, const act_t *d,
                       const std::vector<float> &want, int64_t w, int64_t ld,
                       bool stored = false) {
    const float padWant = stored ? 0.0f : kPadGrad;
    std::vector<float> all = download(d, N * ld), real;
    double padErr = 0;
    for (int64_t n = 0; n < N; ++n) {
      real.insert(real.end(), all.begin() + n * ld, all.begin() + n * ld + w);
      for (int64_t j = w; j < ld; ++j)
        padErr = std::max(padErr,
                          double(std::fabs(all[size_t(n * ld + j)] - padWant)));
    }
    gOk &= report(what + (stored ? " stored dlogits" : " dlogits"),
                  rel_error(real, want), kActTol);
    gOk &= report(what + (stored ? " stored padding columns zero"
                                 : " padding columns untouched"),
                  padErr, 0.0);
  };

  const int64_t ld = strideOf(V);
  std::vector<float> losses(static_cast<size_t>(N)),
      lse(static_cast<size_t>(N));
  ref::crossentropy_forward(losses.data(), lse.data(), logits.data(),
                            targets.data(), N, V);
  DevAct dl(padded(logits, 0, V, ld, kPadLogit));
  DevFloat dloss(N), dlse(N);
  rt::crossentropy_forward(dloss.p, dlse.p, dl.p, dt.data(), N, V, ld);
  gOk &= report(tag + " ld " + std::to_string(ld) + " losses",
                rel_error(download_float(dloss.p, N), losses), kFloatTol);
  gOk &= report(tag + " ld " + std::to_string(ld) + " lse",
                rel_error(download_float(dlse.p, N), lse), kFloatTol);
  std::vector<float> want(size_t(N * V), 0.0f);
  ref::crossentropy_backward(want.data(), logits.data(), lse.data(),
                             targets.data(), N, V, scale);
  DevFloat clse(lse);
  DevAct dd(
      padded(std::vector<float>(size_t(N * V), 0.0f), 0, V, ld, kPadGrad));
  rt::crossentropy_backward(dd.p, dl.p, clse.p, dt.data(), N, V, scale, ld);
  checkGrad(tag + " backward", dd.p, want, V, ld);
  DevAct stale(std::vector<float>(size_t(N * ld), kStale));
  rt::crossentropy_backward(stale.p, dl.p, clse.p, dt.data(), N, V, scale, ld,
                            /*accumulate=*/false);
  checkGrad(tag + " backward", stale.p, want, V, ld, /*stored=*/true);

  // Vocab-parallel: shards [0, V0) and [V0, V), each [N, round_up(Vl, 64)];
  // the all-reduces done on the host.
  const int64_t V0 = V / 2, v0s[2] = {0, V0}, vls[2] = {V0, V - V0};
  std::vector<float> gmax(size_t(N), -INFINITY), sums(size_t(2 * N), 0.0f);
  std::vector<std::vector<float>> dense(2);
  for (int s = 0; s < 2; ++s)
    dense[s] = [&] {
      std::vector<float> r;
      for (int64_t n = 0; n < N; ++n)
        r.insert(r.end(), logits.begin() + n * V + v0s[s],
                 logits.begin() + n * V + v0s[s] + vls[s]);
      return r;
    }();
  for (int s = 0; s < 2; ++s) {
    const int64_t lds = strideOf(vls[s]);
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s) +
                           " ld " + std::to_string(lds);
    std::vector<float> mx(static_cast<size_t>(N));
    ref::crossentropy_vocab_parallel_max(mx.data(), dense[s].data(), N, vls[s]);
    DevAct ds(padded(logits, v0s[s], vls[s], lds, kPadLogit));
    DevFloat dmx(N);
    rt::crossentropy_vocab_parallel_max(dmx.p, ds.p, N, vls[s], lds);
    gOk &= report(st + " max", rel_error(download_float(dmx.p, N), mx), 0.0);
    for (int64_t n = 0; n < N; ++n)
      gmax[size_t(n)] = std::max(gmax[size_t(n)], mx[size_t(n)]);
  }
  DevFloat dgmax(gmax);
  for (int s = 0; s < 2; ++s) {
    const int64_t lds = strideOf(vls[s]);
    const std::string st = tag + " vocab-parallel shard " + std::to_string(s);
    std::vector<float> local(size_t(2 * N), 0.0f);
    ref::crossentropy_vocab_parallel_sums(local.data(), dense[s].data(),
                                          targets.data(), gmax.data(), N,
                                          vls[s], v0s[s]);
    DevAct ds(padded(logits, v0s[s], vls[s], lds, kPadLogit));
    DevFloat dsums(2 * N);
    rt::crossentropy_vocab_parallel_sums(dsums.p, ds.p, dt.data(), dgmax.p, N,
                                         vls[s], v0s[s], lds);
    gOk &= report(st + " sums",
                  rel_error(download_float(dsums.p, 2 * N), local), kFloatTol);
    for (int64_t i = 0; i < 2 * N; ++i)
      sums[size_t(i)] += local[size_t(i)];
  }
  DevFloat dsums(sums);
  for (int s = 0; s < 2; ++s) {
    const int64_t lds = strideOf(vls[s]);
    std::vector<float> wantS(size_t(N * vls[s]), 0.0f);
    ref::crossentropy_vocab_parallel_backward(
        wantS.data(), dense[s].data(), targets.data(), gmax.data(), sums.data(),
        N, vls[s], v0s[s], scale);
    DevAct ds(padded(logits, v0s[s], vls[s], lds, kPadLogit));
    std::vector<float> zeros(size_t(N * V), 0.0f);
    DevAct dg(padded(zeros, 0, vls[s], lds, kPadGrad));
    rt::crossentropy_vocab_parallel_backward(
        dg.p, ds.p, dt.data(), dgmax.p, dsums.p, N, vls[s], v0s[s], scale, lds);
    checkGrad(tag + " vocab-parallel shard " + std::to_string(s) + " backward",
              dg.p, wantS, vls[s], lds);
    DevAct staleS(std::vector<float>(size_t(N * lds), kStale));
    rt::crossentropy_vocab_parallel_backward(staleS.p, ds.p, dt.data(), dgmax.p,
                                             dsums.p, N, vls[s], v0s[s], scale,
                                             lds, /*accumulate=*/false);
    checkGrad(tag + " vocab-parallel shard " + std::to_string(s) + " backward",
              staleS.p, wantS, vls[s], lds, /*stored=*/true);
  }
}

} // namespace kcheck
