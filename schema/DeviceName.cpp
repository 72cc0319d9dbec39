// Parsing and printing of TensorFlow-style device names.
#include "schema/DeviceName.h"

#include <cctype>
#include <string>

namespace dtf {
namespace {

bool isJobNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char &c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Parses a non-negative decimal number that fills `s` entirely.
std::optional<int> parseIndex(std::string_view s) {
  if (s.empty() || s.size() > 9)
    return std::nullopt;
  int value = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::optional<DeviceType> parseDeviceType(std::string_view s) {
  std::string t = lower(s);
  if (t == "cpu")
    return DeviceType::CPU;
  if (t == "gpu")
    return DeviceType::GPU;
  return std::nullopt;
}

DeviceNameParse fail(std::string message, size_t column) {
  DeviceNameParse result;
  result.error = std::move(message);
  result.errorColumn = column;
  return result;
}

} // namespace

std::string DeviceName::toString() const {
  std::string out;
  if (job)
    out += "/job:" + *job;
  if (replica)
    out += "/replica:" + std::to_string(*replica);
  if (task)
    out += "/task:" + std::to_string(*task);
  if (type) {
    out += *type == DeviceType::CPU ? "/device:CPU" : "/device:GPU";
    out += index ? ":" + std::to_string(*index) : ":*";
  }
  return out;
}

bool DeviceName::isCompatibleWith(const DeviceName &other) const {
  auto agree = [](const auto &a, const auto &b) { return !a || !b || *a == *b; };
  return agree(job, other.job) && agree(replica, other.replica) &&
         agree(task, other.task) && agree(type, other.type) &&
         agree(index, other.index);
}

DeviceName DeviceName::completedWith(const DeviceName &other) const {
  DeviceName out = *this;
  if (!out.job)
    out.job = other.job;
  if (!out.replica)
    out.replica = other.replica;
  if (!out.task)
    out.task = other.task;
  if (!out.type) {
    out.type = other.type;
    out.index = other.index;
  }
  return out;
}

bool DeviceName::operator==(const DeviceName &other) const {
  return job == other.job && replica == other.replica && task == other.task &&
         type == other.type && index == other.index;
}

DeviceNameParse parseDeviceName(std::string_view text) {
  DeviceName name;
  size_t pos = 0;
  if (!text.empty() && text[0] != '/')
    return fail("a device name starts with '/', as in \"/job:ps/task:0\"", 0);
  while (pos < text.size()) {
    // Each component is "/key:value" or "/device:TYPE:N" or "/TYPE:N".
    size_t start = pos + 1;
    size_t end = text.find('/', start);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view part = text.substr(start, end - start);
    if (part.empty())
      return fail("empty component in device name", pos);
    size_t colon = part.find(':');
    if (colon == std::string_view::npos)
      return fail("expected 'key:value' in device name, got '" +
                      std::string(part) + "'",
                  start);
    std::string key = lower(part.substr(0, colon));
    std::string_view value = part.substr(colon + 1);
    size_t valueColumn = start + colon + 1;

    auto setOnce = [](auto &field, auto value) {
      if (field)
        return false;
      field = value;
      return true;
    };

    if (key == "job") {
      if (value.empty())
        return fail("missing job name after '/job:'", valueColumn);
      for (size_t i = 0; i < value.size(); ++i)
        if (!isJobNameChar(value[i]))
          return fail("invalid character '" + std::string(1, value[i]) +
                          "' in job name (letters, digits, '_' and '-')",
                      valueColumn + i);
      if (!setOnce(name.job, std::string(value)))
        return fail("the job is given twice", start);
    } else if (key == "replica" || key == "task") {
      std::optional<int> index = parseIndex(value);
      if (!index)
        return fail("expected a non-negative number after '/" + key +
                        ":', got '" + std::string(value) + "'",
                    valueColumn);
      auto &field = key == "task" ? name.task : name.replica;
      if (!setOnce(field, *index))
        return fail("the " + key + " is given twice", start);
    } else {
      // "/device:GPU:0", "/device:GPU:*", "/gpu:0", "/cpu:0".
      std::string_view typeText, indexText;
      size_t indexColumn;
      if (key == "device") {
        size_t colon2 = value.find(':');
        if (colon2 == std::string_view::npos)
          return fail("expected '/device:TYPE:N', as in '/device:GPU:0'",
                      valueColumn);
        typeText = value.substr(0, colon2);
        indexText = value.substr(colon2 + 1);
        indexColumn = valueColumn + colon2 + 1;
      } else {
        typeText = part.substr(0, colon);
        indexText = value;
        indexColumn = valueColumn;
      }
      std::optional<DeviceType> type = parseDeviceType(typeText);
      if (!type)
        return fail("unknown device component '" + std::string(typeText) +
                        "' (expected job, replica, task, cpu, gpu or device)",
                    key == "device" ? valueColumn : start);
      if (name.type)
        return fail("the device is given twice", start);
      name.type = type;
      if (indexText != "*") {
        std::optional<int> index = parseIndex(indexText);
        if (!index)
          return fail("expected a device number or '*', got '" +
                          std::string(indexText) + "'",
                      indexColumn);
        name.index = index;
      }
    }
    pos = end;
  }
  DeviceNameParse result;
  result.name = std::move(name);
  return result;
}

int stageOfDevice(std::string_view device) {
  if (device.empty())
    return 0;
  DeviceNameParse parsed = parseDeviceName(device);
  if (!parsed.name || !parsed.name->task)
    return 0;
  const std::optional<std::string> &job = parsed.name->job;
  if (job && *job != "worker")
    return 0; // a chief's; compute placed on a ps runs on the worker, as before
  return static_cast<int>(*parsed.name->task);
}

} // namespace dtf
