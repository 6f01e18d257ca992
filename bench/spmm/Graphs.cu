// Graph suite of the SpMM/SDDMM benchmark (see Graphs.h). Every generator is
// seeded and deterministic; edges are made on the GPU, then sorted,
// deduplicated and turned into CSR.
#include "bench/spmm/BenchCommon.h"
#include "bench/spmm/Graphs.h"
#include "backends/common/GraphFile.h"

#include <chrono>
#include <cmath>
#include <cub/cub.cuh>
#include <fstream>
#include <iterator>

namespace autoddl::bench {
using rt::GraphFile; // the reader the programs share (backends/common)
using rt::readGraphFile;
namespace {

constexpr uint64_t kNoEdge = ~0ull;

__host__ __device__ inline uint64_t edgeKey(uint32_t u, uint32_t v) {
  return (uint64_t(u) << 32) | v;
}

unsigned blocksFor(int64_t n) { return unsigned((n + 255) / 256); }

__global__ void expandEdgesKernel(const uint64_t *in, int64_t count,
                                  bool symmetrize, bool dropSelf,
                                  uint64_t *out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  uint64_t k = in[i];
  const uint32_t u = uint32_t(k >> 32), v = uint32_t(k);
  if (dropSelf && u == v)
    k = kNoEdge;
  out[i] = k;
  if (symmetrize)
    out[count + i] = k == kNoEdge ? kNoEdge : edgeKey(v, u);
}

__global__ void selfLoopKernel(int32_t n, uint64_t *out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = edgeKey(uint32_t(i), uint32_t(i));
}

__global__ void csrKernel(const uint64_t *keys, int64_t nnz, int32_t rows,
                          int32_t *rowPtr, int32_t *col) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nnz)
    return;
  const int32_t r = int32_t(keys[i] >> 32);
  const int32_t prev = i == 0 ? -1 : int32_t(keys[i - 1] >> 32);
  for (int32_t q = prev + 1; q <= r; ++q)
    rowPtr[q] = int32_t(i);
  if (i == nnz - 1)
    for (int32_t q = r + 1; q <= rows; ++q)
      rowPtr[q] = int32_t(nnz);
  col[i] = int32_t(uint32_t(keys[i]));
}

/// Sorts, deduplicates and converts edge keys into a CSR graph. Frees `keys`.
DeviceGraph finishGraph(uint64_t *keys, int64_t count, int32_t n,
                        bool symmetrize, bool dropSelf, bool addSelf) {
  const int64_t total = count * (symmetrize ? 2 : 1) + (addSelf ? n : 0);
  uint64_t *all, *sorted;
  CUDA_CHECK(cudaMalloc(&all, std::max<int64_t>(total, 1) * 8));
  CUDA_CHECK(cudaMalloc(&sorted, std::max<int64_t>(total, 1) * 8));
  if (count > 0)
    expandEdgesKernel<<<blocksFor(count), 256>>>(keys, count, symmetrize,
                                                 dropSelf, all);
  if (addSelf)
    selfLoopKernel<<<blocksFor(n), 256>>>(n,
                                          all + count * (symmetrize ? 2 : 1));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaFree(keys));
  size_t bytes = 0;
  CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(nullptr, bytes, all, sorted, total));
  void *tmp;
  CUDA_CHECK(cudaMalloc(&tmp, bytes));
  CUDA_CHECK(cub::DeviceRadixSort::SortKeys(tmp, bytes, all, sorted, total));
  CUDA_CHECK(cudaFree(tmp));
  int64_t *numSel;
  CUDA_CHECK(cudaMalloc(&numSel, 8));
  bytes = 0;
  CUDA_CHECK(
      cub::DeviceSelect::Unique(nullptr, bytes, sorted, all, numSel, total));
  CUDA_CHECK(cudaMalloc(&tmp, bytes));
  CUDA_CHECK(cub::DeviceSelect::Unique(tmp, bytes, sorted, all, numSel, total));
  CUDA_CHECK(cudaFree(tmp));
  int64_t nnz = 0;
  CUDA_CHECK(cudaMemcpy(&nnz, numSel, 8, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(numSel));
  if (nnz > 0) {
    uint64_t last;
    CUDA_CHECK(cudaMemcpy(&last, all + nnz - 1, 8, cudaMemcpyDeviceToHost));
    if (last == kNoEdge)
      --nnz;
  }
  DeviceGraph g;
  g.rows = n;
  g.nnz = nnz;
  CUDA_CHECK(cudaMalloc(&g.rowPtr, sizeof(int32_t) * (n + 1)));
  CUDA_CHECK(cudaMalloc(&g.col, sizeof(int32_t) * std::max<int64_t>(nnz, 1)));
  if (nnz > 0)
    csrKernel<<<blocksFor(nnz), 256>>>(all, nnz, n, g.rowPtr, g.col);
  else
    CUDA_CHECK(cudaMemset(g.rowPtr, 0, sizeof(int32_t) * (n + 1)));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaFree(all));
  CUDA_CHECK(cudaFree(sorted));
  CUDA_CHECK(cudaDeviceSynchronize());
  return g;
}

/// A random permutation of [0, n): sort indices by random keys.
uint32_t *randomPermutation(int32_t n, uint64_t seed);

__global__ void permKeysKernel(int32_t n, uint64_t seed, uint64_t *keys) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    keys[i] = (mixBits(seed, i) & ~0xffffffffull) | uint64_t(i);
}

__global__ void permExtractKernel(int32_t n, const uint64_t *keys,
                                  uint32_t *perm) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    perm[i] = uint32_t(keys[i]);
}

uint32_t *randomPermutation(int32_t n, uint64_t seed) {
  uint64_t *keys, *sorted;
  CUDA_CHECK(cudaMalloc(&keys, 8 * size_t(n)));
  CUDA_CHECK(cudaMalloc(&sorted, 8 * size_t(n)));
  permKeysKernel<<<blocksFor(n), 256>>>(n, seed, keys);
  size_t bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, keys, sorted, n));
  void *tmp;
  CUDA_CHECK(cudaMalloc(&tmp, bytes));
  CUDA_CHECK(cub::DeviceRadixSort::SortKeys(tmp, bytes, keys, sorted, n));
  uint32_t *perm;
  CUDA_CHECK(cudaMalloc(&perm, 4 * size_t(n)));
  permExtractKernel<<<blocksFor(n), 256>>>(n, sorted, perm);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaFree(tmp));
  CUDA_CHECK(cudaFree(keys));
  CUDA_CHECK(cudaFree(sorted));
  return perm;
}

/// Graph500 R-MAT: A, B, C, D = 0.57, 0.19, 0.19, 0.05, vertex ids permuted.
__global__ void rmatKernel(int scale, int64_t edges, uint64_t seed,
                           const uint32_t *perm, uint64_t *keys) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= edges)
    return;
  uint32_t u = 0, v = 0;
  for (int level = 0; level < scale; ++level) {
    const double r = uniform01(seed, uint64_t(i) * 64 + level);
    const uint32_t ub = r >= 0.57 + 0.19; // C or D
    const uint32_t vb =
        (r >= 0.57 && r < 0.57 + 0.19) || r >= 0.57 + 0.19 + 0.19;
    u = (u << 1) | ub;
    v = (v << 1) | vb;
  }
  keys[i] = edgeKey(perm[u], perm[v]);
}

/// Chung-Lu: both endpoints drawn with probability proportional to their
/// weight.
__global__ void chungLuKernel(int64_t edges, uint64_t seed, const double *cdf,
                              int32_t n, const uint32_t *perm, uint64_t *keys) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= edges)
    return;
  uint32_t ends[2];
  for (int s = 0; s < 2; ++s) {
    const double r = uniform01(seed, uint64_t(i) * 2 + s) * cdf[n - 1];
    int32_t lo = 0, hi = n - 1; // first index with cdf > r
    while (lo < hi) {
      const int32_t mid = (lo + hi) / 2;
      if (cdf[mid] > r)
        hi = mid;
      else
        lo = mid + 1;
    }
    ends[s] = perm[lo];
  }
  keys[i] = edgeKey(ends[0], ends[1]);
}

__global__ void uniformKernel(int64_t edges, uint64_t seed, int32_t n,
                              uint64_t *keys) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < edges)
    keys[i] = edgeKey(uint32_t(mixBits(seed, 2 * i) % n),
                      uint32_t(mixBits(seed, 2 * i + 1) % n));
}

/// 9-point stencil on a side x side grid, natural (row-major) vertex order.
__global__ void mesh9Kernel(int32_t side, uint64_t *keys) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(side) * side)
    return;
  const int32_t r = int32_t(i / side), c = int32_t(i % side);
  int q = 0;
  for (int dr = -1; dr <= 1; ++dr)
    for (int dc = -1; dc <= 1; ++dc, ++q) {
      const int32_t rr = r + dr, cc = c + dc;
      const bool in = rr >= 0 && rr < side && cc >= 0 && cc < side;
      keys[i * 9 + q] =
          edgeKey(uint32_t(i), in ? uint32_t(rr * side + cc) : uint32_t(i));
    }
}

/// Each row: `perRow` columns drawn uniformly within +-halfBand of the
/// diagonal.
__global__ void bandedKernel(int32_t n, int32_t perRow, int32_t halfBand,
                             uint64_t seed, uint64_t *keys) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(n) * perRow)
    return;
  const int64_t row = i / perRow;
  int64_t c = row + int64_t(mixBits(seed, i) % (2 * halfBand + 1)) - halfBand;
  c = c < 0 ? 0 : (c >= n ? n - 1 : c);
  keys[i] = edgeKey(uint32_t(row), uint32_t(c));
}

uint64_t *allocKeys(int64_t count) {
  uint64_t *keys;
  CUDA_CHECK(cudaMalloc(&keys, 8 * std::max<int64_t>(count, 1)));
  return keys;
}

/// Weights (i + i0)^-exponent with i0 chosen so that max weight / mean weight =
/// ratio.
std::vector<double> chungLuCdf(int32_t n, double exponent, double ratio) {
  auto ratioFor = [&](double i0) {
    double sum = 0;
    for (int32_t i = 0; i < n; i += 97)
      sum += std::pow(i + i0, -exponent) * std::min<int32_t>(97, n - i);
    return std::pow(i0, -exponent) / (sum / n);
  };
  double lo = 1e-3, hi = double(n);
  for (int it = 0; it < 100; ++it) {
    const double mid = std::sqrt(lo * hi);
    (ratioFor(mid) > ratio ? lo : hi) = mid;
  }
  std::vector<double> cdf(n);
  double acc = 0;
  for (int32_t i = 0; i < n; ++i)
    cdf[i] = acc += std::pow(i + lo, -exponent);
  return cdf;
}

DeviceGraph loadReal(const GraphSpec &spec) {
  std::ifstream in(spec.file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench: cannot open %s\n", spec.file.c_str());
    std::exit(1);
  }
  std::vector<uint8_t> buf((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
  if (buf.size() < 20 || std::string(buf.begin(), buf.begin() + 4) != "AGR1") {
    std::fprintf(stderr, "bench: %s: not an AGR1 graph file\n",
                 spec.file.c_str());
    std::exit(1);
  }
  uint32_t n, directed;
  uint64_t arcs;
  std::memcpy(&n, &buf[4], 4);
  std::memcpy(&directed, &buf[8], 4);
  std::memcpy(&arcs, &buf[12], 8);
  size_t pos = 20;
  auto varint = [&]() {
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= buf.size()) {
        std::fprintf(stderr, "bench: %s: truncated\n", spec.file.c_str());
        std::exit(1);
      }
      const uint8_t b = buf[pos++];
      x |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return x;
    }
  };
  std::vector<uint64_t> keys;
  keys.reserve(arcs);
  for (uint32_t u = 0; u < n; ++u) {
    const uint64_t deg = varint();
    uint64_t v = 0;
    for (uint64_t k = 0; k < deg; ++k) {
      v += varint();
      keys.push_back(edgeKey(u, uint32_t(v)));
    }
  }
  uint64_t *d = allocKeys(int64_t(keys.size()));
  CUDA_CHECK(
      cudaMemcpy(d, keys.data(), 8 * keys.size(), cudaMemcpyHostToDevice));
  DeviceGraph g = finishGraph(d, int64_t(keys.size()), int32_t(n), !directed,
                              /*dropSelf=*/true, /*addSelf=*/false);
  g.params = std::string(directed ? "directed" : "undirected, symmetrized") +
             ", " + std::to_string(arcs) + " arcs in file";
  return g;
}

} // namespace

void DeviceGraph::release() {
  if (rowPtr)
    cudaFree(rowPtr);
  if (col)
    cudaFree(col);
  rowPtr = nullptr, col = nullptr;
}

std::vector<GraphSpec> benchSuite(const std::string &dataDir, bool quick) {
  std::vector<GraphSpec> s;
  // A graph of the suite: its name, generator and the generator's sizes.
  auto add = [&](const std::string &name, const char *kind, int64_t a = 0,
                 int64_t b = 0) -> GraphSpec & {
    GraphSpec g;
    g.name = name, g.kind = kind, g.a = a, g.b = b;
    s.push_back(g);
    return s.back();
  };
  auto real = [&](const char *name) {
    add(name, "real").file = dataDir + "/" + name + ".agr";
  };
  auto rmat = [&](int scale, int ef) {
    add("rmat-s" + std::to_string(scale) + "-ef" + std::to_string(ef), "rmat",
        scale, ef);
  };
  auto chunglu = [&](const char *name, int64_t n, double target, double ratio,
                     double exponent) {
    GraphSpec &g = add(name, "chunglu", n);
    g.target = target, g.ratio = ratio, g.exponent = exponent;
  };
  real("email-Enron");
  real("pgp-strong-2009");
  rmat(18, 16);
  chunglu("chunglu-reddit", 232965, 114848857, 44, 0.5);
  add("mesh9-2048", "mesh9", 2048);
  if (quick)
    return s;
  real("cond-mat-2005");
  real("astro-ph");
  real("as-22july06");
  rmat(20, 16);
  rmat(22, 16);
  chunglu("chunglu-products", 2449029, 126167053, 340, 0.8);
  add("uniform-2M-d32", "uniform", 1 << 21, 32);
  add("banded-1M-w32-b512", "banded", 1 << 20, 32);
  return s;
}

std::vector<GraphSpec> fileGraphs(const std::vector<std::string> &paths) {
  std::vector<GraphSpec> s;
  for (const std::string &path : paths) {
    GraphSpec g;
    std::string name = path.substr(path.find_last_of('/') + 1);
    if (const size_t dot = name.find('.'); dot != 0 && dot != std::string::npos)
      name = name.substr(0, dot);
    g.name = name, g.kind = "file", g.file = path;
    s.push_back(g);
  }
  return s;
}

DeviceGraph makeGraph(const GraphSpec &spec, uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  DeviceGraph g;
  if (spec.kind == "real") {
    g = loadReal(spec);
  } else if (spec.kind == "file") {
    GraphFile f;
    try {
      f = readGraphFile(spec.file);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "bench: %s\n", e.what());
      std::exit(1);
    }
    std::vector<uint64_t> keys;
    keys.reserve(f.entries.size());
    for (auto [u, v] : f.entries)
      keys.push_back(edgeKey(u, v));
    uint64_t *d = allocKeys(int64_t(keys.size()));
    CUDA_CHECK(
        cudaMemcpy(d, keys.data(), 8 * keys.size(), cudaMemcpyHostToDevice));
    g = finishGraph(d, int64_t(keys.size()), int32_t(f.rows),
                    /*symmetrize=*/false, /*dropSelf=*/false,
                    /*addSelf=*/false);
    g.params = f.params + ", " + spec.file;
  } else if (spec.kind == "rmat") {
    const int scale = int(spec.a);
    const int32_t n = 1 << scale;
    const int64_t edges = spec.b * int64_t(n);
    uint32_t *perm = randomPermutation(n, seed ^ 0x1234);
    uint64_t *keys = allocKeys(edges);
    rmatKernel<<<blocksFor(edges), 256>>>(scale, edges, seed, perm, keys);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaFree(perm));
    g = finishGraph(keys, edges, n, true, true, false);
    g.params = "Graph500 A,B,C,D=0.57,0.19,0.19,0.05, 2^" +
               std::to_string(scale) + " vertices, edge factor " +
               std::to_string(spec.b) +
               ", permuted, symmetrized, no self loops";
  } else if (spec.kind == "chunglu") {
    const int32_t n = int32_t(spec.a);
    const std::vector<double> cdf = chungLuCdf(n, spec.exponent, spec.ratio);
    double *dCdf;
    CUDA_CHECK(cudaMalloc(&dCdf, 8 * size_t(n)));
    CUDA_CHECK(
        cudaMemcpy(dCdf, cdf.data(), 8 * size_t(n), cudaMemcpyHostToDevice));
    uint32_t *perm = randomPermutation(n, seed ^ 0x5678);
    int64_t edges = int64_t((spec.target - n) / 2);
    for (int round = 0; round < 3; ++round) {
      uint64_t *keys = allocKeys(edges);
      chungLuKernel<<<blocksFor(edges), 256>>>(edges, seed + round, dCdf, n,
                                               perm, keys);
      CUDA_CHECK(cudaGetLastError());
      g.release();
      g = finishGraph(keys, edges, n, true, true, true);
      const double got = double(g.nnz - n), want = spec.target - n;
      if (std::abs(got - want) < 0.01 * want)
        break;
      edges = int64_t(edges * want / got);
    }
    CUDA_CHECK(cudaFree(dCdf));
    CUDA_CHECK(cudaFree(perm));
    char buf[200];
    std::snprintf(
        buf, sizeof buf,
        "weights (i+i0)^-%.2f with max/mean %.0f, permuted, symmetrized, "
        "self loops added, target nnz %.0f",
        spec.exponent, spec.ratio, spec.target);
    g.params = buf;
  } else if (spec.kind == "uniform") {
    const int32_t n = int32_t(spec.a);
    const int64_t edges = int64_t(n) * spec.b / 2;
    uint64_t *keys = allocKeys(edges);
    uniformKernel<<<blocksFor(edges), 256>>>(edges, seed, n, keys);
    CUDA_CHECK(cudaGetLastError());
    g = finishGraph(keys, edges, n, true, true, false);
    g.params = "Erdos-Renyi, " + std::to_string(n) + " vertices, mean degree " +
               std::to_string(spec.b) + ", symmetrized";
  } else if (spec.kind == "mesh9") {
    const int32_t side = int32_t(spec.a);
    const int64_t n = int64_t(side) * side;
    uint64_t *keys = allocKeys(n * 9);
    mesh9Kernel<<<blocksFor(n), 256>>>(side, keys);
    CUDA_CHECK(cudaGetLastError());
    g = finishGraph(keys, n * 9, int32_t(n), false, false, false);
    g.params = "9-point stencil on a " + std::to_string(side) + "x" +
               std::to_string(side) + " grid, natural order, with diagonal";
  } else if (spec.kind == "banded") {
    const int32_t n = int32_t(spec.a);
    const int32_t perRow = int32_t(spec.b), halfBand = 256;
    const int64_t count = int64_t(n) * perRow;
    uint64_t *keys = allocKeys(count);
    bandedKernel<<<blocksFor(count), 256>>>(n, perRow, halfBand, seed, keys);
    CUDA_CHECK(cudaGetLastError());
    g = finishGraph(keys, count, n, false, false, false);
    g.params = std::to_string(perRow) + " random columns per row within +-" +
               std::to_string(halfBand) + " of the diagonal";
  } else {
    std::fprintf(stderr, "bench: unknown graph kind %s\n", spec.kind.c_str());
    std::exit(1);
  }
  g.name = spec.name;
  g.kind = spec.kind;
  g.generateSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return g;
}

} // namespace autoddl::bench
