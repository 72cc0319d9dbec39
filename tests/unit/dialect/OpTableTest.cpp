// The generated op table (dtf/OpNames.h and dtf/OpTable.h, from the ODS
// files as llvm-tblgen resolves them) holds exactly the ops the dtf dialect
// registers, each with the operands, results and attributes its ODS
// definition declares: the runtime names ops through it and the plan reader
// checks every op against it, so an op the generator missed, made up or
// misread would fail here.
#include "compiler/Registration.h"
#include "dtf/OpTable.h"

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

// Every attribute a spec names is one its registered op declares; a few
// specs by hand.
TEST(OpTable, SpecsNameTheAttributesOfTheRegisteredOps) {
  mlir::DialectRegistry registry;
  mlir::dtf::registerDialects(registry);
  mlir::MLIRContext context;
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  int checked = 0;
  for (const dtf::ops::OpSpec &spec : dtf::ops::kSpecs) {
    auto op = mlir::RegisteredOperationName::lookup(spec.name, &context);
    ASSERT_TRUE(op.has_value()) << spec.name;
    // Attribute names the op declares (inherent), variables included.
    llvm::ArrayRef<mlir::StringAttr> names = op->getAttributeNames();
    for (int k = 0; k < spec.numAttrs; ++k)
      EXPECT_TRUE(llvm::any_of(names, [&](mlir::StringAttr n) {
        return n.getValue() == spec.attrs[k].name;
      })) << spec.name << " " << spec.attrs[k].name;
    ++checked;
  }
  EXPECT_EQ(checked, dtf::ops::kCount);
  // A few by hand: an update, a variadic op, a lookup.
  const dtf::ops::OpSpec *adam = dtf::ops::findSpec("dtf.apply_adam");
  ASSERT_NE(adam, nullptr);
  EXPECT_EQ(adam->variables, 3); // var, m, v
  EXPECT_EQ(adam->numInputs, 3); // grad, lr, step
  EXPECT_EQ(adam->numOutputs, 0);
  EXPECT_STREQ(adam->attrs[0].name, "beta1");
  EXPECT_TRUE(adam->attrs[0].required);
  EXPECT_EQ(adam->inputs[0].dtypes & (1u << 4), 0u) << "a float gradient";
  const dtf::ops::OpSpec *fused = dtf::ops::findSpec("dtf.fused");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->inputs[0].arity, dtf::ops::Arity::kVariadic);
  const dtf::ops::OpSpec *ps = dtf::ops::findSpec("dtf.ps_gather");
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->variables, 0);
  EXPECT_EQ(ps->attrs[0].kind, dtf::ops::AttrKind::kString);
  EXPECT_FALSE(ps->attrs[1].required); // create: a unit attribute
  EXPECT_EQ(dtf::ops::findSpec("dtf.nothing"), nullptr);
}

} // namespace
