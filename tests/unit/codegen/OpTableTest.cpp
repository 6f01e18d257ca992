//===- OpTableTest.cpp - codegen's op table against the op kinds ----------===//
//
// The emitters' table (codegen/emit/OpTable.cpp) is codegen's column of the
// one table of op kinds (ir/ops/OpKinds.cpp): it names only kinds of the
// vocabulary (and ONNX primitives), and the CPU programs run every kind but
// parameter (not an op of a stage: the harness's parameter table holds them).
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/OpTable.h"
#include "ir/ops/OpSemantics.h"

#include <gtest/gtest.h>

using namespace autoddl;

namespace {

TEST(OpTable, NamesTheKindsOfTheVocabulary) {
  const auto &table = codegen::emit::opTable();
  for (const auto &[kind, entry] : table)
    EXPECT_TRUE(kind == "primitive" || ops::lookupOp(kind) != nullptr)
        << kind << " is not an op kind of ir/ops/OpKinds.cpp";
  for (const ops::OpInfo &op : ops::allOps())
    if (op.kind != "parameter") {
      EXPECT_EQ(table.count(std::string(op.kind)), 1u)
          << op.kind << " has no emitter";
    }
}

} // namespace
