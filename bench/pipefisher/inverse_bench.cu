// How the K-FAC programs should invert a damped factor on the GPU (issue 47 item 2): cuSOLVER's
// potrf + potri (what backends/cuda/kfac/KfacInverse.cu did) against potrf + potrs on an
// identity. For each size: the GPU time of one inversion (events, median of 10 after warm-up),
// and the host time of queueing it while another stream keeps the GPU busy for 200 ms (an
// asynchronous call returns in microseconds; one that waits for the GPU returns after the busy
// kernel). Checks each inverse: max |F X - I|.
//
//   nvcc -O2 -arch=sm_90 inverse_bench.cu -lcusolver -lcublas -o inverse_bench && ./inverse_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    auto e_ = (x);                                                             \
    if (e_ != 0) {                                                             \
      std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, int(e_)); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
__global__ void identity(float *b, int n) {
  long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (k < (long long)n * n)
    b[k] = (k / n == k % n) ? 1.f : 0.f;
}

enum Method { Potri, Potrs };

struct Inverter {
  cusolverDnHandle_t h;
  cudaStream_t s;
  float *m, *b, *work;
  int *info;
  int lwork;
  int n;
  void run(const float *F, Method how) {
    CK(cudaMemcpyAsync(m, F, sizeof(float) * n * n, cudaMemcpyDeviceToDevice, s));
    CK(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, m, n, work, lwork, info));
    if (how == Potri) {
      CK(cusolverDnSpotri(h, CUBLAS_FILL_MODE_LOWER, n, m, n, work, lwork, info + 1));
    } else {
      identity<<<(n * n + 255) / 256, 256, 0, s>>>(b, n);
      CK(cusolverDnSpotrs(h, CUBLAS_FILL_MODE_LOWER, n, n, m, n, b, n, info + 1));
    }
  }
};

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s\n", prop.name);
  int khz = 0; // CUDA 13: the clock from the attribute
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  cudaStream_t s, busy;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  cusolverDnHandle_t h;
  CK(cusolverDnCreate(&h));
  CK(cusolverDnSetStream(h, s));
  cublasHandle_t cb;
  CK(cublasCreate(&cb));
  CK(cublasSetStream(cb, s));
  std::printf("%6s %-6s %10s %12s %10s\n", "n", "method", "gpu_ms", "host_ms_busy", "max_err");
  for (int n : {768, 2304, 3072, 4096, 8192}) {
    // F = X X^T / n + 1e-3 I, well conditioned enough for fp32.
    std::vector<float> hx(size_t(n) * n);
    srand(1);
    for (auto &v : hx)
      v = float(rand()) / RAND_MAX - 0.5f;
    float *x, *F, *check;
    CK(cudaMalloc(&x, sizeof(float) * n * n));
    CK(cudaMalloc(&F, sizeof(float) * n * n));
    CK(cudaMalloc(&check, sizeof(float) * n * n));
    CK(cudaMemcpy(x, hx.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice));
    const float alpha = 1.f / n, beta = 0.f;
    CK(cublasSgemm(cb, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &alpha, x, n, x, n, &beta, F, n));
    std::vector<float> hf(size_t(n) * n);
    CK(cudaMemcpy(hf.data(), F, sizeof(float) * n * n, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      hf[size_t(i) * n + i] += 1e-3f;
    CK(cudaMemcpy(F, hf.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice));
    Inverter inv{h, s, nullptr, nullptr, nullptr, nullptr, 0, n};
    CK(cudaMalloc(&inv.m, sizeof(float) * n * n));
    CK(cudaMalloc(&inv.b, sizeof(float) * n * n));
    CK(cudaMalloc(&inv.info, 2 * sizeof(int)));
    int lf = 0, li = 0;
    CK(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, inv.m, n, &lf));
    CK(cusolverDnSpotri_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, inv.m, n, &li));
    inv.lwork = std::max(lf, li);
    CK(cudaMalloc(&inv.work, sizeof(float) * inv.lwork));
    for (Method how : {Potri, Potrs}) {
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<float> ms;
      for (int r = 0; r < 13; ++r) {
        CK(cudaEventRecord(e0, s));
        inv.run(F, how);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (r >= 3)
          ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      // Host time of queueing one inversion behind nothing on its stream while the GPU is busy.
      spin<<<1, 1, 0, busy>>>(200LL * khz); // ~200 ms
      auto t0 = std::chrono::steady_clock::now();
      inv.run(F, how);
      double host = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      CK(cudaDeviceSynchronize());
      // max |F X - I| (X symmetric: potri fills the lower triangle; mirror it first).
      const float *X = how == Potri ? inv.m : inv.b;
      std::vector<float> hxv(size_t(n) * n);
      CK(cudaMemcpy(hxv.data(), X, sizeof(float) * n * n, cudaMemcpyDeviceToHost));
      if (how == Potri)
        for (int j = 0; j < n; ++j)
          for (int i = 0; i < j; ++i)
            hxv[size_t(j) * n + i] = hxv[size_t(i) * n + j]; // column-major: lower (i>j) kept
      CK(cudaMemcpy(inv.b, hxv.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice));
      const float one = 1.f, zero = 0.f;
      CK(cublasSgemm(cb, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, F, n, inv.b, n, &zero, check, n));
      std::vector<float> hc(size_t(n) * n);
      CK(cudaMemcpy(hc.data(), check, sizeof(float) * n * n, cudaMemcpyDeviceToHost));
      double err = 0;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i)
          err = std::max(err, std::fabs(double(hc[size_t(j) * n + i]) - (i == j)));
      std::printf("%6d %-6s %10.3f %12.3f %10.2e\n", n, how == Potri ? "potri" : "potrs",
                  ms[ms.size() / 2], host, err);
    }
    CK(cudaFree(x)); CK(cudaFree(F)); CK(cudaFree(check)); CK(cudaFree(inv.m));
    CK(cudaFree(inv.b)); CK(cudaFree(inv.work)); CK(cudaFree(inv.info));
  }
  return 0;
}
