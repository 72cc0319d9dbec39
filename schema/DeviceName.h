// Device names in TensorFlow's form (/job:ps/task:0/gpu:0), full or partial.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dtf {

enum class DeviceType { CPU, GPU };

/// A device name whose parts may be missing: "/gpu:0" names GPU 0 of every task,
/// "/job:ps/task:1" names a task and no device on it. Parts are set only when the
/// name gave them.
struct DeviceName {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  std::optional<DeviceType> type;
  std::optional<int> index;

  /// The canonical spelling: /job:J/replica:R/task:T/device:GPU:N with only the
  /// parts that are set, so parse(toString()) gives back the same name.
  std::string toString() const;

  /// True when every part set in both names is equal.
  bool isCompatibleWith(const DeviceName &other) const;

  /// Parts set in `other` fill those missing here; parts set here are kept.
  DeviceName completedWith(const DeviceName &other) const;

  bool operator==(const DeviceName &other) const;
};

/// The result of parsing: a name, or an error that says what is wrong and where
/// (a 0-based column into the input).
struct DeviceNameParse {
  std::optional<DeviceName> name;
  std::string error;
  size_t errorColumn = 0;
};

/// Parses a full or partial device name. Accepts TensorFlow's spellings:
/// "/job:worker/task:1/gpu:0", "/job:worker/replica:0/task:1/device:GPU:0",
/// "/cpu:0", "/device:CPU:0", and the empty name (nothing set).
DeviceNameParse parseDeviceName(std::string_view text);

/// The stage of a model-parallel replica that an op placed on `device` runs
/// on: the task of a worker device; 0 for a chief or ps device, for none and
/// for one without a task (compute placed on a ps runs on the worker).
int stageOfDevice(std::string_view device);

} // namespace dtf
