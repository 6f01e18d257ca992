// Host time of a classifier's synthetic batch (backends/common/Data.h
// synthetic_classes), on one thread and on several: what a CUDA classifier's
// step waits for before its graph launches (docs/runtime.md "Classification
// samples").
//
//   c++ -O2 -std=c++17 -pthread -I. bench/onnx/class_samples_time.cpp \
//     backends/common/Data.cpp backends/common/FileIo.cpp -o /tmp/cst
//   /tmp/cst [FEATURES] [BATCH]      # default 3072 (3x32x32) and 8
#include "backends/common/Data.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
  const int64_t F = argc > 1 ? std::atoll(argv[1]) : 3072;
  const int64_t B = argc > 2 ? std::atoll(argv[2]) : 8;
  std::vector<float> x(size_t(B * F));
  std::vector<int32_t> y(static_cast<size_t>(B));
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("features %lld, batch %lld, %d hardware threads\n",
              (long long)F, (long long)B, hw);
  double one = 0;
  for (int threads : {1, 2, 4, 8}) {
    std::vector<double> ms;
    for (int step = 0; step < 50; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      autoddl::rt::synthetic_classes(1234, step, B, F, 10, 4.0, 0, B, x.data(),
                                     y.data(), threads);
      ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    if (threads == 1)
      one = median;
    std::printf("threads %d: median %.3f ms a batch (%.1f ns a feature; "
                "%.2fx one thread)\n",
                threads, median, 1e6 * median / double(B * F), one / median);
  }
}
