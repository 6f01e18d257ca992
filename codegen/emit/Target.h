//===- Target.h - what a backend's program offers the emitters --*- C++ -*-===//
//
// The emitters ask the target, not the backend's name, what differs between
// the CPU + MPI program and the CUDA + NCCL one: where a kernel reads a
// parameter, the element type of activation buffers, how an op saves what
// its backward needs, where scratch buffers live. CpuTarget.cpp and
// CudaTarget.cpp hold the two.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace autoddl::codegen::emit {

struct Target {
  const char *name; // "cpu" / "cuda", as --backend spells it
  // The Param member a kernel reads a parameter's value from: the fp32
  // master copy on the CPU, the act_t working copy on the GPU.
  const char *paramValue;
  // Activation buffers hold act_t (bf16, or fp32 with --fp32) and
  // statistics fp32 (Member::stat); on the CPU everything is float.
  bool actBuffers;
  // The element type of activation buffers, and a stage struct's member
  // declaration: fmt format with the named arguments type, name, size and
  // comment.
  const char *actType;
  const char *bufferDecl;
  // A pipeline transfer of one buffer: fmt format with the buffer, its
  // elements, the peer's stage, the boundary, the tag's kind and its index.
  const char *sendFormat;
  const char *recvFormat;
  // Each call of a step is wrapped in an OpScope for --profile
  // (backends/cuda/OpProfile.h, profileScopes).
  bool opProfiling;
  // attention saves the log-sum-exp per row (FlashAttention-style) rather
  // than the probabilities [B, H, T, T], and its backward may store its
  // input gradients.
  bool attentionSavesLse;
  // The loss is summed on the device at the end of the step (sum_to_host)
  // rather than by each forward pass on the host.
  bool lossSumOnDevice;
  // Scratch buffers of a backward (partial sums before their all-reduce)
  // are stage members, zeroed where used (no allocation in a captured step),
  // rather than std::vector locals.
  bool scratchInStage;
};

const Target &cpuTarget();
const Target &cudaTarget();

} // namespace autoddl::codegen::emit
