// Placeholder until the Import command lands (being written in this session).
#include "tools/autoddl/Commands.h"
#include <CLI/CLI.hpp>
namespace autoddl::cli {
void registerImportCommand(CLI::App &app) { (void)app; }
} // namespace autoddl::cli
