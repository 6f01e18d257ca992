//===- CodegenCommand.cpp - `autoddl codegen`: plan -> training project --===//
//
//   autoddl codegen plan.json --backend cpu|cuda -o DIR [--model MODEL]
//   [--fp32] [--weights onnx]
//
// Writes a self-contained project (docs/codegen.md): CMakeLists.txt, train.cpp,
// plan.json and the runtime sources (CPU + MPI, or CUDA + NCCL + MPI; --fp32
// makes the CUDA project build with fp32 activations by default). Refuses a
// non-empty DIR that is not a previous autoddl project. --model names the model
// when plan.json was made from a model file (the plan records the model's name
// only). --weights onnx also writes DIR/weights.safetensors, the ONNX
// model's exported values, for the program's --init.
//
//===----------------------------------------------------------------------===//
#include "codegen/CpuCodegen.h"
#include "driver/Driver.h"
#include "planner/PlanJson.h"
#include "support/UserError.h"
#include "tools/autoddl/Commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace autoddl::cli {

namespace {

struct CodegenArgs {
  std::string plan, backend = "cpu", output, model, weights;
  bool fp32 = false;
};

void run(const CodegenArgs &a) {
  const codegen::Backend backend = codegen::parseBackend(a.backend);
  if (a.fp32 && backend != codegen::Backend::Cuda)
    throw UserError("--fp32: only the cuda backend has a bf16 mode (the cpu "
                    "program is fp32)");
  driver::checkWeightsFlag(a.weights);
  planner::Plan plan = planner::readPlanFile(a.plan);
  ModelGraph g = codegen::validatedModelForPlan(plan, a.model);
  codegen::ProjectFiles files = codegen::generateProject(
      plan, g, codegen::readTextFile(a.plan), backend, a.fp32);
  codegen::writeProject(a.output, files);
  std::string init;
  if (!a.weights.empty()) {
    driver::writeOnnxWeights(plan, a.model, a.output + "/weights.safetensors");
    init = " --init " + a.output + "/weights.safetensors";
  }
  std::printf(
      "wrote %s: train.cpp, CMakeLists.txt, plan.json and %zu runtime "
      "files%s\nbuild: cmake -S %s -B %s/build && cmake --build %s/build\n"
      "run:   mpirun -np %d %s/build/train --steps 20%s\n",
      a.output.c_str(), files.size() - 4,
      init.empty() ? "" : ", weights.safetensors", a.output.c_str(),
      a.output.c_str(), a.output.c_str(),
      plan.knobs.pp * plan.knobs.dp * plan.knobs.tp, a.output.c_str(),
      init.c_str());
}

} // namespace

void registerCodegenCommand(CLI::App &app) {
  auto args = std::make_shared<CodegenArgs>();
  CLI::App *cmd = app.add_subcommand(
      "codegen", "generate a self-contained training project from plan.json");
  cmd->add_option("plan", args->plan, "plan.json (autoddl plan -o)")
      ->required();
  addBackendOptions(*cmd, args->backend, args->fp32);
  cmd->add_option("-o,--output", args->output, "project directory")->required();
  addPlanModelOption(*cmd, args->model);
  addWeightsOption(*cmd, args->weights);
  cmd->callback([args] { run(*args); });
}

} // namespace autoddl::cli
