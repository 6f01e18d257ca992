// The channels-last max pool backward's block grid (backends/cuda/kernels/
// PoolLastGrid.h, run by PrimitiveImageLast.cuh pool_last_max_grid_kernel)
// on the host: every block of the grid the kernel launches, phase 1 (the
// window scans into slots) for all its items, then phase 2 (the gathers).
// Sequential is exact: the phases' items share nothing but the slots, and
// the kernel's one barrier lies between them. Against the definition
// (PrimitiveImage.cuh pool_backward_at with pool_taps_kernel's taps): each
// input's gradient is the fp32 sum, in tap order, of dy of the windows whose
// first maximum (row-major, first strictly greater) it is; dx written once
// (stored, or added to what is there), bit for bit. Values of x from a few
// integers, so most windows tie. CPU only: runs where no GPU is.
#include "backends/cuda/kernels/PoolLastGrid.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace autoddl::rt;

/// A max pool of N samples of C channels on three axes (ceil_mode: a wider
/// padEnd); no dilation.
struct Pool {
  int N, C, in[3], k[3], s[3], p[3], pe[3];
};

PoolLast pool_last(const Pool &a, int V) {
  PoolLast q{};
  for (int d = 0; d < 3; ++d) {
    q.k[d] = a.k[d];
    q.s[d] = a.s[d];
    q.d[d] = 1;
    q.p[d] = a.p[d];
    q.pe[d] = a.pe[d];
    q.in[d] = a.in[d];
    q.out[d] = (a.in[d] + a.p[d] + a.pe[d] - a.k[d]) / a.s[d] + 1;
  }
  q.max = 1;
  q.C = a.C;
  q.packs = a.C / V;
  return q;
}

int64_t plane(const int (&dims)[3]) {
  return int64_t(dims[0]) * dims[1] * dims[2];
}

/// Row-major index i of a [dims] box as coordinates.
void coords(int64_t i, const int (&dims)[3], int (&at)[3]) {
  at[2] = int(i % dims[2]);
  at[1] = int(i / dims[2] % dims[1]);
  at[0] = int(i / dims[2] / dims[1]);
}

/// The definition, with dx0 what dx holds before (acc: added to).
std::vector<float> reference(const PoolLast &q, int N,
                             const std::vector<float> &x,
                             const std::vector<float> &dy,
                             const std::vector<float> &dx0, bool acc) {
  const int C = q.C;
  std::vector<int> first(dy.size(), -1); // each output's first-maximum tap
  for (int n = 0; n < N; ++n)
    for (int64_t o = 0; o < plane(q.out); ++o)
      for (int c = 0; c < C; ++c) {
        int od[3], kd[3];
        coords(o, q.out, od);
        float best = 0;
        int &f = first[size_t((n * plane(q.out) + o) * C + c)];
        for (int k = 0; k < q.k[0] * q.k[1] * q.k[2]; ++k) {
          coords(k, q.k, kd);
          int64_t at = 0;
          bool inside = true;
          for (int d = 0; d < 3; ++d) {
            const int i = od[d] * q.s[d] - q.p[d] + kd[d];
            inside = inside && i >= 0 && i < q.in[d];
            at = at * q.in[d] + i;
          }
          if (!inside)
            continue;
          const float v = x[size_t((n * plane(q.in) + at) * C + c)];
          if (f < 0 || v > best) {
            best = v;
            f = k;
          }
        }
      }
  std::vector<float> dx = dx0;
  for (int n = 0; n < N; ++n)
    for (int64_t a = 0; a < plane(q.in); ++a)
      for (int c = 0; c < C; ++c) {
        int ad[3], kd[3];
        coords(a, q.in, ad);
        float g = 0.0f;
        for (int k = 0; k < q.k[0] * q.k[1] * q.k[2]; ++k) {
          coords(k, q.k, kd);
          int64_t o = 0;
          bool hit = true;
          for (int d = 0; d < 3; ++d) {
            const int t = ad[d] + q.p[d] - kd[d];
            hit = hit && t >= 0 && t % q.s[d] == 0 && t / q.s[d] < q.out[d];
            o = o * q.out[d] + t / q.s[d];
          }
          const size_t e = size_t((n * plane(q.out) + o) * C + c);
          if (hit && first[e] == k)
            g += dy[e];
        }
        float &r = dx[size_t((n * plane(q.in) + a) * C + c)];
        r = acc ? r + g : g;
      }
  return dx;
}

/// The kernel's grid on the host at V channels a pack (K:
/// pool_last_window's): dx as it leaves it, and how often each element was
/// written.
template <int V, int K>
void emulate(const PoolLast &q, int N, const std::vector<float> &x,
             const std::vector<float> &dy, std::vector<float> &dx, bool acc,
             std::vector<int> &writes) {
  const PoolGrid g = pool_grid(q, N, kPoolSlotBytes<V>);
  ASSERT_GT(g.count, 0);
  std::vector<TapPack<V>> taps(size_t(g.slots * g.G));
  std::vector<float> dys(size_t(g.slots * g.G * V));
  auto read = [](const std::vector<float> &from, int64_t e, float(&v)[V]) {
    for (int j = 0; j < V; ++j)
      v[j] = from[size_t(e + j)];
  };
  for (int64_t blk = g.count - 1; blk >= 0; --blk) { // any order
    const PoolBlock b = pool_block(q, g, blk);
    const int windows = b.w[0] * b.w[1] * b.w[2];
    ASSERT_LE(windows, g.slots);
    for (int i = 0; i < windows * g.G; ++i)
      pool_grid_window<V, K>(
          q, g, b, i, [&](int64_t e, float(&v)[V]) { read(x, e, v); },
          [&](int slot, int64_t e) {
            for (int j = 0; j < V; ++j)
              dys[size_t(slot * V + j)] = dy[size_t(e + j)];
          },
          taps.data());
    const int inputs =
        (b.a1[0] - b.a0[0]) * (b.a1[1] - b.a0[1]) * (b.a1[2] - b.a0[2]);
    for (int i = 0; i < inputs * g.G; ++i)
      pool_grid_gather<V>(
          q, g, b, i, taps.data(),
          [&](int slot, float(&v)[V]) { read(dys, int64_t(slot) * V, v); },
          [&](int64_t e, float(&v)[V]) {
            for (int j = 0; j < V; ++j) {
              float &r = dx[size_t(e + j)];
              r = acc ? r + v[j] : v[j];
              ++writes[size_t(e + j)];
            }
          });
  }
}

/// The grid at V against the definition, stored and added, its windows'
/// loops at run time and, for 3x3 windows, unrolled (the kernel's).
template <int V> void check(const Pool &a, unsigned seed) {
  SCOPED_TRACE("C " + std::to_string(a.C) + " V " + std::to_string(V));
  const PoolLast q = pool_last(a, V);
  const size_t nx = size_t(a.N * plane(q.in) * a.C),
               ny = size_t(a.N * plane(q.out) * a.C);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(-2, 2);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(nx), dy(ny), dx0(nx);
  for (float &v : x)
    v = float(level(rng));
  for (float &v : dy)
    v = unit(rng);
  for (float &v : dx0)
    v = unit(rng);
  for (int K : {0, pool_unrolled(q)})
    for (bool acc : {false, true}) {
      SCOPED_TRACE(std::string(acc ? "added" : "stored") + " K " +
                   std::to_string(K));
      const std::vector<float> want = reference(q, a.N, x, dy, dx0, acc);
      std::vector<float> got(nx, NAN);
      if (acc)
        got = dx0;
      std::vector<int> writes(nx, 0);
      if (K == 3)
        emulate<V, 3>(q, a.N, x, dy, got, acc, writes);
      else
        emulate<V, 0>(q, a.N, x, dy, got, acc, writes);
      size_t wrong = 0, notOnce = 0;
      for (size_t e = 0; e < nx; ++e) {
        wrong += std::memcmp(&got[e], &want[e], sizeof(float)) != 0;
        notOnce += writes[e] != 1;
      }
      EXPECT_EQ(notOnce, 0u);
      EXPECT_EQ(wrong, 0u);
    }
}

// ResNet-50's stem pool (3x3/2, pad 1) on whole 112x112 planes of 64
// channels: the bf16 packs (V 8), fp32's (V 4) and single channels.
TEST(PoolGridTest, ResNetStem) {
  const Pool stem{1,         64,        {1, 112, 112}, {1, 3, 3},
                  {1, 2, 2}, {0, 1, 1}, {0, 1, 1}};
  check<8>(stem, 1);
  check<4>(stem, 2);
  check<1>({1, 5, {1, 112, 112}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}},
           3);
}

// Its grid: boxes of 16x28 inputs (7 x 4 a plane, even sides: windows 9 x
// 15 a block, 135 for 112 owned), the 64 channels one group of 8 packs.
TEST(PoolGridTest, ResNetStemGrid) {
  const Pool stem{256,       64,        {1, 112, 112}, {1, 3, 3},
                  {1, 2, 2}, {0, 1, 1}, {0, 1, 1}};
  const PoolGrid g = pool_grid(pool_last(stem, 8), 256, kPoolSlotBytes<8>);
  EXPECT_EQ(g.box[1], 16);
  EXPECT_EQ(g.box[2], 28);
  EXPECT_EQ(g.slots, 135);
  EXPECT_EQ(g.G, 8);
  EXPECT_EQ(g.count, 256 * 7 * 4);
}

// Sides that are not multiples of the box, channels in a partial group (24:
// 3 packs; 72: 8 + 1), padding at every border.
TEST(PoolGridTest, OddShapes) {
  check<8>({2, 24, {1, 37, 35}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}}, 4);
  check<8>({1, 72, {1, 13, 71}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}}, 5);
  check<1>({2, 3, {1, 17, 9}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}}, 6);
}

// VGG's 2x2/2 on odd sides (the last row and column in no window: stored
// 0), stride 1 (a 20x20 box's 22x22 slots too many, halved), ceil_mode
// (windows past the input), stride 3, a 3-D pool, and a 1-D one.
TEST(PoolGridTest, OtherPools) {
  check<8>({2, 16, {1, 9, 11}, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}, {0, 0, 0}}, 7);
  const Pool flat{1,         32,        {1, 20, 40}, {1, 3, 3},
                  {1, 1, 1}, {0, 1, 1}, {0, 1, 1}};
  const PoolGrid g = pool_grid(pool_last(flat, 4), 1, kPoolSlotBytes<4>);
  EXPECT_EQ(g.box[1], 10); // 20x20 halved, the outer side first
  EXPECT_EQ(g.box[2], 20);
  check<4>(flat, 8);
  check<8>({2, 8, {1, 10, 10}, {1, 3, 3}, {1, 2, 2}, {0, 0, 0}, {0, 1, 1}}, 9);
  check<8>({2, 16, {1, 9, 10}, {1, 3, 3}, {1, 3, 3}, {0, 1, 1}, {0, 1, 1}}, 10);
  check<4>({2, 4, {5, 6, 7}, {2, 2, 3}, {2, 1, 2}, {0, 1, 1}, {1, 1, 1}}, 11);
  check<1>({3, 2, {1, 1, 50}, {1, 1, 3}, {1, 1, 2}, {0, 0, 1}, {0, 0, 1}}, 12);
}

// A 3-D stride-1 pool of 254 taps: the box halves to an input or two,
// whose slots still fit (pool_grid's bound).
TEST(PoolGridTest, SlotsFit) {
  const Pool wide{1,         64,        {4, 260, 3}, {2, 127, 1},
                  {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
  const PoolGrid g = pool_grid(pool_last(wide, 8), 1, kPoolSlotBytes<8>);
  EXPECT_LE(g.box[0] * g.box[1] * g.box[2], 2);
  EXPECT_LE(int64_t(g.slots) * g.G * kPoolSlotBytes<8>, kPoolSmemBytes);
}

} // namespace
