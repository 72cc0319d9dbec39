// mixed_float16's dynamic loss scale on the ps (docs/protocol.md, "Loss
// scaling across the ps"): the ps_update a cut plan holds (a guard over the
// pushed flag that holds no tensor, a skippable gradient and learning rate,
// the scale's adjustment), bound to 2 ps tasks: each runs the guard; a push
// whose flag is false may lack the skippable values, the update is skipped
// and the scale halved; a finite push updates and counts; a push lacking a
// gradient while its flag is true is refused. Sync: the replicas' flags are
// ANDed and withheld values left out of the sums.
#include "dtf/OpNames.h"
#include "runtime/distributed/PsStore.h"
#include "runtime/distributed/PsUpdate.h"
#include "runtime/distributed/SyncAggregator.h"
#include "schema/Placement.h"
#include "schema/PlanSchema.h"

#include <gtest/gtest.h>

namespace dtf::dist::ps {
namespace {

plan::Variable *addVariable(plan::Plan &p, const char *name, plan::DType dtype,
                            std::vector<int64_t> dims, double value) {
  plan::Variable *v = p.add_variables();
  v->set_name(name);
  v->mutable_type()->set_dtype(dtype);
  for (int64_t d : dims)
    v->mutable_type()->mutable_shape()->add_dims(d);
  v->mutable_initializer()->set_kind("constant");
  (*v->mutable_initializer()->mutable_params())["value"] = value;
  v->set_partitions(1);
  v->set_role("model");
  return v;
}

// W: f32[4] = 1 updated by sgd; loss_scale = 1024 and its count = 3, with
// growth_steps 4; the ps_update of dtf-cut-train-step and
// dtf-shard-ps-update for it.
plan::Plan lossScalePlan() {
  plan::Plan p;
  p.set_format_version(plan::kPlanFormatVersion);
  p.set_model("loss_scale_ps");
  addVariable(p, "W", plan::F32, {4}, 1.0)->set_trainable(true);
  addVariable(p, "loss_scale", plan::F32, {}, 1024.0);
  addVariable(p, "loss_scale_good_steps", plan::I64, {}, 3.0);
  plan::Program *ps = p.mutable_ps_update();
  ps->set_name("ps_update");
  auto value = [&](int id, plan::DType dtype, std::vector<int64_t> dims) {
    plan::Value *v = ps->add_values();
    v->set_id(id);
    v->mutable_type()->set_dtype(dtype);
    for (int64_t d : dims)
      v->mutable_type()->mutable_shape()->add_dims(d);
  };
  value(0, plan::BOOL, {});
  value(1, plan::F32, {4});
  value(2, plan::F32, {});
  value(3, plan::F32, {4});
  value(4, plan::F32, {});
  value(5, plan::I64, {});
  auto op = [&](const char *name, std::vector<int> in, std::vector<int> out,
                const char *held) {
    plan::Op *o = ps->add_ops();
    o->set_name(name);
    for (int i : in)
      o->add_inputs(i);
    for (int i : out)
      o->add_outputs(i);
    o->set_held(held);
    return o;
  };
  op(dtf::ops::kSkipUpdatesUnless, {0}, {}, "");
  (*op(dtf::ops::kReadVariable, {}, {3}, "W")->mutable_attrs())["name"].set_s(
      "W");
  op(dtf::ops::kApplySgd, {3, 1, 2}, {}, "W");
  (*op(dtf::ops::kReadVariable, {}, {4}, "loss_scale")->mutable_attrs())["name"]
      .set_s("loss_scale");
  (*op(dtf::ops::kReadVariable, {}, {5}, "loss_scale")->mutable_attrs())["name"]
      .set_s("loss_scale_good_steps");
  (*op(dtf::ops::kAdjustLossScale, {4, 5, 0}, {}, "loss_scale")
        ->mutable_attrs())["growth_steps"]
      .set_i(4);
  auto recv = [&](const char *key, int id, const char *variable,
                  bool skippable) {
    plan::Transfer *t = ps->add_recvs();
    t->set_key(key);
    t->set_value(id);
    t->set_variable(variable);
    t->set_skippable(skippable);
    plan::Feed *f = ps->add_feeds();
    f->set_name(key);
    f->set_value(id);
  };
  recv("loss_scale:finite", 0, "loss_scale", false);
  recv("W:grad", 1, "W", true);
  recv("W:apply_sgd:2", 2, "W", true);
  p.mutable_training()->set_seed(1);
  return p;
}

Tensor scalarBool(bool b) {
  Tensor t = Tensor::allocate(DType::Bool, {});
  t.data<bool>()[0] = b;
  return t;
}

Tensor f32(std::vector<float> values, std::vector<int64_t> dims) {
  Tensor t = Tensor::allocate(DType::F32, dims);
  for (size_t i = 0; i < values.size(); ++i)
    t.data<float>()[i] = values[i];
  return t;
}

TEST(LossScalePs, EveryPsRunsTheGuardAndTheScalesPsHalvesOnANonFinitePush) {
  plan::Plan p = lossScalePlan();
  plan::Placement placement;
  ASSERT_TRUE(plan::placeVariables(p, 2, "round_robin", &placement).isOk());
  // Each ps's program starts with the guard over the flag it receives.
  for (int k = 0; k < 2; ++k) {
    plan::Program program;
    ASSERT_TRUE(plan::psProgramFor(p, placement, k, &program).isOk());
    ASSERT_GT(program.ops_size(), 1);
    EXPECT_EQ(program.ops(0).name(), dtf::ops::kSkipUpdatesUnless) << k;
    bool flag = false;
    for (const plan::Transfer &r : program.recvs())
      flag |= r.key() == "loss_scale:finite";
    EXPECT_TRUE(flag) << "ps " << k << " does not receive the flag";
  }
  // One ps holding everything: the update, the scale and its count.
  plan::Placement one;
  ASSERT_TRUE(plan::placeVariables(p, 1, "round_robin", &one).isOk());
  PsStore store(p, one, 0);
  ASSERT_TRUE(store.setUp().isOk());
  PsUpdate update("ps.0");
  ASSERT_TRUE(update.setUp(p, one, 0, store).isOk());
  ASSERT_EQ(update.keys().size(), 3u);
  EXPECT_EQ(update.flagKey(), 0);
  EXPECT_EQ(update.skippable(), (std::vector<bool>{false, true, true}));
  Tensor *w = store.variables().find("W");
  Tensor *scale = store.variables().find("loss_scale");
  Tensor *count = store.variables().find("loss_scale_good_steps");
  ASSERT_TRUE(w && scale && count);

  // The flag false and the gradients withheld: taken, W unchanged, the
  // scale halved and the count reset.
  std::string refusal;
  uint64_t rows = 0;
  std::vector<Tensor> skipped = {scalarBool(false), Tensor(), Tensor()};
  ASSERT_TRUE(update.checkValues(skipped, "worker.1", &refusal, &rows).isOk());
  ASSERT_TRUE(update.run(skipped, 0).isOk());
  EXPECT_FLOAT_EQ(w->data<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(scale->data<float>()[0], 512.0f);
  EXPECT_EQ(count->data<int64_t>()[0], 0);

  // A finite push: W -= 0.5 * g, and the count goes up.
  std::vector<Tensor> finite = {scalarBool(true), f32({2, 2, 2, 2}, {4}),
                                f32({0.5f}, {})};
  ASSERT_TRUE(update.checkValues(finite, "worker.0", &refusal, &rows).isOk());
  ASSERT_TRUE(update.run(finite, 1).isOk());
  EXPECT_FLOAT_EQ(w->data<float>()[3], 0.0f);
  EXPECT_FLOAT_EQ(scale->data<float>()[0], 512.0f);
  EXPECT_EQ(count->data<int64_t>()[0], 1);

  // The flag true without the gradient: refused, naming what it lacks.
  std::vector<Tensor> lacking = {scalarBool(true), Tensor(), f32({0.5f}, {})};
  Status s = update.checkValues(lacking, "worker.1", &refusal, &rows);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("ps.0 refused the push of worker.1: it lacks "
                             "'W:grad', which only a step whose "
                             "'loss_scale:finite' flag is false may leave out"),
            std::string::npos)
      << s.message();
  // Non-finite gradients are refused whatever the flag says.
  std::vector<Tensor> inf = {scalarBool(false), f32({1, 1, 1e38f * 10, 1}, {4}),
                             f32({0.5f}, {})};
  EXPECT_FALSE(update.checkValues(inf, "worker.1", &refusal, &rows).isOk());
  EXPECT_NE(refusal.find("non-finite"), std::string::npos) << refusal;
}

TEST(LossScalePs, SyncReplicasAgreeOneNonFiniteContributionSkipsTheUpdate) {
  SyncAggregator a(/*replicas=*/2, "");
  const std::vector<bool> concat = {false, false};
  std::vector<Tensor> r0 = {scalarBool(true), f32({2, 4}, {2})};
  std::vector<Tensor> r1 = {scalarBool(false), Tensor()}; // withheld
  a.add(r0, "worker.0", concat);
  a.add(r1, "worker.1", concat);
  ASSERT_TRUE(a.complete(2));
  std::vector<Tensor> &avg = a.average();
  EXPECT_FALSE(avg[0].data<bool>()[0]) << "the flags were not ANDed";
  ASSERT_TRUE(avg[1].defined()); // only what came (the update skips it)
  // The other order: the withheld replica first.
  a.applied(0);
  std::vector<Tensor> s0 = {scalarBool(false), Tensor()};
  std::vector<Tensor> s1 = {scalarBool(true), f32({2, 4}, {2})};
  a.add(s0, "worker.1", concat);
  a.add(s1, "worker.0", concat);
  std::vector<Tensor> &avg2 = a.average();
  EXPECT_FALSE(avg2[0].data<bool>()[0]);
  ASSERT_TRUE(avg2[1].defined());
  // Both finite: true, and the gradients averaged.
  a.applied(1);
  std::vector<Tensor> t0 = {scalarBool(true), f32({2, 4}, {2})};
  std::vector<Tensor> t1 = {scalarBool(true), f32({4, 8}, {2})};
  a.add(t0, "worker.0", concat);
  a.add(t1, "worker.1", concat);
  std::vector<Tensor> &avg3 = a.average();
  EXPECT_TRUE(avg3[0].data<bool>()[0]);
  EXPECT_FLOAT_EQ(avg3[1].data<float>()[1], 6.0f);
}

} // namespace
} // namespace dtf::dist::ps
