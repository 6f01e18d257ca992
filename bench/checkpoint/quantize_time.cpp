// Host time of cluster_quantize (backends/common/CheckpointCompress.h) over N
// floats like an AdamW second moment (log-normal), on 1, 2, 4 and 8 threads,
// for each companding: Linear's k-means sorts every chunk, SignedLog's even
// levels (what a compressed checkpoint stores) take one pass.
//
//   c++ -O2 -std=c++17 -pthread -I. bench/checkpoint/quantize_time.cpp \
//     backends/common/CheckpointCompress.cpp -o /tmp/qt
//   /tmp/qt [N]        # default 16777216 (2^24)
#include "backends/common/CheckpointCompress.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : int64_t(1) << 24;
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(7);
  std::lognormal_distribution<float> dist(-12.0f, 2.0f);
  for (float &v : x)
    v = dist(rng);
  std::printf("%lld floats, %u hardware threads\n", (long long)n,
              std::thread::hardware_concurrency());
  using autoddl::rt::Companding;
  for (Companding c : {Companding::Linear, Companding::SignedLog}) {
    double one = 0;
    for (int threads : {1, 2, 4, 8}) {
      const auto t0 = std::chrono::steady_clock::now();
      const autoddl::rt::ClusterQuantized q =
          autoddl::rt::cluster_quantize(x.data(), n, c, 32, threads);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      if (threads == 1)
        one = s;
      std::printf("%s, threads %d: %.3f s (%.1f MB/s of floats, %.2fx one "
                  "thread; max error %.3g, relative %.3g)\n",
                  c == Companding::Linear ? "linear" : "signed-log", threads, s,
                  4e-6 * double(n) / s, one / s, q.max_error,
                  q.max_relative_error);
    }
  }
}
