// Host parallelism for the runtime's data preparation: one loop split over the
// machine's hardware threads.
#ifndef AUTODDL_BACKENDS_COMMON_PARALLEL_H
#define AUTODDL_BACKENDS_COMMON_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace autoddl::rt {

/// Threads a loop uses: `requested` when positive, else the machine's
/// hardware threads.
inline int64_t host_threads(int64_t requested = 0) {
  if (requested > 0)
    return requested;
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

/// Runs body(begin, end) over [0, n) in contiguous chunks, at least
/// `min_per_thread` elements each, on up to host_threads(threads) threads.
/// Callers key every element by its own index, so results do not depend on
/// the split.
template <class Body>
void for_chunks(int64_t n, Body body, int64_t min_per_thread = int64_t(1) << 20,
                int64_t threads = 0) {
  const int64_t t = std::min(host_threads(threads),
                             (n + min_per_thread - 1) / min_per_thread);
  if (t <= 1) {
    body(int64_t(0), n);
    return;
  }
  const int64_t chunk = (n + t - 1) / t;
  std::vector<std::thread> pool;
  for (int64_t b = 0; b < n; b += chunk)
    pool.emplace_back(body, b, std::min(n, b + chunk));
  for (std::thread &th : pool)
    th.join();
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_COMMON_PARALLEL_H
