// mpiCheck(call): runs an MPI call and, when it fails, prints the MPI error
// string with the file and line of the call and aborts every rank (llm.c's
// cudaCheck, for MPI). Communicators made by the runtime return errors
// (MPI_ERRORS_RETURN) so that this check sees them.
#ifndef AUTODDL_BACKENDS_HOST_MPICHECK_H
#define AUTODDL_BACKENDS_HOST_MPICHECK_H

#include <cstdio>
#include <mpi.h>

namespace autoddl::rt {

inline void mpi_check(int rc, const char *file, int line) {
  if (rc == MPI_SUCCESS)
    return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  std::fprintf(stderr, "[MPI ERROR] at file %s:%d: %s\n", file, line, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

} // namespace autoddl::rt

#define mpiCheck(call) ::autoddl::rt::mpi_check((call), __FILE__, __LINE__)

namespace autoddl::rt {

/// MPI_Comm_size / MPI_Comm_rank, checked (both runtimes use them).
inline int comm_size(MPI_Comm comm) {
  int s = 0;
  mpiCheck(MPI_Comm_size(comm, &s));
  return s;
}
inline int comm_rank(MPI_Comm comm) {
  int r = 0;
  mpiCheck(MPI_Comm_rank(comm, &r));
  return r;
}

} // namespace autoddl::rt

#endif // AUTODDL_BACKENDS_HOST_MPICHECK_H
