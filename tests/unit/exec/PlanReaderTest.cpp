// Reading plan.bin: versions, structural errors, and truncated or corrupted
// files, which must give a message and never a crash.
#include "runtime/plan/PlanReader.h"
#include "runtime/exec/Executor.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/TestPlans.h"
#include "dtf/OpTable.h"
#include "schema/PlanSeal.h"

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <functional>
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

// As dtfc writes it: sealed with its digests.
std::string serialize(const plan::Plan &p) { return plan::sealPlan(p); }

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
  EXPECT_EQ(s.message(),
            "plan.bin was written by a newer dtfc (format " +
                std::to_string(plan::kPlanFormatVersion + 1) +
                "); this dtf-run reads format " +
                std::to_string(plan::kPlanFormatVersion));
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
// The program's first input (the logistic regression's x: f32).
int inputValue(const plan::Program &program) {
  for (const plan::Op &op : program.ops())
    if (op.name() == "dtf.input")
      return op.outputs(0);
  return -1;
}

// Op `spec` with `inputs` and `outputs` values, each of the first element
// type its ODS constraint allows (the inputs fed), and its required
// attributes but `skipAttr`, of their kind or (`wrongKind`) another.
plan::Plan planWithOp(const dtf::ops::OpSpec &spec, int inputs, int outputs,
                    const char *skipAttr = "", bool wrongKind = false) {
  auto dtypeOf = [](const dtf::ops::ValueSpec *v, int n, int k) {
    const unsigned mask = k < n ? v[k].dtypes : 0x2u;
    for (int d = 1; d < 8; ++d)
      if (mask & (1u << d))
        return plan::DType(d);
    return plan::F32;
  };
  plan::Plan p = logisticRegressionPlan();
  plan::Program *t = p.mutable_train_step();
  plan::Op *op = t->add_ops();
  op->set_name(spec.name);
  op->set_location("test.dtf:4:9");
  for (int k = 0; k < inputs; ++k) {
    const int operand = k - spec.variables;
    plan::Value *v = t->add_values();
    v->set_id(4000 + k);
    v->mutable_type()->set_dtype(
        operand < 0 ? plan::F32 : dtypeOf(spec.inputs, spec.numInputs, operand));
    plan::Feed *f = t->add_feeds();
    f->set_name(strCat("in", k));
    f->set_value(4000 + k);
    op->add_inputs(4000 + k);
  }
  for (int k = 0; k < outputs; ++k) {
    plan::Value *v = t->add_values();
    v->set_id(3000 + k);
    v->mutable_type()->set_dtype(dtypeOf(spec.outputs, spec.numOutputs, k));
    op->add_outputs(3000 + k);
  }
  for (int k = 0; k < spec.numAttrs; ++k) {
    const dtf::ops::AttrSpec &a = spec.attrs[k];
    if (!a.required || a.name == std::string(skipAttr))
      continue;
    plan::AttrValue &v = (*op->mutable_attrs())[a.name];
    if (wrongKind) { // a string where it takes anything else, and back
      a.kind == dtf::ops::AttrKind::kString ? v.set_i(1) : v.set_s("x");
      continue;
    }
    switch (a.kind) {
      case dtf::ops::AttrKind::kInt: v.set_i(1); break;
      case dtf::ops::AttrKind::kFloat: v.set_f(1); break;
      case dtf::ops::AttrKind::kBool: v.set_b(true); break;
      case dtf::ops::AttrKind::kString: v.set_s("x"); break;
      case dtf::ops::AttrKind::kInts: v.mutable_ints(); break;
      case dtf::ops::AttrKind::kTensor: v.mutable_tensor(); break;
      case dtf::ops::AttrKind::kFloats: v.mutable_floats(); break;
    }
  }
  return p;
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
    auto attrs = [](plan::Op *op) {
      (*op->mutable_attrs())["padding"].set_s("valid");
      for (const char *a : {"window", "strides", "input_shape"})
        (*op->mutable_attrs())[a].mutable_ints()->add_values(2);
    };
    attrs(pool);
    pool->add_outputs(1000);
    pool->add_outputs(1001);
    plan::Op *grad = t->add_ops();
    grad->set_name("dtf.max_pool_grad_with_argmax");
    grad->set_location("test.dtf:9:1");
    attrs(grad);
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
  // A float argmax: refused by the op's ODS result type already.
  EXPECT_EQ(loadError(planWith({-1, 2, 2, 2}, plan::F32, 1)),
            "plan.bin: train_step: op #20 dtf.max_pool_with_argmax result "
            "'argmax' (result 1) of type f32[B,2,2,2] is not of an element "
            "type the op takes");
  EXPECT_EQ(loadError(planWith({-1, 2, 2, 2}, plan::I32, 0)),
            "plan.bin: train_step: test.dtf:9:1: "
            "dtf.max_pool_grad_with_argmax has 1 results, the plan gives it 0");
}

// The recurrent layers' library ops have fixed input and result counts,
// which the reader checks before their kernels index them (the kernels read
// input 4 of a dtf.gru, output 4 of a dtf.gru_grad).
TEST(PlanReader, RecurrentOpsWithTheWrongArityAreRefused) {
  auto planWith = [](const char *name, int inputs, int outputs) {
    return planWithOp(*dtf::ops::findSpec(name), inputs, outputs);
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

// Every op of the dialect is read against its ODS definition (dtf/OpTable.h):
// an op one input short, one result short, without an attribute it needs or
// with one of the wrong kind is refused naming it; a name the dialect lacks
// and an input of an element type the op does not take too.
TEST(PlanReader, EveryOpIsReadAgainstItsOdsDefinition) {
  auto ones = [](const dtf::ops::ValueSpec *v, int n) {
    int c = 0;
    for (int k = 0; k < n; ++k)
      c += v[k].arity == dtf::ops::Arity::kOne;
    return c;
  };
  int checked = 0;
  for (const dtf::ops::OpSpec &spec : dtf::ops::kSpecs) {
    const int in = spec.variables + ones(spec.inputs, spec.numInputs);
    const int out = ones(spec.outputs, spec.numOutputs);
    const std::string where = strCat("plan.bin: train_step: test.dtf:4:9: ", spec.name);
    if (in > 0) {
      EXPECT_EQ(loadError(planWithOp(spec, in - 1, out, "", false)).rfind(where + " takes ", 0), 0u)
          << spec.name;
      ++checked;
    }
    if (out > 0) {
      EXPECT_EQ(loadError(planWithOp(spec, in, out - 1, "", false)).rfind(where + " has ", 0), 0u)
          << spec.name;
    }
    for (int k = 0; k < spec.numAttrs; ++k) {
      if (!spec.attrs[k].required)
        continue;
      EXPECT_EQ(loadError(planWithOp(spec, in, out, spec.attrs[k].name, false)),
                strCat(where, " needs attribute '", spec.attrs[k].name, "'"));
      EXPECT_NE(loadError(planWithOp(spec, in, out, "", true)).find(" must be "),
                std::string::npos)
          << spec.name;
    }
  }
  EXPECT_GT(checked, 60); // nearly every op takes an input
  {
    // bucketize's boundaries are numbers (AttrKind::kFloats): a list of
    // integers is another kind.
    plan::Plan p = planWithOp(*dtf::ops::findSpec("dtf.bucketize"), 1, 1);
    plan::Op *op = p.mutable_train_step()->mutable_ops(
        p.train_step().ops_size() - 1);
    (*op->mutable_attrs())["boundaries"].mutable_ints()->add_values(1);
    EXPECT_EQ(loadError(p), "plan.bin: train_step: test.dtf:4:9: dtf.bucketize "
                            "attribute 'boundaries' must be a list of numbers");
  }
  {
    plan::Plan p = logisticRegressionPlan();
    p.mutable_train_step()->mutable_ops(4)->set_name("dtf.matmul2");
    EXPECT_EQ(loadError(p), "plan.bin: train_step: test.dtf:5:1: dtf.matmul2 is "
                            "not an op of the dtf dialect (a plan of another "
                            "dtfc? recompile it with this one)");
  }
  {
    // The labels of the cross-entropy (an integer) given as floats.
    plan::Plan p = logisticRegressionPlan();
    plan::Program *t = p.mutable_train_step();
    const int x = inputValue(*t);
    plan::Op *op = t->add_ops();
    op->set_name("dtf.one_hot");
    op->set_location("test.dtf:4:9");
    op->add_inputs(x);
    plan::Value *v = t->add_values();
    v->set_id(3000);
    v->mutable_type()->set_dtype(plan::F32);
    op->add_outputs(3000);
    (*op->mutable_attrs())["depth"].set_i(3);
    EXPECT_NE(loadError(p).find("dtf.one_hot input 'indices' (input 0) of type f32"),
              std::string::npos)
        << loadError(p);
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
  // The whole plan loads; no prefix does (the seal ends the file).
  EXPECT_EQ(loaded, 0) << "of " << cases << " truncations";
  loadAsFarAsItGoes(bytes, &loaded);
  EXPECT_EQ(loaded, 1);
}

TEST(PlanReader, EveryChangedByteIsRefusedByTheSeal) {
  const std::string bytes = serialize(logisticRegressionPlan());
  int refused = 0, changed = 0;
  for (size_t at = 0; at < bytes.size(); ++at)
    for (unsigned char flip : {0x01, 0x80}) {
      std::string corrupted = bytes;
      corrupted[at] = char(corrupted[at] ^ flip);
      ++changed;
      plan::Plan out;
      Status s = plan::parsePlan(corrupted, "plan.bin", &out);
      refused += !s.isOk();
      if (s.isOk())
        ADD_FAILURE() << "a flip of byte " << at << " of " << bytes.size()
                      << " loaded";
      else if (s.message().find("plan.bin") == std::string::npos)
        ADD_FAILURE() << "a refusal without the file's name: " << s.message();
    }
  EXPECT_EQ(refused, changed);
  // Bytes after the seal are refused too.
  plan::Plan out;
  Status s = plan::parsePlan(bytes + std::string("\x08\x01", 2), "plan.bin", &out);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("does not end with its integrity digest"),
            std::string::npos)
      << s.message();
}

TEST(PlanReader, APlanWithoutASealIsRefusedAsOlder) {
  plan::Plan p = logisticRegressionPlan();
  std::string bytes;
  ASSERT_TRUE(p.SerializeToString(&bytes));
  plan::Plan out;
  Status s = plan::parsePlan(bytes, "old.bin", &out);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("old.bin has no integrity digest"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("compile the model again"), std::string::npos);
}

// Fields a run may not use are checked all the same, each refusal naming
// the file and the field (an outside trial found these accepted).
TEST(PlanReader, EveryFieldIsCheckedAgainstWhatItMayHold) {
  struct Case {
    const char *what;
    std::function<void(plan::Plan *)> damage;
    const char *says;
  };
  const std::vector<Case> cases = {
      {"inter_op_threads", [](plan::Plan *p) {
         p->mutable_session()->set_inter_op_threads(1000000);
       }, "plan.bin: session.inter_op_threads = 1000000 is outside 0..1024"},
      {"intra_op_threads", [](plan::Plan *p) {
         p->mutable_session()->set_intra_op_threads(-1);
       }, "plan.bin: session.intra_op_threads = -1 is outside 0..1024"},
      {"gpu_towers", [](plan::Plan *p) {
         p->mutable_session()->set_gpu_towers(1 << 20);
       }, "session.gpu_towers = 1048576 is outside 0..64"},
      {"partitions", [](plan::Plan *p) {
         p->mutable_variables(0)->set_partitions(int64_t(1) << 40);
       }, "plan.bin: variable 'W' has partitions = 1099511627776; a variable "
          "splits into 1 to 4 shards"},
      {"role", [](plan::Plan *p) {
         p->mutable_variables(0)->set_role("weights");
       }, "plan.bin: variable 'W' has the unknown role 'weights'"},
      {"slot_of", [](plan::Plan *p) {
         p->mutable_variables(1)->set_role("slot");
         p->mutable_variables(1)->set_slot_of("missing");
       }, "plan.bin: variable 'b' (role 'slot') has slot_of 'missing'"},
      {"optimizer", [](plan::Plan *p) {
         p->mutable_variables(1)->set_role("global_step");
         p->mutable_variables(1)->set_optimizer("ftrl");
       }, "(role 'global_step') names the optimizer 'ftrl'; only a model variable is updated by one"},
      {"slot_of without a slot role", [](plan::Plan *p) {
         p->mutable_variables(1)->set_slot_of("W");
       }, "has slot_of 'W'; a slot or moving average names another variable"},
      {"stddev inf", [](plan::Plan *p) {
         plan::Initializer *init = p->mutable_variables(0)->mutable_initializer();
         init->set_kind("normal");
         (*init->mutable_params())["stddev"] = HUGE_VAL;
       }, "plan.bin: variable 'W': its normal initializer has stddev = inf"},
      {"stddev negative", [](plan::Plan *p) {
         plan::Initializer *init = p->mutable_variables(0)->mutable_initializer();
         init->set_kind("truncated_normal");
         (*init->mutable_params())["stddev"] = -1;
       }, "has a negative stddev -1"},
      {"orthogonal of a vector", [](plan::Plan *p) {
         p->mutable_variables(1)->mutable_initializer()->set_kind("orthogonal");
       }, "plan.bin: variable 'b': the orthogonal initializer needs a variable "
          "of rank 2 or more, got f32[3]"},
      {"cosine_decay without steps", [](plan::Plan *p) {
         plan::Schedule *s =
             p->mutable_training()->mutable_optimizer()->mutable_learning_rate();
         s->set_kind("cosine_decay");
         s->set_learning_rate(0.1);
       }, "plan.bin: the cosine_decay schedule has decay_steps 0; it must be "
          "at least 1"},
      {"cosine_decay warming up to 0", [](plan::Plan *p) {
         plan::Schedule *s =
             p->mutable_training()->mutable_optimizer()->mutable_learning_rate();
         s->set_kind("cosine_decay");
         s->set_decay_steps(10);
         s->set_warmup_target(0);
       }, "the cosine_decay schedule has warmup_target 0; it must be positive"},
      {"minval above maxval", [](plan::Plan *p) {
         plan::Initializer *init = p->mutable_variables(0)->mutable_initializer();
         init->set_kind("uniform");
         (*init->mutable_params())["minval"] = 2;
       }, "its uniform initializer has minval 2 above maxval 1"},
  };
  for (const Case &c : cases) {
    plan::Plan p = logisticRegressionPlan();
    ASSERT_EQ(p.variables(0).type().shape().dims(0), 4) << "W is [4, classes]";
    c.damage(&p);
    EXPECT_NE(loadError(p).find(c.says), std::string::npos)
        << c.what << ": " << loadError(p);
  }
}

// The reader behind the seal: plans whose bytes were changed and sealed
// again (by a tool of the user's, say) still fail with a message or load a
// valid plan.
TEST(PlanReader, CorruptedPlansFailWithAMessageOrLoadValidly) {
  const std::string bytes = logisticRegressionPlan().SerializeAsString();
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
    plan::Plan reparsed;
    if (!reparsed.ParseFromString(corrupted))
      continue; // the protobuf itself is refused before any seal
    loadAsFarAsItGoes(serialize(reparsed), &loaded);
    if (::testing::Test::HasFatalFailure())
      return;
  }
  std::printf("[ info ] %d of %d corrupted plans still loaded\n", loaded,
              kCases);
}

} // namespace
} // namespace dtf::testing
