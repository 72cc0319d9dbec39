// What the checker learns about a file that an editor wants to show: where
// each name is defined and used, and the type (and placement) at each place.
// Filled by buildModule when FrontendOptions::index is set; read by dtf-lsp.
#pragma once

#include "compiler/frontend/AST.h"

#include <string>
#include <vector>

namespace mlir::dtf {

struct FrontendIndex {
  enum class Kind { Model, Network, Input, Variable, Value, Parameter, Layer };

  struct Definition {
    std::string name;
    Kind kind;
    ast::Loc loc; // of the name
    std::string detail; // "f32[B, 784]", "conv2d layer", ...
  };
  /// A use of a name: `length` characters from `loc`, defined at `target`.
  struct Reference {
    ast::Loc loc;
    unsigned length;
    ast::Loc target;
  };
  /// Text to show when hovering `length` characters from `loc`.
  struct Hover {
    ast::Loc loc;
    unsigned length;
    std::string text;
  };

  std::vector<Definition> definitions;
  std::vector<Reference> references;
  std::vector<Hover> hovers;
};

} // namespace mlir::dtf
