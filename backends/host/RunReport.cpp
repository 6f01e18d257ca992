// Gathered run metrics and traces (see RunReport.h).
#include "backends/host/RunReport.h"

#include "backends/common/FileIo.h"
#include "backends/host/CommStats.h"
#include "backends/host/MpiCheck.h"

#include <vector>

namespace autoddl::rt {

void gather_run_metrics(RunMetrics &m, int64_t my_peak_bytes, MPI_Comm comm) {
  m.peak_memory_bytes.assign(size_t(comm_size(comm)), 0);
  mpiCheck(MPI_Allgather(&my_peak_bytes, 1, MPI_INT64_T,
                         m.peak_memory_bytes.data(), 1, MPI_INT64_T, comm));
  m.collectives = comm_stats();
}

void write_run_metrics(RunMetrics &m, const std::string &path, MPI_Comm comm) {
  gather_run_metrics(m, peak_resident_bytes(), comm);
  if (comm_rank(comm) == 0)
    write_metrics_json(path, m);
  mpiCheck(MPI_Barrier(comm)); // the file exists when any rank returns
}

void write_run_trace(const TraceRecorder &trace, const std::string &path,
                     MPI_Comm comm) {
  write_trace_fragments(trace.events_json(comm_rank(comm)), path, comm);
}

void write_trace_fragments(const std::string &mine, const std::string &path,
                           MPI_Comm comm) {
  const int p = comm_size(comm), r = comm_rank(comm);
  int len = int(mine.size());
  std::vector<int> lens(static_cast<size_t>(p)),
      offsets(static_cast<size_t>(p), 0);
  mpiCheck(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm));
  std::string all;
  if (r == 0) {
    for (int q = 1; q < p; ++q)
      offsets[q] = offsets[q - 1] + lens[q - 1];
    all.resize(size_t(offsets[p - 1] + lens[p - 1]));
  }
  mpiCheck(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                       offsets.data(), MPI_CHAR, 0, comm));
  if (r == 0) {
    std::vector<std::string> fragments;
    for (int q = 0; q < p; ++q)
      fragments.push_back(all.substr(size_t(offsets[q]), size_t(lens[q])));
    write_file_atomically(path, trace_document(fragments));
  }
  mpiCheck(MPI_Barrier(comm));
}

} // namespace autoddl::rt
