//===- calibrate.cu - measure this machine for the cost model -------------===//
//
// The calibration probe of `autoddl calibrate` (docs/calibrate.md). One MPI
// rank per GPU; ranks on one host form a node. Measures, and writes as a
// cluster file (docs/cluster-format.md):
//   - bf16 GEMM time by shape through cuBLASLt (the heuristic's first
//     algorithm, as a program calling cuBLASLt gets it), the cost model's
//     calibration table; tf32 and fp32 rates of an 8192^3 GEMM;
//   - HBM bandwidth: the faster of a copy kernel and cudaMemcpy moving 1 GiB,
//     bytes read + written;
//   - the launch floor: back-to-back empty kernels on one stream;
//   - NCCL all_reduce, all_gather and send/recv times by message size over the
//     GPUs of a node (and over one GPU per node when there are several nodes),
//     fitted to t = a + S/B (bus bandwidth, alpha, per-call overhead).
// GEMMs, the copy and the launch floor run on rank 0 alone (the GPUs are
// alike); collectives on every rank. Timing follows NVIDIA/nccl-tests
// (src/common.cu): warm-up, then CUDA events around back-to-back launches.
//
// Usage: mpirun -np <GPUs> calibrate -o cluster.json [--name N] [--raw F]
//                 [--shapes F] [--max-bytes B] [--quick]
// Exit status: 0 written; 1 a failed CUDA/NCCL/MPI call or bad input; 77 no GPU
// (ctest's skip code). NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
//
//===----------------------------------------------------------------------===//
#include "ClusterWriter.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

int gRank = 0;

[[noreturn]] void die(const char *file, int line, const char *call,
                      const std::string &what) {
  std::fprintf(stderr, "calibrate: rank %d: %s:%d: %s failed: %s\n", gRank,
               file, line, call, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

// What a failed call of each library says; empty for success.
std::string failure(cudaError_t e) {
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}
std::string failure(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS
             ? ""
             : "cuBLAS status " + std::to_string(static_cast<int>(s));
}
std::string failure(ncclResult_t r) {
  return r == ncclSuccess ? "" : ncclGetErrorString(r);
}
std::string failure(int mpi) { // MPI's error codes are ints
  return mpi == MPI_SUCCESS ? "" : "MPI error " + std::to_string(mpi);
}
template <class Status>
void check(Status status, const char *file, int line, const char *call) {
  const std::string why = failure(status);
  if (!why.empty())
    die(file, line, call, why);
}
#define CHECK(call) check((call), __FILE__, __LINE__, #call)

// ---------------------------------------------------------------- kernels --

__device__ unsigned hashIndex(unsigned long long i, unsigned seed) {
  unsigned x = static_cast<unsigned>(i) ^
               (static_cast<unsigned>(i >> 32) * 0x9e3779b9u) ^
               (seed * 0x85ebca6bu);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Uniform in [-1, 1): never time on zeros (they run faster than real data).
__global__ void fill_uniform_bf16_kernel(__nv_bfloat16 *p, size_t n,
                                         unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(hashIndex(i, seed) * (2.0f / 4294967296.0f) - 1);
}

__global__ void fill_uniform_f32_kernel(float *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = hashIndex(i, seed) * (2.0f / 4294967296.0f) - 1;
}

// 16-byte loads and stores, grid-stride: the achievable HBM rate.
__global__ void copy_kernel(const int4 *__restrict__ src,
                            int4 *__restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__global__ void empty_kernel() {}

// ------------------------------------------------------------------ timing --

struct Timer {
  cudaEvent_t start, stop;
  cudaStream_t stream;
  explicit Timer(cudaStream_t s) : stream(s) {
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
  }
  ~Timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  // Mean microseconds of one call of `fn` over `iters` back-to-back calls.
  template <typename F> double meanUs(int iters, F fn) {
    CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i)
      fn(i);
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    return 1e3 * ms / iters;
  }
};

// Warm-up, then enough calls for ~targetUs per repeat; the median of the
// repeats' means.
template <typename F>
double medianUs(Timer &t, double targetUs, int repeats, F fn) {
  for (int i = 0; i < 2; ++i)
    fn(i);
  double once = t.meanUs(3, fn);
  int iters = std::max(3, std::min(200, static_cast<int>(targetUs / once)));
  std::vector<double> r;
  for (int k = 0; k < repeats; ++k)
    r.push_back(t.meanUs(iters, fn));
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

// ------------------------------------------------------------------- GEMMs --

struct Lt {
  cublasLtHandle_t handle{};
  void *workspace = nullptr;
  size_t workspaceBytes = 32u << 20;
};

// Y[M,N] = X[M,K] · W[N,K]ᵀ, row-major, as a Linear layer computes it: in
// cuBLAS's column-major terms C(N×M) = op(A = W, transposed)(N×K) · B(K×M).
// `a` and `b` rotate over `copies` input sets so that small GEMMs are not
// timed out of L2.
double timeGemm(Lt &lt, Timer &timer, calib::GemmShape s, cudaDataType_t type,
                cublasComputeType_t compute, char *in, size_t inBytes,
                char *out, double targetUs, int repeats) {
  size_t elem = type == CUDA_R_16BF ? 2 : 4;
  // Operands start on 256-byte boundaries: cuBLASLt's heuristic assumes that
  // alignment unless told otherwise.
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  size_t aBytes = align(size_t(s.n) * s.k * elem);
  size_t set = align(aBytes + size_t(s.m) * s.k * elem);
  int copies =
      static_cast<int>(std::max<size_t>(1, std::min<size_t>(8, inBytes / set)));
  copies = std::min<int>(copies, std::max<size_t>(1, (512u << 20) / set));

  cublasLtMatmulDesc_t op;
  CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
  cublasOperation_t trans = CUBLAS_OP_T;
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans,
                                       sizeof trans));
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK(cublasLtMatrixLayoutCreate(&la, type, s.k, s.n, s.k));
  CHECK(cublasLtMatrixLayoutCreate(&lb, type, s.k, s.m, s.k));
  CHECK(cublasLtMatrixLayoutCreate(&lc, type, s.n, s.m, s.n));
  cublasLtMatmulPreference_t pref;
  CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.workspaceBytes,
      sizeof lt.workspaceBytes));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  // NOT_SUPPORTED is the heuristic's way of saying it found nothing.
  if (cublasLtMatmulAlgoGetHeuristic(lt.handle, op, la, lb, lc, lc, pref, 1,
                                     &heur, &found) != CUBLAS_STATUS_SUCCESS)
    found = 0;
  double us = 0;
  if (found > 0) {
    const float alpha = 1, beta = 0;
    us = medianUs(timer, targetUs, repeats, [&](int i) {
      char *base = in + size_t(i % copies) * set;
      CHECK(cublasLtMatmul(lt.handle, op, &alpha, base, la, base + aBytes, lb,
                           &beta, out, lc, out, lc, &heur.algo, lt.workspace,
                           lt.workspaceBytes, timer.stream));
    });
  } else {
    std::fprintf(stderr,
                 "calibrate: no cuBLASLt algorithm for %lld x %lld x "
                 "%lld; left out\n",
                 s.m, s.n, s.k);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return us;
}

void measureCompute(calib::Measurements &m,
                    const std::vector<calib::GemmShape> &shapes, bool quick,
                    cudaStream_t stream) {
  Timer timer(stream);
  const double target = quick ? 3e3 : 10e3; // µs per repeat
  const int repeats = 3;

  // Launch floor.
  for (int i = 0; i < 100; ++i)
    empty_kernel<<<1, 1, 0, stream>>>();
  CHECK(cudaGetLastError());
  m.launchUs =
      timer.meanUs(2000, [&](int) { empty_kernel<<<1, 1, 0, stream>>>(); });
  CHECK(cudaGetLastError());

  // Input arena: every shape's operands fit (largest: the 16384-token head
  // GEMMs, 1.8 GB), several sets of small ones.
  size_t outBytes = 0, inBytes = size_t(2) << 30;
  for (const calib::GemmShape &s : shapes) {
    outBytes = std::max<size_t>(outBytes, size_t(s.m) * s.n * 2);
    inBytes = std::max<size_t>(
        inBytes, (size_t(s.n) * s.k + size_t(s.m) * s.k) * 2 + 1024);
  }
  outBytes = std::max<size_t>(outBytes, size_t(8192) * 8192 * 4);
  char *in = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&in, inBytes));
  CHECK(cudaMalloc(&out, outBytes));

  // HBM: copy half the arena onto the other half, by our kernel and by
  // cudaMemcpy; the faster is what a tuned kernel attains.
  {
    size_t half = inBytes / 2 / sizeof(int4);
    auto *src = reinterpret_cast<int4 *>(in);
    CHECK(cudaMemsetAsync(in, 1, inBytes, stream));
    double kernelUs = medianUs(timer, quick ? 20e3 : 50e3, 3, [&](int) {
      copy_kernel<<<m.smCount * 8, 512, 0, stream>>>(src, src + half, half);
    });
    CHECK(cudaGetLastError());
    double memcpyUs = medianUs(timer, quick ? 20e3 : 50e3, 3, [&](int) {
      CHECK(cudaMemcpyAsync(src + half, src, half * sizeof(int4),
                            cudaMemcpyDeviceToDevice, stream));
    });
    m.copyGBps =
        2.0 * half * sizeof(int4) / (std::min(kernelUs, memcpyUs) * 1e-6) / 1e9;
  }

  Lt lt;
  CHECK(cublasLtCreate(&lt.handle));
  CHECK(cudaMalloc(&lt.workspace, lt.workspaceBytes));

  fill_uniform_bf16_kernel<<<1024, 256, 0, stream>>>(
      reinterpret_cast<__nv_bfloat16 *>(in), inBytes / 2, 1234u);
  CHECK(cudaGetLastError());
  for (size_t i = 0; i < shapes.size(); ++i) {
    calib::GemmResult r;
    r.shape = shapes[i];
    r.timeUs = timeGemm(lt, timer, r.shape, CUDA_R_16BF, CUBLAS_COMPUTE_32F, in,
                        inBytes, out, target, repeats);
    if (r.timeUs > 0)
      m.gemms.push_back(r);
    if (r.shape == calib::GemmShape{8192, 8192, 8192})
      m.bf16Tflops = r.tflops();
  }
  if (m.bf16Tflops == 0) {
    calib::GemmResult r;
    r.shape = {8192, 8192, 8192};
    r.timeUs = timeGemm(lt, timer, r.shape, CUDA_R_16BF, CUBLAS_COMPUTE_32F, in,
                        inBytes, out, target, repeats);
    m.bf16Tflops = r.timeUs > 0 ? r.tflops() : 0;
  }

  fill_uniform_f32_kernel<<<1024, 256, 0, stream>>>(
      reinterpret_cast<float *>(in), inBytes / 4, 99u);
  CHECK(cudaGetLastError());
  const calib::GemmShape sq{8192, 8192, 8192};
  calib::GemmResult r;
  r.shape = sq;
  r.timeUs = timeGemm(lt, timer, sq, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
                      in, inBytes, out, target, repeats);
  m.tf32Tflops = r.timeUs > 0 ? r.tflops() : 0;
  r.timeUs = timeGemm(lt, timer, sq, CUDA_R_32F, CUBLAS_COMPUTE_32F, in,
                      inBytes, out, target, repeats);
  m.fp32Tflops = r.timeUs > 0 ? r.tflops() : 0;

  CHECK(cudaStreamSynchronize(stream));
  CHECK(cublasLtDestroy(lt.handle));
  CHECK(cudaFree(lt.workspace));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
}

// ------------------------------------------------------------- collectives --

enum class Coll { AllReduce, AllGather, SendRecv };

// Times one collective of S = `bytes` on every rank of `comm`; returns the
// slowest rank's mean (µs).
double timeCollective(Coll c, ncclComm_t nccl, MPI_Comm comm, int rank, int n,
                      float *send, float *recv, size_t bytes, Timer &timer) {
  size_t count = bytes / sizeof(float);
  auto launch = [&](int) {
    switch (c) {
    case Coll::AllReduce:
      CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, nccl,
                          timer.stream));
      break;
    case Coll::AllGather:
      CHECK(
          ncclAllGather(send, recv, count / n, ncclFloat, nccl, timer.stream));
      break;
    case Coll::SendRecv: // 0 -> 1: a pipeline-stage boundary
      if (rank == 0)
        CHECK(ncclSend(send, count, ncclFloat, 1, nccl, timer.stream));
      else if (rank == 1)
        CHECK(ncclRecv(recv, count, ncclFloat, 0, nccl, timer.stream));
      break;
    }
  };
  int iters = bytes <= (1u << 20) ? 100 : bytes <= (64u << 20) ? 20 : 5;
  for (int w = 0; w < 3; ++w)
    launch(w);
  CHECK(cudaStreamSynchronize(timer.stream));
  CHECK(MPI_Barrier(comm));
  double us = timer.meanUs(iters, launch), worst = 0;
  CHECK(MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, comm));
  return worst;
}

calib::GroupSeries measureGroup(MPI_Comm comm, size_t maxBytes,
                                cudaStream_t stream) {
  int rank = 0, n = 0;
  CHECK(MPI_Comm_rank(comm, &rank));
  CHECK(MPI_Comm_size(comm, &n));
  ncclUniqueId id;
  if (rank == 0)
    CHECK(ncclGetUniqueId(&id));
  CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  ncclComm_t nccl;
  CHECK(ncclCommInitRank(&nccl, n, id, rank));
  float *send = nullptr, *recv = nullptr;
  CHECK(cudaMalloc(&send, maxBytes));
  CHECK(cudaMalloc(&recv, maxBytes));
  fill_uniform_f32_kernel<<<1024, 256, 0, stream>>>(send, maxBytes / 4, 7u);
  CHECK(cudaGetLastError());
  Timer timer(stream);
  calib::GroupSeries g;
  g.ranks = n;
  for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
    size_t s = bytes / (sizeof(float) * n) * (sizeof(float) * n);
    g.allReduce.push_back(
        {double(s), timeCollective(Coll::AllReduce, nccl, comm, rank, n, send,
                                   recv, s, timer)});
    g.allGather.push_back(
        {double(s), timeCollective(Coll::AllGather, nccl, comm, rank, n, send,
                                   recv, s, timer)});
    g.sendRecv.push_back(
        {double(s), timeCollective(Coll::SendRecv, nccl, comm, rank, n, send,
                                   recv, s, timer)});
  }
  CHECK(cudaFree(send));
  CHECK(cudaFree(recv));
  CHECK(ncclCommDestroy(nccl));
  return g;
}

// ------------------------------------------------------------------ output --

bool writeAtomically(const std::string &path, const std::string &text) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE *f = std::fopen(tmp.c_str(), "w");
  if (!f)
    return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (fsync(fileno(f)) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

struct Options {
  std::string out, raw, shapes, name = "calibrated";
  size_t maxBytes = size_t(1) << 30;
  bool quick = false;
};

// Returns an empty string or the usage error.
std::string parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &dst) {
      if (i + 1 >= argc)
        return false;
      dst = argv[++i];
      return true;
    };
    std::string v;
    if ((a == "-o" || a == "--output") && value(o.out))
      continue;
    if (a == "--raw" && value(o.raw))
      continue;
    if (a == "--shapes" && value(o.shapes))
      continue;
    if (a == "--name" && value(o.name))
      continue;
    if (a == "--quick") {
      o.quick = true;
      continue;
    }
    if (a == "--max-bytes" && value(v)) {
      char *end = nullptr;
      unsigned long long b = std::strtoull(v.c_str(), &end, 10);
      if (*end || b < 4096 || b > (8ull << 30))
        return "--max-bytes: expected 4096..8589934592, got " + v;
      o.maxBytes = b;
      continue;
    }
    return "unknown or incomplete argument " + a;
  }
  if (o.out.empty())
    return "missing -o FILE";
  if (o.name.empty())
    return "--name must not be empty";
  return "";
}

} // namespace

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 1); // never NVLink multicast (device notes)
  CHECK(MPI_Init(&argc, &argv));
  int world = 0;
  CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &gRank));
  CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  Options opt;
  std::string err = parse(argc, argv, opt);
  std::vector<calib::GemmShape> shapes;
  if (err.empty() && !opt.shapes.empty())
    calib::readShapesFile(opt.shapes, shapes, err);
  if (!err.empty()) {
    if (gRank == 0)
      std::fprintf(stderr,
                   "calibrate: %s\nusage: mpirun -np <GPUs> calibrate -o "
                   "cluster.json [--name N] [--raw F] [--shapes F] "
                   "[--max-bytes B] [--quick]\n",
                   err.c_str());
    MPI_Finalize();
    return 1;
  }
  if (shapes.empty())
    shapes = calib::defaultGemmShapes();

  // Nodes: ranks sharing memory. One GPU per local rank.
  MPI_Comm local;
  CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, gRank,
                            MPI_INFO_NULL, &local));
  int localRank = 0, localSize = 0;
  CHECK(MPI_Comm_rank(local, &localRank));
  CHECK(MPI_Comm_size(local, &localSize));
  int devices = 0;
  cudaError_t ce = cudaGetDeviceCount(&devices);
  int noGpu = (ce != cudaSuccess || devices == 0) ? 1 : 0, anyNoGpu = 0;
  CHECK(MPI_Allreduce(&noGpu, &anyNoGpu, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (anyNoGpu) {
    if (gRank == 0)
      std::fprintf(stderr, "calibrate: no CUDA GPU found (%s)\n",
                   ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
    MPI_Finalize();
    return 77;
  }
  int tooFew = localSize > devices ? 1 : 0, anyTooFew = 0;
  CHECK(
      MPI_Allreduce(&tooFew, &anyTooFew, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (anyTooFew) {
    if (gRank == 0)
      std::fprintf(stderr,
                   "calibrate: more ranks on a node than its %d GPUs; start "
                   "one rank per GPU\n",
                   devices);
    MPI_Finalize();
    return 1;
  }
  int leader = localRank == 0 ? 1 : 0, nodes = 0, minLocal = 0, maxLocal = 0;
  CHECK(MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(MPI_Allreduce(&localSize, &minLocal, 1, MPI_INT, MPI_MIN,
                      MPI_COMM_WORLD));
  CHECK(MPI_Allreduce(&localSize, &maxLocal, 1, MPI_INT, MPI_MAX,
                      MPI_COMM_WORLD));
  if (minLocal != maxLocal) {
    if (gRank == 0)
      std::fprintf(stderr,
                   "calibrate: nodes run %d..%d ranks; a cluster has "
                   "the same number of GPUs on every node\n",
                   minLocal, maxLocal);
    MPI_Finalize();
    return 1;
  }
  CHECK(cudaSetDevice(localRank));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  calib::Measurements m;
  m.name = opt.name;
  m.date = today();
  m.nodes = nodes;
  m.gpusPerNode = localSize;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, localRank));
  m.gpuModel = prop.name;
  m.smCount = prop.multiProcessorCount;
  m.memoryBytes = static_cast<double>(prop.totalGlobalMem);
  m.l2Bytes = static_cast<double>(prop.l2CacheSize);
  {
    int rt = 0, drv = 0, nv = 0;
    CHECK(cudaRuntimeGetVersion(&rt));
    CHECK(cudaDriverGetVersion(&drv));
    CHECK(ncclGetVersion(&nv));
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    m.probe = "CUDA runtime " + std::to_string(rt) + ", driver " +
              std::to_string(drv) + ", cuBLASLt " +
              std::to_string(cublasLtGetVersion()) + ", NCCL " +
              std::to_string(nv) + ", " + std::to_string(world) +
              " rank(s), host " + host;
  }

  if (gRank == 0) {
    std::fprintf(stderr,
                 "calibrate: %s, %d node(s) x %d GPU(s); %zu GEMM "
                 "shapes\n",
                 m.gpuModel.c_str(), nodes, localSize, shapes.size());
    measureCompute(m, shapes, opt.quick, stream);
  }
  CHECK(MPI_Barrier(MPI_COMM_WORLD));

  if (localSize > 1) {
    m.intra = measureGroup(local, opt.maxBytes, stream);
    m.hasIntra = true;
  }
  if (nodes > 1) {
    MPI_Comm cross; // one GPU per node; every local rank's group at once
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, localRank, gRank, &cross));
    m.inter = measureGroup(cross, opt.maxBytes, stream);
    m.hasInter = true;
    CHECK(MPI_Comm_free(&cross));
  }

  int status = 0;
  if (gRank == 0) {
    if (!writeAtomically(opt.out, calib::clusterJson(m))) {
      std::fprintf(stderr, "calibrate: cannot write %s: %s\n", opt.out.c_str(),
                   std::strerror(errno));
      status = 1;
    }
    if (status == 0 && !opt.raw.empty() &&
        !writeAtomically(opt.raw, calib::rawJson(m))) {
      std::fprintf(stderr, "calibrate: cannot write %s: %s\n", opt.raw.c_str(),
                   std::strerror(errno));
      status = 1;
    }
    std::printf("gpu %s x %d per node, %d node(s)\n", m.gpuModel.c_str(),
                m.gpusPerNode, m.nodes);
    std::printf("launch floor %.2f us; copy %.0f GB/s (read + write)\n",
                m.launchUs, m.copyGBps);
    std::printf("8192^3 GEMM: bf16 %.1f, tf32 %.1f, fp32 %.1f TFLOP/s; %zu "
                "bf16 shapes timed\n",
                m.bf16Tflops, m.tf32Tflops, m.fp32Tflops, m.gemms.size());
    if (m.hasIntra) {
      calib::LinkFit f = calib::fitLink(m.intra);
      std::printf("intra-node NCCL (%d GPUs): all_reduce busbw %.1f GB/s, "
                  "alpha %.2f us, overhead %.2f us, p2p %.1f GB/s\n",
                  m.intra.ranks, f.busbwGBps, f.latencyUs, f.overheadUs,
                  f.p2pGBps);
    }
    if (m.hasInter) {
      calib::LinkFit f = calib::fitLink(m.inter);
      std::printf("inter-node NCCL (%d nodes): all_reduce busbw %.1f GB/s, "
                  "alpha %.2f us\n",
                  m.inter.ranks, f.busbwGBps, f.latencyUs);
    }
    if (status == 0)
      std::printf("wrote %s\n", opt.out.c_str());
  }
  CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
  MPI_Comm_free(&local);
  MPI_Finalize();
  return status;
}
