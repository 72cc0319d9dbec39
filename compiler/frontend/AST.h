// The abstract syntax tree of a .dtf file, built from ANTLR's parse tree.
#pragma once

#include "llvm/Support/Casting.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::dtf::ast {

/// A place in the source: 1-based line and column.
struct Loc {
  unsigned line = 0;
  unsigned col = 0;
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind { Number, String, Bool, DType, Name, List, Neg, Binary, Call };
  Expr(Kind kind, Loc loc) : kind(kind), loc(loc) {}
  virtual ~Expr() = default;
  Kind getKind() const { return kind; }
  Loc getLoc() const { return loc; }

private:
  Kind kind;
  Loc loc;
};
using ExprPtr = std::unique_ptr<Expr>;

struct NumberExpr : Expr {
  NumberExpr(Loc loc, double value, bool isInteger, std::string text)
      : Expr(Kind::Number, loc), value(value), isInteger(isInteger),
        text(std::move(text)) {}
  double value;
  bool isInteger;
  std::string text; // as written, for messages
  static bool classof(const Expr *e) { return e->getKind() == Kind::Number; }
};

struct StringExpr : Expr {
  StringExpr(Loc loc, std::string value)
      : Expr(Kind::String, loc), value(std::move(value)) {}
  std::string value; // without quotes, escapes resolved
  static bool classof(const Expr *e) { return e->getKind() == Kind::String; }
};

struct BoolExpr : Expr {
  BoolExpr(Loc loc, bool value) : Expr(Kind::Bool, loc), value(value) {}
  bool value;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Bool; }
};

struct DTypeExpr : Expr {
  DTypeExpr(Loc loc, std::string name)
      : Expr(Kind::DType, loc), name(std::move(name)) {}
  std::string name;
  static bool classof(const Expr *e) { return e->getKind() == Kind::DType; }
};

struct NameExpr : Expr {
  NameExpr(Loc loc, std::string name)
      : Expr(Kind::Name, loc), name(std::move(name)) {}
  std::string name;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }
};

struct ListExpr : Expr {
  ListExpr(Loc loc, std::vector<ExprPtr> items)
      : Expr(Kind::List, loc), items(std::move(items)) {}
  std::vector<ExprPtr> items;
  static bool classof(const Expr *e) { return e->getKind() == Kind::List; }
};

struct NegExpr : Expr {
  NegExpr(Loc loc, ExprPtr operand)
      : Expr(Kind::Neg, loc), operand(std::move(operand)) {}
  ExprPtr operand;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Neg; }
};

struct BinaryExpr : Expr {
  BinaryExpr(Loc loc, std::string op, ExprPtr lhs, ExprPtr rhs)
      : Expr(Kind::Binary, loc), op(std::move(op)), lhs(std::move(lhs)),
        rhs(std::move(rhs)) {}
  std::string op; // + - * / @ == != < <= > >=
  ExprPtr lhs, rhs;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }
};

/// An argument of a call or a keyword option: `key = value`, or a positional
/// argument when `key` is empty.
struct Arg {
  std::string key;
  Loc keyLoc;
  ExprPtr value;
};

struct CallExpr : Expr {
  enum class Naming { None, As, Shares };
  CallExpr(Loc loc, std::string callee) : Expr(Kind::Call, loc), callee(std::move(callee)) {}
  std::string callee;
  std::vector<Arg> args;
  Naming naming = Naming::None;
  std::string layerName; // after `as` or `shares`
  Loc layerLoc;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }
};

//===----------------------------------------------------------------------===//
// Types and statements
//===----------------------------------------------------------------------===//

/// One dimension of a written shape: a size, or a symbol (the batch, `B`).
struct Dim {
  std::optional<int64_t> size;
  std::string symbol;
  Loc loc;
};

/// `f32[B, 784]`
struct TensorTypeSpec {
  std::string dtype;
  std::vector<Dim> dims;
  Loc loc;
};

class Stmt {
public:
  enum class Kind { Input, Var, Assign, Return, On };
  Stmt(Kind kind, Loc loc) : kind(kind), loc(loc) {}
  virtual ~Stmt() = default;
  Kind getKind() const { return kind; }
  Loc getLoc() const { return loc; }

private:
  Kind kind;
  Loc loc;
};
using StmtPtr = std::unique_ptr<Stmt>;

/// `input x: f32[B, 784]`
struct InputStmt : Stmt {
  InputStmt(Loc loc, std::string name, TensorTypeSpec type)
      : Stmt(Kind::Input, loc), name(std::move(name)), type(std::move(type)) {}
  std::string name;
  TensorTypeSpec type;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Input; }
};

/// `var W: f32[784, 10] = truncated_normal(stddev = 0.1), trainable = false`
struct VarStmt : Stmt {
  VarStmt(Loc loc, std::string name, TensorTypeSpec type)
      : Stmt(Kind::Var, loc), name(std::move(name)), type(std::move(type)) {}
  std::string name;
  TensorTypeSpec type;
  ExprPtr init; // may be null: zeros
  std::vector<Arg> options;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Var; }
};

/// `h = relu(x @ W + b)`
struct AssignStmt : Stmt {
  AssignStmt(Loc loc, std::string name, ExprPtr value)
      : Stmt(Kind::Assign, loc), name(std::move(name)), value(std::move(value)) {}
  std::string name;
  ExprPtr value;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Assign; }
};

/// `return h` (in networks)
struct ReturnStmt : Stmt {
  ReturnStmt(Loc loc, std::vector<ExprPtr> values)
      : Stmt(Kind::Return, loc), values(std::move(values)) {}
  std::vector<ExprPtr> values;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Return; }
};

/// `on "/job:ps/task:0" { ... }`
struct OnStmt : Stmt {
  OnStmt(Loc loc, std::string device, Loc deviceLoc)
      : Stmt(Kind::On, loc), device(std::move(device)), deviceLoc(deviceLoc) {}
  std::string device;
  Loc deviceLoc; // of the opening quote
  std::vector<StmtPtr> body;
  static bool classof(const Stmt *s) { return s->getKind() == Kind::On; }
};

//===----------------------------------------------------------------------===//
// Networks, placement, training, models
//===----------------------------------------------------------------------===//

struct Param {
  std::string name;
  Loc loc;
  ExprPtr defaultValue;
};

/// `network tower(x, units = 10) { ... return y }`
struct Network {
  std::string name;
  Loc loc;
  std::vector<Param> params;
  std::vector<StmtPtr> body;
};

/// `placement replicate(ps = round_robin)`
struct Placement {
  std::string strategy;
  Loc loc;
  std::vector<Arg> options;
};

struct TrainItem {
  enum class Kind { Setting, Checkpoint, Summary };
  Kind kind;
  Loc loc;
  // Setting: `key = value, extra = ...`, or for a group of variables
  // `key for target, ... = value` (a target: a name, or a "glob" string).
  std::string key;
  struct GroupTarget {
    std::string text;
    bool pattern = false; // written as a string: a glob of variable names
    Loc loc;
  };
  std::vector<GroupTarget> group;
  ExprPtr value;
  std::vector<Arg> extra;
  // Checkpoint and summary: `every N unit [keep K] [names]`
  double every = 0;
  Loc everyLoc;
  std::string unit;
  Loc unitLoc;
  std::optional<int64_t> keep;
  Loc keepLoc;
  std::vector<std::pair<std::string, Loc>> names;
};

struct Model {
  std::string name;
  Loc loc;
  std::vector<StmtPtr> body; // inputs, variables, graph statements, on blocks
  std::vector<Placement> placements;
  std::vector<Network> networks;
  std::vector<TrainItem> train;
  std::vector<Loc> trainBlocks; // where each train block starts
};

struct File {
  std::string path;
  std::vector<Model> models;
  std::vector<Network> networks; // defined outside any model
};

/// Writes the tree as indented text (dtfc --emit=ast).
void dump(const File &file, llvm::raw_ostream &os);

} // namespace mlir::dtf::ast
