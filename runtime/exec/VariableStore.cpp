// VariableStore: the model's variables by name.
#include "runtime/exec/VariableStore.h"

namespace dtf::exec {

Status VariableStore::add(const std::string &name, Tensor value) {
  if (!value.defined())
    return errorStatus("variable '", name, "' has no value");
  if (!variables_.emplace(name, std::move(value)).second)
    return errorStatus("variable '", name, "' is defined twice");
  return Status::ok();
}

Tensor *VariableStore::find(std::string_view name) {
  auto it = variables_.find(name);
  return it == variables_.end() ? nullptr : &it->second;
}

const Tensor *VariableStore::find(std::string_view name) const {
  auto it = variables_.find(name);
  return it == variables_.end() ? nullptr : &it->second;
}

std::vector<std::string> VariableStore::names() const {
  std::vector<std::string> out;
  out.reserve(variables_.size());
  for (const auto &[name, tensor] : variables_)
    out.push_back(name);
  return out;
}

size_t VariableStore::byteSize() const {
  size_t bytes = 0;
  for (const auto &[name, tensor] : variables_)
    bytes += tensor.byteSize();
  return bytes;
}

} // namespace dtf::exec
