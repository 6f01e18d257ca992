//===- allreduce_busbw.cu - nccl-tests-style bus bandwidth of NCCL collectives
//-===//
//
// One process drives every visible GPU (ncclCommInitAll) and times all_reduce,
// all_gather, reduce_scatter and a send/recv pair between GPU 0 and GPU 1, for
// message sizes 1 KiB .. 1 GiB (x2 steps). Timing follows nccl-tests
// (NVIDIA/nccl-tests: src/common.cu): warm-up, then CUDA events around `iters`
// back-to-back launches on each GPU's stream; the time of a size is the slowest
// GPU's mean. Bandwidths follow doc/PERFORMANCE.md:
//   algbw = S / t, busbw = algbw * factor,
//   factor = 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter), 1
//   (send/recv),
// where S is the per-rank buffer of all_reduce, the gathered output of
// all_gather, the per-rank input of reduce_scatter, and the message of
// send/recv. Prints a JSON document on stdout. NVLink SHARP (NVLS) is turned
// off: the lent machines must not use multicast (see the device notes), and
// NCCL_NVLS_ENABLE=0 is also what the cost model's preset assumes.
//
// Build: nvcc -O2 -arch=sm_90 -o allreduce_busbw allreduce_busbw.cu -lnccl
//===----------------------------------------------------------------------===//
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// A CUDA or NCCL call's status: a failure prints the place, the library and
// its message, then exits 1.
struct Status {
  bool ok;
  const char *lib, *msg;
};
Status status(cudaError_t e) {
  return {e == cudaSuccess, "CUDA", cudaGetErrorString(e)};
}
Status status(ncclResult_t r) {
  return {r == ncclSuccess, "NCCL", ncclGetErrorString(r)};
}
template <class Result> void check(Result r, const char *file, int line) {
  const Status s = status(r);
  if (!s.ok) {
    std::fprintf(stderr, "%s:%d: %s error: %s\n", file, line, s.lib, s.msg);
    std::exit(1);
  }
}
#define CHECK(call) check((call), __FILE__, __LINE__)

namespace {

enum class Op { AllReduce, AllGather, ReduceScatter, SendRecv };
const char *opName(Op op) {
  switch (op) {
  case Op::AllReduce:
    return "all_reduce";
  case Op::AllGather:
    return "all_gather";
  case Op::ReduceScatter:
    return "reduce_scatter";
  case Op::SendRecv:
    return "send_recv";
  }
  return "?";
}

struct Gpu {
  ncclComm_t comm;
  cudaStream_t stream;
  float *send, *recv;
  cudaEvent_t start, stop;
};

// Launches one collective of `bytes` (S as defined above) on every GPU.
void launch(Op op, std::vector<Gpu> &gpus, size_t bytes) {
  int n = static_cast<int>(gpus.size());
  size_t count = bytes / sizeof(float);
  CHECK(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    Gpu &g = gpus[i];
    switch (op) {
    case Op::AllReduce:
      CHECK(ncclAllReduce(g.send, g.recv, count, ncclFloat, ncclSum, g.comm,
                          g.stream));
      break;
    case Op::AllGather: // output S, each rank contributes S/n
      CHECK(ncclAllGather(g.send, g.recv, count / n, ncclFloat, g.comm,
                          g.stream));
      break;
    case Op::ReduceScatter: // input S, each rank keeps S/n
      CHECK(ncclReduceScatter(g.send, g.recv, count / n, ncclFloat, ncclSum,
                              g.comm, g.stream));
      break;
    case Op::SendRecv: // 0 -> 1 only: a pipeline-stage boundary
      if (i == 0)
        CHECK(ncclSend(g.send, count, ncclFloat, 1, g.comm, g.stream));
      if (i == 1)
        CHECK(ncclRecv(g.recv, count, ncclFloat, 0, g.comm, g.stream));
      break;
    }
  }
  CHECK(ncclGroupEnd());
}

// Mean seconds per launch, slowest GPU.
double timeOp(Op op, std::vector<Gpu> &gpus, size_t bytes, int warmup,
              int iters) {
  for (int w = 0; w < warmup; ++w)
    launch(op, gpus, bytes);
  for (Gpu &g : gpus)
    CHECK(cudaStreamSynchronize(g.stream));
  int dev = 0;
  for (Gpu &g : gpus) {
    CHECK(cudaSetDevice(dev++));
    CHECK(cudaEventRecord(g.start, g.stream));
  }
  for (int it = 0; it < iters; ++it)
    launch(op, gpus, bytes);
  dev = 0;
  double worst = 0;
  for (Gpu &g : gpus) {
    CHECK(cudaSetDevice(dev++));
    CHECK(cudaEventRecord(g.stop, g.stream));
  }
  for (Gpu &g : gpus) {
    CHECK(cudaEventSynchronize(g.stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, g.start, g.stop));
    worst = std::max(worst, ms * 1e-3 / iters);
  }
  return worst;
}

} // namespace

int main(int argc, char **argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 1); // never multicast on the lent machines
  size_t maxBytes =
      argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1ull << 30);
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 2) {
    std::fprintf(stderr, "need at least 2 GPUs, found %d\n", n);
    return 1;
  }
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i)
    devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<Gpu> gpus(n);
  for (int i = 0; i < n; ++i) {
    CHECK(cudaSetDevice(i));
    gpus[i].comm = comms[i];
    CHECK(cudaStreamCreateWithFlags(&gpus[i].stream, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&gpus[i].send, maxBytes));
    CHECK(cudaMalloc(&gpus[i].recv, maxBytes));
    CHECK(cudaMemset(gpus[i].send, 0, maxBytes));
    CHECK(cudaEventCreate(&gpus[i].start));
    CHECK(cudaEventCreate(&gpus[i].stop));
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int ncclVer = 0, rtVer = 0, drvVer = 0;
  CHECK(ncclGetVersion(&ncclVer));
  CHECK(cudaRuntimeGetVersion(&rtVer));
  CHECK(cudaDriverGetVersion(&drvVer));
  int p2p = 0;
  CHECK(cudaDeviceCanAccessPeer(&p2p, 0, 1));

  std::printf("{\n  \"device\": \"%d x %s\",\n  \"gpus\": %d,\n", n, prop.name,
              n);
  std::printf("  \"sm_count\": %d,\n  \"nccl_version\": %d,\n",
              prop.multiProcessorCount, ncclVer);
  std::printf("  \"cuda_runtime\": %d,\n  \"cuda_driver\": %d,\n  "
              "\"peer_access\": %d,\n",
              rtVer, drvVer, p2p);
  std::printf("  \"env\": {\"NCCL_NVLS_ENABLE\": \"0\", \"NCCL_ALGO\": \"%s\", "
              "\"NCCL_PROTO\": \"%s\"},\n",
              getenv("NCCL_ALGO") ? getenv("NCCL_ALGO") : "",
              getenv("NCCL_PROTO") ? getenv("NCCL_PROTO") : "");
  std::printf(
      "  \"timing\": \"CUDA events around iters launches after warm-up; "
      "slowest GPU's mean\",\n  \"results\": [\n");
  const Op ops[] = {Op::AllReduce, Op::AllGather, Op::ReduceScatter,
                    Op::SendRecv};
  bool first = true;
  for (Op op : ops) {
    for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 2) {
      // Enough launches that the timed span is well past event resolution.
      int iters = bytes <= (1u << 20) ? 200 : bytes <= (64u << 20) ? 50 : 10;
      double t = timeOp(op, gpus, bytes, 5, iters);
      double algbw = bytes / t / 1e9;
      double factor = op == Op::AllReduce  ? 2.0 * (n - 1) / n
                      : op == Op::SendRecv ? 1.0
                                           : double(n - 1) / n;
      std::printf(
          "%s    {\"op\": \"%s\", \"bytes\": %zu, \"iters\": %d, "
          "\"time_us\": %.3f, \"algbw_GBps\": %.3f, \"busbw_GBps\": %.3f}",
          first ? "" : ",\n", opName(op), bytes, iters, t * 1e6, algbw,
          algbw * factor);
      std::fflush(stdout);
      first = false;
    }
  }
  std::printf("\n  ]\n}\n");
  for (int i = 0; i < n; ++i)
    CHECK(ncclCommDestroy(comms[i]));
  return 0;
}
