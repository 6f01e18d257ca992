// Placeholder until the Cost command lands (being written in this session).
#include "tools/autoddl/Commands.h"
#include <CLI/CLI.hpp>
namespace autoddl::cli {
void registerCostCommand(CLI::App &app) { (void)app; }
} // namespace autoddl::cli
