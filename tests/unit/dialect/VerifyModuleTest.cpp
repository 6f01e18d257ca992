//===- VerifyModuleTest.cpp - sbp::verifyModule against mlir::verify -----===//
//
// sbp::verifyModule answers the ops' lookups (mesh, sbp.mesh count, send/recv
// peers) from one walk of the module; it must report exactly what a lone
// mlir::verify reports. Every case of the dialect's verification lit tests
// (the send/recv, stage-bound and mesh cases among them) is verified both ways
// and the diagnostics, notes included, compared.
//
//===----------------------------------------------------------------------===//
#include "ir/dialect/SbpDialect.h"
#include "ir/dialect/Verifiers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace mlir;

namespace {

std::vector<std::string> splitCases(const std::string &path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> cases(1);
  std::string line;
  while (std::getline(text, line)) {
    if (line.rfind("// -----", 0) == 0)
      cases.emplace_back();
    else
      cases.back() += line + "\n";
  }
  return cases;
}

struct Outcome {
  bool ok = false;
  std::vector<std::string> diagnostics; // each with its notes
};

/// Verifies `text` (parsed unverified) with `verifier`.
template <typename Verifier>
std::optional<Outcome> verifyText(const std::string &text, Verifier verifier) {
  MLIRContext context;
  context.loadDialect<autoddl::sbp::SbpDialect, func::FuncDialect>();
  Outcome outcome;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << d.getLocation() << ": " << d;
    for (const Diagnostic &note : d.getNotes())
      os << " | note " << note.getLocation() << ": " << note;
    outcome.diagnostics.push_back(s);
    return success();
  });
  ParserConfig config(&context, /*verifyAfterParse=*/false);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, config);
  if (!module)
    return std::nullopt; // a parser case: no module to verify
  outcome.diagnostics.clear();
  outcome.ok = succeeded(verifier(*module));
  return outcome;
}

TEST(VerifyModule, ReportsWhatMlirVerifyReports) {
  int compared = 0, failing = 0, transfers = 0;
  for (const char *file : {"tests/lit/dialect/ops_verification.mlir",
                           "tests/lit/dialect/attrs_verification.mlir",
                           "tests/lit/dialect/ops.mlir"}) {
    for (const std::string &text : splitCases(file)) {
      std::optional<Outcome> plain =
          verifyText(text, [](ModuleOp m) { return verify(m.getOperation()); });
      std::optional<Outcome> indexed = verifyText(
          text, [](ModuleOp m) { return autoddl::sbp::verifyModule(m); });
      ASSERT_EQ(plain.has_value(), indexed.has_value()) << text;
      if (!plain)
        continue;
      ++compared;
      EXPECT_EQ(plain->ok, indexed->ok) << text;
      EXPECT_EQ(plain->diagnostics, indexed->diagnostics) << text;
      failing += plain->ok ? 0 : 1;
      for (const std::string &d : plain->diagnostics)
        transfers += d.find("'sbp.send'") != std::string::npos ||
                     d.find("'sbp.recv'") != std::string::npos;
    }
  }
  // The lit files hold dozens of bad modules, five of them send/recv ones:
  // the comparison must have covered them.
  EXPECT_GT(compared, 40);
  EXPECT_GT(failing, 30);
  EXPECT_GE(transfers, 5);
}

} // namespace
