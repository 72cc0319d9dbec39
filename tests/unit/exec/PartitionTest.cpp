// The ps/worker cut of a train_step and the replica device setter
// (runtime/plan/Partition.h): the worker's and the ps tasks' programs run
// together must do exactly what the train_step does, for whole and for
// partitioned variables.
#include "runtime/exec/Executor.h"
#include "runtime/plan/Partition.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/TestPlans.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

namespace dtf::plan {
namespace {

using exec::Executor;
using exec::VariableStore;

constexpr int64_t kBatch = 6;

Plan cutPlan(int64_t features, int partitionsOfW) {
  testing::LogisticRegressionOptions o;
  o.features = features;
  Plan p = testing::logisticRegressionPlan(o);
  p.set_format_version(kPlanFormatVersion);
  for (Variable &v : *p.mutable_variables())
    if (v.name() == "W") {
      v.set_partitions(partitionsOfW);
      v.mutable_initializer()->Clear();
      v.mutable_initializer()->set_kind("uniform");
      (*v.mutable_initializer()->mutable_params())["minval"] = -1;
      (*v.mutable_initializer()->mutable_params())["maxval"] = 1;
      v.mutable_initializer()->set_seed(3);
    }
  EXPECT_TRUE(partitionTrainStep(&p).isOk());
  return p;
}

// Fills the x and y feeds of `e` with the same batch every time.
void feedBatch(Executor &e, int64_t features) {
  Tensor *x = nullptr, *y = nullptr;
  ASSERT_TRUE(e.prepareFeed(e.findFeed("x"), kBatch, &x).isOk());
  ASSERT_TRUE(e.prepareFeed(e.findFeed("y"), kBatch, &y).isOk());
  for (int64_t i = 0; i < kBatch * features; ++i)
    x->data<float>()[i] = float((i * 7) % 11) / 11.0f - 0.4f;
  for (int64_t i = 0; i < kBatch; ++i)
    y->data<int32_t>()[i] = int32_t(i % 3);
}

Tensor copyOf(const Tensor &t) {
  Tensor c = Tensor::allocate(t.dtype(), t.shape());
  std::memcpy(c.rawData(), t.rawData(), t.byteSize());
  return c;
}

// One train_step on fresh variables: W and b after it.
std::map<std::string, Tensor> trainStepResult(const Plan &p, int64_t features) {
  VariableStore vars;
  EXPECT_TRUE(train::initializeVariables(p, 1, &vars).isOk());
  std::unique_ptr<Executor> e;
  EXPECT_TRUE(Executor::create(p.train_step(), vars,
                               train::cpuKernelRegistry(), {}, &e)
                  .isOk());
  feedBatch(*e, features);
  EXPECT_TRUE(e->run(0).isOk());
  return {{"W", copyOf(*vars.find("W"))}, {"b", copyOf(*vars.find("b"))}};
}

// The same step cut: the worker_step on its copy of the variables, then each
// ps's program on the tensors it holds, fed the rows of the sends it takes.
std::map<std::string, Tensor> cutResult(const Plan &p, int numPs,
                                        int64_t features) {
  Placement placement;
  EXPECT_TRUE(placeVariables(p, numPs, "round_robin", &placement).isOk());
  VariableStore workerVars;
  EXPECT_TRUE(train::initializeVariables(p, 1, &workerVars).isOk());
  Program worker = p.worker_step();
  for (const Transfer &send : worker.sends()) {
    Fetch *f = worker.add_fetches();
    f->set_name(send.key());
    f->set_value(send.value());
  }
  std::unique_ptr<Executor> w;
  EXPECT_TRUE(Executor::create(worker, workerVars, train::cpuKernelRegistry(),
                               {}, &w)
                  .isOk());
  feedBatch(*w, features);
  EXPECT_TRUE(w->run(0).isOk());

  std::map<std::string, Tensor> result = {
      {"W", copyOf(*workerVars.find("W"))}, {"b", copyOf(*workerVars.find("b"))}};
  for (int ps = 0; ps < numPs; ++ps) {
    Program program;
    EXPECT_TRUE(psProgramFor(p, placement, ps, &program).isOk());
    VariableStore held;
    for (const HeldTensor &h : heldBy(p, placement, ps)) {
      const Tensor &whole = *workerVars.find(h.variable);
      std::vector<int64_t> dims = whole.shape();
      if (h.partitioned)
        dims[0] = h.rows;
      Tensor t = Tensor::allocate(whole.dtype(), dims);
      const size_t rowBytes = whole.rank() ? whole.byteSize() / size_t(whole.dim(0)) : 0;
      std::memcpy(t.rawData(),
                  static_cast<const char *>(whole.rawData()) + size_t(h.rowOffset) * rowBytes,
                  t.byteSize());
      EXPECT_TRUE(held.add(h.name, std::move(t)).isOk());
    }
    if (program.ops_size() == 0)
      continue;
    std::unique_ptr<Executor> e;
    Status s = Executor::create(program, held, train::cpuKernelRegistry(), {}, &e);
    EXPECT_TRUE(s.isOk()) << s.message();
    if (!s.isOk())
      return {};
    for (const Transfer &r : program.recvs()) {
      std::string base = r.rows() > 0 ? r.key().substr(0, r.key().rfind("/part_")) : r.key();
      const Tensor &sent = w->fetch(w->findFetch(base));
      Tensor rows = copyOf(sent);
      if (r.rows() > 0) {
        std::vector<int64_t> dims = sent.shape();
        dims[0] = r.rows();
        rows = Tensor::allocate(sent.dtype(), dims);
        const size_t rowBytes = sent.byteSize() / size_t(sent.dim(0));
        std::memcpy(rows.rawData(),
                    static_cast<const char *>(sent.rawData()) + size_t(r.row_offset()) * rowBytes,
                    rows.byteSize());
      }
      EXPECT_TRUE(e->setFeed(e->findFeed(r.key()), rows).isOk()) << r.key();
    }
    s = e->run(0);
    EXPECT_TRUE(s.isOk()) << s.message();
    // Back into the whole variables, row by row.
    for (const HeldTensor &h : heldBy(p, placement, ps)) {
      if (!result.count(h.variable))
        continue;
      Tensor &whole = result[h.variable];
      const Tensor &part = *held.find(h.name);
      const size_t rowBytes = whole.rank() ? whole.byteSize() / size_t(whole.dim(0)) : 0;
      std::memcpy(static_cast<char *>(whole.rawData()) + size_t(h.rowOffset) * rowBytes,
                  part.rawData(), part.byteSize());
    }
  }
  return result;
}

void expectSame(const std::map<std::string, Tensor> &a,
                const std::map<std::string, Tensor> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, t] : a) {
    const Tensor &u = b.at(name);
    ASSERT_EQ(t.shape(), u.shape()) << name;
    EXPECT_EQ(std::memcmp(t.rawData(), u.rawData(), t.byteSize()), 0) << name;
  }
}

TEST(Partition, CutsAtTheUpdatesWithKeyedSends) {
  Plan p = cutPlan(4, 1);
  EXPECT_TRUE(validatePlan(p, "plan.bin").isOk()) << validatePlan(p, "plan.bin").message();
  for (const Op &op : p.worker_step().ops())
    EXPECT_NE(op.name(), "dtf.apply_sgd");
  std::vector<std::string> keys;
  for (const Transfer &t : p.worker_step().sends())
    keys.push_back(t.key());
  // The learning rate is sent once, under its first consumer's key.
  EXPECT_EQ(keys, (std::vector<std::string>{"W:grad", "W:apply_sgd:2", "b:grad"}));
  int applies = 0;
  for (const Op &op : p.ps_update().ops())
    applies += op.name() == "dtf.apply_sgd";
  EXPECT_EQ(applies, 2);
  EXPECT_EQ(p.ps_update().recvs_size(), 3);
}

TEST(Partition, WorkerAndPsTogetherDoWhatTheTrainStepDoes) {
  Plan p = cutPlan(5, 1);
  expectSame(trainStepResult(p, 5), cutResult(p, 1, 5));
  expectSame(trainStepResult(p, 5), cutResult(p, 2, 5));
}

TEST(Partition, ShardsOfAPartitionedVariableUpdateTheirRows) {
  // 7 rows in 3 shards (3, 2, 2) over 2 ps tasks.
  Plan p = cutPlan(7, 3);
  Placement placement;
  ASSERT_TRUE(placeVariables(p, 2, "round_robin", &placement).isOk());
  std::vector<std::string> names;
  std::vector<int64_t> rows;
  for (int ps = 0; ps < 2; ++ps)
    for (const HeldTensor &h : heldBy(p, placement, ps))
      if (h.variable == "W") {
        names.push_back(h.name);
        rows.push_back(h.rows);
      }
  ASSERT_EQ(names.size(), 3u);
  int64_t total = 0;
  for (int64_t r : rows)
    total += r;
  EXPECT_EQ(total, 7);
  Program program;
  ASSERT_TRUE(psProgramFor(p, placement, 0, &program).isOk());
  bool shardRecv = false;
  for (const Transfer &r : program.recvs())
    shardRecv |= r.key().rfind("W:grad/part_", 0) == 0 && r.rows() > 0;
  EXPECT_TRUE(shardRecv);
  expectSame(trainStepResult(p, 7), cutResult(p, 2, 7));
  expectSame(trainStepResult(p, 7), cutResult(p, 3, 7));
}

TEST(Partition, APinnedPsTaskTheClusterLacksIsRefused) {
  Plan p = cutPlan(4, 1);
  for (Variable &v : *p.mutable_variables())
    if (v.name() == "b")
      v.set_device("/job:ps/task:2");
  Placement placement;
  Status s = placeVariables(p, 2, "", &placement);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "variable 'b' is placed on /job:ps/task:2, but the cluster has 2 "
            "ps tasks (/job:ps/task:0 to /job:ps/task:1); add ps tasks or "
            "change its `on` scope");
  ASSERT_TRUE(placeVariables(p, 3, "", &placement).isOk());
  EXPECT_EQ(placement.psOf.at("b"), 2);
}

} // namespace
} // namespace dtf::plan
