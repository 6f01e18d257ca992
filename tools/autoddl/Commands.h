//===- Commands.h - the autoddl subcommands ------------------------------===//
//
// Each subcommand lives in its own <Name>Command.cpp and registers itself on the
// CLI11 app. A command reports bad input by throwing autoddl::UserError; main()
// prints it as one line and exits 1.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace autoddl::cli {

void registerImportCommand(CLI::App &app);     // ImportCommand.cpp: model -> sbp IR, summary
void registerSimulateCommand(CLI::App &app);   // SimulateCommand.cpp: pipeline-schedule simulator
void registerCostCommand(CLI::App &app);       // CostCommand.cpp: collective / compute costs
void registerPlanCommand(CLI::App &app);       // PlanCommand.cpp: parallel-plan search -> plan.json
void registerInspectCommand(CLI::App &app);    // InspectCommand.cpp: plan tables, why-not, trace

void registerCodegenCommand(CLI::App &app);    // CodegenCommand.cpp: plan -> training project
void registerRunCommand(CLI::App &app);        // RunCommand.cpp: plan, generate, build, mpirun
void registerVerifyCommand(CLI::App &app);     // VerifyCommand.cpp: plan vs one rank, step by step
void registerCalibrateCommand(CLI::App &app);  // CalibrateCommand.cpp: measure GPUs -> cluster file
void registerValidateCommand(CLI::App &app);   // ValidateCommand.cpp: predicted vs measured

// The options that mean the same in every command generating or running a
// plan's program (ProgramOptions.cpp), with one help text each:
/// --backend (cpu or cuda) and --fp32.
void addBackendOptions(CLI::App &cmd, std::string &backend, bool &fp32);
/// --model: the model file the plan was made from.
void addPlanModelOption(CLI::App &cmd, std::string &model);
/// --weights: onnx, the ONNX model's exported values as the initial ones.
void addWeightsOption(CLI::App &cmd, std::string &weights);

} // namespace autoddl::cli
