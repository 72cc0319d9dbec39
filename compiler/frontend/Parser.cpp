// Runs the ANTLR-generated lexer and parser and turns the parse tree into the AST.
#include "compiler/frontend/Parser.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"

#include <cmath>

#include "DtfLexer.h"
#include "DtfParser.h"
#include "antlr4-runtime.h"

using namespace mlir;
using namespace mlir::dtf;
using dtfgrammar::DtfLexer;
using dtfgrammar::DtfParser;

Location mlir::dtf::toLocation(MLIRContext *context, StringRef filename,
                               ast::Loc loc) {
  return FileLineColLoc::get(context, filename, loc.line, loc.col);
}

namespace {

ast::Loc locOf(antlr4::Token *token) {
  if (!token)
    return {};
  return {static_cast<unsigned>(token->getLine()),
          static_cast<unsigned>(token->getCharPositionInLine() + 1)};
}
ast::Loc locOf(antlr4::ParserRuleContext *ctx) {
  return ctx ? locOf(ctx->getStart()) : ast::Loc{};
}
ast::Loc locOf(antlr4::tree::TerminalNode *node) {
  return node ? locOf(node->getSymbol()) : ast::Loc{};
}

/// The token as a user would name it in a message.
std::string describeToken(antlr4::Token *token) {
  if (!token || token->getType() == antlr4::Token::EOF)
    return "end of file";
  std::string text = token->getText();
  if (token->getType() == DtfLexer::ERROR_CHAR) {
    if (text == "\"")
      return "'\"' (a string that does not end on its line)";
    return "character '" + text + "'";
  }
  return "'" + text + "'";
}

/// A token type as a user would name it: keywords and punctuation quoted,
/// classes of tokens in words.
std::string describeTokenType(const antlr4::dfa::Vocabulary &vocabulary, size_t type) {
  switch (type) {
  case DtfLexer::ID:
    return "a name";
  case DtfLexer::INT:
    return "an integer";
  case DtfLexer::FLOAT:
    return "a number";
  case DtfLexer::STRING:
    return "a string";
  case DtfLexer::DTYPE:
    return "a dtype (f32, f64, f16, bf16, i32, i64, bool)";
  default:
    return vocabulary.getDisplayName(type);
  }
}

/// Turns ANTLR's syntax errors into located diagnostics with a short list of
/// what was expected.
class ErrorListener : public antlr4::BaseErrorListener {
public:
  ErrorListener(MLIRContext *context, StringRef filename)
      : context(context), filename(filename) {}

  void syntaxError(antlr4::Recognizer *recognizer,
                   antlr4::Token *offendingSymbol, size_t line,
                   size_t charPositionInLine, const std::string &message,
                   std::exception_ptr) override {
    // ANTLR's own message is used only for the lexer; the parser's lists
    // every token kind, so expectations are rebuilt below.
    ++errors;
    Location loc = FileLineColLoc::get(context, filename, line,
                                       charPositionInLine + 1);
    auto *parser = dynamic_cast<antlr4::Parser *>(recognizer);
    if (!parser || !offendingSymbol) {
      // The lexer reports characters it cannot start a token with.
      emitError(loc) << message;
      return;
    }
    InFlightDiagnostic diag = emitError(loc)
                              << "unexpected " << describeToken(offendingSymbol);
    antlr4::misc::IntervalSet expected = parser->getExpectedTokens();
    std::vector<std::string> names;
    for (ssize_t type : expected.toList()) {
      if (type == static_cast<ssize_t>(antlr4::Token::EOF))
        names.push_back("end of file");
      else
        names.push_back(describeTokenType(parser->getVocabulary(), type));
    }
    if (!names.empty() && names.size() <= 8) {
      diag << ", expected " << (names.size() > 1 ? "one of " : "");
      diag << llvm::join(names, ", ");
    }
  }

  unsigned errors = 0;

private:
  MLIRContext *context;
  std::string filename;
};

/// A policy's interval; NaN when out of range (the checker reports it).
double parseInterval(const std::string &text) {
  double value = std::strtod(text.c_str(), nullptr);
  return std::isfinite(value) && value > 0 ? value : std::nan("");
}

std::string unquote(const std::string &quoted) {
  std::string out;
  for (size_t i = 1; i + 1 < quoted.size(); ++i) {
    char c = quoted[i];
    if (c == '\\' && i + 2 < quoted.size()) {
      char next = quoted[++i];
      out += next == 'n' ? '\n' : next == 't' ? '\t' : next;
    } else {
      out += c;
    }
  }
  return out;
}

/// Deeper expressions are refused: recursion over them (here, in the checker
/// and in the tree's destructor) must stay far from the stack's end.
constexpr unsigned kMaxExprDepth = 256;

/// Walks the parse tree (free of syntax errors) and builds the AST.
class ASTBuilder {
public:
  ASTBuilder(MLIRContext *context, StringRef filename)
      : context(context), filename(filename) {}

  /// True when an expression was too deep (reported once).
  bool tooDeep = false;

  ast::File build(DtfParser::FileContext *file, StringRef path) {
    ast::File out;
    out.path = path.str();
    for (auto *model : file->model())
      out.models.push_back(buildModel(model));
    for (auto *network : file->network())
      out.networks.push_back(buildNetwork(network));
    return out;
  }

private:
  ast::Model buildModel(DtfParser::ModelContext *ctx) {
    ast::Model model;
    model.name = ctx->name->getText();
    model.loc = locOf(ctx->name);
    for (auto *item : ctx->modelItem()) {
      if (auto *input = item->inputDecl()) {
        model.body.push_back(std::make_unique<ast::InputStmt>(
            locOf(input->name), input->name->getText(),
            buildType(input->tensorType())));
      } else if (auto *var = item->varDecl()) {
        model.body.push_back(buildVar(var));
      } else if (auto *placement = item->placementDecl()) {
        ast::Placement p;
        p.strategy = placement->strategy->getText();
        p.loc = locOf(placement->strategy);
        if (auto *kwargs = placement->kwargs())
          for (auto *kw : kwargs->kwarg())
            p.options.push_back(buildKwarg(kw));
        model.placements.push_back(std::move(p));
      } else if (auto *on = item->onBlock()) {
        model.body.push_back(buildOn(on));
      } else if (auto *graph = item->graphBlock()) {
        for (auto *g : graph->graphItem())
          model.body.push_back(buildGraphItem(g));
      } else if (auto *train = item->trainBlock()) {
        model.trainBlocks.push_back(locOf(train->TRAIN()));
        for (auto *t : train->trainItem())
          model.train.push_back(buildTrainItem(t));
      } else if (auto *network = item->network()) {
        model.networks.push_back(buildNetwork(network));
      }
    }
    return model;
  }

  ast::Network buildNetwork(DtfParser::NetworkContext *ctx) {
    ast::Network network;
    network.name = ctx->name->getText();
    network.loc = locOf(ctx->name);
    for (auto *param : ctx->param())
      network.params.push_back(
          {param->name->getText(), locOf(param->name),
           param->expr() ? buildExpr(param->expr()) : nullptr});
    for (auto *item : ctx->graphItem())
      network.body.push_back(buildGraphItem(item));
    return network;
  }

  ast::TensorTypeSpec buildType(DtfParser::TensorTypeContext *ctx) {
    ast::TensorTypeSpec type;
    type.dtype = ctx->DTYPE()->getText();
    type.loc = locOf(ctx);
    for (auto *dim : ctx->dim()) {
      ast::Dim d;
      d.loc = locOf(dim);
      if (auto *size = dim->INT()) {
        int64_t value = 0;
        if (StringRef(size->getText()).getAsInteger(10, value))
          value = -1; // too large: the checker reports it
        d.size = value;
      } else {
        d.symbol = dim->ident()->getText();
      }
      type.dims.push_back(std::move(d));
    }
    return type;
  }

  ast::StmtPtr buildVar(DtfParser::VarDeclContext *ctx) {
    auto var = std::make_unique<ast::VarStmt>(
        locOf(ctx->name), ctx->name->getText(), buildType(ctx->tensorType()));
    if (ctx->init)
      var->init = buildExpr(ctx->init);
    for (auto *kw : ctx->kwarg())
      var->options.push_back(buildKwarg(kw));
    return var;
  }

  ast::StmtPtr buildOn(DtfParser::OnBlockContext *ctx) {
    auto on = std::make_unique<ast::OnStmt>(
        locOf(ctx->ON()), unquote(ctx->device->getText()), locOf(ctx->device));
    for (auto *item : ctx->graphItem())
      on->body.push_back(buildGraphItem(item));
    return on;
  }

  ast::StmtPtr buildGraphItem(DtfParser::GraphItemContext *ctx) {
    if (auto *var = ctx->varDecl())
      return buildVar(var);
    if (auto *on = ctx->onBlock())
      return buildOn(on);
    if (auto *assign = ctx->assign())
      return std::make_unique<ast::AssignStmt>(locOf(assign->name),
                                               assign->name->getText(),
                                               buildExpr(assign->expr()));
    auto *ret = ctx->returnStmt();
    std::vector<ast::ExprPtr> values;
    for (auto *e : ret->expr())
      values.push_back(buildExpr(e));
    return std::make_unique<ast::ReturnStmt>(locOf(ret->RETURN()),
                                             std::move(values));
  }

  ast::TrainItem buildTrainItem(DtfParser::TrainItemContext *ctx) {
    ast::TrainItem item;
    item.loc = locOf(ctx);
    if (auto *setting = dynamic_cast<DtfParser::SettingContext *>(ctx)) {
      item.kind = ast::TrainItem::Kind::Setting;
      item.key = setting->key->getText();
      item.loc = locOf(setting->key);
      item.value = buildExpr(setting->expr());
      for (auto *target : setting->groupTarget())
        item.group.push_back(
            target->STRING()
                ? ast::TrainItem::GroupTarget{unquote(target->getText()), true,
                                              locOf(target)}
                : ast::TrainItem::GroupTarget{target->getText(), false,
                                              locOf(target)});
      for (auto *kw : setting->kwarg())
        item.extra.push_back(buildKwarg(kw));
    } else if (auto *ckpt =
                   dynamic_cast<DtfParser::CheckpointPolicyContext *>(ctx)) {
      item.kind = ast::TrainItem::Kind::Checkpoint;
      item.every = parseInterval(ckpt->every->getText());
      item.everyLoc = locOf(ckpt->every);
      item.unit = ckpt->unit->getText();
      item.unitLoc = locOf(ckpt->unit);
      if (ckpt->keep) {
        int64_t keep = 0;
        if (StringRef(ckpt->keep->getText()).getAsInteger(10, keep))
          keep = -1;
        item.keep = keep;
        item.keepLoc = locOf(ckpt->keep);
      }
    } else {
      auto *summary = dynamic_cast<DtfParser::SummaryPolicyContext *>(ctx);
      item.kind = ast::TrainItem::Kind::Summary;
      item.every = parseInterval(summary->every->getText());
      item.everyLoc = locOf(summary->every);
      item.unit = summary->unit->getText();
      item.unitLoc = locOf(summary->unit);
      auto idents = summary->ident();
      for (size_t i = 1; i < idents.size(); ++i) // idents[0] is the unit
        item.names.push_back({idents[i]->getText(), locOf(idents[i])});
    }
    return item;
  }

  ast::Arg buildKwarg(DtfParser::KwargContext *ctx) {
    return {ctx->key->getText(), locOf(ctx->key), buildExpr(ctx->expr())};
  }

  ast::ExprPtr buildExpr(DtfParser::ExprContext *ctx) {
    if (depth >= kMaxExprDepth) {
      if (!tooDeep)
        emitError(toLocation(context, filename, locOf(ctx)))
            << "expression nested more than " << kMaxExprDepth
            << " levels deep; split it with intermediate names";
      tooDeep = true;
      return std::make_unique<ast::NumberExpr>(locOf(ctx), 0, true, "0");
    }
    ++depth;
    auto done = llvm::make_scope_exit([&] { --depth; });
    if (auto *p = dynamic_cast<DtfParser::PrimaryExprContext *>(ctx))
      return buildPrimary(p->primary());
    if (auto *n = dynamic_cast<DtfParser::NegExprContext *>(ctx))
      return std::make_unique<ast::NegExpr>(locOf(n->op), buildExpr(n->expr()));
    antlr4::Token *op = nullptr;
    DtfParser::ExprContext *lhs = nullptr, *rhs = nullptr;
    if (auto *m = dynamic_cast<DtfParser::MulExprContext *>(ctx))
      op = m->op, lhs = m->lhs, rhs = m->rhs;
    else if (auto *a = dynamic_cast<DtfParser::AddExprContext *>(ctx))
      op = a->op, lhs = a->lhs, rhs = a->rhs;
    else if (auto *c = dynamic_cast<DtfParser::CompareExprContext *>(ctx))
      op = c->op, lhs = c->lhs, rhs = c->rhs;
    return std::make_unique<ast::BinaryExpr>(locOf(op), op->getText(),
                                             buildExpr(lhs), buildExpr(rhs));
  }

  ast::ExprPtr buildPrimary(DtfParser::PrimaryContext *ctx) {
    ast::Loc loc = locOf(ctx);
    if (auto *n = dynamic_cast<DtfParser::NumberLitContext *>(ctx)) {
      std::string text = n->number()->getText();
      bool isInteger = n->number()->INT() != nullptr;
      return std::make_unique<ast::NumberExpr>(loc, std::strtod(text.c_str(), nullptr),
                                               isInteger, text);
    }
    if (auto *s = dynamic_cast<DtfParser::StringLitContext *>(ctx))
      return std::make_unique<ast::StringExpr>(loc, unquote(s->STRING()->getText()));
    if (auto *b = dynamic_cast<DtfParser::BoolLitContext *>(ctx))
      return std::make_unique<ast::BoolExpr>(loc, b->TRUE() != nullptr);
    if (auto *d = dynamic_cast<DtfParser::DtypeLitContext *>(ctx))
      return std::make_unique<ast::DTypeExpr>(loc, d->DTYPE()->getText());
    if (auto *r = dynamic_cast<DtfParser::NameRefContext *>(ctx))
      return std::make_unique<ast::NameExpr>(loc, r->ident()->getText());
    if (auto *p = dynamic_cast<DtfParser::ParenExprContext *>(ctx))
      return buildExpr(p->expr());
    if (auto *l = dynamic_cast<DtfParser::ListLitContext *>(ctx)) {
      std::vector<ast::ExprPtr> items;
      for (auto *e : l->expr())
        items.push_back(buildExpr(e));
      return std::make_unique<ast::ListExpr>(loc, std::move(items));
    }
    auto *callCtx = dynamic_cast<DtfParser::CallExprContext *>(ctx)->call();
    auto call = std::make_unique<ast::CallExpr>(locOf(callCtx->callee),
                                                callCtx->callee->getText());
    for (auto *arg : callCtx->arg())
      call->args.push_back({arg->key ? arg->key->getText() : "",
                            arg->key ? locOf(arg->key) : ast::Loc{},
                            buildExpr(arg->expr())});
    if (callCtx->as) {
      call->naming = ast::CallExpr::Naming::As;
      call->layerName = callCtx->as->getText();
      call->layerLoc = locOf(callCtx->as);
    } else if (callCtx->shares) {
      call->naming = ast::CallExpr::Naming::Shares;
      call->layerName = callCtx->shares->getText();
      call->layerLoc = locOf(callCtx->shares);
    }
    return call;
  }

  MLIRContext *context;
  std::string filename;
  unsigned depth = 0;
};

/// A problem found before parsing, with where it is.
struct SourceProblem {
  ast::Loc loc;
  std::string message;
};

/// Scans for what ANTLR reports badly or not at all: brackets nested deeper
/// than `limit` (its parser recurses once per level, so ten thousand '(' must
/// be refused first) and a block comment that never ends.
std::optional<SourceProblem> scanSource(StringRef source, unsigned limit) {
  unsigned depth = 0, line = 1, col = 1;
  for (size_t i = 0; i < source.size(); ++i, ++col) {
    char c = source[i];
    if (c == '\n') {
      ++line;
      col = 0;
    } else if (c == '"') {
      for (++i, ++col; i < source.size() && source[i] != '"' && source[i] != '\n'; ++i, ++col)
        if (source[i] == '\\')
          ++i, ++col;
      if (i < source.size() && source[i] == '\n')
        ++line, col = 0;
    } else if (c == '/' && i + 1 < source.size() && source[i + 1] == '/') {
      while (i + 1 < source.size() && source[i + 1] != '\n')
        ++i;
    } else if (c == '/' && i + 1 < source.size() && source[i + 1] == '*') {
      ast::Loc start{line, col};
      for (i += 2, col += 2; i + 1 < source.size() && !(source[i] == '*' && source[i + 1] == '/'); ++i, ++col)
        if (source[i] == '\n')
          ++line, col = 0;
      if (i + 1 >= source.size())
        return SourceProblem{start, "this /* comment never ends; close it with */"};
      ++i, ++col;
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > limit)
        return SourceProblem{{line, col},
                             "brackets nested more than " + std::to_string(limit) +
                                 " levels deep; split the expression with "
                                 "intermediate names"};
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<ast::File> mlir::dtf::parseSource(StringRef source,
                                                StringRef filename,
                                                MLIRContext *context) {
  // ANTLR's input stream throws on bytes that are not UTF-8: find them first.
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(source.begin());
  const llvm::UTF8 *bad = begin;
  if (!llvm::isLegalUTF8String(&bad, reinterpret_cast<const llvm::UTF8 *>(source.end()))) {
    size_t offset = bad - begin;
    StringRef before = source.take_front(offset);
    unsigned line = before.count('\n') + 1;
    unsigned col = offset - (before.rfind('\n') == StringRef::npos ? -1 : before.rfind('\n')) ;
    emitError(toLocation(context, filename, {line, col}))
        << "invalid UTF-8 (byte 0x" << llvm::utohexstr(static_cast<uint8_t>(source[offset]), false, 2)
        << "); a .dtf file is UTF-8 text";
    return std::nullopt;
  }
  if (std::optional<SourceProblem> problem = scanSource(source, kMaxExprDepth)) {
    emitError(toLocation(context, filename, problem->loc)) << problem->message;
    return std::nullopt;
  }
  antlr4::ANTLRInputStream input(source.data(), source.size());
  DtfLexer lexer(&input);
  antlr4::CommonTokenStream tokens(&lexer);
  DtfParser parser(&tokens);
  ErrorListener listener(context, filename);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  DtfParser::FileContext *tree = parser.file();
  if (listener.errors > 0)
    return std::nullopt;
  ASTBuilder builder(context, filename);
  ast::File file = builder.build(tree, filename);
  if (builder.tooDeep)
    return std::nullopt;
  return file;
}
