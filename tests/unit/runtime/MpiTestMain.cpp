// gtest main for tests run under mpirun: every rank runs every test; one rank
// prints; the exit status is non-zero when any rank failed.
#include "backends/cpu/Collectives.h"
#include "backends/host/Mesh.h"

#include <gtest/gtest.h>

#include <mpi.h>

using namespace autoddl::rt;

int main(int argc, char **argv) {
  mpi_init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (comm_rank(MPI_COMM_WORLD) !=
      0) // one rank prints; every rank's failures count below
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()
            ->listeners()
            .default_result_printer());
  int failed = RUN_ALL_TESTS() != 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
