// Each op's elementwise meaning is written twice: once for the generated
// kernels (compiler/kernels/ScalarOps.cpp, from which the CPU's code, the
// GPU's and the emulation's twins all come) and once in the runtime's
// op-by-op CPU kernels. fusion.Models/EveryKernel compares every generated
// kernel of the models with the op-by-op kernels; this test checks that
// those kernels hold every op dtf-fuse may put into one (Fusion.h's list),
// so that no fusable op escapes the comparison.
#include "dialects/Dtf/Transforms/Fusion.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

TEST(FusableOps, EveryOneIsInAKernelComparedWithItsOpByOpKernel) {
  const std::string model =
      std::string(DTF_SOURCE_DIR) + "/tests/unit/fusion/elementwise/every_op.dtf";
  const std::string bin = ::testing::TempDir() + "every_op.bin";
  const std::string cmd = std::string(DTF_DTFC_PATH) + " " + model +
                          " --no-data-check --fuse-reductions=all -o " + bin +
                          " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(bin, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  dtf::plan::Plan plan;
  ASSERT_TRUE(plan.ParseFromString(bytes.str()));
  std::set<std::string> inKernels;
  for (const dtf::plan::Kernel &k : plan.kernels())
    inKernels.insert(k.ops().begin(), k.ops().end());
  const auto fusable = mlir::dtf::fusableElementwiseOpNames();
  EXPECT_GT(fusable.size(), 20u);
  for (llvm::StringRef name : fusable)
    EXPECT_TRUE(inKernels.count(name.str()))
        << name.str() << " may be fused, but no kernel of " << model
        << " holds it: use it there so that its generated code is compared "
           "with its op-by-op kernel";
}

} // namespace
