// The MPI calls of the CUDA runtime over the TCP world (backends/cuda/
// MpiRoute.cpp, Bootstrap.cpp) on the CPU: run by tcp_bootstrap.sh as
// torchrun-style processes (or under mpirun, the PMPI path). Usage:
//   tcp_bootstrap_test ok DIR every call the runtime makes, checked; then a
//                             Mesh and a sharded checkpoint saved to DIR
//                             and loaded back (the runtime's own code)
//   tcp_bootstrap_test abort  rank 1 calls MPI_Abort; the others (3 ranks or
//                             more) wait in MPI_Recv and must be stopped
//   tcp_bootstrap_test crash  rank 1 exits without a word; likewise
// Prints "rank R ok" and exits 0 when every check passes.
#include "backends/host/Checkpoint.h"
#include "backends/host/Mesh.h"
#include "backends/cuda/Bootstrap.h"

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
int rank = 0, size = 1;
void check(bool ok, const char *what) {
  if (ok)
    return;
  std::fprintf(stderr, "rank %d: check failed: %s\n", rank, what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}
} // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  try {
    autoddl::rt::mpi_init(&argc, &argv); // MPI_Init, as the runtime calls it
  } catch (const std::exception &e) {    // the TCP world did not connect
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  int inited = 0;
  MPI_Initialized(&inited);
  check(inited == 1, "MPI_Initialized");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check(size >= 2, "at least 2 ranks");

  if (mode == "abort" || mode == "crash") {
    int x = 0;
    if (rank == 1) {
      if (mode == "abort")
        MPI_Abort(MPI_COMM_WORLD, 3);
      std::_Exit(4); // a crash: no message, no MPI_Abort
    }
    // Waits for a rank that never sends (not rank 1, whose closing socket
    // would end the wait): only the control connections can stop this rank.
    const int other = rank == 0 ? size - 1 : 0;
    MPI_Recv(&x, 1, MPI_INT, other, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    std::fprintf(stderr, "rank %d: MPI_Recv returned after rank 1 failed\n",
                 rank);
    return 0;
  }

  // Allreduce: double sum (the loss), int max, MAXLOC, in place.
  double loss = 0.5 + rank;
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  check(loss == 0.5 * size + size * (size - 1) / 2.0, "allreduce sum");
  int mx = 0, bad = rank == size - 1 ? 7 : 0;
  MPI_Allreduce(&bad, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  check(mx == 7, "allreduce max");
  struct {
    double v;
    int r;
  } mine{double(rank % 2), rank}, best{};
  MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  check(best.v == 1.0 && best.r == 1, "allreduce maxloc");
  // Bcast from a non-zero root (the ncclUniqueId comes from rank 0).
  char id[128];
  std::memset(id, rank == 1 ? 'x' : 0, sizeof id);
  MPI_Bcast(id, sizeof id, MPI_BYTE, 1, MPI_COMM_WORLD);
  check(id[0] == 'x' && id[127] == 'x', "bcast");
  // Split: even and odd ranks, reversed by key.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int hr = -1, hs = 0;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  check(hs == (size + 1 - rank % 2) / 2, "split size");
  check(hr == (hs - 1) - rank / 2, "split rank (by key)");
  int64_t sum = rank, total = 0;
  MPI_Allreduce(&sum, &total, 1, MPI_INT64_T, MPI_SUM, half);
  int64_t expect = 0;
  for (int r = rank % 2; r < size; r += 2)
    expect += r;
  check(total == expect, "allreduce on a split communicator");
  MPI_Comm none;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none);
  check((rank == 0) == (none == MPI_COMM_NULL), "split MPI_UNDEFINED");
  if (none != MPI_COMM_NULL)
    MPI_Comm_free(&none);
  // Allgather, Gather, Gatherv (checkpoints, metrics).
  std::vector<int64_t> peaks(static_cast<size_t>(size));
  const int64_t peak = 1000 + rank;
  MPI_Allgather(&peak, 1, MPI_INT64_T, peaks.data(), 1, MPI_INT64_T,
                MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r)
    check(peaks[size_t(r)] == 1000 + r, "allgather");
  const int count = 3 + rank;
  std::vector<int> counts(static_cast<size_t>(size));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<float> block(static_cast<size_t>(count), float(rank)), all;
  std::vector<int> displs(static_cast<size_t>(size), 0);
  if (rank == 0) {
    int n = 0;
    for (int r = 0; r < size; ++r) {
      check(counts[size_t(r)] == 3 + r, "gather");
      displs[size_t(r)] = n;
      n += counts[size_t(r)];
    }
    all.resize(size_t(n));
  }
  MPI_Gatherv(block.data(), count, MPI_FLOAT, all.data(), counts.data(),
              displs.data(), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < size; ++r)
      check(all[size_t(displs[size_t(r)] + counts[size_t(r)] - 1)] == float(r),
            "gatherv");
  // Isend / Recv in another order than sent (the pipeline's order exchange).
  std::vector<MPI_Request> reqs;
  int a = 10 * rank + 1, b = 10 * rank + 2;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank)
      continue;
    MPI_Request q;
    MPI_Isend(&a, 1, MPI_INT, peer, 7001, MPI_COMM_WORLD, &q);
    reqs.push_back(q);
    MPI_Isend(&b, 1, MPI_INT, peer, 7002, MPI_COMM_WORLD, &q);
    reqs.push_back(q);
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank)
      continue;
    int x = 0, y = 0;
    MPI_Recv(&y, 1, MPI_INT, peer, 7002, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&x, 1, MPI_INT, peer, 7001, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    check(x == 10 * peer + 1 && y == 10 * peer + 2, "isend/recv by tag");
  }
  MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  MPI_Barrier(half);
  MPI_Comm_free(&half);
  MPI_Barrier(MPI_COMM_WORLD);
  const char *place = nullptr;
  check(autoddl::rt::tcp::progress_age_s(&place) < 5.0 && place,
        "progress is marked");

  // The runtime's Mesh and sharded checkpoint over the same calls: a [2p, 3]
  // tensor split in rows over the p ranks, gathered to rank 0, read back whole.
  {
    using namespace autoddl::rt;
    Mesh mesh({1, int64_t(size)}, MPI_COMM_WORLD);
    check(mesh.coord(1) == rank, "mesh coordinate");
    int axisSize = 0;
    MPI_Comm_size(mesh.axis(1), &axisSize);
    check(axisSize == size, "mesh axis communicator");
    const Slice whole = Slice::whole({2 * int64_t(size), 3});
    const Slice mine = whole.split(0, size, rank);
    std::vector<float> block(static_cast<size_t>(mine.numel()));
    for (size_t k = 0; k < block.size(); ++k)
      block[k] = float(rank * 6 + int(k));
    const std::string path =
        std::string(argc > 2 ? argv[2] : ".") + "/ck.safetensors";
    checkpoint_save(path, {{"w", mine, block.data()}}, {{"step", "7"}},
                    MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<float> all(static_cast<size_t>(whole.numel()), -1.0f);
    auto meta = checkpoint_load(path, {{"w", whole, all.data()}});
    check(meta["step"] == "7", "checkpoint metadata");
    for (size_t k = 0; k < all.size(); ++k)
      check(all[k] == float(k), "checkpoint values");
  }
  std::printf("rank %d ok\n", rank);
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
