// dtf.lstm, dtf.lstm_train and dtf.lstm_grad (oneDNN's LSTM primitive), and
// dtf.gru, dtf.gru_train and dtf.gru_grad (its linear-before-reset GRU),
// against float64 references written here: the forward recurrences of
// docs/dialect.md (LSTM: gates i, f, c, o, the forget gate's pre-activation
// + 1; GRU: gates z, r, h, TensorFlow 2's reset_after; zero initial states)
// and their backward passes through time.
#include "tests/unit/kernels/KernelTestUtil.h"

#include <algorithm>

namespace dtf::test {
namespace {

struct Dims {
  int64_t b, t, f, u;
  bool sequences;
};

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// The layer's output from the states h[0..T]: the last step's [B, U], or
/// every step's [B, T, U].
Values layerOutput(const Dims &d, const std::vector<Values> &h) {
  Values y;
  for (int64_t n = 0; n < d.b; ++n)
    for (int64_t s = d.sequences ? 0 : d.t - 1; s < d.t; ++s)
      for (int64_t j = 0; j < d.u; ++j)
        y.push_back(h[s + 1][n * d.u + j]);
  return y;
}

/// Step s's share of the products' gradients: with the pre-activations
/// x_s @ k [b, G u] and h_s @ r [b, G u] and their gradients dzx and dzh,
/// adds to dx, dk, dr and dh (h_s's gradient).
void backpropProducts(const Dims &d, int64_t gu, int64_t s, const Values &x,
                      const Values &k, const Values &r, const Values &hs,
                      const Values &dzx, const Values &dzh, Values &dx, Values &dk,
                      Values &dr, Values &dh) {
  const int64_t t = d.t, f = d.f, u = d.u;
  for (int64_t n = 0; n < d.b; ++n)
    for (int64_t j = 0; j < gu; ++j) {
      const double a = dzx[n * gu + j], c = dzh[n * gu + j];
      for (int64_t q = 0; q < f; ++q) {
        dk[q * gu + j] += x[(n * t + s) * f + q] * a;
        dx[(n * t + s) * f + q] += k[q * gu + j] * a;
      }
      for (int64_t q = 0; q < u; ++q) {
        dr[q * gu + j] += hs[n * u + q] * c;
        dh[n * u + q] += r[q * gu + j] * c;
      }
    }
}

/// The reference: forward, and with `dy` the gradients of x, kernel,
/// recurrent_kernel and bias.
struct Reference {
  Values y, dx, dk, dr, db;
};

Reference reference(const Dims &d, const Values &x, const Values &k, const Values &r,
                    const Values &bias, const Values *dy) {
  const int64_t b = d.b, t = d.t, f = d.f, u = d.u, g4 = 4 * u;
  // Per step: gate activations [b, 4u] (i, f, g, o) and states c, h [b, u].
  std::vector<Values> gates(t, Values(b * g4)), c(t + 1, Values(b * u, 0.0)),
      h(t + 1, Values(b * u, 0.0));
  for (int64_t s = 0; s < t; ++s) {
    for (int64_t n = 0; n < b; ++n)
      for (int64_t j = 0; j < g4; ++j) {
        double z = bias[j] + (j / u == 1 ? 1.0 : 0.0);
        for (int64_t q = 0; q < f; ++q)
          z += x[(n * t + s) * f + q] * k[q * g4 + j];
        for (int64_t q = 0; q < u; ++q)
          z += h[s][n * u + q] * r[q * g4 + j];
        gates[s][n * g4 + j] = j / u == 2 ? std::tanh(z) : sigmoid(z);
      }
    for (int64_t n = 0; n < b; ++n)
      for (int64_t j = 0; j < u; ++j) {
        const double *gt = &gates[s][n * g4];
        double cc = gt[u + j] * c[s][n * u + j] + gt[j] * gt[2 * u + j];
        c[s + 1][n * u + j] = cc;
        h[s + 1][n * u + j] = gt[3 * u + j] * std::tanh(cc);
      }
  }
  Reference out;
  out.y = layerOutput(d, h);
  if (!dy)
    return out;
  out.dx.assign(b * t * f, 0.0);
  out.dk.assign(f * g4, 0.0);
  out.dr.assign(u * g4, 0.0);
  out.db.assign(g4, 0.0);
  Values dh(b * u, 0.0), dc(b * u, 0.0), dz(b * g4);
  for (int64_t s = t - 1; s >= 0; --s) {
    for (int64_t n = 0; n < b; ++n)
      for (int64_t j = 0; j < u; ++j) {
        if (d.sequences)
          dh[n * u + j] += (*dy)[(n * t + s) * u + j];
        else if (s == t - 1)
          dh[n * u + j] += (*dy)[n * u + j];
        const double *gt = &gates[s][n * g4];
        const double tc = std::tanh(c[s + 1][n * u + j]);
        const double dcc = dc[n * u + j] + dh[n * u + j] * gt[3 * u + j] * (1 - tc * tc);
        const double gi = gt[j], gf = gt[u + j], gg = gt[2 * u + j], go = gt[3 * u + j];
        dz[n * g4 + j] = dcc * gg * gi * (1 - gi);
        dz[n * g4 + u + j] = dcc * c[s][n * u + j] * gf * (1 - gf);
        dz[n * g4 + 2 * u + j] = dcc * gi * (1 - gg * gg);
        dz[n * g4 + 3 * u + j] = dh[n * u + j] * tc * go * (1 - go);
        dc[n * u + j] = dcc * gf;
      }
    std::fill(dh.begin(), dh.end(), 0.0);
    for (int64_t n = 0; n < b; ++n)
      for (int64_t j = 0; j < g4; ++j)
        out.db[j] += dz[n * g4 + j];
    backpropProducts(d, g4, s, x, k, r, h[s], dz, dz, out.dx, out.dk, out.dr, dh);
  }
  return out;
}

void expectNear(const Tensor &got, const Values &want, double tol, const char *what) {
  Values v = valuesOf(got);
  ASSERT_EQ(v.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i)
    worst = std::max(worst, std::abs(v[i] - want[i]) / std::max(1.0, std::abs(want[i])));
  EXPECT_LE(worst, tol) << what;
}

class Lstm : public ::testing::TestWithParam<Dims> {};

// Shapes: one step, one example, units that are not a multiple of a vector,
// a batch of 1 and of 7, and both outputs.
const Dims kShapes[] = {{1, 1, 1, 1, false},  {3, 5, 4, 3, false}, {7, 6, 5, 9, true},
                        {2, 28, 28, 16, false}, {5, 3, 2, 17, true}};

TEST_P(Lstm, MatchesTheFloat64Recurrence) {
  const Dims d = GetParam();
  Rng rng(7 + d.b * 31 + d.u);
  Tensor x = rng.f32({d.b, d.t, d.f}), k = rng.f32({d.f, 4 * d.u}, -0.7, 0.7),
         r = rng.f32({d.u, 4 * d.u}, -0.7, 0.7), bias = rng.f32({4 * d.u}, -0.3, 0.3);
  const Shape yShape = d.sequences ? Shape{d.b, d.t, d.u} : Shape{d.b, d.u};
  Tensor dy = rng.f32(yShape);
  Values dyv = valuesOf(dy);
  Reference want = reference(d, valuesOf(x), valuesOf(k), valuesOf(r), valuesOf(bias), &dyv);

  KernelRun infer("dtf.lstm");
  infer.in(x).in(k).in(r).in(bias).attr("return_sequences", d.sequences).pool();
  ASSERT_TRUE(infer.exec().isOk()) << errorOf(infer);
  EXPECT_EQ(infer.out().shape(), yShape);
  expectNear(infer.out(), want.y, 2e-5, "dtf.lstm");

  KernelRun train("dtf.lstm_train");
  train.in(x).in(k).in(r).in(bias).attr("return_sequences", d.sequences).pool().outputs(2);
  ASSERT_TRUE(train.exec().isOk()) << errorOf(train);
  expectNear(train.out(0), want.y, 2e-5, "dtf.lstm_train");
  EXPECT_EQ(train.out(1).dtype(), DType::I32);

  // Twice: the weights' gradients must not pile up from call to call
  // (oneDNN adds to what its outputs hold).
  KernelRun grad("dtf.lstm_grad");
  grad.in(x).in(k).in(r).in(bias).in(train.out(0)).in(train.out(1)).in(dy)
      .attr("return_sequences", d.sequences).pool().outputs(4);
  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE(grad.exec().isOk()) << errorOf(grad);
    expectNear(grad.out(0), want.dx, 1e-4, "dx");
    expectNear(grad.out(1), want.dk, 1e-4, "dkernel");
    expectNear(grad.out(2), want.dr, 1e-4, "drecurrent_kernel");
    expectNear(grad.out(3), want.db, 1e-4, "dbias");
  }
}

std::string shapeName(const ::testing::TestParamInfo<Dims> &info) {
  const Dims &d = info.param;
  return "b" + std::to_string(d.b) + "_t" + std::to_string(d.t) + "_f" +
         std::to_string(d.f) + "_u" + std::to_string(d.u) +
         (d.sequences ? "_sequences" : "_last");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Lstm, ::testing::ValuesIn(kShapes), shapeName);

TEST(LstmErrors, WrongWorkspaceShapesAndDTypesAreErrors) {
  Rng rng(3);
  Tensor x = rng.f32({2, 3, 4}), k = rng.f32({4, 8}), r = rng.f32({2, 8}),
         bias = rng.f32({8}), dy = rng.f32({2, 2});
  KernelRun train("dtf.lstm_train");
  train.in(x).in(k).in(r).in(bias).outputs(2);
  ASSERT_TRUE(train.exec().isOk()) << errorOf(train);

  // A workspace from another batch size.
  KernelRun other("dtf.lstm_train");
  other.in(rng.f32({3, 3, 4})).in(k).in(r).in(bias).outputs(2);
  ASSERT_TRUE(other.exec().isOk()) << errorOf(other);
  KernelRun grad("dtf.lstm_grad");
  grad.in(x).in(k).in(r).in(bias).in(train.out(0)).in(other.out(1)).in(dy).outputs(4);
  EXPECT_NE(errorOf(grad).find("dtf.lstm_grad expects the workspace dtf.lstm_train wrote"),
            std::string::npos)
      << errorOf(grad);

  KernelRun gates("dtf.lstm");
  gates.in(x).in(rng.f32({4, 6})).in(r).in(bias);
  EXPECT_NE(errorOf(gates).find("expects x [B, T, F], kernel [F, 4 U]"), std::string::npos)
      << errorOf(gates);

  KernelRun doubles("dtf.lstm");
  doubles.in(f64({1, 1, 1}, {0.5})).in(f64({1, 4}, {1, 1, 1, 1}))
      .in(f64({1, 4}, {1, 1, 1, 1})).in(f64({4}, {0, 0, 0, 0}));
  EXPECT_NE(errorOf(doubles).find("dtf.lstm runs f32 only"), std::string::npos)
      << errorOf(doubles);
}

TEST(LstmErrors, AnEmptyBatchGivesEmptyOutputsAndZeroGradients) {
  Rng rng(5);
  Tensor x = f32({0, 3, 2}, {}), k = rng.f32({2, 8}), r = rng.f32({2, 8}), bias = rng.f32({8});
  KernelRun train("dtf.lstm_train");
  train.in(x).in(k).in(r).in(bias).outputs(2);
  ASSERT_TRUE(train.exec().isOk()) << errorOf(train);
  EXPECT_EQ(train.out(0).shape(), (Shape{0, 2}));
  KernelRun grad("dtf.lstm_grad");
  grad.in(x).in(k).in(r).in(bias).in(train.out(0)).in(train.out(1)).in(f32({0, 2}, {}))
      .outputs(4);
  ASSERT_TRUE(grad.exec().isOk()) << errorOf(grad);
  for (double v : valuesOf(grad.out(1)))
    EXPECT_EQ(v, 0.0);
}

/// The GRU's reference: forward, and with `dy` the gradients of x, kernel,
/// recurrent_kernel, bias and recurrent_bias.
struct GruReference {
  Values y, dx, dk, dr, db, drb;
};

GruReference gruReference(const Dims &d, const Values &x, const Values &k,
                          const Values &r, const Values &bias, const Values &rbias,
                          const Values *dy) {
  const int64_t b = d.b, t = d.t, f = d.f, u = d.u, g3 = 3 * u;
  // Per step: z, r, g and the recurrent part of h's gate (h @ U_h + b_h),
  // each [b, u]; h [b, u] before and after every step.
  std::vector<Values> zs(t, Values(b * u)), rs(t, Values(b * u)), gs(t, Values(b * u)),
      hhs(t, Values(b * u)), h(t + 1, Values(b * u, 0.0));
  for (int64_t s = 0; s < t; ++s)
    for (int64_t n = 0; n < b; ++n) {
      Values xz(g3), hz(g3);
      for (int64_t j = 0; j < g3; ++j) {
        xz[j] = bias[j];
        hz[j] = rbias[j];
        for (int64_t q = 0; q < f; ++q)
          xz[j] += x[(n * t + s) * f + q] * k[q * g3 + j];
        for (int64_t q = 0; q < u; ++q)
          hz[j] += h[s][n * u + q] * r[q * g3 + j];
      }
      for (int64_t j = 0; j < u; ++j) {
        const int64_t i = n * u + j;
        zs[s][i] = sigmoid(xz[j] + hz[j]);
        rs[s][i] = sigmoid(xz[u + j] + hz[u + j]);
        hhs[s][i] = hz[2 * u + j];
        gs[s][i] = std::tanh(xz[2 * u + j] + rs[s][i] * hhs[s][i]);
        h[s + 1][i] = zs[s][i] * h[s][i] + (1 - zs[s][i]) * gs[s][i];
      }
    }
  GruReference out;
  out.y = layerOutput(d, h);
  if (!dy)
    return out;
  out.dx.assign(b * t * f, 0.0);
  out.dk.assign(f * g3, 0.0);
  out.dr.assign(u * g3, 0.0);
  out.db.assign(g3, 0.0);
  out.drb.assign(g3, 0.0);
  Values dh(b * u, 0.0), dxz(b * g3), dhz(b * g3);
  for (int64_t s = t - 1; s >= 0; --s) {
    for (int64_t n = 0; n < b; ++n)
      for (int64_t j = 0; j < u; ++j) {
        const int64_t i = n * u + j;
        if (d.sequences)
          dh[i] += (*dy)[(n * t + s) * u + j];
        else if (s == t - 1)
          dh[i] += (*dy)[n * u + j];
        const double z = zs[s][i], rr = rs[s][i], g = gs[s][i];
        const double dz = dh[i] * (h[s][i] - g) * z * (1 - z);
        const double dg = dh[i] * (1 - z) * (1 - g * g);
        const double dr = dg * hhs[s][i] * rr * (1 - rr);
        dxz[n * g3 + j] = dhz[n * g3 + j] = dz;
        dxz[n * g3 + u + j] = dhz[n * g3 + u + j] = dr;
        dxz[n * g3 + 2 * u + j] = dg;
        dhz[n * g3 + 2 * u + j] = dg * rr;
        dh[i] *= z;
      }
    for (int64_t n = 0; n < b; ++n)
      for (int64_t j = 0; j < g3; ++j) {
        out.db[j] += dxz[n * g3 + j];
        out.drb[j] += dhz[n * g3 + j];
      }
    backpropProducts(d, g3, s, x, k, r, h[s], dxz, dhz, out.dx, out.dk, out.dr, dh);
  }
  return out;
}

class Gru : public ::testing::TestWithParam<Dims> {};

TEST_P(Gru, MatchesTheFloat64Recurrence) {
  const Dims d = GetParam();
  Rng rng(11 + d.b * 31 + d.u);
  Tensor x = rng.f32({d.b, d.t, d.f}), k = rng.f32({d.f, 3 * d.u}, -0.7, 0.7),
         r = rng.f32({d.u, 3 * d.u}, -0.7, 0.7), bias = rng.f32({3 * d.u}, -0.3, 0.3),
         rbias = rng.f32({3 * d.u}, -0.3, 0.3);
  const Shape yShape = d.sequences ? Shape{d.b, d.t, d.u} : Shape{d.b, d.u};
  Tensor dy = rng.f32(yShape);
  Values dyv = valuesOf(dy);
  GruReference want = gruReference(d, valuesOf(x), valuesOf(k), valuesOf(r),
                                   valuesOf(bias), valuesOf(rbias), &dyv);

  KernelRun infer("dtf.gru");
  infer.in(x).in(k).in(r).in(bias).in(rbias).attr("return_sequences", d.sequences).pool();
  ASSERT_TRUE(infer.exec().isOk()) << errorOf(infer);
  EXPECT_EQ(infer.out().shape(), yShape);
  expectNear(infer.out(), want.y, 2e-5, "dtf.gru");

  KernelRun train("dtf.gru_train");
  train.in(x).in(k).in(r).in(bias).in(rbias).attr("return_sequences", d.sequences).pool()
      .outputs(2);
  ASSERT_TRUE(train.exec().isOk()) << errorOf(train);
  expectNear(train.out(0), want.y, 2e-5, "dtf.gru_train");
  EXPECT_EQ(train.out(1).dtype(), DType::I32);

  // Twice: the gradients must not pile up from call to call.
  KernelRun grad("dtf.gru_grad");
  grad.in(x).in(k).in(r).in(bias).in(rbias).in(train.out(0)).in(train.out(1)).in(dy)
      .attr("return_sequences", d.sequences).pool().outputs(5);
  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE(grad.exec().isOk()) << errorOf(grad);
    expectNear(grad.out(0), want.dx, 1e-4, "dx");
    expectNear(grad.out(1), want.dk, 1e-4, "dkernel");
    expectNear(grad.out(2), want.dr, 1e-4, "drecurrent_kernel");
    expectNear(grad.out(3), want.db, 1e-4, "dbias");
    expectNear(grad.out(4), want.drb, 1e-4, "drecurrent_bias");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Gru, ::testing::ValuesIn(kShapes), shapeName);

TEST(GruErrors, WrongWorkspaceShapesAndDTypesAreErrors) {
  Rng rng(3);
  Tensor x = rng.f32({2, 3, 4}), k = rng.f32({4, 6}), r = rng.f32({2, 6}),
         bias = rng.f32({6}), rbias = rng.f32({6}), dy = rng.f32({2, 2});
  KernelRun train("dtf.gru_train");
  train.in(x).in(k).in(r).in(bias).in(rbias).outputs(2);
  ASSERT_TRUE(train.exec().isOk()) << errorOf(train);

  KernelRun other("dtf.gru_train");
  other.in(rng.f32({3, 3, 4})).in(k).in(r).in(bias).in(rbias).outputs(2);
  ASSERT_TRUE(other.exec().isOk()) << errorOf(other);
  KernelRun grad("dtf.gru_grad");
  grad.in(x).in(k).in(r).in(bias).in(rbias).in(train.out(0)).in(other.out(1)).in(dy)
      .outputs(5);
  EXPECT_NE(errorOf(grad).find("dtf.gru_grad expects the workspace dtf.gru_train wrote"),
            std::string::npos)
      << errorOf(grad);

  KernelRun biases("dtf.gru");
  biases.in(x).in(k).in(r).in(bias).in(rng.f32({5}));
  EXPECT_NE(errorOf(biases).find("expects x [B, T, F], kernel [F, 3 U], recurrent_kernel "
                                 "[U, 3 U] and bias and recurrent_bias [3 U]"),
            std::string::npos)
      << errorOf(biases);

  KernelRun doubles("dtf.gru");
  doubles.in(f64({1, 1, 1}, {0.5})).in(f64({1, 3}, {1, 1, 1})).in(f64({1, 3}, {1, 1, 1}))
      .in(f64({3}, {0, 0, 0})).in(f64({3}, {0, 0, 0}));
  EXPECT_NE(errorOf(doubles).find("dtf.gru runs f32 only (dtfc unrolls a gru"),
            std::string::npos)
      << errorOf(doubles);
}

TEST(GruErrors, AnEmptyBatchGivesEmptyOutputsAndZeroGradients) {
  Rng rng(5);
  Tensor x = f32({0, 3, 2}, {}), k = rng.f32({2, 6}), r = rng.f32({2, 6}),
         bias = rng.f32({6}), rbias = rng.f32({6});
  KernelRun train("dtf.gru_train");
  train.in(x).in(k).in(r).in(bias).in(rbias).outputs(2);
  ASSERT_TRUE(train.exec().isOk()) << errorOf(train);
  EXPECT_EQ(train.out(0).shape(), (Shape{0, 2}));
  KernelRun grad("dtf.gru_grad");
  grad.in(x).in(k).in(r).in(bias).in(rbias).in(train.out(0)).in(train.out(1))
      .in(f32({0, 2}, {})).outputs(5);
  ASSERT_TRUE(grad.exec().isOk()) << errorOf(grad);
  for (int i = 1; i < 5; ++i)
    for (double v : valuesOf(grad.out(i)))
      EXPECT_EQ(v, 0.0);
}

} // namespace
} // namespace dtf::test
