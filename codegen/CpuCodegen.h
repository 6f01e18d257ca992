//===- CpuCodegen.h - plan + model -> a standalone CPU+MPI project -------===//
//
// Edge code (no MLIR): turns a plan (planner/Plan.h) and the model it was made
// for (ir/import/ModelGraph.h) into the files of a self-contained training
// project (DESIGN §6, docs/codegen.md): CMakeLists.txt, train.cpp, plan.json
// and copies of the runtime (backends/common, backends/cpu, and for the CUDA
// backend backends/cuda). Emission is
// deterministic: the same plan and model give the same bytes. Bad input (a
// model op or a plan the CPU backend cannot run) throws autoddl::UserError.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/ModelGraph.h"
#include "planner/Plan.h"

#include <map>
#include <string>

namespace autoddl::codegen {

/// Relative path -> file contents, in path order.
using ProjectFiles = std::map<std::string, std::string>;

/// The two programs one emitter writes: CPU + MPI, and CUDA + NCCL + MPI.
enum class Backend { Cpu, Cuda };

/// "cpu" / "cuda" -> Backend; UserError for anything else.
Backend parseBackend(const std::string &name);

/// Why `backend`'s programs do not run `model` whatever the plan (an op kind
/// it lacks, a model it does not feed), or "". No plan changes this answer;
/// what a plan changes is planner/Runnable.h's.
std::string backendRefusal(const ModelGraph &model, Backend backend);

/// The generated training program alone (train.cpp). Throws UserError with
/// backendRefusal's or planner::RunnableConfigurations's reason first.
std::string emitTrainProgram(const planner::Plan &plan, const ModelGraph &model,
                             Backend backend);
std::string emitCpuTrainProgram(const planner::Plan &plan,
                                const ModelGraph &model);

/// Every file of the project. `planText` is written as plan.json. `fp32`
/// (cuda only): the project builds in the --fp32 mode by default.
ProjectFiles generateProject(const planner::Plan &plan, const ModelGraph &model,
                             const std::string &planText, Backend backend,
                             bool fp32 = false);
ProjectFiles generateCpuProject(const planner::Plan &plan,
                                const ModelGraph &model,
                                const std::string &planText);

/// The runtime sources a project of `backend` carries, embedded into autoddl
/// at build time: backends/common/** and backends/cpu/** (cpu), plus
/// backends/cuda/* and backends/cuda/kernels/* (cuda).
ProjectFiles runtimeSources(Backend backend = Backend::Cpu);

/// The CPU runtime alone as a project: runtimeSources(Cpu) laid out as in a
/// generated project, and a CMakeLists.txt that builds only the library with
/// AUTODDL_EXPORT_RUNTIME=ON, for projects configured with
/// AUTODDL_PREBUILT_RUNTIME naming its build directory
/// (backends/cpu/StandaloneRuntime.cmake; driver/Build.cpp builds it once per
/// cache).
ProjectFiles cpuRuntimeProject();

/// Writes `files` under `dir`. Refuses (UserError, nothing written) when `dir`
/// exists, is not empty and is not a previous autoddl project (it has no
/// .autoddl-project marker). Files are written atomically; stale generated
/// files of a previous project are replaced.
void writeProject(const std::string &dir, const ProjectFiles &files);

/// The model a plan loads when no --model is given: the file it was made from
/// (plan.modelSource, absolute) or its built-in name. Throws UserError naming
/// the plan and the file when the file cannot be read (moved, removed).
std::string planModelSource(const planner::Plan &plan);

/// Whether planModelSource(plan) can be read here (a built-in name or a
/// readable file): commands that can do without the model (inspect, validate
/// --measured) check the plan against it only then.
bool planModelAtHand(const planner::Plan &plan);

/// The imported model a plan was made for: re-imports `model` (the --model
/// override; default planModelSource) at the plan's micro-batch size and
/// sequence length.
ModelGraph modelForPlan(const planner::Plan &plan,
                        const std::string &model = "");

/// modelForPlan, then the plan checked against that model
/// (planner::validatePlanForModel): what every command that runs or generates
/// a plan read from a file loads, so a plan runs only the model it was made
/// for. Derived plans (verify's single-rank reference) use modelForPlan.
ModelGraph validatedModelForPlan(const planner::Plan &plan,
                                 const std::string &model = "");

/// A whole file; UserError naming it when it cannot be read.
std::string readTextFile(const std::string &path);

} // namespace autoddl::codegen
