// The mailbox where a model-parallel stage's dtf.recv ops meet what the other
// stages send (runtime/exec/Rendezvous.h): a value is taken once, by key and
// step; a wait reports and can give up; leftovers of a dropped step go.
#include "runtime/exec/Executor.h"
#include "runtime/exec/Rendezvous.h"

#include <gtest/gtest.h>

#include <thread>

namespace dtf::exec {
namespace {

using std::chrono::milliseconds;

Tensor scalar(float v) {
  Tensor t = Tensor::allocate(DType::F32, {});
  t.data<float>()[0] = v;
  return t;
}

TEST(Rendezvous, AValueIsTakenOnceByKeyAndStep) {
  RendezvousTable table;
  table.put("v1:0->1", 3, scalar(1.5f));
  table.put("v1:0->1", 4, scalar(2.5f));
  EXPECT_EQ(table.size(), 2u);
  Tensor out;
  ASSERT_TRUE(table.take("v1:0->1", 4, &out, milliseconds(10), nullptr).isOk());
  EXPECT_EQ(out.data<float>()[0], 2.5f);
  ASSERT_TRUE(table.take("v1:0->1", 3, &out, milliseconds(10), nullptr).isOk());
  EXPECT_EQ(out.data<float>()[0], 1.5f);
  EXPECT_EQ(table.size(), 0u);
}

TEST(Rendezvous, ATakeWaitsForTheSenderAndSaysSo) {
  RendezvousTable table;
  std::thread sender([&] {
    std::this_thread::sleep_for(milliseconds(60));
    table.put("k", 1, scalar(7));
  });
  int calls = 0;
  Tensor out;
  Status s = table.take("k", 1, &out, milliseconds(10),
                        [&](double, Status *) { return ++calls > 0; });
  sender.join();
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(out.data<float>()[0], 7.0f);
  EXPECT_GT(calls, 0) << "the waiting callback was never asked";
}

TEST(Rendezvous, AWaitThatGivesUpReturnsItsReason) {
  RendezvousTable table;
  Tensor out;
  Status s = table.take("k", 1, &out, milliseconds(5), [](double, Status *why) {
    *why = errorStatus("lost worker.1");
    return false;
  });
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "lost worker.1");
  s = table.take("k", 1, &out, milliseconds(5),
                 [](double, Status *) { return false; });
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "gave up waiting for 'k' of step 1");
}

TEST(Rendezvous, LeftoversOfEarlierStepsAreDropped) {
  RendezvousTable table;
  table.put("a", 1, scalar(1));
  table.put("b", 2, scalar(2));
  table.put("a", 3, scalar(3)); // already sent for the next step
  table.dropBefore(3);
  EXPECT_EQ(table.size(), 1u);
  Tensor out;
  ASSERT_TRUE(table.take("a", 3, &out, milliseconds(5), nullptr).isOk());
  EXPECT_EQ(out.data<float>()[0], 3.0f);
}

TEST(Rendezvous, LocalSendCopiesAndRefusesAStageItLacks) {
  RendezvousTable t0, t1;
  LocalRendezvous r0({&t0, &t1}, 0, 1.0);
  Tensor v = scalar(4);
  ASSERT_TRUE(r0.send("k", 1, 9, v).isOk());
  v.data<float>()[0] = 5; // the sent copy does not change
  LocalRendezvous r1({&t0, &t1}, 1, 1.0);
  Tensor out;
  ASSERT_TRUE(r1.recv("k", 0, 9, &out).isOk());
  EXPECT_EQ(out.data<float>()[0], 4.0f);
  Status s = r0.send("k", 2, 9, v);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "send of 'k' to stage 2, which this replica does not have");
}

TEST(Rendezvous, AProgramWithRecvsNeedsARendezvous) {
  plan::Program p;
  p.set_name("stage 1");
  plan::Value *v = p.add_values();
  v->set_id(0);
  v->mutable_type()->set_dtype(plan::F32);
  plan::Op *recv = p.add_ops();
  recv->set_name("dtf.recv");
  recv->add_outputs(0);
  (*recv->mutable_attrs())["key"].set_s("v0:0->1");
  (*recv->mutable_attrs())["peer"].set_i(0);
  VariableStore vars;
  KernelRegistry kernels;
  ExecutorOptions o;
  o.programName = "stage 1";
  std::unique_ptr<Executor> e;
  Status s = Executor::create(p, vars, kernels, o, &e);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("runs only in a cluster, with its other stages"),
            std::string::npos)
      << s.message();

  // With one, it takes the value; a value of the wrong type is named.
  RendezvousTable t0, t1;
  LocalRendezvous r({&t0, &t1}, 1, 1.0);
  o.rendezvous = &r;
  ASSERT_TRUE(Executor::create(p, vars, kernels, o, &e).isOk());
  t1.put("v0:0->1", 0, scalar(6));
  ASSERT_TRUE(e->run(0).isOk());
  Tensor wrong = Tensor::allocate(DType::I32, {2});
  t1.put("v0:0->1", 1, wrong);
  s = e->run(1);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("stage 0 sent i32[2] under 'v0:0->1', but the plan "
                             "declares f32[]"),
            std::string::npos)
      << s.message();
}

} // namespace
} // namespace dtf::exec
