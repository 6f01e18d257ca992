// The MPI calls of the generated CUDA program and its runtime (MPI_Init, the
// host-side collectives of loss, metrics and checkpoints, the Mesh's
// communicators, the pipeline's order exchange), routed at run time
// (docs/runtime.md "Launching without MPI"):
//  - started by an MPI launcher, or by nobody: to the MPI library, through its
//    profiling interface (PMPI_*), as before;
//  - started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and no
//    MPI launcher variable): over the TCP world of Bootstrap.h, MPI never
//    initialised.
// These definitions take the place of the library's MPI_* symbols in the
// program (the MPI profiling interface guarantees PMPI_* for every MPI_*).
// Built with AUTODDL_NO_MPI (no MPI on the machine; NoMpi.h stands in for
// mpi.h) there is only the TCP world. Only the calls and datatypes the
// runtime uses are here; every call also marks progress for the watchdog.
#include "backends/cuda/Bootstrap.h"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using autoddl::rt::tcp::Group;
using autoddl::rt::tcp::World;
namespace tcp = autoddl::rt::tcp;

namespace {

enum class Mode { Unset, Mpi, Tcp };
Mode gMode = Mode::Unset;
bool gFinalized = false;

bool tcp_mode() {
  if (gMode == Mode::Unset) {
#ifdef AUTODDL_NO_MPI
    gMode = Mode::Tcp;
#else
    gMode = tcp::detect_launcher() == tcp::Launcher::Torchrun ? Mode::Tcp
                                                              : Mode::Mpi;
#endif
  }
  return gMode == Mode::Tcp;
}

/// Marks progress for the watchdog when the call returns.
struct Progress {
  const char *place;
  explicit Progress(const char *p) : place(p) { tcp::progress(p); }
  ~Progress() { tcp::progress(place); }
};

[[noreturn]] void misuse(const std::string &what) {
  std::fprintf(stderr, "autoddl: rank %d: %s\n", World::rank(), what.c_str());
  World::abort(1);
}

// ---- communicators of the TCP world ----

struct CommInfo {
  Group group;
  int splits = 0; // made from it so far (the same count on every member)
};
std::map<MPI_Comm, CommInfo> &comms() {
  static std::map<MPI_Comm, CommInfo> m;
  return m;
}
CommInfo &info(MPI_Comm c, const char *call) {
  auto it = comms().find(c);
  if (it == comms().end())
    misuse(std::string(call) + ": not a communicator of this program");
  return it->second;
}

/// A handle no MPI object has: pointer handles (Open MPI) point to memory of
/// ours, integer handles (MPICH) count down from INT_MAX.
template <class Handle> Handle new_handle() {
  if constexpr (std::is_pointer_v<Handle>) {
    return reinterpret_cast<Handle>(new char[8]);
  } else {
    static int next = 0x7fffffff;
    return Handle(next--);
  }
}

// ---- datatypes and reductions ----

struct DoubleInt {
  double value;
  int index;
};

size_t type_size(MPI_Datatype t, const char *call) {
  if (t == MPI_INT)
    return sizeof(int);
  if (t == MPI_INT64_T)
    return sizeof(int64_t);
  if (t == MPI_DOUBLE)
    return sizeof(double);
  if (t == MPI_FLOAT)
    return sizeof(float);
  if (t == MPI_CHAR || t == MPI_BYTE)
    return 1;
  if (t == MPI_DOUBLE_INT)
    return sizeof(DoubleInt);
  misuse(std::string(call) + ": a datatype the TCP transport does not carry");
}

template <class T> void combine(T *acc, const T *x, int n, MPI_Op op) {
  for (int i = 0; i < n; ++i) {
    if (op == MPI_SUM)
      acc[i] += x[i];
    else if (op == MPI_MAX)
      acc[i] = x[i] > acc[i] ? x[i] : acc[i];
    else if (op == MPI_MIN)
      acc[i] = x[i] < acc[i] ? x[i] : acc[i];
    else
      misuse("MPI_Allreduce: an operation the TCP transport does not apply");
  }
}

/// acc = acc (op) x, element-wise; members are combined in rank order, so
/// every rank gets the same bits.
void reduce(void *acc, const void *x, int n, MPI_Datatype t, MPI_Op op) {
  if (t == MPI_DOUBLE_INT && op == MPI_MAXLOC) {
    auto *a = static_cast<DoubleInt *>(acc);
    const auto *b = static_cast<const DoubleInt *>(x);
    for (int i = 0; i < n; ++i)
      if (b[i].value > a[i].value ||
          (b[i].value == a[i].value && b[i].index < a[i].index))
        a[i] = b[i];
  } else if (t == MPI_INT) {
    combine(static_cast<int *>(acc), static_cast<const int *>(x), n, op);
  } else if (t == MPI_INT64_T) {
    combine(static_cast<int64_t *>(acc), static_cast<const int64_t *>(x), n,
            op);
  } else if (t == MPI_DOUBLE) {
    combine(static_cast<double *>(acc), static_cast<const double *>(x), n, op);
  } else if (t == MPI_FLOAT) {
    combine(static_cast<float *>(acc), static_cast<const float *>(x), n, op);
  } else {
    misuse("MPI_Allreduce: a datatype the TCP transport does not reduce");
  }
}

void start_tcp(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  tcp::Options o;
  switch (tcp::detect_launcher()) {
  case tcp::Launcher::Torchrun:
    o = tcp::options_from_env();
    break;
  case tcp::Launcher::Single:
    break; // one process: no connections
  case tcp::Launcher::Mpi:
    throw std::runtime_error(
        "started by an MPI launcher, but this program was built without MPI "
        "(AUTODDL_NO_MPI): start it with torchrun, or build it where MPI is");
  }
  World::start(o);
  comms()[MPI_COMM_WORLD] = {World::world_group(), 0};
}

} // namespace

#ifdef AUTODDL_NO_MPI
#define AUTODDL_PMPI(call) misuse("no MPI in this build")
#else
#define AUTODDL_PMPI(call) return P##call
#endif
/// The MPI path: the library's own function (return PMPI_...(args)).
#define AUTODDL_ROUTE(call)                                                    \
  if (!tcp_mode())                                                             \
    AUTODDL_PMPI(call);

int MPI_Init(int *argc, char ***argv) {
  Progress p("MPI_Init");
  AUTODDL_ROUTE(MPI_Init(argc, argv));
  start_tcp(argc, argv); // throws std::runtime_error with the reason
  return MPI_SUCCESS;
}

int MPI_Initialized(int *flag) {
  AUTODDL_ROUTE(MPI_Initialized(flag));
  *flag = World::started() ? 1 : 0;
  return MPI_SUCCESS;
}

int MPI_Finalized(int *flag) {
  AUTODDL_ROUTE(MPI_Finalized(flag));
  *flag = gFinalized ? 1 : 0;
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  Progress p("MPI_Finalize");
  AUTODDL_ROUTE(MPI_Finalize());
  World::finalize();
  comms().clear();
  gFinalized = true;
  return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  AUTODDL_ROUTE(MPI_Abort(comm, errorcode));
  (void)comm; // the whole TCP world stops
  World::abort(errorcode);
}

int MPI_Error_string(int errorcode, char *string, int *resultlen) {
  AUTODDL_ROUTE(MPI_Error_string(errorcode, string, resultlen));
  *resultlen = std::snprintf(string, MPI_MAX_ERROR_STRING,
                             "error %d of the TCP transport", errorcode);
  return MPI_SUCCESS;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  AUTODDL_ROUTE(MPI_Comm_set_errhandler(comm, errhandler));
  (void)comm;
  (void)errhandler;
  return MPI_SUCCESS; // TCP errors stop the job with a message (Bootstrap.h)
}

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  AUTODDL_ROUTE(MPI_Comm_rank(comm, rank));
  *rank = info(comm, "MPI_Comm_rank").group.me;
  return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
  AUTODDL_ROUTE(MPI_Comm_size(comm, size));
  *size = info(comm, "MPI_Comm_size").group.size();
  return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  Progress p("MPI_Comm_split");
  AUTODDL_ROUTE(MPI_Comm_split(comm, color, key, newcomm));
  CommInfo &parent = info(comm, "MPI_Comm_split");
  const int mine[2] = {color, key};
  const auto all = World::allgather(parent.group, mine, sizeof mine);
  const int split = parent.splits++;
  if (color == MPI_UNDEFINED) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  // Members: the same color, ordered by (key, rank in the parent).
  std::vector<std::pair<std::pair<int, int>, int>> members;
  for (int i = 0; i < parent.group.size(); ++i) {
    int ck[2];
    std::memcpy(ck, all[size_t(i)].data(), sizeof ck);
    if (ck[0] == color)
      members.push_back({{ck[1], i}, parent.group.ranks[size_t(i)]});
  }
  std::sort(members.begin(), members.end());
  CommInfo c;
  // The members agree on (parent, split, color): mix them into the context.
  uint64_t ctx = parent.group.ctx * 0x9E3779B97F4A7C15ull + uint64_t(split);
  ctx = (ctx ^ (ctx >> 29)) * 0xBF58476D1CE4E5B9ull + uint64_t(color) + 2;
  c.group.ctx = ctx ^ (ctx >> 32);
  for (size_t i = 0; i < members.size(); ++i) {
    c.group.ranks.push_back(members[i].second);
    if (members[i].second == World::rank())
      c.group.me = int(i);
  }
  *newcomm = new_handle<MPI_Comm>();
  comms()[*newcomm] = std::move(c);
  return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm) {
  AUTODDL_ROUTE(MPI_Comm_free(comm));
  comms().erase(*comm);
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm) {
  Progress p("MPI_Barrier");
  AUTODDL_ROUTE(MPI_Barrier(comm));
  World::barrier(info(comm, "MPI_Barrier").group);
  return MPI_SUCCESS;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
              MPI_Comm comm) {
  Progress p("MPI_Bcast");
  AUTODDL_ROUTE(MPI_Bcast(buffer, count, datatype, root, comm));
  const Group &g = info(comm, "MPI_Bcast").group;
  const size_t bytes = size_t(count) * type_size(datatype, "MPI_Bcast");
  std::vector<char> data;
  if (g.me == root)
    data.assign(static_cast<char *>(buffer),
                static_cast<char *>(buffer) + bytes);
  World::bcast(g, root, data);
  if (data.size() != bytes)
    misuse("MPI_Bcast: the root sent " + std::to_string(data.size()) +
           " bytes, this rank expects " + std::to_string(bytes));
  if (g.me != root)
    std::memcpy(buffer, data.data(), bytes);
  return MPI_SUCCESS;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Progress p("MPI_Allreduce");
  AUTODDL_ROUTE(MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm));
  const Group &g = info(comm, "MPI_Allreduce").group;
  const size_t bytes = size_t(count) * type_size(datatype, "MPI_Allreduce");
  const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  auto all = World::gather(g, 0, in, bytes);
  std::vector<char> result;
  if (g.me == 0) {
    result = all[0];
    for (int i = 1; i < g.size(); ++i) {
      if (all[size_t(i)].size() != bytes)
        misuse("MPI_Allreduce: members disagree on the count");
      reduce(result.data(), all[size_t(i)].data(), count, datatype, op);
    }
  }
  World::bcast(g, 0, result);
  std::memcpy(recvbuf, result.data(), bytes);
  return MPI_SUCCESS;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm) {
  Progress p("MPI_Allgather");
  AUTODDL_ROUTE(MPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                              recvtype, comm));
  const Group &g = info(comm, "MPI_Allgather").group;
  const size_t each = size_t(recvcount) * type_size(recvtype, "MPI_Allgather");
  const void *in = sendbuf == MPI_IN_PLACE
                       ? static_cast<char *>(recvbuf) + size_t(g.me) * each
                       : sendbuf;
  const size_t bytes =
      sendbuf == MPI_IN_PLACE
          ? each
          : size_t(sendcount) * type_size(sendtype, "MPI_Allgather");
  const auto all = World::allgather(g, in, bytes);
  for (int i = 0; i < g.size(); ++i) {
    if (all[size_t(i)].size() != each)
      misuse("MPI_Allgather: members disagree on the count");
    std::memcpy(static_cast<char *>(recvbuf) + size_t(i) * each,
                all[size_t(i)].data(), each);
  }
  return MPI_SUCCESS;
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int displs[],
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  Progress p("MPI_Gatherv");
  AUTODDL_ROUTE(MPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                            displs, recvtype, root, comm));
  const Group &g = info(comm, "MPI_Gatherv").group;
  const bool inPlace = sendbuf == MPI_IN_PLACE; // the root's block is there
  const size_t bytes =
      inPlace ? 0 : size_t(sendcount) * type_size(sendtype, "MPI_Gatherv");
  const auto all = World::gather(g, root, sendbuf, bytes);
  if (g.me != root)
    return MPI_SUCCESS;
  const size_t unit = type_size(recvtype, "MPI_Gatherv");
  for (int i = 0; i < g.size(); ++i) {
    if (i == root && inPlace)
      continue;
    if (all[size_t(i)].size() != size_t(recvcounts[i]) * unit)
      misuse("MPI_Gatherv: rank " + std::to_string(i) + " sent " +
             std::to_string(all[size_t(i)].size()) +
             " bytes, the root expects " +
             std::to_string(size_t(recvcounts[i]) * unit));
    std::memcpy(static_cast<char *>(recvbuf) + size_t(displs[i]) * unit,
                all[size_t(i)].data(), all[size_t(i)].size());
  }
  return MPI_SUCCESS;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm) {
  Progress p("MPI_Gather");
  AUTODDL_ROUTE(MPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                           recvtype, root, comm));
  const int n = info(comm, "MPI_Gather").group.size();
  std::vector<int> counts(size_t(n), recvcount);
  std::vector<int> displs(size_t(n), 0);
  for (int i = 0; i < n; ++i)
    displs[size_t(i)] = i * recvcount;
  return MPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, counts.data(),
                     displs.data(), recvtype, root, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm, MPI_Request *request) {
  Progress p("MPI_Isend");
  AUTODDL_ROUTE(MPI_Isend(buf, count, datatype, dest, tag, comm, request));
  const Group &g = info(comm, "MPI_Isend").group;
  // Sent now: the runtime's non-blocking sends are a few ints that the peer
  // receives in the same phase, so they fit in the socket buffers.
  World::send(g.ranks.at(size_t(dest)), g.ctx, tag, buf,
              size_t(count) * type_size(datatype, "MPI_Isend"));
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
             MPI_Comm comm, MPI_Status *status) {
  Progress p("MPI_Recv");
  AUTODDL_ROUTE(MPI_Recv(buf, count, datatype, source, tag, comm, status));
  const Group &g = info(comm, "MPI_Recv").group;
  const std::vector<char> data =
      World::recv(g.ranks.at(size_t(source)), g.ctx, tag);
  if (data.size() > size_t(count) * type_size(datatype, "MPI_Recv"))
    misuse("MPI_Recv: message of " + std::to_string(data.size()) +
           " bytes truncated");
  std::memcpy(buf, data.data(), data.size());
  if (status != MPI_STATUS_IGNORE) {
    status->MPI_SOURCE = source;
    status->MPI_TAG = tag;
    status->MPI_ERROR = MPI_SUCCESS;
  }
  return MPI_SUCCESS;
}

int MPI_Waitall(int count, MPI_Request array_of_requests[],
                MPI_Status *array_of_statuses) {
  Progress p("MPI_Waitall");
  AUTODDL_ROUTE(MPI_Waitall(count, array_of_requests, array_of_statuses));
  (void)array_of_statuses;        // the runtime passes MPI_STATUSES_IGNORE
  for (int i = 0; i < count; ++i) // every send completed when it was posted
    array_of_requests[i] = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
