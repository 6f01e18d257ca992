//===- ProgramOptions.cpp - options shared by the program commands --------===//
//
// codegen, run, verify and validate generate or run a plan's program: their
// --backend, --fp32, --model and --weights mean the same everywhere and are
// described once here.
//
//===----------------------------------------------------------------------===//
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>

namespace autoddl::cli {

void addBackendOptions(CLI::App &cmd, std::string &backend, bool &fp32) {
  cmd.add_option("--backend", backend,
                 "cpu (default; C++ + MPI + BLAS) or cuda (CUDA + NCCL + MPI, "
                 "one GPU a rank)");
  cmd.add_flag("--fp32", fp32,
               "cuda: fp32 activations instead of bf16 (matches the cpu "
               "backend tightly)");
}

void addPlanModelOption(CLI::App &cmd, std::string &model) {
  cmd.add_option("--model", model,
                 "the model file the plan was made from (default: the "
                 "plan's model name, a built-in model)");
}

void addWeightsOption(CLI::App &cmd, std::string &weights) {
  cmd.add_option("--weights", weights,
                 "onnx: start from the ONNX model's exported values (written "
                 "to weights.safetensors, the program's --init; default: the "
                 "program's seeded initialisation)");
}

} // namespace autoddl::cli
