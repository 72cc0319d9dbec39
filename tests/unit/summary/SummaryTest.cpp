// Summaries: TFRecord framing (bytes computed by an independent CRC-32C),
// event files read back, the summary policy, the training log, and the
// training loop writing them under --model-dir.
#include "runtime/summary/EventWriter.h"
#include "runtime/summary/Record.h"
#include "runtime/summary/RunSummaries.h"
#include "runtime/summary/TrainLog.h"
#include "runtime/train/Trainer.h"
#include "tests/unit/exec/TestPlans.h"

#include "plan.pb.h"
#include "summary.pb.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace dtf::summary {
namespace {

namespace fs = std::filesystem;

std::string hex(const std::string &bytes) {
  static const char *digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s.push_back(digits[c >> 4]);
    s.push_back(digits[c & 15]);
  }
  return s;
}

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A fresh directory per test, removed after it.
class Summaries : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("dtf-summary-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The event files of `dir`, sorted.
  static std::vector<std::string> eventFiles(const std::string &dir) {
    std::vector<std::string> files;
    for (const auto &e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
        files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
  }

  static std::vector<tensorflow::Event> events(const std::string &path) {
    std::vector<std::string> records;
    Status s = readRecordFile(path, &records);
    EXPECT_TRUE(s.isOk()) << s.message();
    std::vector<tensorflow::Event> out;
    for (const std::string &r : records) {
      tensorflow::Event e;
      EXPECT_TRUE(e.ParseFromString(r));
      out.push_back(e);
    }
    return out;
  }

  std::string dir_;
};

// --- TFRecord framing -----------------------------------------------------

TEST(Record, BytesMatchAnIndependentCrc32c) {
  // Expected bytes from a bitwise CRC-32C (polynomial 0x82f63b78) in Python:
  // length 5, masked CRC 0x3e04b2ea of the length, "hello", masked CRC
  // 0x191c1fbb of "hello", all little-endian.
  EXPECT_EQ(hex(encodeRecord("hello")),
            "0500000000000000eab2043e68656c6c6fbb1f1c19");
  EXPECT_EQ(hex(encodeRecord("")), "000000000000000029039807d8ea82a2");
}

TEST(Record, RecordsReadBack) {
  std::string bytes;
  std::vector<std::string> data = {"", "a", std::string(1000, 'x'),
                                   std::string("\0\1\2", 3)};
  for (const std::string &d : data)
    bytes += encodeRecord(d);
  std::vector<std::string> records;
  Status s = decodeRecords(bytes, &records);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(records, data);
}

TEST(Record, AFlippedByteIsDetected) {
  const std::string good = encodeRecord("first") + encodeRecord("second");
  const size_t second = kRecordHeaderBytes + 5 + kRecordFooterBytes;
  std::vector<std::string> records;
  // Every byte of the second record, flipped in turn, fails its check and
  // names the record's offset; the first record still reads.
  for (size_t i = second; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x20;
    Status s = decodeRecords(bad, &records, "f.tfevents");
    ASSERT_FALSE(s.isOk()) << "byte " << i;
    EXPECT_NE(s.message().find("f.tfevents: "), std::string::npos);
    EXPECT_NE(s.message().find("at byte " + std::to_string(second)),
              std::string::npos)
        << s.message();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0], "first");
  }
  std::string bad = good;
  bad[second + kRecordHeaderBytes + 1] ^= 1;
  Status s = decodeRecords(bad, &records);
  EXPECT_NE(s.message().find("the data of the record"), std::string::npos)
      << s.message();
  bad = good;
  bad[second + 2] ^= 1;
  s = decodeRecords(bad, &records);
  EXPECT_NE(s.message().find("the length of the record"), std::string::npos)
      << s.message();
}

TEST(Record, TruncationIsDetected) {
  const std::string good = encodeRecord("payload");
  std::vector<std::string> records;
  for (size_t n = 1; n < good.size(); ++n) {
    Status s = decodeRecords(good.substr(0, n), &records);
    EXPECT_FALSE(s.isOk()) << n;
    EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  }
}

// --- EventWriter ------------------------------------------------------------

TEST_F(Summaries, EventFileHoldsTheVersionThenScalars) {
  const std::string dir = dir_ + "/a/b/train";
  std::unique_ptr<EventWriter> w;
  EventWriterOptions o;
  o.hostname = "testhost";
  const double before = wallTimeNow();
  Status s = EventWriter::open(dir, &w, o);
  ASSERT_TRUE(s.isOk()) << s.message();
  const std::string name = fs::path(w->path()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - 9), ".testhost") << name;
  const long long stamp = std::stoll(name.substr(20));
  EXPECT_LE(std::abs(stamp - (long long)before), 2) << name;
  ASSERT_TRUE(w->writeScalars(10, {{"loss", 0.5}, {"accuracy", 0.25}}).isOk());
  ASSERT_TRUE(w->writeScalar(20, "loss", 0.125).isOk());
  ASSERT_TRUE(w->close().isOk());
  EXPECT_FALSE(w->writeScalar(30, "loss", 1).isOk());

  std::vector<tensorflow::Event> ev = events(w->path());
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  EXPECT_GE(ev[0].wall_time(), before - 1);
  ASSERT_TRUE(ev[1].has_summary());
  EXPECT_EQ(ev[1].step(), 10);
  ASSERT_EQ(ev[1].summary().value_size(), 2);
  EXPECT_EQ(ev[1].summary().value(0).tag(), "loss");
  EXPECT_EQ(ev[1].summary().value(0).simple_value(), 0.5f);
  EXPECT_EQ(ev[1].summary().value(1).tag(), "accuracy");
  EXPECT_EQ(ev[1].summary().value(1).simple_value(), 0.25f);
  EXPECT_EQ(ev[2].step(), 20);
  EXPECT_EQ(ev[2].summary().value(0).simple_value(), 0.125f);
  EXPECT_GE(ev[2].wall_time(), ev[1].wall_time());
}

TEST_F(Summaries, WritersInTheSameSecondGetTheirOwnFiles) {
  EventWriterOptions o;
  o.hostname = "h";
  std::unique_ptr<EventWriter> a, b, c;
  ASSERT_TRUE(EventWriter::open(dir_, &a, o).isOk());
  ASSERT_TRUE(EventWriter::open(dir_, &b, o).isOk());
  ASSERT_TRUE(EventWriter::open(dir_, &c, o).isOk());
  EXPECT_NE(a->path(), b->path());
  EXPECT_NE(b->path(), c->path());
  EXPECT_NE(a->path(), c->path());
  ASSERT_TRUE(a->writeScalar(1, "x", 1).isOk());
  ASSERT_TRUE(a->close().isOk());
  ASSERT_TRUE(b->close().isOk());
  EXPECT_EQ(events(a->path()).size(), 2u);
  EXPECT_EQ(events(b->path()).size(), 1u);
}

TEST_F(Summaries, EventsReachTheFileWithinTheFlushInterval) {
  std::unique_ptr<EventWriter> w;
  EventWriterOptions o;
  o.flushSeconds = 0.1;
  ASSERT_TRUE(EventWriter::open(dir_, &w, o).isOk());
  // The version event is flushed at open, for TensorBoard to see the run.
  EXPECT_EQ(events(w->path()).size(), 1u);
  ASSERT_TRUE(w->writeScalar(5, "loss", 2).isOk());
  // Still open: the background flush must bring it out.
  size_t n = 0;
  for (int i = 0; i < 100 && n < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<std::string> records;
    if (readRecordFile(w->path(), &records).isOk())
      n = records.size();
  }
  EXPECT_EQ(n, 2u);
}

TEST_F(Summaries, AnUnwritableDirectoryIsAnErrorNamingIt) {
  // A path under a regular file cannot be a directory (root ignores modes,
  // so permissions would not do).
  std::ofstream(dir_ + "/file") << "x";
  std::unique_ptr<EventWriter> w;
  Status s = EventWriter::open(dir_ + "/file/train", &w);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(dir_ + "/file/train"), std::string::npos)
      << s.message();
  EXPECT_EQ(w, nullptr);
  std::unique_ptr<TrainLog> log;
  s = TrainLog::open(dir_ + "/file/train.log", &log);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(dir_ + "/file"), std::string::npos) << s.message();
}

// --- TrainLog ---------------------------------------------------------------

TEST_F(Summaries, TrainLogAppendsPlainLines) {
  EXPECT_EQ(plainText("\r\x1b[Kstep 3/9  loss 1.0\x1b[0m"),
            "step 3/9  loss 1.0");
  const std::string path = dir_ + "/logs/train.log";
  {
    std::unique_ptr<TrainLog> log;
    ASSERT_TRUE(TrainLog::open(path, &log).isOk());
    ASSERT_TRUE(log->line("first").isOk());
    ASSERT_TRUE(log->line("\rsecond\x1b[K").isOk());
    // Written through at once.
    EXPECT_EQ(slurp(path), "first\nsecond\n");
  }
  std::unique_ptr<TrainLog> log;
  ASSERT_TRUE(TrainLog::open(path, &log).isOk());
  ASSERT_TRUE(log->line("rerun").isOk());
  EXPECT_EQ(slurp(path), "first\nsecond\nrerun\n");
}

// --- SummaryPolicy and RunSummaries -----------------------------------------

TEST(SummaryPolicy, FromThePlan) {
  plan::Training t;
  SummaryPolicy p = SummaryPolicy::fromPlan(t);
  EXPECT_EQ(p.every, 100);
  EXPECT_FALSE(p.inSeconds);
  EXPECT_TRUE(p.names.empty());
  EXPECT_TRUE(p.due(200, 0));
  EXPECT_FALSE(p.due(201, 1e9));

  t.set_summary_every(20);
  t.set_summary_unit("steps");
  t.add_summaries("loss");
  p = SummaryPolicy::fromPlan(t);
  EXPECT_EQ(p.names, std::vector<std::string>{"loss"});
  EXPECT_TRUE(p.due(40, 0));
  EXPECT_FALSE(p.due(41, 0));

  t.set_summary_every(2);
  t.set_summary_unit("min");
  p = SummaryPolicy::fromPlan(t);
  EXPECT_TRUE(p.inSeconds);
  EXPECT_EQ(p.every, 120);
  EXPECT_FALSE(p.due(100, 119.9));
  EXPECT_TRUE(p.due(7, 120));

  t.set_summary_unit("s");
  p = SummaryPolicy::fromPlan(t);
  EXPECT_EQ(p.every, 2);
  EXPECT_TRUE(p.due(3, 2.5));
}

TEST_F(Summaries, RunSummariesWriteMeansSinceTheLastSummary) {
  RunSummariesOptions o;
  o.modelDir = dir_ + "/run";
  o.task = "worker.1";
  SummaryPolicy policy;
  policy.every = 2;
  policy.names = {"accuracy", "loss", "not_a_fetch"};
  std::unique_ptr<RunSummaries> r;
  Status s = RunSummaries::open(o, policy, {"loss", "accuracy", "other"}, &r);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(r->missingNames(), std::vector<std::string>{"not_a_fetch"});
  EXPECT_EQ(fs::path(r->eventPath()).parent_path(),
            fs::path(o.modelDir) / "worker.1");
  EXPECT_EQ(r->logPath(), o.modelDir + "/worker.1.log");

  r->addStep({1.0, 0.5, 9}, 10, 0.5);
  EXPECT_FALSE(r->due(1));
  r->addStep({3.0, 1.0, 9}, 10, 1.5);
  EXPECT_TRUE(r->due(2));
  ASSERT_TRUE(r->write(2, 0.25).isOk());
  EXPECT_EQ(r->pendingSteps(), 0);
  ASSERT_TRUE(r->write(3, 0.25).isOk()); // nothing new: no event
  r->addStep({5.0, 0.0, 9}, 4, 1.0);
  ASSERT_TRUE(r->write(3, std::nan("")).isOk());
  ASSERT_TRUE(r->writeEval(3, {{"loss", 0.75}}).isOk());
  ASSERT_TRUE(r->log("eval  step 3  loss 0.7500").isOk());
  ASSERT_TRUE(r->close().isOk());

  std::vector<tensorflow::Event> ev = events(r->eventPath());
  ASSERT_EQ(ev.size(), 3u);
  auto scalars = [](const tensorflow::Event &e) {
    std::map<std::string, float> m;
    for (const auto &v : e.summary().value())
      m[v.tag()] = v.simple_value();
    return m;
  };
  std::map<std::string, float> first = scalars(ev[1]);
  EXPECT_EQ(ev[1].step(), 2);
  EXPECT_EQ(first.size(), 5u);
  EXPECT_EQ(first["loss"], 2.0f);
  EXPECT_EQ(first["accuracy"], 0.75f);
  EXPECT_EQ(first["learning_rate"], 0.25f);
  EXPECT_EQ(first["examples_per_sec"], 10.0f); // 20 examples in 2 s
  EXPECT_EQ(first["global_step/sec"], 1.0f);   // 2 steps in 2 s
  EXPECT_EQ(first.count("other"), 0u);
  // The names in the policy's order.
  EXPECT_EQ(ev[1].summary().value(0).tag(), "accuracy");
  std::map<std::string, float> second = scalars(ev[2]);
  EXPECT_EQ(ev[2].step(), 3);
  EXPECT_EQ(second["loss"], 5.0f);
  EXPECT_EQ(second.count("learning_rate"), 0u);
  EXPECT_EQ(second["examples_per_sec"], 4.0f);

  std::vector<std::string> evalFiles = eventFiles(o.modelDir + "/eval");
  ASSERT_EQ(evalFiles.size(), 1u);
  std::vector<tensorflow::Event> evalEvents = events(evalFiles[0]);
  ASSERT_EQ(evalEvents.size(), 2u);
  EXPECT_EQ(evalEvents[1].step(), 3);
  EXPECT_EQ(evalEvents[1].summary().value(0).tag(), "loss");
  EXPECT_EQ(slurp(r->logPath()), "eval  step 3  loss 0.7500\n");
}

// --- The training loop
// --------------------------------------------------------

TEST_F(Summaries, TrainerWritesScalarsEvalsAndTheLog) {
  testing::LogisticRegressionOptions lo;
  lo.steps = 60;
  lo.evalEvery = 30;
  lo.learningRateFeed = true;
  plan::Plan p = testing::logisticRegressionPlan(lo);
  plan::Training *t = p.mutable_training();
  plan::Schedule *lr = t->mutable_optimizer()->mutable_learning_rate();
  lr->set_kind("exponential_decay");
  lr->set_learning_rate(0.5);
  lr->set_decay_steps(20);
  lr->set_decay_rate(0.5);
  lr->set_staircase(true);
  t->set_summary_every(20);
  t->set_summary_unit("steps");
  t->add_summaries("loss");

  train::TrainOptions o;
  o.modelDir = dir_ + "/run";
  o.threads = 1;
  std::FILE *out = std::tmpfile();
  o.out = out;
  train::TrainReport report;
  Status s = train::train(p, o, &report);
  std::fclose(out);
  ASSERT_TRUE(s.isOk()) << s.message();

  std::vector<std::string> files = eventFiles(o.modelDir + "/train");
  ASSERT_EQ(files.size(), 1u);
  std::vector<tensorflow::Event> ev = events(files[0]);
  ASSERT_EQ(ev.size(), 4u); // version, steps 20, 40, 60
  const double rates[] = {0.5, 0.25, 0.125};
  for (int i = 0; i < 3; ++i) {
    const tensorflow::Event &e = ev[size_t(i) + 1];
    EXPECT_EQ(e.step(), 20 * (i + 1));
    std::map<std::string, float> m;
    for (const auto &v : e.summary().value())
      m[v.tag()] = v.simple_value();
    EXPECT_EQ(m.size(),
              4u); // loss, learning_rate, examples_per_sec, global_step/sec
    EXPECT_EQ(m.count("accuracy"), 0u);
    EXPECT_FLOAT_EQ(m["learning_rate"], float(rates[i]));
    EXPECT_GT(m["examples_per_sec"], 0);
    EXPECT_GT(m["global_step/sec"], 0);
    // The mean over the same interval as the progress line.
    ASSERT_EQ(report.progress[size_t(i)].first, 20 * (i + 1));
    EXPECT_NEAR(m["loss"], report.progress[size_t(i)].second[0].value, 1e-6);
  }

  files = eventFiles(o.modelDir + "/eval");
  ASSERT_EQ(files.size(), 1u);
  ev = events(files[0]);
  ASSERT_EQ(ev.size(), 3u); // version, steps 30 and 60
  ASSERT_EQ(report.evals.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ev[size_t(i) + 1].step(), report.evals[size_t(i)].first);
    ASSERT_EQ(ev[size_t(i) + 1].summary().value_size(), 2);
    EXPECT_EQ(ev[size_t(i) + 1].summary().value(1).tag(), "accuracy");
    EXPECT_FLOAT_EQ(ev[size_t(i) + 1].summary().value(1).simple_value(),
                    float(report.evals[size_t(i)].second[1].value));
  }

  std::string log = slurp(o.modelDir + "/train.log");
  EXPECT_EQ(log.rfind("training logistic_regression: 60 steps", 0), 0u) << log;
  EXPECT_NE(log.find("\nstep 20/60  loss "), std::string::npos) << log;
  EXPECT_NE(log.find("\neval  step 30  loss "), std::string::npos) << log;
  EXPECT_NE(log.find("\n" + report.finalLine + "\n"), std::string::npos) << log;
  EXPECT_EQ(log.find('\r'), std::string::npos);
}

TEST_F(Summaries, TrainerWithoutModelDirWritesNothingAndBadDirFails) {
  plan::Plan p = testing::logisticRegressionPlan();
  train::TrainOptions o;
  o.steps = 5;
  o.threads = 1;
  o.quiet = true;
  std::FILE *out = std::tmpfile();
  o.out = out;
  train::TrainReport report;
  ASSERT_TRUE(train::train(p, o, &report).isOk());
  EXPECT_TRUE(fs::is_empty(dir_));

  std::ofstream(dir_ + "/file") << "x";
  o.modelDir = dir_ + "/file";
  o.summaryTask = "worker.0";
  train::FailureKind kind;
  Status s = train::train(p, o, &report, &kind);
  std::fclose(out);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(kind, train::FailureKind::kData);
  // The checkpoint restore looks at the directory first and names it.
  EXPECT_NE(s.message().find(dir_ + "/file: Not a directory"),
            std::string::npos)
      << s.message();
}

} // namespace
} // namespace dtf::summary
