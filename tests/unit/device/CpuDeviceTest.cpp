// The device interface on its host implementation (CpuDevice): memory and
// copies, and ops in a graph reading uploads and each other's outputs.
#include "runtime/device/cpu/CpuDevice.h"
#include "runtime/kernels/cpu/KernelUtil.h"

#include <gtest/gtest.h>

#include <cstring>

namespace dtf::device {
namespace {

const KernelRegistry &elementwise() {
  static const KernelRegistry *r = [] {
    auto *registry = new KernelRegistry();
    cpu::registerElementwiseKernels(*registry);
    return registry;
  }();
  return *r;
}

Tensor floats(std::vector<float> values) {
  Tensor t = Tensor::allocate(DType::F32, {int64_t(values.size())});
  std::memcpy(t.rawData(), values.data(), values.size() * sizeof(float));
  return t;
}

TEST(CpuDeviceTest, NamesItselfAsTheHostsCpu) {
  CpuDevice cpu(elementwise());
  EXPECT_EQ(cpu.name(), "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(gpuDeviceName(1), "/job:localhost/replica:0/task:0/device:GPU:1");
}

TEST(CpuDeviceTest, CopiesThroughItsMemory) {
  CpuDevice cpu(elementwise());
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(cpu.allocator().allocate(12, "a test buffer", &a).isOk());
  ASSERT_TRUE(cpu.allocator().allocate(12, "a test buffer", &b).isOk());
  const float in[3] = {1, 2, 3};
  float out[3] = {};
  Stream &stream = cpu.stream();
  ASSERT_TRUE(stream.copyToDevice(a, in, sizeof in, "in").isOk());
  ASSERT_TRUE(stream.copyOnDevice(b, a, sizeof in, "across").isOk());
  ASSERT_TRUE(stream.copyToHost(out, b, sizeof out, "out").isOk());
  ASSERT_TRUE(stream.synchronize().isOk());
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_FALSE(cpu.allocator().arenaPending());
  EXPECT_TRUE(cpu.allocator().planArena().isOk());
  cpu.allocator().free(a);
  cpu.allocator().free(b);
}

TEST(CpuDeviceTest, RunsAGraphOfOpsThatReadEachOther) {
  CpuDevice cpu(elementwise());
  Tensor x = floats({1, 2, 3}), y = floats({10, 20, 30});
  std::unique_ptr<Graph> graph = cpu.createGraph();
  DeviceOpSpec add;
  add.opName = "dtf.add";
  add.numOutputs = 1;
  std::unique_ptr<DeviceOp> first, second;
  ASSERT_TRUE(cpu.createOp(add, &first).isOk());
  ASSERT_TRUE(cpu.createOp(add, &second).isOk());
  first->addDeviceInput(graph->upload(&x));
  first->addDeviceInput(graph->upload(&y));
  second->addDeviceInput(&first->deviceOutput(0));
  second->addDeviceInput(graph->upload(&x));
  second->setDownload(0);
  graph->add(first.get());
  graph->add(second.get());
  for (uint64_t step = 0; step < 2; ++step) {
    Status s = graph->run(step, 0);
    ASSERT_TRUE(s.isOk()) << s.message();
    const float *z = second->hostOutput(0)->data<float>();
    EXPECT_EQ(z[0], 12.0f);
    EXPECT_EQ(z[2], 36.0f);
  }
  EXPECT_EQ(graph->failedOp(), -1);
}

TEST(CpuDeviceTest, NamesAnOpWithoutAKernel) {
  CpuDevice cpu(elementwise());
  DeviceOpSpec spec;
  spec.opName = "dtf.no_such_op";
  std::unique_ptr<DeviceOp> op;
  Status s = cpu.createOp(spec, &op);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("dtf.no_such_op"), std::string::npos);
}

} // namespace
} // namespace dtf::device
