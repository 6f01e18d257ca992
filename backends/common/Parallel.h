// Host parallelism for the runtime's data preparation: one loop split over the
// cores the process may use.
#ifndef AUTODDL_BACKENDS_COMMON_PARALLEL_H
#define AUTODDL_BACKENDS_COMMON_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

namespace autoddl::rt {

/// The machine's hardware threads.
inline int64_t hardware_threads() {
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

/// The cores this process may run on: its affinity mask where the OS has
/// one (mpirun binds a rank to one core by default, and 8 threads there run
/// no faster than one), else the machine's hardware threads.
inline int64_t available_cores() {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
#endif
  return hardware_threads();
}

/// Threads a loop uses: `requested` when positive, else available_cores().
inline int64_t host_threads(int64_t requested = 0) {
  return requested > 0 ? requested : available_cores();
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
