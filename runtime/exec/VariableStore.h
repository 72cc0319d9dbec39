// VariableStore: the model's variables by name, the tensors that programs read
// and that optimizer ops update in place.
#pragma once

#include "schema/Status.h"
#include "runtime/core/Tensor.h"

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dtf::exec {

/// Owns one tensor per variable. The tensors never move: an executor keeps
/// pointers to them (dtf.read_variable aliases the variable, no copy), so a
/// variable is updated in place and never replaced while an executor uses
/// the store.
class VariableStore {
public:
  /// Adds a variable; an error when the name is taken or `value` is
  /// undefined.
  Status add(const std::string &name, Tensor value);

  /// The variable's tensor, or null when there is none of that name.
  Tensor *find(std::string_view name);
  const Tensor *find(std::string_view name) const;

  /// Sorted names.
  std::vector<std::string> names() const;
  size_t size() const { return variables_.size(); }
  /// The bytes of all variables together.
  size_t byteSize() const;

private:
  // std::map: element addresses stay stable as variables are added.
  std::map<std::string, Tensor, std::less<>> variables_;
};

} // namespace dtf::exec
