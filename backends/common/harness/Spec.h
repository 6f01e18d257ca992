//===- Spec.h - what a generated program tells the harness about its plan -===//
//
// The generated train.cpp keeps its plan's constants as constexpr values for
// its stage code, and hands the same values to the harness (the compiled,
// fixed part of every program: flags, data, parameters, optimizer,
// checkpoints, metrics, the step loop) as one ProgramSpec before it runs.
// docs/codegen.md "Generated program and harness".
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_SPEC_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_SPEC_H

#include <cstdint>

namespace autoddl::rt::harness {

/// What a program trains on: tokens (a language model), synthetic class
/// prototypes (a classifier: mlp, vgg) or a planted-community graph (gcn, gat).
enum class DataKind { Tokens, Classes, Graph };

struct ProgramSpec {
  const char *model_name = "";
  // The Hugging Face config.json the model was imported from ("" for other
  // models): written beside each checkpoint, so from_pretrained loads it.
  const char *hf_config = "";
  int64_t pp = 1, dp = 1, tp = 1;
  bool tensor_inner = true; // mesh axes (pp, dp, tp); else (pp, tp, dp)
  int64_t stages = 1, micro_batches = 1, micro_batch = 1;
  int64_t global_batch = 1, seq = 1, vocab = 1;
  bool chimera = false;
  DataKind data = DataKind::Tokens;
  int zero = 0;                 // ZeRO stage (0 or 1)
  bool loss_rows_on_tp = false; // the loss split by rows over tp
  int max_boundary = 1;         // tensors crossing one stage boundary
  int64_t loss_count = 1;       // positions the loss is the mean over
  int64_t held_out_count = 0;   // a graph model's held-out nodes
  // Classifiers and graph models: samples per micro-batch (classifiers),
  // nodes (graph models), features of one sample or node, classes.
  int64_t class_batch = 0, nodes = 0, features = 0, classes = 0;
  // CUDA classifiers whose convolutions read the images channels-last
  // (codegen/emit/ChannelsLast.cpp): their channels C, the samples drawn
  // [class_batch, H, W, C]; 0: as the model's input ([class_batch, C, H, W]).
  int64_t images_channels_last = 0;
  // Graph models: the adjacency's stored entries the plan priced (self loops
  // included), which the generated graph has.
  int64_t graph_nnz = 0;
  // CUDA graph models whose ops read the adjacency's column indices directly
  // (GATConv's kernels, backends/cuda/kernels/GatAttention.h): the device Csr
  // keeps them ([nnz] int32), which the others do without.
  bool graph_columns = false;
  // CUDA only: the MFU's numerator and denominator, and whether the step
  // may run as one CUDA graph.
  double model_flops_per_step = 0, peak_flops_per_gpu = 0;
  bool step_graphable = false;
  // The plan's predicted peak of this backend's measured memory (CUDA: bytes
  // the allocation wrapper counts; CPU: host bytes), 0 when unknown: named
  // in an out-of-memory message and written to metrics.json.
  double predicted_peak_bytes = 0;

  int64_t ranks() const { return pp * dp * tp; }
  bool graph_model() const { return data == DataKind::Graph; }
  /// Classifiers and graph models report an accuracy beside the loss.
  bool reports_accuracy() const { return data != DataKind::Tokens; }
};

/// The spec of the running program (set once by the backend's run_program;
/// the pipeline and data helpers the stage code calls read it).
const ProgramSpec &program_spec();
void set_program_spec(const ProgramSpec &spec);

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_SPEC_H
