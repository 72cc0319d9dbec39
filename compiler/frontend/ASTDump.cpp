// Prints the AST as an indented tree, for dtfc --emit=ast and for tests.
#include "compiler/frontend/AST.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir::dtf::ast;
using llvm::raw_ostream;

namespace {

class Dumper {
public:
  explicit Dumper(raw_ostream &os) : os(os) {}

  void file(const File &f) {
    line() << "File " << f.path << "\n";
    Indent in(*this);
    for (const Network &n : f.networks)
      network(n);
    for (const Model &m : f.models)
      model(m);
  }

private:
  struct Indent {
    explicit Indent(Dumper &d) : d(d) { ++d.depth; }
    ~Indent() { --d.depth; }
    Dumper &d;
  };

  raw_ostream &line() {
    os.indent(depth * 2);
    return os;
  }
  static std::string at(Loc loc) {
    return " @" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
  }

  void model(const Model &m) {
    line() << "Model " << m.name << at(m.loc) << "\n";
    Indent in(*this);
    for (const Placement &p : m.placements) {
      line() << "Placement " << p.strategy << at(p.loc) << "\n";
      Indent in2(*this);
      args(p.options);
    }
    for (const Network &n : m.networks)
      network(n);
    for (const StmtPtr &s : m.body)
      stmt(*s);
    for (size_t i = 0; i < m.trainBlocks.size(); ++i)
      line() << "Train" << at(m.trainBlocks[i]) << "\n";
    Indent in2(*this);
    for (const TrainItem &t : m.train)
      trainItem(t);
  }

  void network(const Network &n) {
    line() << "Network " << n.name << at(n.loc) << "\n";
    Indent in(*this);
    for (const Param &p : n.params) {
      line() << "Param " << p.name << at(p.loc) << "\n";
      if (p.defaultValue) {
        Indent in2(*this);
        expr(*p.defaultValue);
      }
    }
    for (const StmtPtr &s : n.body)
      stmt(*s);
  }

  void type(const TensorTypeSpec &t) {
    os << t.dtype << "[";
    for (size_t i = 0; i < t.dims.size(); ++i) {
      if (i)
        os << ", ";
      if (t.dims[i].size)
        os << *t.dims[i].size;
      else
        os << t.dims[i].symbol;
    }
    os << "]";
  }

  void stmt(const Stmt &s) {
    llvm::TypeSwitch<const Stmt *>(&s)
        .Case([&](const InputStmt *i) {
          line() << "Input " << i->name << ": ";
          type(i->type);
          os << at(i->getLoc()) << "\n";
        })
        .Case([&](const VarStmt *v) {
          line() << "Var " << v->name << ": ";
          type(v->type);
          os << at(v->getLoc()) << "\n";
          Indent in(*this);
          if (v->init)
            expr(*v->init);
          args(v->options);
        })
        .Case([&](const AssignStmt *a) {
          line() << "Assign " << a->name << at(a->getLoc()) << "\n";
          Indent in(*this);
          expr(*a->value);
        })
        .Case([&](const ReturnStmt *r) {
          line() << "Return" << at(r->getLoc()) << "\n";
          Indent in(*this);
          for (const ExprPtr &e : r->values)
            expr(*e);
        })
        .Case([&](const OnStmt *o) {
          line() << "On \"" << o->device << "\"" << at(o->getLoc()) << "\n";
          Indent in(*this);
          for (const StmtPtr &b : o->body)
            stmt(*b);
        });
  }

  void trainItem(const TrainItem &t) {
    switch (t.kind) {
    case TrainItem::Kind::Setting: {
      line() << "Setting " << t.key;
      for (size_t i = 0; i < t.group.size(); ++i)
        os << (i ? ", " : " for ")
           << (t.group[i].pattern ? "\"" + t.group[i].text + "\""
                                  : t.group[i].text);
      os << at(t.loc) << "\n";
      Indent in(*this);
      expr(*t.value);
      args(t.extra);
      break;
    }
    case TrainItem::Kind::Checkpoint:
      line() << "Checkpoint every " << t.every << " " << t.unit;
      if (t.keep)
        os << " keep " << *t.keep;
      os << at(t.loc) << "\n";
      break;
    case TrainItem::Kind::Summary:
      line() << "Summary every " << t.every << " " << t.unit << " [";
      for (size_t i = 0; i < t.names.size(); ++i)
        os << (i ? ", " : "") << t.names[i].first;
      os << "]" << at(t.loc) << "\n";
      break;
    }
  }

  void args(const std::vector<Arg> &list) {
    for (const Arg &a : list) {
      if (a.key.empty()) {
        expr(*a.value);
        continue;
      }
      line() << "Kwarg " << a.key << at(a.keyLoc) << "\n";
      Indent in(*this);
      expr(*a.value);
    }
  }

  void expr(const Expr &e) {
    llvm::TypeSwitch<const Expr *>(&e)
        .Case([&](const NumberExpr *n) {
          line() << "Number " << n->text << (n->isInteger ? " (int)" : "")
                 << at(n->getLoc()) << "\n";
        })
        .Case([&](const StringExpr *s) {
          line() << "String \"" << s->value << "\"" << at(s->getLoc()) << "\n";
        })
        .Case([&](const BoolExpr *b) {
          line() << "Bool " << (b->value ? "true" : "false") << at(b->getLoc())
                 << "\n";
        })
        .Case([&](const DTypeExpr *d) {
          line() << "DType " << d->name << at(d->getLoc()) << "\n";
        })
        .Case([&](const NameExpr *n) {
          line() << "Name " << n->name << at(n->getLoc()) << "\n";
        })
        .Case([&](const ListExpr *l) {
          line() << "List" << at(l->getLoc()) << "\n";
          Indent in(*this);
          for (const ExprPtr &item : l->items)
            expr(*item);
        })
        .Case([&](const NegExpr *n) {
          line() << "Neg" << at(n->getLoc()) << "\n";
          Indent in(*this);
          expr(*n->operand);
        })
        .Case([&](const BinaryExpr *b) {
          line() << "Binary " << b->op << at(b->getLoc()) << "\n";
          Indent in(*this);
          expr(*b->lhs);
          expr(*b->rhs);
        })
        .Case([&](const CallExpr *c) {
          line() << "Call " << c->callee << at(c->getLoc());
          if (c->naming == CallExpr::Naming::As)
            os << " as " << c->layerName;
          else if (c->naming == CallExpr::Naming::Shares)
            os << " shares " << c->layerName;
          os << "\n";
          Indent in(*this);
          args(c->args);
        });
  }

  raw_ostream &os;
  unsigned depth = 0;
};

} // namespace

void mlir::dtf::ast::dump(const File &file, raw_ostream &os) {
  Dumper(os).file(file);
}
