// dtf.lstm, dtf.lstm_train and dtf.lstm_grad (oneDNN's LSTM primitive), and
// dtf.gru, dtf.gru_train and dtf.gru_grad (its linear-before-reset GRU),
// against float64 references written here: the forward recurrences of
// docs/dialect.md (LSTM: gates i, f, c, o, the forget gate's pre-activation
// + 1; GRU: gates z, r, h, TensorFlow 2's reset_after; zero initial states)
// and their backward passes through time; and the same ops in mixed
// precision (compute_dtype "bf16" and "f16").
#include "tests/unit/kernels/KernelTestUtil.h"

#include "runtime/core/Bf16.h"
#include "runtime/core/F16.h"
#include "runtime/kernels/cpu/OneDnn.h"

#include <algorithm>
#include <cstdio>

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

// Mixed precision (docs/kernels.md, "Mixed precision"). A layer's
// variables and the f64 reference's, for LSTM (x, kernel, recurrent_kernel,
// bias) or GRU (and recurrent_bias).
struct Layer {
  bool lstm;
  Dims d;
  std::vector<Tensor> in; // x and the variables
  Tensor dy;
};

Layer makeLayer(bool lstm, const Dims &d, uint64_t seed) {
  Rng rng(seed);
  const int64_t g = lstm ? 4 : 3;
  Layer l{lstm, d, {}, {}};
  l.in = {rng.f32({d.b, d.t, d.f}), rng.f32({d.f, g * d.u}, -0.7, 0.7),
          rng.f32({d.u, g * d.u}, -0.7, 0.7), rng.f32({g * d.u}, -0.3, 0.3)};
  if (!lstm)
    l.in.push_back(rng.f32({g * d.u}, -0.3, 0.3));
  l.dy = rng.f32(d.sequences ? Shape{d.b, d.t, d.u} : Shape{d.b, d.u});
  return l;
}

/// The layer's inference output, training output and gradients (x's, then
/// the variables') with compute_dtype `dtype` ("" for none), from `in`.
struct LayerOutputs {
  Tensor infer, train;
  std::vector<Tensor> grads;
};

LayerOutputs runLayer(const Layer &l, const std::vector<Tensor> &in,
                      const std::string &dtype) {
  const std::string name = l.lstm ? "dtf.lstm" : "dtf.gru";
  auto setUp = [&](KernelRun &run) {
    for (const Tensor &t : in)
      run.in(t);
    run.attr("return_sequences", l.d.sequences).pool();
    if (!dtype.empty())
      run.attr("compute_dtype", dtype);
  };
  LayerOutputs out;
  KernelRun infer(name);
  setUp(infer);
  EXPECT_EQ(errorOf(infer), "") << name << " " << dtype;
  out.infer = infer.out();
  KernelRun train(name + "_train");
  setUp(train);
  train.outputs(2);
  EXPECT_EQ(errorOf(train), "") << name << "_train " << dtype;
  out.train = train.out(0);
  KernelRun grad(name + "_grad");
  setUp(grad);
  grad.in(train.out(0)).in(train.out(1)).in(l.dy).outputs(int(in.size()));
  EXPECT_EQ(errorOf(grad), "") << name << "_grad " << dtype;
  for (size_t i = 0; i < in.size(); ++i)
    out.grads.push_back(grad.out(int(i)));
  return out;
}

/// The f64 reference's output and gradients (x's, then the variables'), in
/// runLayer's order.
std::vector<Values> referenceOf(const Layer &l) {
  std::vector<Values> v;
  for (const Tensor &t : l.in)
    v.push_back(valuesOf(t));
  Values dy = valuesOf(l.dy);
  if (l.lstm) {
    Reference r = reference(l.d, v[0], v[1], v[2], v[3], &dy);
    return {r.y, r.dx, r.dk, r.dr, r.db};
  }
  GruReference r = gruReference(l.d, v[0], v[1], v[2], v[3], v[4], &dy);
  return {r.y, r.dx, r.dk, r.dr, r.db, r.drb};
}

/// max |got - want| / max(1, |want|).
double worstError(const Tensor &got, const Values &want) {
  Values v = valuesOf(got);
  EXPECT_EQ(v.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < v.size() && i < want.size(); ++i)
    worst = std::max(worst, std::abs(v[i] - want[i]) / std::max(1.0, std::abs(want[i])));
  return worst;
}

const Dims kMixedShapes[] = {{4, 12, 10, 16, false}, {3, 6, 5, 9, true}};

// The gradient check in mixed precision: the bf16 layer's output and every
// gradient against the float64 recurrence on the unrounded operands. bf16
// keeps 8 significant bits (2^-9 relative per rounding); oneDNN's bf16
// primitives round x, the weights and h (the state fed to the next step's
// product and written as the output) and keep c, the sums and the gradients
// in f32, so the output is within 2e-2 of f64 and each gradient, a sum
// over every step and example, within 3e-2 (relative to
// max(1, |value|); measured here: at most 5e-3 for the output and 1e-2 for
// the gradients on these shapes). Under DTF_BF16_NATIVE=0
// (kernels.RecurrentMixedPrecisionFallback) the same bounds hold for the f32
// primitive on rounded operands (measured: 4.4e-3 and 4.9e-3).
TEST(RecurrentMixedPrecision, Bf16GradientsMatchFloat64WithinTolerance) {
  for (bool lstm : {true, false})
    for (const Dims &d : kMixedShapes) {
      SCOPED_TRACE(::testing::Message() << (lstm ? "lstm " : "gru ") << d.b << "x" << d.t
                                        << "x" << d.f << " units " << d.u
                                        << (d.sequences ? " sequences" : ""));
      Layer l = makeLayer(lstm, d, 21 + d.u);
      std::vector<Values> want = referenceOf(l);
      LayerOutputs got = runLayer(l, l.in, "bf16");
      const double y = std::max(worstError(got.infer, want[0]), worstError(got.train, want[0]));
      double g = 0;
      for (size_t i = 0; i < got.grads.size(); ++i)
        g = std::max(g, worstError(got.grads[i], want[i + 1]));
      std::printf("[ bf16     ] %s %s: output %.3g, gradients %.3g from float64 (%s)\n",
                  lstm ? "lstm" : "gru", d.sequences ? "sequences" : "last", y, g,
                  cpu::bf16Native() ? "bf16 primitive" : "f32 primitive, rounded operands");
      EXPECT_LE(y, 2e-2);
      EXPECT_LE(g, 3e-2);
      // Not vacuous: the f32 layer is far closer (the f32 tests: 2e-5, 1e-4).
      LayerOutputs f32 = runLayer(l, l.in, "");
      EXPECT_LE(worstError(f32.train, want[0]), 2e-5);
    }
}

/// `t` (f32) with every element rounded through bf16 (Bf16.h) or f16 (F16.h).
Tensor roundedThrough(const Tensor &t, bool f16) {
  Values v = valuesOf(t);
  for (double &e : v)
    e = f16 ? roundToF16(float(e)) : f32FromBf16(bf16FromF32(float(e)));
  return f32(t.shape(), v);
}

/// Whether every element of `t` (f32) is a bf16 value: its low 16 bits 0.
bool allBf16(const Tensor &t) {
  const float *p = t.data<float>();
  for (int64_t i = 0; i < t.numElements(); ++i)
    if (bitsOf(p[i]) & 0xffffu)
      return false;
  return true;
}

void expectSameBits(const Tensor &got, const Tensor &want, const char *what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(std::memcmp(got.rawData(), want.rawData(), got.byteSize()), 0)
      << what << " differs from the f32 op on rounded operands";
}

// Which computation ran. Where the CPU has bf16 instructions, oneDNN's bf16
// primitive writes dst_layer in bf16: every output element is a bf16 value
// (low 16 bits zero; an f32 primitive's outputs are not), and the outputs
// differ from the f32 layer's by bf16-sized amounts (more than 1e-4, less
// than 2e-2). Without them (DTF_BF16_NATIVE=0: the ctest
// kernels.RecurrentMixedPrecisionFallback), the layer is the f32 op on
// operands rounded by Bf16.h, bit for bit, gradients included.
TEST(RecurrentMixedPrecision, Bf16RunsTheBf16PrimitiveOrTheFallback) {
  for (bool lstm : {true, false}) {
    SCOPED_TRACE(lstm ? "lstm" : "gru");
    Layer l = makeLayer(lstm, {5, 7, 6, 11, false}, 33);
    LayerOutputs low = runLayer(l, l.in, "bf16");
    if (cpu::bf16Native()) {
      LayerOutputs f32 = runLayer(l, l.in, "");
      EXPECT_FALSE(allBf16(f32.infer)) << "the check cannot tell the primitives apart";
      for (const Tensor *t : {&low.infer, &low.train}) {
        EXPECT_TRUE(allBf16(*t)) << "an output element is not a bf16 value: not the bf16 primitive";
        const double apart = worstError(*t, valuesOf(f32.train));
        EXPECT_GT(apart, 1e-4);
        EXPECT_LT(apart, 2e-2);
      }
      continue;
    }
    std::printf("note: no AVX512-BF16/AMX here (or DTF_BF16_NATIVE=0): checking the "
                "fallback, the f32 op on bf16-rounded operands\n");
    std::vector<Tensor> rounded = l.in;
    for (int i = 0; i < 3; ++i)
      rounded[i] = roundedThrough(l.in[i], false);
    LayerOutputs want = runLayer(l, rounded, "");
    expectSameBits(low.infer, want.infer, "output");
    expectSameBits(low.train, want.train, "training output");
    for (size_t i = 0; i < want.grads.size(); ++i)
      expectSameBits(low.grads[i], want.grads[i], "a gradient");
  }
}

// compute_dtype "f16" (mixed_float16): oneDNN 2.6 has no f16 RNN on the
// CPU, so the layer is the f32 op on f16-rounded x and weights, bit for
// bit, on every CPU.
TEST(RecurrentMixedPrecision, F16RunsTheF32PrimitiveOnF16RoundedOperands) {
  for (bool lstm : {true, false}) {
    SCOPED_TRACE(lstm ? "lstm" : "gru");
    Layer l = makeLayer(lstm, {3, 5, 4, 7, true}, 44);
    std::vector<Tensor> rounded = l.in;
    for (int i = 0; i < 3; ++i)
      rounded[i] = roundedThrough(l.in[i], true);
    LayerOutputs low = runLayer(l, l.in, "f16"), want = runLayer(l, rounded, "");
    expectSameBits(low.infer, want.infer, "output");
    expectSameBits(low.train, want.train, "training output");
    for (size_t i = 0; i < want.grads.size(); ++i)
      expectSameBits(low.grads[i], want.grads[i], "a gradient");
    LayerOutputs f32 = runLayer(l, l.in, "");
    EXPECT_NE(std::memcmp(f32.train.rawData(), low.train.rawData(), f32.train.byteSize()), 0)
        << "f16 rounding changed nothing: the test cannot tell";
  }
}

TEST(RecurrentMixedPrecision, AnotherComputeDtypeIsRefused) {
  Layer l = makeLayer(true, {1, 2, 2, 2, false}, 5);
  KernelRun run("dtf.lstm");
  for (const Tensor &t : l.in)
    run.in(t);
  run.attr("compute_dtype", std::string("f8"));
  EXPECT_NE(errorOf(run).find("dtf.lstm: compute_dtype is \"bf16\", \"f16\" or absent"),
            std::string::npos)
      << errorOf(run);
}

} // namespace
} // namespace dtf::test
