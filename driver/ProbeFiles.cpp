//===- ProbeFiles.cpp - the probe project's sources, embedded -------------===//
//
// codegen/EmbedRuntime.cmake writes ProbeFiles.inc from
// backends/cuda/calibrate/probe/ (see CMakeLists.txt); its table is renamed
// here so that it links beside the runtime table codegen embeds the same way.
//
//===----------------------------------------------------------------------===//
#define kRuntimeFiles kProbeFiles
#define kNumRuntimeFiles kNumProbeFiles
#include "driver/ProbeFiles.inc"
