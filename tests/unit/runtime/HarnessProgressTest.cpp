// progress_sends (backends/cpu/harness/Harness.h) under mpirun with Open MPI's
// single copy off (CMakeLists.txt sets btl_vader_single_copy_mechanism=none):
// a pipeline send past the eager limit then moves only while its sender is in
// MPI. Rank 0 sends 128 KiB (a pipeline activation of the 4-stage benchmark)
// and computes for 400 ms; rank 1 receives 5 ms later. Without progress the
// message arrives after the compute (the control); with progress_sends every
// millisecond it arrives within the first few.
#include "backends/cpu/Collectives.h"
#include "backends/cpu/harness/Harness.h"

#include <gtest/gtest.h>

#include <mpi.h>

#include <vector>

using namespace autoddl::rt;
using namespace autoddl::rt::harness;

namespace {

constexpr double kComputeS = 0.4;
constexpr int64_t kFloats = 32768; // 128 KiB

/// Rank 0's compute: wall-clock spinning, progress_sends every millisecond
/// when `progress`.
void compute(bool progress) {
  const double t0 = MPI_Wtime();
  while (MPI_Wtime() - t0 < kComputeS) {
    const double t1 = MPI_Wtime();
    while (MPI_Wtime() - t1 < 1e-3) {
    }
    if (progress)
      progress_sends();
  }
}

/// Seconds from a barrier until rank 1 holds rank 0's message (-1 on others).
double arrival(bool progress) {
  std::vector<float> buf(size_t(kFloats), 1.0f);
  const int rank = comm_rank(MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  double seconds = -1;
  if (rank == 0) {
    pending.push_back(isend(buf.data(), kFloats, 1, 5, MPI_COMM_WORLD));
    compute(progress);
    wait_all(pending);
  } else if (rank == 1) {
    while (MPI_Wtime() - t0 < 5e-3) {
    }
    MPI_Recv(buf.data(), int(kFloats), MPI_FLOAT, 0, 5, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    seconds = MPI_Wtime() - t0;
  }
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
  return seconds;
}

TEST(HarnessProgress, SendsMoveWhileTheSenderComputes) {
  const double without = arrival(false);
  if (without < kComputeS / 2)
    GTEST_SKIP() << "this MPI moves a 128 KiB send without its sender ("
                 << without * 1e3 << " ms): nothing to test";
  const double with = arrival(true);
  EXPECT_LT(with, kComputeS / 4)
      << "without progress_sends " << without * 1e3 << " ms, with "
      << with * 1e3 << " ms";
}

} // namespace
