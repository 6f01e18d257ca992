# The runtime sources both backends' standalone builds compile (StandaloneRuntime.cmake of
# backends/cpu and backends/cuda): backends/common, the MPI host layer (backends/host) and the
# harness's shared host part (backends/common/harness). Sets AUTODDL_SHARED_RUNTIME_SOURCES from
# ${_rt}, the directory holding the runtime's backends/.
set(AUTODDL_SHARED_RUNTIME_SOURCES
  ${_rt}/common/Init.cpp ${_rt}/common/Data.cpp ${_rt}/common/CommunityGraph.cpp
  ${_rt}/common/GraphFile.cpp ${_rt}/common/UserGraph.cpp ${_rt}/common/MiniJson.cpp
  ${_rt}/common/FileIo.cpp ${_rt}/common/Safetensors.cpp ${_rt}/common/Metrics.cpp
  ${_rt}/common/Trace.cpp
  ${_rt}/host/Mesh.cpp ${_rt}/host/Checkpoint.cpp ${_rt}/host/RunReport.cpp
  ${_rt}/host/CommStats.cpp
  ${_rt}/common/harness/Spec.cpp ${_rt}/common/harness/Options.cpp
  ${_rt}/common/harness/ParamTable.cpp ${_rt}/common/harness/DataOrder.cpp
  ${_rt}/common/harness/Pipeline.cpp ${_rt}/common/harness/ProgramRun.cpp
  ${_rt}/common/harness/RunCheckpoint.cpp ${_rt}/common/harness/Anomalies.cpp
  ${_rt}/common/harness/CompressedCheckpoint.cpp
  ${_rt}/common/CheckpointCompress.cpp)
