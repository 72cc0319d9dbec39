// Tests of the shape rules shared by the dtf ops and the front end.
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/IR/ShapeInference.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::dtf;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

class ShapeInference : public ::testing::Test {
protected:
  ShapeInference() {
    context.loadDialect<DtfDialect>();
    // Collect messages instead of printing them.
    context.getDiagEngine().registerHandler([this](Diagnostic &diag) {
      messages.push_back(diag.str());
      return success();
    });
  }

  RankedTensorType f32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, Float32Type::get(&context));
  }
  RankedTensorType i32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, IntegerType::get(&context, 32));
  }
  std::function<InFlightDiagnostic()> emitter() {
    return errorEmitterAt(UnknownLoc::get(&context));
  }
  std::string lastMessage() const {
    return messages.empty() ? "" : messages.back();
  }

  MLIRContext context;
  std::vector<std::string> messages;
};

TEST_F(ShapeInference, BroadcastFollowsNumPy) {
  auto expect = [](ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                   ArrayRef<int64_t> want) {
    FailureOr<SmallVector<int64_t>> got = broadcastShapes(a, b);
    ASSERT_TRUE(succeeded(got));
    EXPECT_EQ(ArrayRef<int64_t>(*got), want);
  };
  expect({2, 3}, {3}, {2, 3});
  expect({2, 1}, {1, 5}, {2, 5});
  expect({}, {4, 4}, {4, 4});
  expect({kDyn, 10}, {10}, {kDyn, 10});
  expect({kDyn, 1}, {1, 7}, {kDyn, 7});
  expect({kDyn}, {1}, {kDyn});
  expect({kDyn, 10}, {kDyn, 1}, {kDyn, 10});
  // ? is the batch B, not any size: it does not line up with a fixed one.
  EXPECT_TRUE(failed(broadcastShapes({kDyn}, {5})));
  EXPECT_TRUE(failed(broadcastShapes({kDyn, 784}, {784, 784})));
  EXPECT_TRUE(failed(broadcastShapes({2, 3}, {4})));
  EXPECT_TRUE(failed(broadcastShapes({3, 2}, {2, 2})));
}

TEST_F(ShapeInference, BroadcastRejectsMixedDtypes) {
  EXPECT_TRUE(failed(inferBroadcast("add", f32({2}), i32({2}), emitter())));
  EXPECT_NE(lastMessage().find("same dtype, got 'f32' and 'i32'"),
            std::string::npos)
      << lastMessage();
}

TEST_F(ShapeInference, MatmulWithTransposes) {
  auto plain = inferMatmul(f32({kDyn, 784}), f32({784, 500}), false, false,
                           emitter());
  ASSERT_TRUE(succeeded(plain));
  EXPECT_EQ(*plain, f32({kDyn, 500}));
  auto gradW = inferMatmul(f32({kDyn, 784}), f32({kDyn, 500}), true, false,
                           emitter());
  ASSERT_TRUE(succeeded(gradW));
  EXPECT_EQ(*gradW, f32({784, 500}));
  auto gradX = inferMatmul(f32({kDyn, 500}), f32({784, 500}), false, true,
                           emitter());
  ASSERT_TRUE(succeeded(gradX));
  EXPECT_EQ(*gradX, f32({kDyn, 784}));
  auto batched = inferMatmul(f32({4, 2, 3}), f32({4, 3, 5}), false, false,
                             emitter());
  ASSERT_TRUE(succeeded(batched));
  EXPECT_EQ(*batched, f32({4, 2, 5}));
}

TEST_F(ShapeInference, MatmulInnerMismatchIsReported) {
  EXPECT_TRUE(failed(
      inferMatmul(f32({kDyn, 784}), f32({500, 10}), false, false, emitter())));
  EXPECT_NE(lastMessage().find("inner dimensions to match, got "
                               "'tensor<?x784xf32>' and 'tensor<500x10xf32>'"),
            std::string::npos)
      << lastMessage();
}

TEST_F(ShapeInference, ConvAndPoolOutputSizes) {
  // The seed CNN: 28x28x1 -> conv 5x5x32 same -> pool 2 -> conv 5x5x64 -> pool 2.
  auto c1 = inferConv2D(f32({kDyn, 28, 28, 1}), f32({5, 5, 1, 32}), {1, 1},
                        {1, 1}, Padding::same, emitter());
  ASSERT_TRUE(succeeded(c1));
  EXPECT_EQ(*c1, f32({kDyn, 28, 28, 32}));
  auto p1 = inferPool("max_pool", *c1, {2, 2}, {2, 2}, Padding::valid,
                      emitter());
  ASSERT_TRUE(succeeded(p1));
  EXPECT_EQ(*p1, f32({kDyn, 14, 14, 32}));
  auto valid = inferConv2D(f32({1, 14, 14, 32}), f32({5, 5, 32, 64}), {1, 1},
                           {1, 1}, Padding::valid, emitter());
  ASSERT_TRUE(succeeded(valid));
  EXPECT_EQ(*valid, f32({1, 10, 10, 64}));
  // Odd sizes, strides and dilation.
  EXPECT_EQ(windowOutputSize(7, 3, 2, 1, Padding::same), 4);
  EXPECT_EQ(windowOutputSize(7, 3, 2, 1, Padding::valid), 3);
  EXPECT_EQ(windowOutputSize(9, 3, 1, 2, Padding::valid), 5);
  EXPECT_EQ(windowOutputSize(kDyn, 3, 1, 1, Padding::valid), kDyn);
}

TEST_F(ShapeInference, ConvChannelMismatchIsReported) {
  EXPECT_TRUE(failed(inferConv2D(f32({1, 8, 8, 3}), f32({3, 3, 4, 8}), {1, 1},
                                 {1, 1}, Padding::same, emitter())));
  EXPECT_NE(lastMessage().find("input channels"), std::string::npos)
      << lastMessage();
}

TEST_F(ShapeInference, ReductionsAndAxes) {
  auto all = inferReduce("mean", f32({kDyn, 10}), std::nullopt, false,
                         emitter());
  ASSERT_TRUE(succeeded(all));
  EXPECT_EQ(all->getRank(), 0);
  SmallVector<int64_t> last = {-1};
  auto kept = inferReduce("sum", f32({kDyn, 10}), ArrayRef<int64_t>(last),
                          true, emitter());
  ASSERT_TRUE(succeeded(kept));
  EXPECT_EQ(*kept, f32({kDyn, 1}));
  SmallVector<int64_t> twice = {1, -1};
  EXPECT_TRUE(failed(inferReduce("sum", f32({2, 3}), ArrayRef<int64_t>(twice),
                                 false, emitter())));
  EXPECT_NE(lastMessage().find("names axis 1 twice"), std::string::npos);
  EXPECT_TRUE(failed(normalizeAxis("argmax", 2, 2, emitter())));
  EXPECT_NE(lastMessage().find("axis in [-2, 2)"), std::string::npos);
}

TEST_F(ShapeInference, ShapeOps) {
  auto t = inferTranspose(f32({2, 3, 4}), {2, 0, 1}, emitter());
  ASSERT_TRUE(succeeded(t));
  EXPECT_EQ(*t, f32({4, 2, 3}));
  EXPECT_TRUE(failed(inferTranspose(f32({2, 3}), {0, 0}, emitter())));

  auto c = inferConcat({f32({kDyn, 3}), f32({kDyn, 5})}, -1, emitter());
  ASSERT_TRUE(succeeded(c));
  EXPECT_EQ(*c, f32({kDyn, 8}));
  EXPECT_TRUE(failed(inferConcat({f32({2, 3}), f32({4, 5})}, 1, emitter())));

  auto s = inferSlice(f32({kDyn, 10}), {0, 2}, {-1, 3}, emitter());
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, f32({kDyn, 3}));
  EXPECT_TRUE(failed(inferSlice(f32({4, 10}), {0, 8}, {-1, 3}, emitter())));
  EXPECT_NE(lastMessage().find("goes past its end"), std::string::npos);

  EXPECT_TRUE(succeeded(verifyReshape(f32({kDyn, 784}),
                                      f32({kDyn, 28, 28, 1}), emitter())));
  EXPECT_TRUE(succeeded(verifyReshape(f32({6, 4}), f32({kDyn, 8}), emitter())));
  EXPECT_TRUE(failed(verifyReshape(f32({6, 4}), f32({5, 5}), emitter())));
  EXPECT_TRUE(failed(verifyReshape(f32({6, 4}), f32({kDyn, 5}), emitter())));
}

TEST_F(ShapeInference, LossesAndGather) {
  auto dense = inferSoftmaxCrossEntropy(f32({kDyn, 10}), f32({kDyn, 10}),
                                        emitter());
  ASSERT_TRUE(succeeded(dense));
  EXPECT_EQ(*dense, f32({kDyn}));
  auto sparse = inferSparseSoftmaxCrossEntropy(f32({kDyn, 10}), i32({kDyn}),
                                               emitter());
  ASSERT_TRUE(succeeded(sparse));
  EXPECT_EQ(*sparse, f32({kDyn}));
  EXPECT_TRUE(failed(
      inferSparseSoftmaxCrossEntropy(f32({8, 10}), i32({8, 10}), emitter())));
  auto rows = inferGather(f32({50000, 64}), i32({kDyn, 20}), emitter());
  ASSERT_TRUE(succeeded(rows));
  EXPECT_EQ(*rows, f32({kDyn, 20, 64}));
}

} // namespace
