// Starting a job without an MPI launcher (docs/runtime.md "Launching without
// MPI"): the torchrun-style variables RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT name the world; rank 0 listens on MASTER_ADDR:MASTER_PORT, the
// others connect to it, then every pair of ranks connects (a full mesh of TCP
// connections, plus one control connection from each rank to rank 0). The MPI
// calls of the generated program and its runtime go over these connections
// when there is no MPI launcher (MpiRoute.cpp); NCCL then starts from a
// ncclUniqueId broadcast over them.
//
// Faults. Any rank that fails tells rank 0 over its control connection, and
// rank 0 tells every other rank; a control connection that closes before
// finalize counts as a failure of its rank (it crashed). A thread watches the
// control connections and runs the failure hook, so that a rank blocked in a
// GPU collective stops too. Plain C++ (no MPI, no CUDA): unit-tested on the
// CPU.
#ifndef AUTODDL_BACKENDS_CUDA_BOOTSTRAP_H
#define AUTODDL_BACKENDS_CUDA_BOOTSTRAP_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::rt::tcp {

/// Who started this process: an MPI launcher (OMPI_*, PMI_*, PMIX_*, MV2_*
/// variables), torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and no MPI
/// launcher variable) or nobody (one process).
enum class Launcher { Mpi, Torchrun, Single };
Launcher detect_launcher();

struct Options {
  int rank = 0, size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// Bound on connecting to and accepting from the other ranks.
  double timeout_s = 60;
};
/// Options from the torchrun variables. The port is MASTER_PORT, or
/// MASTER_PORT + 1 when torchrun's agent serves its own store there
/// (TORCHELASTIC_USE_AGENT_STORE=True); AUTODDL_MASTER_PORT overrides it.
/// AUTODDL_CONNECT_TIMEOUT (seconds) sets timeout_s. Throws
/// std::runtime_error on a missing or malformed variable.
Options options_from_env();

/// The group of a collective: world ranks in group order, this rank's index in
/// it, and a context id that the members agree on (messages of different
/// groups never match).
struct Group {
  uint64_t ctx = 1;
  std::vector<int> ranks;
  int me = 0;
  int size() const { return int(ranks.size()); }
};

/// The connected world. One per process.
class World {
public:
  /// Connects the mesh. Throws std::runtime_error naming the rank, the peer
  /// and the address when a connection does not come within the timeout.
  static void start(const Options &o);
  static bool started();
  static int rank();
  static int size();
  /// Every rank, context 1.
  static Group world_group();

  /// Point to point: messages from one peer with the same (ctx, tag) arrive
  /// in the order sent; others wait in a queue until asked for. A send
  /// blocks until the kernel has taken the bytes (the runtime sends at most a
  /// few KiB that no peer reads late).
  static void send(int peer, uint64_t ctx, int64_t tag, const void *data,
                   size_t bytes);
  static std::vector<char> recv(int peer, uint64_t ctx, int64_t tag);

  /// Collectives over a group (every member calls them in the same order).
  /// gather: the root gets every member's bytes in group order (others: {}).
  static std::vector<std::vector<char>> gather(const Group &g, int root,
                                               const void *data, size_t bytes);
  /// bcast: every member gets the root's `data`.
  static void bcast(const Group &g, int root, std::vector<char> &data);
  /// allgather: every member gets every member's bytes in group order.
  static std::vector<std::vector<char>>
  allgather(const Group &g, const void *data, size_t bytes);
  static void barrier(const Group &g);

  /// Every rank calls it at the end: a barrier, then the connections close
  /// (closing before it is a failure).
  static void finalize();
  /// Tells every rank to stop (through rank 0), then exits with `code`.
  [[noreturn]] static void abort(int code);
};

/// Tells the other ranks (through rank 0) that this rank fails, before it
/// cleans up and exits: they stop even if this rank's cleanup hangs. Once;
/// nothing without a TCP world.
void announce_failure();

/// What runs when another rank failed (it aborted or its connection closed)
/// or a connection of this rank broke: gets the message ("autoddl: rank R:
/// ..."), then the process exits non-zero. The CUDA layer aborts its NCCL
/// communicators here. Null: print the message only.
void set_failure_hook(void (*hook)(const char *message));

// ---- progress, for the watchdog of the CUDA layer ----

/// Marks that this rank made progress at `place` (a string literal): every
/// host collective, every step.
void progress(const char *place);
/// Seconds since the last progress() and its place.
double progress_age_s(const char **place);

} // namespace autoddl::rt::tcp

#endif // AUTODDL_BACKENDS_CUDA_BOOTSTRAP_H
