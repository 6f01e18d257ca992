//===- Target.h - what a backend's program offers the emitters --*- C++ -*-===//
//
// The emitters ask the target, not the backend's name, what differs between
// the CPU + MPI program and the CUDA + NCCL one: where a kernel reads a
// parameter, the element type of activation buffers, how an op saves what
// its backward needs, where scratch buffers live, the program's includes,
// and the step's glue around the stages (gradient zeroing and buckets, the
// step graph, timing, freeing). CpuTarget.cpp and CudaTarget.cpp hold the
// two.
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
  // The loss is summed and the accuracy counted on the device, read after
  // the step (sum_to_host, counter_to_host), rather than by each forward
  // pass on the host: nothing in the step waits for the host.
  bool lossSumOnDevice;
  // Scratch buffers of a backward (partial sums before their all-reduce)
  // are stage members, zeroed where used (no allocation in a captured step),
  // rather than std::vector locals.
  bool scratchInStage;
  // The program's includes (the backend's harness and the kernels its stages
  // call), those a classification model adds, and the standard headers; then
  // what the anonymous namespace declares beyond using the runtime's
  // namespaces (Emitter::prelude).
  const char *includes;
  const char *imageIncludes;
  const char *stdIncludes;
  const char *extraUsings;
  // Forward and backward may run as one captured CUDA graph (StepGraph.h):
  // a stage's inputs load in their own stage<k>_load_inputs, which the step
  // runs ahead of the graph, and the program has the graph's glue
  // (kStepGraphable, preload_inputs).
  bool stepGraph;
  // Clearing a token_type_ids buffer (one segment): fmt format with its name.
  const char *zeroTokenTypes;
  // A stage's gradients are cleared by one ZeroSet launch, built at the first
  // call, that leaves out those a receive or a storing writer overwrites;
  // else by a std::fill each.
  bool gradZeroSet;
  // A backward instruction's call of stage<k>_zero_grads (fmt format with the
  // stage), and an instruction's compute timed (fmt format with the named
  // arguments call and letter): on the host clock, or by CUDA events skipped
  // while the pipeline's transfers are being recorded.
  const char *zeroGradsCall;
  const char *timedCall;
  // local_loss_sum's loop over the last stage's micro-batches: fmt format
  // with the stage's vector.
  const char *lossSumLoop;
  // Gradients all-reduce in buckets as the backward completes them (GradSync:
  // grad_sync.ready calls, configure_grad_sync).
  bool gradBuckets;
  // Device buffers are freed before the device context is (free_stages,
  // free_params).
  bool freesBuffers;
  // metrics.json reports the MFU: the plan's model FLOPs per step and the
  // GPU's peak.
  bool reportsMfu;
  // A parameter may be held padded (a vocabulary padded to 64 rows per rank):
  // device_numel.
  bool paddedParams;
  // A K-FAC plan's include: the backend's KfacRun (kfac_curvature_A / _G on
  // the target's buffers, KfacProgram).
  const char *kfacInclude;
  // Clearing one buffer on the program's stream (a recomputed layer's
  // scratch gradients): fmt format with the buffer.
  const char *zeroBuffer;
  // The runtime has kfac_phase / kfac_reduce / kfac_invert: a refresh
  // cycle's reductions and inversions run in the bubbles the plan placed
  // them in (else all at the refresh step's end).
  bool kfacBubbleItems;
  // A line after each step of a stage's forward and backward ("": none).
  // The CPU program tests its pending pipeline sends there (progress_sends):
  // without a single-copy transport (Open MPI with
  // btl_vader_single_copy_mechanism=none, as container images often set) a send
  // larger than the eager limit moves only while its sender is inside MPI, so
  // the receiver would wait for the sender's whole next forward or backward.
  const char *progressCall;
  // Copying n act_t elements on the program's stream: fmt format with
  // {dst}, {src} (pointers) and {n}.
  const char *copyElements;
  // An ONNX import's primitives run through the backend's device kernels
  // (backends/cuda/kernels/Primitive.h: operands as PrimRef, a constant's
  // values uploaded once by primitive_constant), else through
  // OnnxPrimitive.h's host templates on float.
  bool devicePrimitives;
};

const Target &cpuTarget();
const Target &cudaTarget();

} // namespace autoddl::codegen::emit
