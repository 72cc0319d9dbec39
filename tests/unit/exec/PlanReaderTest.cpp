// Reading plan.bin: versions, structural errors, and truncated or corrupted
// files, which must give a message and never a crash.
#include "runtime/plan/PlanReader.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/TestPlans.h"

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>

namespace dtf::testing {
namespace {

using plan::PlanErrorKind;

// Corrupted plans make protobuf log about bad UTF-8; the reader's own
// message is what matters.
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

std::string serialize(const plan::Plan &p) {
  std::string bytes;
  EXPECT_TRUE(p.SerializeToString(&bytes));
  return bytes;
}

Status parse(const plan::Plan &p, plan::Plan *out,
             PlanErrorKind *kind = nullptr) {
  return plan::parsePlan(serialize(p), "plan.bin", out, kind);
}

// The message of a plan that must fail to load.
std::string loadError(const plan::Plan &p) {
  plan::Plan out;
  Status s = parse(p, &out);
  EXPECT_FALSE(s.isOk());
  return s.message();
}

TEST(PlanReader, ReadsAValidPlanFromAFile) {
  plan::Plan p = logisticRegressionPlan();
  std::string path = (std::filesystem::temp_directory_path() /
                      ("dtf-plan-" + std::to_string(::getpid()) + ".bin"))
                         .string();
  {
    std::ofstream f(path, std::ios::binary);
    f << serialize(p);
  }
  plan::Plan out;
  PlanErrorKind kind;
  Status s = plan::readPlanFile(path, &out, &kind);
  std::filesystem::remove(path);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(kind, PlanErrorKind::kNone);
  EXPECT_EQ(out.model(), "logistic_regression");
  EXPECT_EQ(out.train_step().ops_size(), p.train_step().ops_size());
}

TEST(PlanReader, MissingFileIsUnreadable) {
  plan::Plan out;
  PlanErrorKind kind;
  Status s = plan::readPlanFile("/nonexistent/dir/plan.bin", &out, &kind);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, PlanErrorKind::kUnreadable);
  EXPECT_NE(s.message().find("cannot open plan '/nonexistent/dir/plan.bin'"),
            std::string::npos)
      << s.message();
}

TEST(PlanReader, NewerFormatIsRefusedWithBothVersions) {
  plan::Plan p = logisticRegressionPlan();
  p.set_format_version(plan::kPlanFormatVersion + 1);
  plan::Plan out;
  PlanErrorKind kind;
  Status s = parse(p, &out, &kind);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, PlanErrorKind::kNewerFormat);
  EXPECT_EQ(s.message(), "plan.bin was written by a newer dtfc (format 4); "
                         "this dtf-run reads format 3");
}

TEST(PlanReader, EmptyAndVersionlessInputsAreNotPlans) {
  plan::Plan out;
  Status s = plan::parsePlan("", "plan.bin", &out);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("plan.bin is empty"), std::string::npos);
  plan::Plan p = logisticRegressionPlan();
  p.clear_format_version();
  EXPECT_NE(loadError(p).find("is not a dtf plan"), std::string::npos);
  s = plan::parsePlan("this is some text, not a plan", "notes.txt", &out);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("notes.txt", 0), 0u) << s.message();
}

TEST(PlanReader, StructuralErrorsNameTheProgramAndOp) {
  {
    plan::Plan p = logisticRegressionPlan();
    // The matmul reads a value nobody defines.
    p.mutable_train_step()->mutable_ops(4)->set_inputs(0, 999);
    std::string m = loadError(p);
    EXPECT_NE(m.find("plan.bin: train_step: test.dtf:5:1: dtf.matmul reads "
                     "value 999, which is not declared"),
              std::string::npos)
        << m;
  }
  {
    plan::Plan p = logisticRegressionPlan();
    // Swap two ops: the add then reads the matmul's result before it exists.
    p.mutable_train_step()->mutable_ops()->SwapElements(4, 5);
    std::string m = loadError(p);
    EXPECT_NE(m.find("before any op defines it"), std::string::npos) << m;
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_train_step()->mutable_values(3)->set_id(2);
    EXPECT_NE(loadError(p).find("value 2 is declared twice"),
              std::string::npos);
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_train_step()->mutable_ops(5)->add_outputs(0);
    EXPECT_NE(loadError(p).find("already defined by"), std::string::npos);
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_variables(1)->set_name("bias");
    std::string m = loadError(p);
    EXPECT_NE(m.find("reads variable 'b', which the plan does not declare"),
              std::string::npos)
        << m;
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_variables(0)->mutable_initializer()->set_kind("xavier");
    EXPECT_NE(loadError(p).find("variable 'W' has an unknown initializer "
                                "'xavier'"),
              std::string::npos);
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_variables(0)->mutable_type()->mutable_shape()->set_dims(0, -1);
    EXPECT_NE(loadError(p).find("needs a static shape"), std::string::npos);
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_train_step()->clear_fetches();
    EXPECT_NE(loadError(p).find("fetches nothing"), std::string::npos);
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_train_step()->mutable_fetches(0)->set_value(2); // read of W
    p.mutable_train_step()->mutable_values(2)->mutable_type()->set_dtype(
        plan::I32);
    std::string m = loadError(p);
    EXPECT_FALSE(m.empty());
  }
  {
    plan::Plan p = logisticRegressionPlan();
    // apply_sgd must update a variable, not a computed value.
    plan::Program *t = p.mutable_train_step();
    for (plan::Op &op : *t->mutable_ops())
      if (op.name() == "dtf.apply_sgd") {
        op.set_inputs(0, op.inputs(1));
        break;
      }
    EXPECT_NE(loadError(p).find("must be a dtf.read_variable result"),
              std::string::npos);
  }
  {
    plan::Plan p = logisticRegressionPlan();
    plan::Op *c = nullptr;
    for (plan::Op &op : *p.mutable_train_step()->mutable_ops())
      if (op.name() == "dtf.constant")
        c = &op;
    ASSERT_NE(c, nullptr);
    (*c->mutable_attrs())["value"].mutable_tensor()->set_data("abc");
    EXPECT_NE(loadError(p).find("needs 4 bytes of data, got 3"),
              std::string::npos);
  }
}

// max_pool_with_argmax and max_pool_grad_with_argmax: the reader checks
// that the argmax is i32 [N, OH, OW, ceil(C / 4)] for the pooled values
// (output 0 or dy) before any kernel reads its bytes.
// The value of a program's (last) dtf.input, for ops added to a test plan.
int inputValue(const plan::Program &program) {
  int x = -1;
  for (const plan::Op &op : program.ops())
    if (op.name() == "dtf.input")
      x = op.outputs(0);
  return x;
}

TEST(PlanReader, PoolArgmaxOfAnotherTypeIsRefused) {
  auto planWith = [](std::vector<int64_t> argmaxDims, plan::DType argmaxDType,
                     int gradOutputs) {
    plan::Plan p = logisticRegressionPlan();
    plan::Program *t = p.mutable_train_step();
    const int x = inputValue(*t);
    auto value = [&](int id, plan::DType dtype, std::vector<int64_t> dims) {
      plan::Value *v = t->add_values();
      v->set_id(id);
      v->mutable_type()->set_dtype(dtype);
      for (int64_t d : dims)
        v->mutable_type()->mutable_shape()->add_dims(d);
    };
    value(1000, plan::F32, {-1, 2, 2, 5});
    value(1001, argmaxDType, argmaxDims);
    value(1002, plan::F32, {-1, 4, 4, 5});
    plan::Op *pool = t->add_ops();
    pool->set_name("dtf.max_pool_with_argmax");
    pool->add_inputs(x);
    pool->add_outputs(1000);
    pool->add_outputs(1001);
    plan::Op *grad = t->add_ops();
    grad->set_name("dtf.max_pool_grad_with_argmax");
    grad->set_location("test.dtf:9:1");
    grad->add_inputs(1001);
    grad->add_inputs(1000);
    for (int k = 0; k < gradOutputs; ++k)
      grad->add_outputs(1002);
    return p;
  };
  plan::Plan out;
  Status ok = parse(planWith({-1, 2, 2, 2}, plan::I32, 1), &out);
  EXPECT_TRUE(ok.isOk()) << ok.message();
  EXPECT_EQ(loadError(planWith({-1, 2, 2, 5}, plan::I32, 1)),
            "plan.bin: train_step: op #20 dtf.max_pool_with_argmax needs its "
            "argmax of type i32[B,2,2,2] (four window-position bytes to an "
            "i32) for pooled values of type f32[B,2,2,5], the plan gives "
            "i32[B,2,2,5]");
  EXPECT_EQ(loadError(planWith({-1, 2, 2, 2}, plan::F32, 1)),
            "plan.bin: train_step: op #20 dtf.max_pool_with_argmax needs its "
            "argmax of type i32[B,2,2,2] (four window-position bytes to an "
            "i32) for pooled values of type f32[B,2,2,5], the plan gives "
            "f32[B,2,2,2]");
  EXPECT_EQ(loadError(planWith({-1, 2, 2, 2}, plan::I32, 0)),
            "plan.bin: train_step: test.dtf:9:1: "
            "dtf.max_pool_grad_with_argmax has 1 results, the plan gives it 0");
}

// The recurrent layers' library ops have fixed input and result counts,
// which the reader checks before their kernels index them (the kernels read
// input 4 of a dtf.gru, output 4 of a dtf.gru_grad).
TEST(PlanReader, RecurrentOpsWithTheWrongArityAreRefused) {
  auto planWith = [](const char *name, int inputs, int outputs) {
    plan::Plan p = logisticRegressionPlan();
    plan::Program *t = p.mutable_train_step();
    const int x = inputValue(*t);
    plan::Op *op = t->add_ops();
    op->set_name(name);
    op->set_location("test.dtf:4:9");
    for (int k = 0; k < inputs; ++k)
      op->add_inputs(x);
    for (int k = 0; k < outputs; ++k) {
      plan::Value *v = t->add_values();
      v->set_id(2000 + k);
      v->mutable_type()->set_dtype(plan::F32);
      op->add_outputs(2000 + k);
    }
    return p;
  };
  plan::Plan out;
  for (auto [name, in, res] : {std::tuple{"dtf.lstm", 4, 1}, {"dtf.lstm_train", 4, 2},
                               {"dtf.lstm_grad", 7, 4}, {"dtf.gru", 5, 1},
                               {"dtf.gru_train", 5, 2}, {"dtf.gru_grad", 8, 5}}) {
    Status ok = parse(planWith(name, in, res), &out);
    EXPECT_TRUE(ok.isOk()) << name << ": " << ok.message();
    EXPECT_EQ(loadError(planWith(name, in - 1, res)),
              strCat("plan.bin: train_step: test.dtf:4:9: ", name, " takes ", in,
                     " inputs, the plan gives it ", in - 1));
    EXPECT_EQ(loadError(planWith(name, in, res - 1)),
              strCat("plan.bin: train_step: test.dtf:4:9: ", name, " has ", res,
                     " results, the plan gives it ", res - 1));
  }
}

// Loads `bytes` as far as it goes; a plan that loads is then initialized,
// built into executors and run for a step on a real batch. Any failure must
// come back as a message.
void loadAsFarAsItGoes(const std::string &bytes, int *loaded) {
  plan::Plan p;
  Status s = plan::parsePlan(bytes, "plan.bin", &p);
  if (!s.isOk()) {
    ASSERT_FALSE(s.message().empty());
    return;
  }
  ++*loaded;
  int64_t elements = 0;
  for (const plan::Variable &v : p.variables()) {
    int64_t n = 1;
    for (int64_t d : v.type().shape().dims())
      n *= d;
    elements += n;
  }
  if (elements > (1 << 20))
    return; // a corrupted dim made a huge (valid) variable; nothing to learn
  exec::VariableStore vars;
  s = train::initializeVariables(p, 1, &vars);
  if (!s.isOk()) {
    ASSERT_FALSE(s.message().empty());
    return;
  }
  std::unique_ptr<exec::Executor> e;
  s = exec::Executor::create(p.train_step(), vars, train::cpuKernelRegistry(),
                             {}, &e);
  if (!s.isOk()) {
    ASSERT_FALSE(s.message().empty());
    return;
  }
  int x = e->findFeed("x"), y = e->findFeed("y");
  if (x < 0 || y < 0)
    return;
  Tensor xs = Tensor::zeros(DType::F32, {8, 4});
  Tensor ys = Tensor::zeros(DType::I32, {8});
  if (!e->setFeed(x, xs).isOk() || !e->setFeed(y, ys).isOk())
    return;
  for (int i = 0; i < e->numFeeds(); ++i)
    if (i != x && i != y)
      return;
  s = e->run(0);
  if (!s.isOk()) {
    ASSERT_FALSE(s.message().empty());
  }
}

TEST(PlanReader, TruncatedPlansFailWithAMessage) {
  const std::string bytes = serialize(logisticRegressionPlan());
  int loaded = 0, cases = 0;
  for (size_t n = 0; n < bytes.size(); n += 7, ++cases)
    loadAsFarAsItGoes(bytes.substr(0, n), &loaded);
  // The whole plan loads; hardly any prefix does.
  loadAsFarAsItGoes(bytes, &loaded);
  EXPECT_GE(loaded, 1);
  EXPECT_LT(loaded, cases / 4) << "most truncations must be caught";
}

TEST(PlanReader, CorruptedPlansFailWithAMessageOrLoadValidly) {
  const std::string bytes = serialize(logisticRegressionPlan());
  // DTF_PLAN_FUZZ_CASES and DTF_PLAN_FUZZ_SEED run more or other cases.
  const char *seedEnv = std::getenv("DTF_PLAN_FUZZ_SEED");
  const char *casesEnv = std::getenv("DTF_PLAN_FUZZ_CASES");
  std::mt19937 rng(seedEnv ? unsigned(std::atol(seedEnv)) : 1234u);
  int loaded = 0;
  const int kCases = casesEnv ? std::atoi(casesEnv) : 3000;
  for (int c = 0; c < kCases; ++c) {
    std::string corrupted = bytes;
    const int flips = 1 + int(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      size_t at = rng() % corrupted.size();
      corrupted[at] = char(rng() % 256);
    }
    loadAsFarAsItGoes(corrupted, &loaded);
    if (::testing::Test::HasFatalFailure())
      return;
  }
  std::printf("[ info ] %d of %d corrupted plans still loaded\n", loaded,
              kCases);
}

} // namespace
} // namespace dtf::testing
