// write-summaries-test-plan: writes the plan that
// tests/summaries/tensorboard.sh trains when dtfc is not built, with the
// settings of synthetic.dtf (60 steps, summaries every 20 steps, eval every 30,
// a staircase exponential decay).
#include "tests/unit/exec/TestPlans.h"
#include "schema/PlanSeal.h"

#include <cstdio>
#include <fstream>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PLAN_OUT\n", argv[0]);
    return 2;
  }
  dtf::testing::LogisticRegressionOptions o;
  o.features = 8;
  o.batch = 16;
  o.steps = 60;
  o.evalEvery = 30;
  o.learningRateFeed = true;
  dtf::plan::Plan p = dtf::testing::logisticRegressionPlan(o);
  p.set_model("summaries_test");
  dtf::plan::Training *t = p.mutable_training();
  dtf::plan::Schedule *lr = t->mutable_optimizer()->mutable_learning_rate();
  lr->set_kind("exponential_decay");
  lr->set_learning_rate(0.5);
  lr->set_decay_steps(20);
  lr->set_decay_rate(0.5);
  lr->set_staircase(true);
  t->set_summary_every(20);
  t->set_summary_unit("steps");
  t->add_summaries("loss");
  t->add_summaries("accuracy");
  std::ofstream f(argv[1], std::ios::binary);
  if (!(f << dtf::plan::sealPlan(p))) { // as dtfc writes it
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
