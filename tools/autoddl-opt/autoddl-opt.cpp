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
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

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

/// Upstream flags whose value is a file MLIR writes (mlir-print-ir-tree-dir:
/// a folder): each must pass the checks -o passes (a reproducer written over
/// the input would destroy it).
/// log-actions-to and profile-actions-to take "-" for stderr.
constexpr const char *kOutputFlags[] = {
    "mlir-generate-reproducer", "mlir-pass-pipeline-crash-reproducer",
    "log-actions-to",           "profile-actions-to",
    "lto-pass-remarks-output",  "mlir-print-ir-tree-dir"};

/// The problem of the first output flag of argv whose file may not be
/// written: empty, not a regular file, the input, or -o's file.
std::optional<std::string> outputFlagProblem(int argc, char **argv,
                                             const std::string &input,
                                             const std::string &output) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--")
      break;
    if (arg.size() < 2 || arg[0] != '-')
      continue;
    arg.erase(0, arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (std::find_if(std::begin(kOutputFlags), std::end(kOutputFlags),
                     [&](const char *f) { return name == f; }) ==
        std::end(kOutputFlags))
      continue;
    std::string value;
    if (eq != std::string::npos)
      value = arg.substr(eq + 1);
    else if (i + 1 < argc)
      value = argv[++i];
    const std::string flag = "--" + name;
    if (value.empty())
      return flag + ": empty path";
    if (value == "-")
      continue;
    if (name == "mlir-print-ir-tree-dir") { // a folder MLIR fills with files
      struct stat st {};
      if (::stat(value.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
        return flag + " " + value + ": exists and is not a folder";
      continue;
    }
    if (auto problem = outputProblem(value, input))
      return flag + " " + *problem;
    struct stat a {
    }, b{};
    if (output != "-" &&
        (value == output ||
         (::stat(value.c_str(), &a) == 0 && ::stat(output.c_str(), &b) == 0 &&
          a.st_dev == b.st_dev && a.st_ino == b.st_ino)))
      return flag + " " + value +
             ": is also the output (-o); refusing to "
             "write both there";
  }
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
  std::optional<std::string> problem;
  if (output.empty())
    problem = "-o: empty path";
  if (!problem)
    problem = inputProblem(input);
  if (!problem)
    problem = outputProblem(output, input);
  if (!problem)
    problem = outputFlagProblem(argc, argv, input, output);
  if (problem) {
    std::fprintf(stderr, "autoddl-opt: error: %s\n",
                 autoddl::capMessage(*problem).c_str());
    return 1;
  }
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (output == "-" || config.shouldShowDialects())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, input, output, registry));
  // -o FILE: the module is printed into memory and written as every autoddl
  // output is (support/UserFiles.h: a temporary name beside it, renamed), so
  // a failure or a full disk leaves the earlier file or nothing.
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    std::fprintf(stderr, "autoddl-opt: error: %s\n",
                 autoddl::capMessage(error).c_str());
    return 1;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (mlir::failed(mlir::MlirOptMain(os, std::move(file), registry, config)))
    return 1;
  os.flush();
  if (auto written = autoddl::writeUserFileProblem(output, text)) {
    std::fprintf(stderr, "autoddl-opt: error: %s\n",
                 autoddl::capMessage(*written).c_str());
    return 1;
  }
  return 0;
}
