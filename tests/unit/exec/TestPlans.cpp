// Plans built in code for the executor and training tests.
#include "tests/unit/exec/TestPlans.h"

#include <cstring>

namespace dtf::testing {

int ProgramBuilder::value(plan::DType dtype, std::vector<int64_t> dims) {
  plan::Value *v = p_->add_values();
  v->set_id(next_);
  v->mutable_type()->set_dtype(dtype);
  for (int64_t d : dims)
    v->mutable_type()->mutable_shape()->add_dims(d);
  return next_++;
}

plan::Op *ProgramBuilder::op(const std::string &name, std::vector<int> inputs,
                             std::vector<int> outputs,
                             const std::string &location) {
  plan::Op *op = p_->add_ops();
  op->set_name(name);
  for (int i : inputs)
    op->add_inputs(i);
  for (int o : outputs)
    op->add_outputs(o);
  op->set_location(location.empty()
                       ? "test.dtf:" + std::to_string(p_->ops_size()) + ":1"
                       : location);
  return op;
}

int ProgramBuilder::input(const std::string &name, plan::DType dtype,
                          std::vector<int64_t> dims) {
  int v = value(dtype, std::move(dims));
  setAttr(op("dtf.input", {}, {v}), "name", name.c_str());
  plan::Feed *feed = p_->add_feeds();
  feed->set_name(name);
  feed->set_value(v);
  return v;
}

int ProgramBuilder::readVariable(const std::string &name, plan::DType dtype,
                                 std::vector<int64_t> dims) {
  int v = value(dtype, std::move(dims));
  setAttr(op("dtf.read_variable", {}, {v}), "name", name.c_str());
  return v;
}

namespace {
template <typename T>
int addConstant(ProgramBuilder &b, plan::DType dtype, std::vector<int64_t> dims,
                const std::vector<T> &values) {
  int v = b.value(dtype, dims);
  plan::Op *op = b.op("dtf.constant", {}, {v});
  plan::TensorValue *t = (*op->mutable_attrs())["value"].mutable_tensor();
  t->mutable_type()->set_dtype(dtype);
  for (int64_t d : dims)
    t->mutable_type()->mutable_shape()->add_dims(d);
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  t->set_data(bytes);
  return v;
}
} // namespace

int ProgramBuilder::constantF32(std::vector<int64_t> dims,
                                std::vector<float> values) {
  return addConstant(*this, plan::F32, std::move(dims), values);
}

int ProgramBuilder::constantI64(std::vector<int64_t> dims,
                                std::vector<int64_t> values) {
  return addConstant(*this, plan::I64, std::move(dims), values);
}

int ProgramBuilder::compute(const std::string &name, std::vector<int> inputs,
                            plan::DType dtype, std::vector<int64_t> dims) {
  int v = value(dtype, std::move(dims));
  op(name, std::move(inputs), {v});
  return v;
}

void ProgramBuilder::fetch(const std::string &name, int value) {
  plan::Fetch *f = p_->add_fetches();
  f->set_name(name);
  f->set_value(value);
}

void setAttr(plan::Op *op, const std::string &name, int64_t v) {
  (*op->mutable_attrs())[name].set_i(v);
}
void setAttr(plan::Op *op, const std::string &name, double v) {
  (*op->mutable_attrs())[name].set_f(v);
}
void setAttr(plan::Op *op, const std::string &name, bool v) {
  (*op->mutable_attrs())[name].set_b(v);
}
void setAttr(plan::Op *op, const std::string &name, const char *v) {
  (*op->mutable_attrs())[name].set_s(v);
}
void setAttr(plan::Op *op, const std::string &name,
             std::initializer_list<int64_t> v) {
  plan::IntList *list = (*op->mutable_attrs())[name].mutable_ints();
  for (int64_t x : v)
    list->add_values(x);
}

void addVariable(plan::Plan *plan, const std::string &name, plan::DType dtype,
                 std::vector<int64_t> dims, const std::string &init,
                 const std::string &role) {
  plan::Variable *v = plan->add_variables();
  v->set_name(name);
  v->mutable_type()->set_dtype(dtype);
  for (int64_t d : dims)
    v->mutable_type()->mutable_shape()->add_dims(d);
  if (!init.empty())
    v->mutable_initializer()->set_kind(init);
  v->set_trainable(role == "model");
  v->set_role(role);
}

namespace {

struct Forward {
  int x, y, W, b, logits, xent, loss, accuracy;
};

// The model's forward pass and its metrics.
Forward buildForward(ProgramBuilder &g, const LogisticRegressionOptions &o) {
  const int64_t F = o.features, C = o.classes;
  const plan::DType labelType = o.labelsI64 ? plan::I64 : plan::I32;
  Forward f;
  f.x = g.input("x", plan::F32, {-1, F});
  f.y = g.input("y", labelType, {-1});
  f.W = g.readVariable("W", plan::F32, {F, C});
  f.b = g.readVariable("b", plan::F32, {C});
  int mm = g.compute("dtf.matmul", {f.x, f.W}, plan::F32, {-1, C});
  f.logits = g.compute("dtf.add", {mm, f.b}, plan::F32, {-1, C});
  f.xent = g.value(plan::F32, {-1});
  g.op("dtf.sparse_softmax_cross_entropy", {f.logits, f.y}, {f.xent},
       kXentLocation);
  f.loss = g.compute("dtf.mean", {f.xent}, plan::F32, {});
  // argmax's and cast's result dtypes come from the declared types.
  int pred = g.value(labelType, {-1});
  setAttr(g.op("dtf.argmax", {f.logits}, {pred}), "axis", int64_t(1));
  int eq = g.value(plan::BOOL, {-1});
  setAttr(g.op("dtf.compare", {pred, f.y}, {eq}), "predicate", "eq");
  int eqf = g.compute("dtf.cast", {eq}, plan::F32, {-1});
  f.accuracy = g.compute("dtf.mean", {eqf}, plan::F32, {});
  return f;
}

} // namespace

plan::Plan logisticRegressionPlan(const LogisticRegressionOptions &o) {
  plan::Plan p;
  p.set_format_version(1);
  p.set_model("logistic_regression");
  p.set_source("lr.dtf");
  addVariable(&p, "W", plan::F32, {o.features, o.classes}, "zeros");
  addVariable(&p, "b", plan::F32, {o.classes});

  ProgramBuilder g(p.mutable_train_step());
  p.mutable_train_step()->set_name("train_step");
  Forward f = buildForward(g, o);
  int one = g.constantF32({}, {1.0f});
  int dxent = g.value(plan::F32, {-1});
  setAttr(g.op("dtf.reduce_grad", {one, f.xent}, {dxent}), "mean", true);
  int dlogits = g.compute("dtf.sparse_softmax_cross_entropy_grad",
                          {dxent, f.logits, f.y}, plan::F32, {-1, o.classes});
  int dW = g.value(plan::F32, {o.features, o.classes});
  setAttr(g.op("dtf.matmul", {f.x, dlogits}, {dW}), "transpose_a", true);
  int db =
      g.compute("dtf.sum_to_shape", {dlogits, f.b}, plan::F32, {o.classes});
  int lr = o.learningRateFeed ? g.input("learning_rate", plan::F32, {})
                              : g.constantF32({}, {o.learningRate});
  g.op("dtf.apply_sgd", {f.W, dW, lr}, {});
  g.op("dtf.apply_sgd", {f.b, db, lr}, {});
  g.fetch("loss", f.loss);
  g.fetch("accuracy", f.accuracy);

  if (o.withEval) {
    ProgramBuilder e(p.mutable_eval());
    p.mutable_eval()->set_name("eval");
    Forward ef = buildForward(e, o);
    e.fetch("loss", ef.loss);
    e.fetch("accuracy", ef.accuracy);
  }

  plan::Training *t = p.mutable_training();
  t->set_batch(o.batch);
  t->set_steps(o.steps);
  t->set_seed(o.seed);
  t->mutable_optimizer()->set_kind("sgd");
  t->mutable_optimizer()->mutable_learning_rate()->set_kind("constant");
  t->mutable_optimizer()->mutable_learning_rate()->set_learning_rate(
      o.learningRate);
  t->mutable_data()->set_kind("synthetic");
  t->mutable_data()->set_examples(o.examples);
  t->mutable_data()->set_seed(3);
  if (o.withEval) {
    t->mutable_eval()->set_kind("synthetic");
    t->mutable_eval()->set_examples(o.evalExamples);
    t->mutable_eval()->set_every(o.evalEvery);
  }
  t->set_loss("loss");
  t->add_metrics("loss");
  t->add_metrics("accuracy");
  return p;
}

} // namespace dtf::testing
