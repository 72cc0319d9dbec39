// The language server's requests: diagnostics through the front end, and
// hover, definition, symbols and completion from its index.
#include "compiler/tools/dtf-lsp/LanguageServer.h"
#include "compiler/Registration.h"
#include "compiler/frontend/Builtins.h"
#include "compiler/frontend/Diagnostics.h"
#include "compiler/frontend/MLIRGen.h"
#include "compiler/frontend/Parser.h"
#include "dtf/Version.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"

#include <set>

using namespace mlir;
using namespace mlir::dtf;
using namespace mlir::dtf::lsp;
namespace mlsp = mlir::lsp;
using llvm::StringRef;

namespace {

bool isIdentChar(char c) {
  return llvm::isAlnum(static_cast<unsigned char>(c)) || c == '_';
}

/// The text of 0-based `line`, or "" past the end.
StringRef lineText(StringRef text, int line) {
  for (int i = 0; i < line; ++i) {
    size_t nl = text.find('\n');
    if (nl == StringRef::npos)
      return "";
    text = text.drop_front(nl + 1);
  }
  return text.take_until([](char c) { return c == '\n'; });
}

/// The LSP range of the token that starts at 1-based `loc`: an identifier or
/// number, a string, or one character.
mlsp::Range tokenRange(StringRef text, ast::Loc loc, unsigned length = 0) {
  int line = loc.line ? loc.line - 1 : 0;
  int col = loc.col ? loc.col - 1 : 0;
  if (!length) {
    StringRef l = lineText(text, line);
    size_t end = col;
    if (end < l.size() && l[end] == '"') {
      end = l.find('"', end + 1);
      end = end == StringRef::npos ? l.size() : end + 1;
    } else {
      while (end < l.size() && isIdentChar(l[end]))
        ++end;
      if (end == static_cast<size_t>(col))
        end = std::min(l.size(), end + 1);
    }
    length = std::max<size_t>(1, end - col);
  }
  return mlsp::Range(mlsp::Position(line, col), mlsp::Position(line, col + length));
}

bool contains(ast::Loc loc, unsigned length, mlsp::Position pos) {
  return static_cast<int>(loc.line) - 1 == pos.line &&
         static_cast<int>(loc.col) - 1 <= pos.character &&
         pos.character < static_cast<int>(loc.col - 1 + length);
}

/// A deep copy: llvm::json keeps StringRefs by reference, and the protocol
/// structs' toJSON hands out references into the structs themselves, which
/// are gone by the time the answer is written.
llvm::json::Value owned(const llvm::json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  os.flush();
  return cantFail(llvm::json::parse(text));
}

/// Parameters decoded from JSON, or an InvalidParams response.
template <typename T>
std::optional<T> decode(const llvm::json::Value &params, Transport::Response &error) {
  T value;
  llvm::json::Path::Root root;
  if (!fromJSON(params, value, llvm::json::Path(root))) {
    std::string message;
    llvm::raw_string_ostream os(message);
    os << "invalid params: " << llvm::toString(root.getError());
    error = Transport::Response::error(RpcError::InvalidParams, os.str());
    return std::nullopt;
  }
  return value;
}

} // namespace

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

Transport::Response LanguageServer::onRequest(StringRef method,
                                              const llvm::json::Value &params) {
  if (method == "initialize") {
    initialized = true;
    return Transport::Response::ok(llvm::json::Object{
        {"capabilities",
         llvm::json::Object{
             {"textDocumentSync",
              llvm::json::Object{{"openClose", true},
                                 {"change", static_cast<int>(mlsp::TextDocumentSyncKind::Full)},
                                 {"save", true}}},
             {"hoverProvider", true},
             {"definitionProvider", true},
             {"documentSymbolProvider", true},
             {"completionProvider",
              llvm::json::Object{{"triggerCharacters", llvm::json::Array{"(", ",", " ", "="}}}},
         }},
        {"serverInfo", llvm::json::Object{{"name", "dtf-lsp"}, {"version", DTF_VERSION_STRING}}},
    });
  }
  if (!initialized)
    return Transport::Response::error(RpcError::ServerNotInitialized,
                                      "the server is not initialized yet");
  if (shutdown)
    return Transport::Response::error(RpcError::InvalidRequest,
                                      "the server is shutting down");
  if (method == "shutdown") {
    shutdown = true;
    return Transport::Response::ok(nullptr);
  }

  Transport::Response error;
  auto withDocument = [&](auto handle) -> Transport::Response {
    auto p = decode<mlsp::TextDocumentPositionParams>(params, error);
    if (!p)
      return error;
    Document *doc = find(p->textDocument.uri);
    if (!doc)
      return Transport::Response::error(RpcError::InvalidParams,
                                        "the document is not open: " +
                                            p->textDocument.uri.uri().str());
    return Transport::Response::ok(owned(handle(*doc, p->position)));
  };
  if (method == "textDocument/hover")
    return withDocument([&](Document &d, mlsp::Position pos) { return hover(d, pos); });
  if (method == "textDocument/definition")
    return withDocument([&](Document &d, mlsp::Position pos) { return definition(d, pos); });
  if (method == "textDocument/completion")
    return withDocument([&](Document &d, mlsp::Position pos) { return completion(d, pos); });
  if (method == "textDocument/documentSymbol") {
    auto p = decode<mlsp::DocumentSymbolParams>(params, error);
    if (!p)
      return error;
    Document *doc = find(p->textDocument.uri);
    if (!doc)
      return Transport::Response::error(RpcError::InvalidParams, "the document is not open");
    return Transport::Response::ok(owned(symbols(*doc)));
  }
  return Transport::Response::error(RpcError::MethodNotFound,
                                    "dtf-lsp does not handle '" + method.str() + "'");
}

bool LanguageServer::onNotification(StringRef method, const llvm::json::Value &params) {
  if (method == "exit")
    return false;
  if (!initialized)
    return true;
  Transport::Response ignored;
  if (method == "textDocument/didOpen") {
    if (auto p = decode<mlsp::DidOpenTextDocumentParams>(params, ignored)) {
      Document &doc = documents[p->textDocument.uri.file().str()];
      doc.uri = p->textDocument.uri;
      doc.text = p->textDocument.text;
      doc.version = p->textDocument.version;
      analyze(doc);
    }
  } else if (method == "textDocument/didChange") {
    if (auto p = decode<mlsp::DidChangeTextDocumentParams>(params, ignored)) {
      if (Document *doc = find(p->textDocument.uri)) {
        if (succeeded(mlsp::TextDocumentContentChangeEvent::applyTo(p->contentChanges, doc->text))) {
          doc->version = p->textDocument.version;
          analyze(*doc);
        }
      }
    }
  } else if (method == "textDocument/didClose") {
    if (auto p = decode<mlsp::DidCloseTextDocumentParams>(params, ignored)) {
      documents.erase(p->textDocument.uri.file().str());
      mlsp::PublishDiagnosticsParams cleared(p->textDocument.uri, 0);
      transport.notify("textDocument/publishDiagnostics", owned(toJSON(cleared)));
    }
  }
  return true;
}

LanguageServer::Document *LanguageServer::find(const mlsp::URIForFile &uri) {
  auto it = documents.find(uri.file().str());
  return it == documents.end() ? nullptr : &it->second;
}

//===----------------------------------------------------------------------===//
// Diagnostics
//===----------------------------------------------------------------------===//

void LanguageServer::analyze(Document &doc) {
  doc.diagnostics.clear();
  doc.index = FrontendIndex();
  DialectRegistry registry;
  registerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  std::set<std::pair<std::string, std::string>> seen; // (range, message)
  std::string path = doc.uri.file().str();
  context.getDiagEngine().registerHandler([&](Diagnostic &diag) {
    auto toRange = [&](Location loc) {
      if (auto fileLoc = dyn_cast<FileLineColLoc>(loc))
        return tokenRange(doc.text, {fileLoc.getLine(), fileLoc.getColumn()});
      return mlsp::Range(mlsp::Position(0, 0), mlsp::Position(0, 1));
    };
    mlsp::Diagnostic out;
    out.range = toRange(diag.getLocation());
    out.source = "dtf";
    out.message = rewriteTypesInMessage(diag.str());
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      out.severity = mlsp::DiagnosticSeverity::Error;
      break;
    case DiagnosticSeverity::Warning:
      out.severity = mlsp::DiagnosticSeverity::Warning;
      break;
    default:
      out.severity = mlsp::DiagnosticSeverity::Information;
      break;
    }
    std::vector<mlsp::DiagnosticRelatedInformation> related;
    for (Diagnostic &note : diag.getNotes())
      related.push_back({mlsp::Location(doc.uri, toRange(note.getLocation())),
                         rewriteTypesInMessage(note.str())});
    if (!related.empty())
      out.relatedInformation = std::move(related);
    std::string key = llvm::formatv("{0}:{1}", out.range.start.line, out.range.start.character).str();
    if (seen.insert({key, out.message}).second)
      doc.diagnostics.push_back(std::move(out));
    return success();
  });

  std::optional<ast::File> file = parseSource(doc.text, path, &context);
  if (file) {
    FrontendOptions options;
    options.index = &doc.index;
    for (const ast::Model &model : file->models) {
      options.modelName = model.name;
      (void)buildModule(*file, &context, options);
    }
    if (file->models.empty()) // still report what a model-less file lacks
      (void)buildModule(*file, &context, options);
  }
  mlsp::PublishDiagnosticsParams publish(doc.uri, doc.version);
  publish.diagnostics = doc.diagnostics;
  transport.notify("textDocument/publishDiagnostics", owned(toJSON(publish)));
}

//===----------------------------------------------------------------------===//
// Hover, definition, symbols
//===----------------------------------------------------------------------===//

llvm::json::Value LanguageServer::hover(const Document &doc, mlsp::Position pos) {
  const FrontendIndex::Hover *best = nullptr;
  for (const FrontendIndex::Hover &h : doc.index.hovers)
    if (contains(h.loc, h.length, pos) && (!best || h.length <= best->length))
      best = &h;
  if (!best)
    return nullptr;
  mlsp::Hover result(tokenRange(doc.text, best->loc, best->length));
  result.contents.value = "```\n" + best->text + "\n```";
  return owned(toJSON(result));
}

llvm::json::Value LanguageServer::definition(const Document &doc, mlsp::Position pos) {
  for (const FrontendIndex::Reference &r : doc.index.references)
    if (contains(r.loc, r.length, pos))
      return owned(toJSON(mlsp::Location(doc.uri, tokenRange(doc.text, r.target))));
  for (const FrontendIndex::Definition &d : doc.index.definitions)
    if (contains(d.loc, d.name.size(), pos))
      return owned(toJSON(mlsp::Location(doc.uri, tokenRange(doc.text, d.loc))));
  return llvm::json::Array();
}

llvm::json::Value LanguageServer::symbols(const Document &doc) {
  using Kind = FrontendIndex::Kind;
  std::vector<mlsp::DocumentSymbol> top;
  std::set<std::pair<unsigned, unsigned>> seen;
  // Models hold their inputs, variables and layers; networks stand alone.
  mlsp::DocumentSymbol *currentModel = nullptr;
  std::vector<const FrontendIndex::Definition *> defs;
  for (const FrontendIndex::Definition &d : doc.index.definitions)
    defs.push_back(&d);
  for (const FrontendIndex::Definition *d : defs) {
    if (!seen.insert({d->loc.line, d->loc.col}).second || d->kind == Kind::Value ||
        d->kind == Kind::Parameter)
      continue;
    mlsp::Range range = tokenRange(doc.text, d->loc, d->name.size());
    mlsp::SymbolKind kind = d->kind == Kind::Model       ? mlsp::SymbolKind::Class
                            : d->kind == Kind::Network   ? mlsp::SymbolKind::Function
                            : d->kind == Kind::Input     ? mlsp::SymbolKind::Field
                            : d->kind == Kind::Variable  ? mlsp::SymbolKind::Variable
                                                         : mlsp::SymbolKind::Object;
    mlsp::DocumentSymbol symbol(d->name, kind, range, range);
    symbol.detail = d->detail;
    if (d->kind == Kind::Model) {
      top.push_back(std::move(symbol));
      currentModel = &top.back();
    } else if (d->kind == Kind::Network || !currentModel) {
      top.push_back(std::move(symbol));
      if (currentModel)
        currentModel = &top[top.size() - 2];
    } else {
      currentModel->children.push_back(std::move(symbol));
    }
  }
  llvm::json::Array out;
  for (const mlsp::DocumentSymbol &s : top)
    out.push_back(owned(toJSON(s)));
  return out;
}

//===----------------------------------------------------------------------===//
// Completion
//===----------------------------------------------------------------------===//

namespace {
// Settings and arguments that take one of a few words, offered after `key =`.
struct WordChoice {
  StringRef key;
  std::vector<std::pair<StringRef, StringRef>> words; // word, detail
};
const WordChoice kWordChoices[] = {
    {"activation",
     {{"relu", "activation"}, {"sigmoid", "activation"}, {"tanh", "activation"},
      {"softmax", "activation"}, {"gelu", "activation"}, {"none", "activation"}}},
    {"padding", {{"same", "padding"}, {"valid", "padding"}}},
    {"precision",
     {{"float32", "precision: all in f32 (the default)"},
      {"mixed_bfloat16",
       "precision: matmuls and convolutions in bf16, f32 accumulation and variables"},
      {"mixed_float16",
       "precision: matmuls and convolutions in f16, f32 accumulation and "
       "variables, dynamic loss scaling"}}},
    {"loss_scale",
     {{"dynamic", "loss_scale: dynamic (initial_scale = 32768, "
                  "dynamic_growth_steps = 2000), or dynamic(...), or a "
                  "fixed number"}}},
};
} // namespace

llvm::json::Value LanguageServer::completion(const Document &doc, mlsp::Position pos) {
  // The text before the cursor.
  size_t offset = 0;
  StringRef text = doc.text;
  for (int line = 0; line < pos.line && offset < text.size(); ++line) {
    size_t nl = text.find('\n', offset);
    offset = nl == StringRef::npos ? text.size() : nl + 1;
  }
  offset = std::min(text.size(), offset + pos.character);
  StringRef before = text.take_front(offset);

  mlsp::CompletionList list;
  auto add = [&](StringRef label, mlsp::CompletionItemKind kind, StringRef detail,
                 StringRef insert = "", StringRef sort = "") {
    mlsp::CompletionItem item(label, kind, sort);
    item.detail = detail.str();
    if (!insert.empty())
      item.insertText = insert.str();
    list.items.push_back(std::move(item));
  };
  auto addBuiltins = [&](std::initializer_list<BuiltinKind> kinds) {
    for (BuiltinKind kind : kinds)
      for (const BuiltinSpec *spec : builtinsOfKind(kind))
        add(spec->name, mlsp::CompletionItemKind::Function,
            (spec->name + "(" + llvm::join(spec->params, ", ") + "): " + spec->summary).str(),
            "", "1");
  };

  // After `key =` in a setting, offer what fits that key.
  StringRef line = before.substr(before.rfind('\n') + 1);
  size_t wordStart = line.size(); // drop the word being typed
  while (wordStart > 0 && isIdentChar(line[wordStart - 1]))
    --wordStart;
  StringRef trimmed = line.take_front(wordStart).rtrim();
  auto afterKey = [&](StringRef key) {
    return trimmed.ends_with("=") && trimmed.drop_back().rtrim().ends_with(key);
  };
  // `optimizer for wide, "cross_*" =`: a group's optimizer; `optimizer for`
  // (and after a comma there): the layers and variables a group can name.
  StringRef statement = trimmed.ltrim();
  const bool inGroup = statement.starts_with("optimizer for ") &&
                       !statement.contains('(');
  if (afterKey("optimizer") || (inGroup && statement.ends_with("="))) {
    addBuiltins({BuiltinKind::Optimizer});
    return owned(toJSON(list));
  }
  if (inGroup || statement == "optimizer for") {
    std::set<std::string> seen;
    for (const FrontendIndex::Definition &d : doc.index.definitions)
      if ((d.kind == FrontendIndex::Kind::Layer ||
           d.kind == FrontendIndex::Kind::Variable) &&
          seen.insert(d.name).second)
        add(d.name, mlsp::CompletionItemKind::Variable,
            (d.detail + ": its variables take this group's optimizer"), "",
            "0");
    return owned(toJSON(list));
  }
  if (afterKey("data") || afterKey("eval")) {
    addBuiltins({BuiltinKind::Data});
    return owned(toJSON(list));
  }
  if (afterKey("learning_rate"))
    addBuiltins({BuiltinKind::Schedule});
  for (const WordChoice &choice : kWordChoices)
    if (afterKey(choice.key)) {
      for (const auto &[word, detail] : choice.words)
        add(word, mlsp::CompletionItemKind::EnumMember, detail);
      return owned(toJSON(list));
    }

  // Inside the parentheses of a call: its keyword arguments first.
  int depth = 0;
  for (size_t i = before.size(); i-- > 0;) {
    char c = before[i];
    if (c == ')')
      ++depth;
    else if (c == '(' && depth-- == 0) {
      size_t end = i;
      size_t start = end;
      while (start > 0 && isIdentChar(before[start - 1]))
        --start;
      StringRef callee = before.slice(start, end);
      const BuiltinSpec *spec = nullptr;
      for (BuiltinKind kind : {BuiltinKind::Layer, BuiltinKind::Op, BuiltinKind::Initializer,
                               BuiltinKind::Optimizer, BuiltinKind::Schedule,
                               BuiltinKind::Data, BuiltinKind::Config})
        if (!spec)
          spec = lookupBuiltin(callee, kind);
      if (spec)
        for (StringRef param : spec->params)
          add(param, mlsp::CompletionItemKind::Property,
              (spec->name + " parameter").str(), (param + " = ").str(), "0");
      break;
    } else if (c == '{' || c == '}') {
      break;
    }
  }

  // The enclosing block: a train block offers its settings.
  int braces = 0;
  StringRef block;
  for (size_t i = before.size(); i-- > 0;) {
    if (before[i] == '}')
      ++braces;
    else if (before[i] == '{' && braces-- == 0) {
      StringRef head = before.take_front(i).rtrim();
      head = head.substr(head.rfind('\n') + 1).trim();
      block = head.take_while(isIdentChar);
      break;
    }
  }
  if (block == "train") {
    for (StringRef key : {"loss", "metrics", "optimizer", "clip_gradients", "moving_average",
                          "replication", "update", "batch", "steps", "seed", "data", "eval",
                          "session", "precision", "loss_scale"})
      add(key, mlsp::CompletionItemKind::Property, "training setting", (key + " = ").str(), "0");
    add("checkpoint every", mlsp::CompletionItemKind::Snippet, "checkpoint policy",
        "checkpoint every 600 s keep 5", "0");
    add("optimizer for", mlsp::CompletionItemKind::Snippet,
        "an optimizer for a group of variables (a layer's `as` name, a "
        "variable, a \"glob\")",
        "optimizer for wide = ftrl(learning_rate = 0.2)", "0");
    add("summary every", mlsp::CompletionItemKind::Snippet, "summary policy",
        "summary every 100 steps [loss]", "0");
    addBuiltins({BuiltinKind::Optimizer, BuiltinKind::Schedule, BuiltinKind::Data,
                 BuiltinKind::Config});
    return owned(toJSON(list));
  }

  for (StringRef keyword : {"model", "input", "var", "graph", "train", "on", "network",
                            "return", "placement", "as", "shares"})
    add(keyword, mlsp::CompletionItemKind::Keyword, "keyword", "", "3");
  addBuiltins({BuiltinKind::Layer, BuiltinKind::Op, BuiltinKind::Initializer});
  std::set<std::string> names;
  for (const FrontendIndex::Definition &d : doc.index.definitions)
    if (names.insert(d.name).second)
      add(d.name,
          d.kind == FrontendIndex::Kind::Network ? mlsp::CompletionItemKind::Function
                                                 : mlsp::CompletionItemKind::Variable,
          d.detail, "", "2");
  return owned(toJSON(list));
}
