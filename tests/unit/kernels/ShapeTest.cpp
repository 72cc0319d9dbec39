// Shape ops: reshape, transpose, concat, slice, broadcast_to, tile and its
// gradient, on several
// dtypes.
#include "KernelTestUtil.h"

#include <numeric>

namespace dtf::test {
namespace {

Values iota(int64_t n, double start = 0) {
  Values v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(Shape, ReshapeIsAViewWithInferredDimensions) {
  Tensor x = f32({6, 784}, iota(6 * 784));
  struct Case {
    Shape outShape, want;
  };
  for (const Case &c : std::vector<Case>{
           {{-1, 28, 28, 1}, {6, 28, 28, 1}},
           {{6, -1}, {6, 784}},
           {{-1, -1, 28}, {6, 28, 28}}, // the first -1 is the batch
           {{4704}, {4704}}}) {
    KernelRun run("dtf.reshape");
    run.attr("out_shape", c.outShape).in(x);
    ASSERT_EQ(errorOf(run), "") << shapeString(c.outShape);
    EXPECT_EQ(run.out().shape(), c.want);
    EXPECT_EQ(run.out().rawData(), x.rawData()) << "reshape should not copy";
  }
  KernelRun bad("dtf.reshape");
  bad.attr("out_shape", Shape{5, 5}).in(f32({2, 3}, iota(6)));
  EXPECT_EQ(errorOf(bad), "dtf.reshape cannot reshape f32[2,3] (6 elements) to "
                          "[5,5] (25 elements)");
  KernelRun divide("dtf.reshape");
  divide.attr("out_shape", Shape{-1, 4}).in(f32({2, 3}, iota(6)));
  EXPECT_EQ(errorOf(divide),
            "dtf.reshape cannot reshape f32[2,3] to [-1,4]: 6 elements do not "
            "divide into rows of 4");
}

// out[i] = x[perm-applied index], the reference of transpose.
Values refTranspose(const Shape &shape, const Values &x, const Shape &perm,
                    Shape *outShape) {
  outShape->resize(shape.size());
  for (size_t i = 0; i < perm.size(); ++i)
    (*outShape)[i] = shape[perm[i]];
  Values out(x.size());
  for (int64_t o = 0; o < int64_t(x.size()); ++o) {
    Shape oi = unravel(o, *outShape), ii(shape.size());
    for (size_t d = 0; d < perm.size(); ++d)
      ii[perm[d]] = oi[d];
    out[o] = x[ravel(ii, shape)];
  }
  return out;
}

TEST(Shape, TransposeEveryPermutationAndDtype) {
  Rng rng;
  struct Case {
    Shape shape, perm;
  };
  for (const Case &c : std::vector<Case>{{{3, 5}, {1, 0}},
                                         {{3, 5, 7}, {2, 0, 1}},
                                         {{3, 5, 7}, {0, 2, 1}},
                                         {{3, 5, 7}, {1, 0, 2}},
                                         {{3, 5, 7}, {0, 1, 2}},
                                         {{2, 3, 4, 5}, {3, 1, 2, 0}},
                                         {{1, 5, 1, 7}, {3, 2, 1, 0}},
                                         {{300, 257}, {1, 0}}})
    for (DType dtype : {DType::F32, DType::I64, DType::Bool}) {
      SCOPED_TRACE(shapeString(c.shape) + " perm " + shapeString(c.perm) + " " +
                   dtypeName(dtype));
      Values x = rng.integers(numElementsOf(c.shape), 0,
                              dtype == DType::Bool ? 1 : 1000);
      Shape outShape;
      Values want = refTranspose(c.shape, x, c.perm, &outShape);
      KernelRun run("dtf.transpose");
      run.pool().attr("permutation", c.perm).in(tensorOf(dtype, c.shape, x));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(equal(run.out(), outShape, want));
    }
  // f16 moves as bytes.
  Tensor half = Tensor::allocate(DType::F16, {2, 3});
  for (int i = 0; i < 6; ++i)
    static_cast<uint16_t *>(half.rawData())[i] = uint16_t(100 + i);
  KernelRun run("dtf.transpose");
  run.attr("permutation", Shape{1, 0}).in(half);
  ASSERT_EQ(errorOf(run), "");
  const uint16_t *h = static_cast<const uint16_t *>(run.out().rawData());
  EXPECT_EQ(std::vector<uint16_t>(h, h + 6),
            (std::vector<uint16_t>{100, 103, 101, 104, 102, 105}));

  KernelRun bad("dtf.transpose");
  bad.attr("permutation", Shape{0, 0}).in(f32({2, 3}, iota(6)));
  EXPECT_EQ(errorOf(bad),
            "dtf.transpose: permutation [0,0] is not a permutation of the 2 "
            "dimensions of f32[2,3]");
}

TEST(Shape, ConcatAlongEveryAxis) {
  Rng rng;
  for (int axis : {0, 1, 2, -1})
    for (DType dtype : {DType::F32, DType::I32, DType::Bool}) {
      SCOPED_TRACE(::testing::Message()
                   << "axis " << axis << " " << dtypeName(dtype));
      int a = axis < 0 ? axis + 3 : axis;
      std::vector<Shape> shapes(3, Shape{3, 5, 7});
      shapes[0][a] = 2;
      shapes[2][a] = 1;
      std::vector<Values> parts;
      Shape outShape = {3, 5, 7};
      outShape[a] = 2 + shapes[1][a] + 1;
      KernelRun run("dtf.concat");
      run.attr("axis", int64_t(axis)).pool();
      for (const Shape &s : shapes) {
        parts.push_back(
            rng.integers(numElementsOf(s), 0, dtype == DType::Bool ? 1 : 99));
        run.in(tensorOf(dtype, s, parts.back()));
      }
      Values want(numElementsOf(outShape));
      for (int64_t o = 0; o < int64_t(want.size()); ++o) {
        Shape idx = unravel(o, outShape);
        int k = 0;
        while (idx[a] >= shapes[k][a])
          idx[a] -= shapes[k++][a];
        want[o] = parts[k][ravel(idx, shapes[k])];
      }
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(equal(run.out(), outShape, want));
    }
  KernelRun bad("dtf.concat");
  bad.attr("axis", int64_t(1))
      .in(f32({2, 3}, iota(6)))
      .in(f32({3, 3}, iota(9)));
  EXPECT_EQ(errorOf(bad),
            "dtf.concat expects inputs of equal sizes except along axis 1, got "
            "f32[2,3] and f32[3,3]");
  KernelRun dtype("dtf.concat");
  dtype.attr("axis", int64_t(0))
      .in(f32({2}, {1, 2}))
      .in(tensorOf(DType::I32, {2}, {1, 2}));
  EXPECT_EQ(errorOf(dtype), "dtf.concat expects inputs of the same dtype and "
                            "rank, got f32[2] and i32[2]");
}

TEST(Shape, SliceWithSizesAndTheRest) {
  const Shape shape = {3, 5, 7};
  Values x = iota(105);
  struct Case {
    Shape begin, size, outShape;
  };
  for (const Case &c : std::vector<Case>{{{0, 0, 0}, {3, 5, 7}, {3, 5, 7}},
                                         {{1, 2, 3}, {2, 2, 4}, {2, 2, 4}},
                                         {{0, 2, 0}, {-1, 3, -1}, {3, 3, 7}},
                                         {{2, 4, 6}, {1, 1, 1}, {1, 1, 1}},
                                         {{1, 0, 5}, {0, -1, 2}, {0, 5, 2}}})
    for (DType dtype : {DType::F32, DType::I64}) {
      SCOPED_TRACE(shapeString(c.begin) + " " + shapeString(c.size));
      Values want;
      for (int64_t o = 0; o < numElementsOf(c.outShape); ++o) {
        Shape idx = unravel(o, c.outShape);
        for (int d = 0; d < 3; ++d)
          idx[d] += c.begin[d];
        want.push_back(x[ravel(idx, shape)]);
      }
      KernelRun run("dtf.slice");
      run.attr("begin", c.begin)
          .attr("size", c.size)
          .in(tensorOf(dtype, shape, x));
      ASSERT_EQ(errorOf(run), "");
      EXPECT_TRUE(equal(run.out(), c.outShape, want));
    }
  KernelRun past("dtf.slice");
  past.attr("begin", Shape{0, 3})
      .attr("size", Shape{-1, 3})
      .in(f32({2, 5}, iota(10)));
  EXPECT_EQ(
      errorOf(past),
      "dtf.slice of dimension 1 (size 5) from 3 with size 3 goes past the "
      "end of f32[2,5]");
  KernelRun rank("dtf.slice");
  rank.attr("begin", Shape{0}).attr("size", Shape{1}).in(f32({2, 5}, iota(10)));
  EXPECT_EQ(
      errorOf(rank),
      "dtf.slice expects begin and size with one entry per dimension (2), "
      "got begin [0] and size [1]");
}

TEST(Shape, BroadcastToWithKnownAndInferredDimensions) {
  Rng rng;
  Values bias = rng.uniform(10);
  // The batch of the target comes from the second input.
  KernelRun run("dtf.broadcast_to");
  run.attr("out_shape", Shape{-1, 10})
      .in(f32({10}, bias))
      .in(Tensor::zeros(DType::F32, {13, 10}));
  ASSERT_EQ(errorOf(run), "");
  Values want;
  for (int r = 0; r < 13; ++r)
    want.insert(want.end(), bias.begin(), bias.end());
  EXPECT_TRUE(equal(run.out(), {13, 10}, want));

  KernelRun aligned(
      "dtf.broadcast_to"); // -1 read from the input aligned at the right
  aligned.attr("out_shape", Shape{4, -1, 3})
      .in(tensorOf(DType::I32, {2, 1}, {5, 6}));
  ASSERT_EQ(errorOf(aligned), "");
  EXPECT_TRUE(
      equal(aligned.out(), {4, 2, 3}, {5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6,
                                       5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6}));

  KernelRun unknown("dtf.broadcast_to");
  unknown.attr("out_shape", Shape{-1, 10}).in(f32({10}, bias));
  EXPECT_EQ(errorOf(unknown),
            "dtf.broadcast_to: cannot infer dimension 0 of out_shape [-1,10] "
            "from f32[10]; pass the target as a second input");
  KernelRun bad("dtf.broadcast_to");
  bad.attr("out_shape", Shape{3, 4}).in(f32({3}, {1, 2, 3}));
  EXPECT_EQ(errorOf(bad), "dtf.broadcast_to expects shapes that broadcast, got "
                          "f32[3] and f32[3,4]");
}

// tf.tile against an independent reference (each output index read at
// its index modulo x's shape), on two byte widths; -1 repeats over the
// batch of the second input.
TEST(Shape, TileRepeatsEachDimension) {
  auto reference = [](const Shape &shape, const Values &x, const Shape &out) {
    Values want;
    for (int64_t i = 0; i < numElementsOf(out); ++i) {
      Shape idx = unravel(i, out);
      for (size_t d = 0; d < idx.size(); ++d)
        idx[d] %= shape[d];
      want.push_back(x[ravel(idx, shape)]);
    }
    return want;
  };
  Values x = iota(6, 1);
  for (DType dtype : {DType::F32, DType::I64}) {
    KernelRun run("dtf.tile");
    run.attr("multiples", Shape{2, 1, 3}).in(tensorOf(dtype, {2, 1, 3}, x));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(equal(run.out(), {4, 1, 9}, reference({2, 1, 3}, x, {4, 1, 9})));
  }
  KernelRun batch("dtf.tile"); // a class token over a batch of 5
  batch.attr("multiples", Shape{-1, 2, 1})
      .in(f32({1, 1, 3}, {7, 8, 9}))
      .in(Tensor::zeros(DType::F32, {5, 784}));
  ASSERT_EQ(errorOf(batch), "");
  EXPECT_TRUE(equal(batch.out(), {5, 2, 3}, reference({1, 1, 3}, {7, 8, 9}, {5, 2, 3})));

  KernelRun noBatch("dtf.tile");
  noBatch.attr("multiples", Shape{-1, 1}).in(f32({1, 3}, {1, 2, 3}));
  EXPECT_EQ(errorOf(noBatch), "dtf.tile: multiple -1 (the batch) in dimension 0 "
                              "needs a second input with that dimension");
  KernelRun count("dtf.tile");
  count.attr("multiples", Shape{2}).in(f32({1, 3}, {1, 2, 3}));
  EXPECT_EQ(errorOf(count), "dtf.tile expects one multiple per dimension of "
                            "f32[1,3], got [2]");
}

// tile's gradient: dy summed over the repeats, in float64 and int32.
TEST(Shape, TileGradSumsTheRepeats) {
  Values dy = iota(24, 1); // dy of x [2, 3] tiled [2, 2]: [4, 6]
  Values want(6, 0.0);
  for (int64_t i = 0; i < 24; ++i) {
    Shape idx = unravel(i, {4, 6});
    want[ravel({idx[0] % 2, idx[1] % 3}, {2, 3})] += dy[i];
  }
  for (DType dtype : {DType::F64, DType::I32}) {
    KernelRun run("dtf.tile_grad");
    run.in(tensorOf(dtype, {4, 6}, dy)).in(Tensor::zeros(dtype, {2, 3}));
    ASSERT_EQ(errorOf(run), "");
    EXPECT_TRUE(equal(run.out(), {2, 3}, want));
  }
  KernelRun token("dtf.tile_grad"); // a class token's: the sum over the batch
  token.in(f32({3, 1, 2}, {1, 2, 3, 4, 5, 6})).in(Tensor::zeros(DType::F32, {1, 1, 2}));
  ASSERT_EQ(errorOf(token), "");
  EXPECT_TRUE(equal(token.out(), {1, 1, 2}, {9, 12}));
  KernelRun bad("dtf.tile_grad");
  bad.in(f32({5, 3}, iota(15))).in(Tensor::zeros(DType::F32, {2, 3}));
  EXPECT_EQ(errorOf(bad), "dtf.tile_grad expects dy of x's dtype and rank with "
                          "each size a multiple of x's, got f32[5,3] for f32[2,3]");
}

} // namespace
} // namespace dtf::test
