// The check of an NCCL call, shared by the comm layer (Comm.h) and the K-FAC
// library (kfac/KfacInternal.cuh), which report a failure their own way.
#ifndef AUTODDL_BACKENDS_CUDA_NCCLCHECK_H
#define AUTODDL_BACKENDS_CUDA_NCCLCHECK_H

#include <nccl.h>

/// Runs the NCCL call x; a result other than success (ncclInProgress counts
/// as success: a non-blocking communicator's call still under way) goes to
/// `fail`, a [[noreturn]] function of (result, call text, file, line).
#define AUTODDL_NCCL_CHECK_WITH(fail, x)                                       \
  do {                                                                         \
    const ncclResult_t autoddl_nr_ = (x);                                      \
    if (autoddl_nr_ != ncclSuccess && autoddl_nr_ != ncclInProgress)           \
      fail(autoddl_nr_, #x, __FILE__, __LINE__);                               \
  } while (0)

#endif // AUTODDL_BACKENDS_CUDA_NCCLCHECK_H
