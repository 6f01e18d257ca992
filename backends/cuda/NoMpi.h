// A stand-in for <mpi.h> where there is no MPI: StandaloneRuntime.cmake copies
// it to <build>/autoddl_no_mpi/mpi.h and defines AUTODDL_NO_MPI when MPI is not
// found (or -DAUTODDL_NO_MPI=ON). It declares only the types, constants and
// calls the CUDA runtime and the generated program use; MpiRoute.cpp serves
// them over the TCP world of Bootstrap.h, so such a build starts under torchrun
// (or alone), never under mpirun.
#ifndef AUTODDL_BACKENDS_CUDA_NOMPI_H
#define AUTODDL_BACKENDS_CUDA_NOMPI_H

#include <stddef.h> // size_t, as mpi.h brings it

#ifdef __cplusplus
extern "C" {
#endif

typedef struct autoddl_mpi_comm *MPI_Comm;
typedef struct autoddl_mpi_datatype *MPI_Datatype;
typedef struct autoddl_mpi_op *MPI_Op;
typedef struct autoddl_mpi_request *MPI_Request;
typedef struct autoddl_mpi_errhandler *MPI_Errhandler;
typedef struct {
  int MPI_SOURCE, MPI_TAG, MPI_ERROR;
} MPI_Status;

// Predefined handles: small integers no allocated object has.
#define MPI_COMM_NULL ((MPI_Comm)0)
#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_INT ((MPI_Datatype)1)
#define MPI_INT64_T ((MPI_Datatype)2)
#define MPI_DOUBLE ((MPI_Datatype)3)
#define MPI_FLOAT ((MPI_Datatype)4)
#define MPI_CHAR ((MPI_Datatype)5)
#define MPI_BYTE ((MPI_Datatype)6)
#define MPI_DOUBLE_INT ((MPI_Datatype)7)
#define MPI_SUM ((MPI_Op)1)
#define MPI_MAX ((MPI_Op)2)
#define MPI_MIN ((MPI_Op)3)
#define MPI_MAXLOC ((MPI_Op)4)
#define MPI_REQUEST_NULL ((MPI_Request)0)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)1)
#define MPI_IN_PLACE ((void *)1)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_STATUSES_IGNORE ((MPI_Status *)0)
#define MPI_SUCCESS 0
#define MPI_UNDEFINED (-32766)
#define MPI_MAX_ERROR_STRING 256

int MPI_Init(int *argc, char ***argv);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
              MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm);
int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int displs[],
                MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
             MPI_Comm comm, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request array_of_requests[],
                MPI_Status *array_of_statuses);

#ifdef __cplusplus
}
#endif

#endif // AUTODDL_BACKENDS_CUDA_NOMPI_H
