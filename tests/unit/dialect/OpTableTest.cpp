// The generated op table (dtf/OpNames.h, from the ODS files as text) holds
// exactly the ops the dtf dialect registers: the runtime names ops through
// it, so an op the generator missed or made up would fail here.
#include "compiler/Registration.h"
#include "dtf/OpNames.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

TEST(OpTable, HoldsExactlyTheOpsTheDialectRegisters) {
  mlir::DialectRegistry registry;
  mlir::dtf::registerDialects(registry);
  mlir::MLIRContext context;
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  std::set<std::string> registered;
  for (mlir::RegisteredOperationName op : context.getRegisteredOperations())
    if (op.getDialectNamespace() == "dtf")
      registered.insert(op.getStringRef().str());
  std::set<std::string> table(std::begin(dtf::ops::kAll),
                              std::end(dtf::ops::kAll));
  EXPECT_EQ(table.size(), size_t(dtf::ops::kCount)) << "a name twice";
  EXPECT_GT(registered.size(), 80u);
  EXPECT_EQ(table, registered);
}

TEST(OpTable, ConstantsSpellTheFullName) {
  EXPECT_STREQ(dtf::ops::kMatmul, "dtf.matmul");
  EXPECT_STREQ(dtf::ops::kSparseApplyAdam, "dtf.sparse_apply_adam");
  EXPECT_STREQ(dtf::ops::kPsGather, "dtf.ps_gather");
}

} // namespace
