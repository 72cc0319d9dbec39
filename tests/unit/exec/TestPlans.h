// Plans built in code for the executor and training tests: a program builder
// over the protobuf API and a small logistic regression.
#pragma once

#include "plan.pb.h"

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

namespace dtf::testing {

/// Appends values and ops to a plan::Program; value ids count from 0.
class ProgramBuilder {
public:
  explicit ProgramBuilder(plan::Program *program) : p_(program) {}

  /// A new value of `dtype` and `dims` (-1: the batch).
  int value(plan::DType dtype, std::vector<int64_t> dims);

  /// An op; `location` defaults to "test.dtf:<line>:1" numbered by op.
  plan::Op *op(const std::string &name, std::vector<int> inputs,
               std::vector<int> outputs, const std::string &location = "");

  /// dtf.input NAME with a Feed entry; returns its value.
  int input(const std::string &name, plan::DType dtype,
            std::vector<int64_t> dims);
  /// dtf.read_variable NAME.
  int readVariable(const std::string &name, plan::DType dtype,
                   std::vector<int64_t> dims);
  /// dtf.constant of f32 values.
  int constantF32(std::vector<int64_t> dims, std::vector<float> values);
  /// dtf.constant of i64 values.
  int constantI64(std::vector<int64_t> dims, std::vector<int64_t> values);
  /// A one-output op whose result is a new value of `dtype` and `dims`.
  int compute(const std::string &name, std::vector<int> inputs,
              plan::DType dtype, std::vector<int64_t> dims);
  void fetch(const std::string &name, int value);

  plan::Program *program() { return p_; }

private:
  plan::Program *p_;
  int next_ = 0;
};

void setAttr(plan::Op *op, const std::string &name, int64_t v);
void setAttr(plan::Op *op, const std::string &name, double v);
void setAttr(plan::Op *op, const std::string &name, bool v);
void setAttr(plan::Op *op, const std::string &name, const char *v);
void setAttr(plan::Op *op, const std::string &name,
             std::initializer_list<int64_t> v);

void addVariable(plan::Plan *plan, const std::string &name, plan::DType dtype,
                 std::vector<int64_t> dims, const std::string &init = "",
                 const std::string &role = "model");

struct LogisticRegressionOptions {
  int64_t features = 4;
  int64_t classes = 3;
  float learningRate = 0.5f;
  int64_t batch = 32;
  int64_t steps = 200;
  int64_t seed = 7;
  int64_t examples = 2000;
  int64_t evalExamples = 500;
  int64_t evalEvery = 100;
  bool withEval = true;
  /// Labels as i64 instead of i32.
  bool labelsI64 = false;
  /// The learning rate from a `learning_rate` feed instead of a constant.
  bool learningRateFeed = false;
};

/// A complete plan: x f32[B,features], y i32[B], W f32[features,classes]
/// (zeros), b f32[classes]; logits = x W + b; loss = mean(sparse softmax
/// cross-entropy); accuracy = mean(argmax(logits) == y); their gradients and
/// apply_sgd on W and b. Data: synthetic, with a synthetic eval set.
plan::Plan logisticRegressionPlan(const LogisticRegressionOptions &o = {});

/// The location of the train_step's sparse_softmax_cross_entropy op.
constexpr const char *kXentLocation = "lr.dtf:7:10";

// What a run printed, from a temporary file.
class Capture {
public:
  Capture() : f_(std::tmpfile()) {}
  ~Capture() { std::fclose(f_); }
  std::FILE *file() { return f_; }
  std::string text() {
    std::fflush(f_);
    std::rewind(f_);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f_)) > 0)
      s.append(buf, n);
    return s;
  }

private:
  std::FILE *f_;
};

} // namespace dtf::testing
