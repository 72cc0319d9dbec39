// Tests that ops built from C++ infer their result types and fold as documented.
#include "compiler/Registration.h"
#include "dialects/Dtf/IR/DtfDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::dtf;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

class OpBuilders : public ::testing::Test {
protected:
  OpBuilders() : builder(&context) {
    DialectRegistry registry;
    dtf::registerDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  RankedTensorType f32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }
  Value input(StringRef name, RankedTensorType type) {
    return builder.create<InputOp>(loc(), type, name);
  }
  Value splat(RankedTensorType type, float value) {
    return builder.create<ConstantOp>(
        loc(), DenseElementsAttr::get(type, builder.getF32FloatAttr(value)));
  }
  Location loc() { return builder.getUnknownLoc(); }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(OpBuilders, ResultTypesAreInferred) {
  Value x = input("x", f32({kDyn, 784}));
  Value w = input("w", f32({784, 10}));
  Value b = input("b", f32({10}));
  auto mm = builder.create<MatmulOp>(loc(), x, w);
  auto add = builder.create<AddOp>(loc(), mm, b);
  auto loss = builder.create<MeanOp>(loc(), add, nullptr, false);
  EXPECT_EQ(mm.getType(), f32({kDyn, 10}));
  EXPECT_EQ(add.getType(), f32({kDyn, 10}));
  EXPECT_EQ(cast<RankedTensorType>(loss.getType()).getRank(), 0);
  EXPECT_TRUE(succeeded(verify(*module)));
}

TEST_F(OpBuilders, AddZeroAndMulOneFoldAway) {
  Value x = input("x", f32({4, 3}));
  SmallVector<Value> folded;
  builder.createOrFold<AddOp>(folded, loc(), x, splat(f32({4, 3}), 0.0f));
  ASSERT_EQ(folded.size(), 1u);
  EXPECT_EQ(folded[0], x);
  folded.clear();
  builder.createOrFold<MulOp>(folded, loc(), splat(f32({4, 3}), 1.0f), x);
  EXPECT_EQ(folded[0], x);
  // Broadcasting changes the type, so x + 0 with a larger zero must stay.
  Value row = input("row", f32({3}));
  folded.clear();
  builder.createOrFold<AddOp>(folded, loc(), row, splat(f32({4, 3}), 0.0f));
  EXPECT_NE(folded[0], row);
}

TEST_F(OpBuilders, ConstantsFold) {
  SmallVector<Value> folded;
  builder.createOrFold<MulOp>(folded, loc(), splat(f32({2}), 3.0f),
                              splat(f32({2}), 4.0f));
  auto constant = folded[0].getDefiningOp<ConstantOp>();
  ASSERT_TRUE(constant);
  auto value = cast<DenseElementsAttr>(constant.getValue());
  EXPECT_FLOAT_EQ(value.getSplatValue<float>(), 12.0f);
}

TEST_F(OpBuilders, NegNegIsIdentity) {
  Value x = input("x", f32({5}));
  Value once = builder.create<NegOp>(loc(), x);
  SmallVector<Value> folded;
  builder.createOrFold<NegOp>(folded, loc(), once);
  EXPECT_EQ(folded[0], x);
}

} // namespace
