// Tests of device-name parsing, printing, compatibility and completion.
#include "schema/DeviceName.h"

#include <gtest/gtest.h>

using dtf::DeviceName;
using dtf::DeviceType;
using dtf::parseDeviceName;

namespace {

DeviceName parseOk(const std::string &text) {
  dtf::DeviceNameParse parsed = parseDeviceName(text);
  EXPECT_TRUE(parsed.name.has_value()) << text << ": " << parsed.error;
  return parsed.name.value_or(DeviceName{});
}

TEST(DeviceName, FullName) {
  DeviceName d = parseOk("/job:worker/task:1/gpu:0");
  EXPECT_EQ(d.job, "worker");
  EXPECT_EQ(d.task, 1);
  EXPECT_EQ(d.type, DeviceType::GPU);
  EXPECT_EQ(d.index, 0);
  EXPECT_FALSE(d.replica.has_value());
  EXPECT_EQ(d.toString(), "/job:worker/task:1/device:GPU:0");
}

TEST(DeviceName, TensorFlowLongForm) {
  DeviceName d = parseOk("/job:ps/replica:0/task:2/device:CPU:0");
  EXPECT_EQ(d.job, "ps");
  EXPECT_EQ(d.replica, 0);
  EXPECT_EQ(d.task, 2);
  EXPECT_EQ(d.type, DeviceType::CPU);
  EXPECT_EQ(d.index, 0);
}

TEST(DeviceName, PartialNames) {
  DeviceName gpu = parseOk("/gpu:1");
  EXPECT_FALSE(gpu.job.has_value());
  EXPECT_EQ(gpu.type, DeviceType::GPU);
  EXPECT_EQ(gpu.index, 1);

  DeviceName task = parseOk("/job:ps/task:0");
  EXPECT_FALSE(task.type.has_value());

  DeviceName any = parseOk("/device:GPU:*");
  EXPECT_EQ(any.type, DeviceType::GPU);
  EXPECT_FALSE(any.index.has_value());

  DeviceName empty = parseOk("");
  EXPECT_EQ(empty.toString(), "");
}

TEST(DeviceName, CaseOfDeviceTypeIsFree) {
  EXPECT_EQ(parseOk("/CPU:0").type, DeviceType::CPU);
  EXPECT_EQ(parseOk("/device:gpu:3").index, 3);
}

TEST(DeviceName, RoundTrip) {
  for (const char *text :
       {"/job:worker/task:1/gpu:0", "/cpu:0", "/job:ps", "/job:chief/task:0",
        "/job:worker/replica:3/task:7/device:GPU:2", "/gpu:*"}) {
    DeviceName once = parseOk(text);
    DeviceName twice = parseOk(once.toString());
    EXPECT_EQ(once, twice) << text;
  }
}

TEST(DeviceName, Compatibility) {
  DeviceName worker1gpu0 = parseOk("/job:worker/task:1/gpu:0");
  EXPECT_TRUE(parseOk("/gpu:0").isCompatibleWith(worker1gpu0));
  EXPECT_TRUE(parseOk("/job:worker").isCompatibleWith(worker1gpu0));
  EXPECT_FALSE(parseOk("/job:ps").isCompatibleWith(worker1gpu0));
  EXPECT_FALSE(parseOk("/cpu:0").isCompatibleWith(worker1gpu0));
  EXPECT_FALSE(parseOk("/job:worker/task:2").isCompatibleWith(worker1gpu0));
}

TEST(DeviceName, CompletionFillsOnlyMissingParts) {
  DeviceName partial = parseOk("/gpu:0");
  DeviceName full = partial.completedWith(parseOk("/job:worker/task:3/cpu:0"));
  EXPECT_EQ(full.toString(), "/job:worker/task:3/device:GPU:0");
}

struct BadName {
  const char *text;
  const char *message; // a fragment the error must contain
  size_t column;
};

void PrintTo(const BadName &bad, std::ostream *os) { *os << '"' << bad.text << '"'; }

class DeviceNameErrors : public ::testing::TestWithParam<BadName> {};

TEST_P(DeviceNameErrors, SaysWhatAndWhere) {
  const BadName &bad = GetParam();
  dtf::DeviceNameParse parsed = parseDeviceName(bad.text);
  ASSERT_FALSE(parsed.name.has_value()) << bad.text;
  EXPECT_NE(parsed.error.find(bad.message), std::string::npos)
      << "error for '" << bad.text << "' was: " << parsed.error;
  EXPECT_EQ(parsed.errorColumn, bad.column) << bad.text;
}

INSTANTIATE_TEST_SUITE_P(
    Bad, DeviceNameErrors,
    ::testing::Values(
        BadName{"job:ps", "starts with '/'", 0},
        BadName{"/job:", "missing job name", 5},
        BadName{"/job:p s", "invalid character ' '", 6},
        BadName{"/job:ps/task:x", "non-negative number", 13},
        BadName{"/job:ps/task:-1", "non-negative number", 13},
        BadName{"/job:ps/task:0/task:1", "task is given twice", 15},
        BadName{"/tpu:0", "unknown device component 'tpu'", 1},
        BadName{"/gpu:zero", "device number or '*'", 5},
        BadName{"/job:ps//cpu:0", "empty component", 7},
        BadName{"/job", "expected 'key:value'", 1},
        BadName{"/cpu:0/gpu:0", "device is given twice", 7},
        BadName{"/device:GPU", "expected '/device:TYPE:N'", 8}));

} // namespace
