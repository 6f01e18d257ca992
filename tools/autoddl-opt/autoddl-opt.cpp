//===- autoddl-opt.cpp - mlir-opt for the sbp dialect ---------------------===//
//
// Parses, verifies, transforms and prints sbp modules:
//   autoddl-opt model.mlir --sbp-assign-data-parallel --sbp-insert-boxing
//
// Before MLIR's parser sees a file, the file passes the checks every autoddl
// input passes (support/UserFiles.h: a regular file of bounded size, not a FIFO
// or /dev/zero) and a nesting check: MLIR's recursive-descent parser has no
// depth limit, so 100,000 nested regions or attributes would overflow the
// stack.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/Passes.h"
#include "ir/dialect/SbpDialect.h"
#include "support/UserFiles.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdio>
#include <optional>
#include <string>
#include <sys/stat.h>

namespace {

/// Brackets of any kind open at once; real modules stay far below (a few per
/// nested region).
constexpr int kMaxMlirNesting = 1000;

/// "file:line:col: nested deeper than ..." when `text` nests brackets ((, [, {,
/// <) deeper than kMaxMlirNesting outside strings and comments.
std::optional<std::string> nestingProblem(llvm::StringRef text,
                                          const std::string &path) {
  int depth = 0, line = 1, col = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
    } else if (c == '"') { // skip the string, honouring escapes
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > kMaxMlirNesting)
        return path + ":" + std::to_string(line) + ":" + std::to_string(col) +
               ": nested deeper than " + std::to_string(kMaxMlirNesting) +
               " levels";
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::optional<std::string> inputProblem(const std::string &path) {
  if (path == "-")
    return std::nullopt;
  if (auto problem = autoddl::userFileProblem(path, "MLIR"))
    return problem;
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return path + ": cannot read MLIR file: " + buffer.getError().message();
  return nestingProblem((*buffer)->getBuffer(), path);
}

/// An output that exists must be a regular file (or a link to one) other than
/// the input: never a device, a FIFO or the file being read.
std::optional<std::string> outputProblem(const std::string &path,
                                         const std::string &input) {
  struct stat out {
  }, in{};
  if (path == "-" || ::stat(path.c_str(), &out) != 0)
    return std::nullopt;
  if (!S_ISREG(out.st_mode))
    return path + ": is not a regular file; refusing to write output there";
  if (input != "-" && ::stat(input.c_str(), &in) == 0 &&
      in.st_dev == out.st_dev && in.st_ino == out.st_ino)
    return path + ": is also the input; refusing to overwrite it";
  return std::nullopt;
}

} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<autoddl::sbp::SbpDialect, mlir::func::FuncDialect>();
  autoddl::sbp::registerSbpPasses();
  // Generic cleanups (-canonicalize, -cse, -symbol-dce) to use alongside.
  mlir::registerTransformsPasses();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "autoddl-opt: the sbp dialect and its passes\n", registry);
  std::optional<std::string> problem = inputProblem(input);
  if (!problem)
    problem = outputProblem(output, input);
  if (problem) {
    std::fprintf(stderr, "autoddl-opt: error: %s\n",
                 autoddl::capMessage(*problem).c_str());
    return 1;
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
