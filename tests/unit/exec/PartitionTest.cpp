// The per-task programs that dtfc writes (the cut passes, then ps_update per
// held tensor) and the replica device setter (schema/Placement.h): the
// worker's and the ps tasks' programs run together must do exactly what the
// train_step does, for whole and for partitioned variables, and the stages
// of a model-parallel replica what the worker_step does. The plans come
// from dtfc itself (op by op: --fusion=off); the cut's own form is checked
// by the lit tests of dtf-cut-train-step and dtf-cut-stages.
#include "runtime/exec/Executor.h"
#include "runtime/exec/Rendezvous.h"
#include "schema/Placement.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/train/Initializers.h"
#include "runtime/train/Trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <thread>

namespace dtf::plan {
namespace {

using exec::Executor;
using exec::VariableStore;

constexpr int64_t kBatch = 6;

// The plan dtfc writes for `source` (model `name`), with `args` added.
Plan compiled(const std::string &name, const std::string &source,
              const std::string &args = "") {
  const std::string dtf = ::testing::TempDir() + "partition_" + name + ".dtf";
  const std::string bin = ::testing::TempDir() + "partition_" + name + ".bin";
  std::ofstream(dtf) << source;
  const std::string cmd = std::string(DTF_DTFC_PATH) + " " + dtf +
                          " --no-data-check --fusion=off " + args + " -o " +
                          bin + " 2>&1";
  std::string output;
  FILE *pipe = popen(cmd.c_str(), "r");
  char buf[512];
  while (pipe && fgets(buf, sizeof buf, pipe))
    output += buf;
  const int rc = pipe ? pclose(pipe) : -1;
  EXPECT_EQ(rc, 0) << cmd << "\n" << output;
  Plan p;
  Status s = readPlanFile(bin, &p);
  EXPECT_TRUE(s.isOk()) << s.message();
  return p;
}

// Softmax regression over `features` inputs, W split into `partitionsOfW`
// shards; `scopes` wraps the graph's lines in `on` blocks (model
// parallelism): "h", "logits" and "loss" name the task of each line.
Plan partitionedPlan(int64_t features, int partitionsOfW,
                     std::map<std::string, int> scopes = {}) {
  auto line = [&](const std::string &what, const std::string &stmt) {
    auto it = scopes.find(what);
    const std::string block =
        it == scopes.end()
            ? std::string("graph")
            : "on \"/job:worker/task:" + std::to_string(it->second) + "\"";
    return "  " + block + " {\n    " + stmt + "\n  }\n";
  };
  const std::string f = std::to_string(features);
  const std::string source =
      "model cut {\n"
      "  input x: f32[B, " + f + "]\n"
      "  input y: i32[B]\n"
      "  var W: f32[" + f + ", 3] = uniform(minval = -1, maxval = 1, seed = 3), "
      "partitions = " + std::to_string(partitionsOfW) + "\n"
      "  var b: f32[3] = constant(0.25)\n" +
      line("h", "h = x @ W") + line("logits", "logits = h + b") +
      line("loss", "loss = mean(sparse_softmax_cross_entropy(logits, y))") +
      "  train {\n"
      "    optimizer = sgd(0.1)\n"
      "    update = async\n"
      "    batch = 6\n"
      "    steps = 1\n"
      "    data = synthetic(examples = 6)\n"
      "  }\n"
      "}\n";
  std::string name = "f" + f + "_p" + std::to_string(partitionsOfW);
  for (const auto &[what, task] : scopes)
    name += "_" + what + std::to_string(task);
  return compiled(name, source);
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
  Plan p = partitionedPlan(4, 1);
  EXPECT_TRUE(validatePlan(p, "plan.bin").isOk()) << validatePlan(p, "plan.bin").message();
  for (const Op &op : p.worker_step().ops())
    EXPECT_NE(op.name(), "dtf.apply_sgd");
  std::vector<std::string> keys;
  for (const Transfer &t : p.worker_step().sends())
    keys.push_back(t.key());
  // The learning rate is sent once, under its first consumer's key; the
  // global step's increment is an update too.
  EXPECT_EQ(keys, (std::vector<std::string>{"W:grad", "W:apply_sgd:2", "b:grad",
                                            "global_step:assign_add:1"}));
  int applies = 0;
  for (const Op &op : p.ps_update().ops())
    applies += op.name() == "dtf.apply_sgd";
  EXPECT_EQ(applies, 2);
  EXPECT_EQ(p.ps_update().recvs_size(), 4);
}

TEST(Partition, WorkerAndPsTogetherDoWhatTheTrainStepDoes) {
  Plan p = partitionedPlan(5, 1);
  expectSame(trainStepResult(p, 5), cutResult(p, 1, 5));
  expectSame(trainStepResult(p, 5), cutResult(p, 2, 5));
}

TEST(Partition, ShardsOfAPartitionedVariableUpdateTheirRows) {
  // 7 rows in 3 shards (3, 2, 2) over 2 ps tasks.
  Plan p = partitionedPlan(7, 3);
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

// A table only gathered and updated sparsely (`emb`), and one also fetched
// (`other`): with remote lookups the first is looked up on the ps and its
// gradient sent as (ids, rows); the second keeps the dense way.
Plan embeddingPlan() {
  return compiled("embedding", R"(model lookups {
  input ids: i64[B, 3]
  var emb: f32[10, 4] = zeros, partitions = 2
  var other: f32[6, 4] = zeros
  graph {
    rows = gather(emb, ids) + gather(other, ids)
    loss = sum(rows) + sum(other)
  }
  train {
    optimizer = sgd(0.1)
    batch = 6
    steps = 1
    data = synthetic(examples = 6)
  }
}
)");
}

TEST(Partition, RemoteLookupsGatherTablesOnThePsAndSendRows) {
  Plan p = embeddingPlan();
  ASSERT_TRUE(selectLookupCut(&p)); // what a between-graph task runs
  std::vector<std::string> reads, lookups;
  for (const Op &op : p.worker_step().ops()) {
    if (op.name() == "dtf.read_variable")
      reads.push_back(op.attrs().at("name").s());
    if (op.name() == "dtf.ps_gather") {
      lookups.push_back(op.attrs().at("variable").s());
      EXPECT_EQ(op.inputs_size(), 1);
    }
  }
  EXPECT_EQ(lookups, std::vector<std::string>{"emb"});
  // `other` is also summed whole: pulled whole.
  EXPECT_EQ(std::count(reads.begin(), reads.end(), "other"), 1);
  EXPECT_EQ(std::count(reads.begin(), reads.end(), "emb"), 0);
  int sparse = 0;
  for (const Transfer &t : p.worker_step().sends())
    if (t.sparse()) {
      ++sparse;
      EXPECT_EQ(t.key(), "emb:grad:0");
      EXPECT_EQ(t.variable(), "emb");
      EXPECT_NE(t.rows_value(), t.value());
    }
  EXPECT_EQ(sparse, 1);
  // `other` keeps the dense update on the ps, from a dense gradient.
  std::set<std::string> psOps;
  for (const Op &op : p.ps_update().ops())
    psOps.insert(op.name());
  EXPECT_TRUE(psOps.count("dtf.sparse_apply_sgd"));
  EXPECT_TRUE(psOps.count("dtf.apply_sgd"));

  // Per shard of `emb` (two ps): its ids and rows fed under key and key#rows,
  // with the shard's rows recorded for the worker's routing.
  Placement placement;
  ASSERT_TRUE(placeVariables(p, 2, "round_robin", &placement).isOk());
  for (int ps = 0; ps < 2; ++ps) {
    Program program;
    ASSERT_TRUE(psProgramFor(p, placement, ps, &program).isOk());
    std::set<std::string> feeds;
    for (const Feed &f : program.feeds())
      feeds.insert(f.name());
    const std::string key = "emb:grad:0/part_" + std::to_string(ps);
    for (const Transfer &r : program.recvs())
      if (r.sparse()) {
        EXPECT_EQ(r.key(), key);
        EXPECT_EQ(r.row_offset(), 5 * ps);
        EXPECT_EQ(r.rows(), 5);
        EXPECT_TRUE(feeds.count(key) && feeds.count(key + "#rows")) << key;
      }
  }

  // The dense cut (in-graph and model-parallel training, or
  // DTF_EMBEDDING_LOOKUPS=pull) reads both tables on the worker.
  Plan dense = embeddingPlan();
  for (const Op &op : dense.worker_step().ops())
    EXPECT_NE(op.name(), "dtf.ps_gather");
  for (const Transfer &t : dense.worker_step().sends())
    EXPECT_FALSE(t.sparse());
}

TEST(Partition, APinnedPsTaskTheClusterLacksIsRefused) {
  Plan p = partitionedPlan(4, 1);
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

// --- Model parallelism: the worker_step split into stages ----------------------

// Runs the worker_step whole, then split into its stages (stage k on its own
// thread, all meeting in one LocalRendezvous), for `steps` steps on the same
// batch; the fetches and sends of both must be the same bits every step.
void expectStagesDoWhatTheWorkerStepDoes(const Plan &p, int64_t features,
                                         int steps) {
  Program whole = p.worker_step();
  for (const Transfer &send : whole.sends()) {
    Fetch *f = whole.add_fetches();
    f->set_name(send.key());
    f->set_value(send.value());
  }
  VariableStore wholeVars;
  ASSERT_TRUE(train::initializeVariables(p, 1, &wholeVars).isOk());
  std::unique_ptr<Executor> ref;
  ASSERT_TRUE(Executor::create(whole, wholeVars, train::cpuKernelRegistry(),
                               {}, &ref)
                  .isOk());

  const int span = replicaSpan(p);
  std::vector<exec::RendezvousTable> tables(span);
  std::vector<exec::RendezvousTable *> tablePtrs;
  for (exec::RendezvousTable &t : tables)
    tablePtrs.push_back(&t);
  std::vector<std::unique_ptr<exec::LocalRendezvous>> rendezvous;
  std::vector<VariableStore> vars(span);
  std::vector<std::unique_ptr<Executor>> stages(span);
  for (int k = 0; k < span; ++k) {
    Program program;
    Status s = stageProgramFor(p, k, &program);
    ASSERT_TRUE(s.isOk()) << s.message();
    ASSERT_TRUE(validateProgram(program, program.name()).isOk())
        << validateProgram(program, program.name()).message();
    if (k == 0)
      for (const Transfer &send : program.sends()) {
        Fetch *f = program.add_fetches();
        f->set_name(send.key());
        f->set_value(send.value());
      }
    ASSERT_TRUE(train::initializeVariables(p, 1, &vars[k]).isOk());
    rendezvous.push_back(
        std::make_unique<exec::LocalRendezvous>(tablePtrs, k, 10.0));
    exec::ExecutorOptions o;
    o.rendezvous = rendezvous.back().get();
    s = Executor::create(program, vars[k], train::cpuKernelRegistry(), o,
                         &stages[k]);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  for (int step = 0; step < steps; ++step) {
    feedBatch(*ref, features);
    ASSERT_TRUE(ref->run(uint64_t(step)).isOk());
    feedBatch(*stages[0], features);
    std::vector<Status> results(span, Status::ok());
    std::vector<std::thread> threads;
    for (int k = 1; k < span; ++k)
      threads.emplace_back(
          [&, k] { results[k] = stages[k]->run(uint64_t(step)); });
    results[0] = stages[0]->run(uint64_t(step));
    for (std::thread &t : threads)
      t.join();
    for (int k = 0; k < span; ++k)
      ASSERT_TRUE(results[k].isOk()) << "stage " << k << ": " << results[k].message();
    ASSERT_EQ(ref->numFetches(), stages[0]->numFetches());
    for (int i = 0; i < ref->numFetches(); ++i) {
      const Tensor &a = ref->fetch(i), &b = stages[0]->fetch(i);
      ASSERT_EQ(ref->fetchInfo(i).name, stages[0]->fetchInfo(i).name);
      ASSERT_EQ(a.shape(), b.shape()) << ref->fetchInfo(i).name;
      EXPECT_EQ(std::memcmp(a.rawData(), b.rawData(), a.byteSize()), 0)
          << "step " << step << ": " << ref->fetchInfo(i).name;
    }
    for (const exec::RendezvousTable &t : tables)
      EXPECT_EQ(t.size(), 0u) << "a transfer nobody received";
  }
}

TEST(Partition, AReplicaSpansTheWorkerTasksItsOpsName) {
  EXPECT_EQ(replicaSpan(partitionedPlan(4, 1)), 1);
  Plan p = partitionedPlan(4, 1, {{"h", 1}, {"logits", 2}});
  EXPECT_EQ(replicaSpan(p), 3);
  Op op;
  op.set_name("dtf.matmul");
  op.set_device("/job:worker/task:2/gpu:0");
  EXPECT_EQ(stageOf(op), 2);
  op.set_device("/job:chief/task:0");
  EXPECT_EQ(stageOf(op), 0);
  op.set_device("/gpu:0");
  EXPECT_EQ(stageOf(op), 0);
  op.set_name("dtf.read_variable");
  EXPECT_EQ(stageOf(op), -1);
  Program none;
  EXPECT_FALSE(stageProgramFor(p, 3, &none).isOk());
}

TEST(Partition, StagesKeepFeedsFetchesAndPsSendsOnStageZero) {
  Plan p = partitionedPlan(4, 1, {{"h", 1}});
  Program s0, s1;
  ASSERT_TRUE(stageProgramFor(p, 0, &s0).isOk());
  ASSERT_TRUE(stageProgramFor(p, 1, &s1).isOk());
  EXPECT_EQ(s0.feeds_size(), p.worker_step().feeds_size());
  EXPECT_EQ(s0.sends_size(), p.worker_step().sends_size());
  EXPECT_EQ(s0.fetches_size(), p.worker_step().fetches_size());
  EXPECT_EQ(s1.feeds_size() + s1.sends_size() + s1.fetches_size(), 0);
  // Every send has its recv on the other side, under the same key.
  std::multiset<std::string> sent, received;
  for (const Program *prog : {&s0, &s1})
    for (const Op &op : prog->ops()) {
      if (op.name() == "dtf.send")
        sent.insert(op.attrs().at("key").s());
      if (op.name() == "dtf.recv")
        received.insert(op.attrs().at("key").s());
    }
  EXPECT_FALSE(sent.empty());
  EXPECT_EQ(sent, received);
  for (const Op &op : s1.ops())
    EXPECT_NE(op.name(), "dtf.input") << "only stage 0 is fed";
}

TEST(Partition, TwoStagesDoWhatTheWorkerStepDoes) {
  // Forward on task 1, loss and backward on task 0, and the other way round.
  expectStagesDoWhatTheWorkerStepDoes(
      partitionedPlan(5, 1, {{"h", 1}, {"logits", 1}}), 5, 3);
  expectStagesDoWhatTheWorkerStepDoes(partitionedPlan(5, 1, {{"loss", 1}}), 5, 3);
}

TEST(Partition, ThreeStagesPassingEveryValueAroundDoNotDeadlock) {
  // Each line on another task than the last: a transfer on every edge
  // between them, forward and backward.
  expectStagesDoWhatTheWorkerStepDoes(
      partitionedPlan(5, 1, {{"h", 1}, {"logits", 2}}), 5, 3);
  expectStagesDoWhatTheWorkerStepDoes(
      partitionedPlan(5, 1, {{"h", 2}, {"loss", 1}}), 5, 2);
}

} // namespace
} // namespace dtf::plan
