// dtf-lsp's language server: keeps the open documents, checks them with the
// same front end as dtfc, and answers hover, definition, symbols, completion.
#pragma once

#include "compiler/frontend/Index.h"
#include "compiler/tools/dtf-lsp/Transport.h"

#include "mlir/Tools/lsp-server-support/Protocol.h"

#include <map>
#include <string>

namespace mlir::dtf::lsp {

class LanguageServer {
public:
  explicit LanguageServer(Transport &transport) : transport(transport) {}

  Transport::Response onRequest(llvm::StringRef method,
                                const llvm::json::Value &params);
  bool onNotification(llvm::StringRef method, const llvm::json::Value &params);
  bool shutdownRequested() const { return shutdown; }

private:
  struct Document {
    mlir::lsp::URIForFile uri;
    std::string text;
    int64_t version = 0;
    std::vector<mlir::lsp::Diagnostic> diagnostics;
    FrontendIndex index;
  };

  void analyze(Document &doc);
  Document *find(const mlir::lsp::URIForFile &uri);

  llvm::json::Value hover(const Document &doc, mlir::lsp::Position pos);
  llvm::json::Value definition(const Document &doc, mlir::lsp::Position pos);
  llvm::json::Value symbols(const Document &doc);
  llvm::json::Value completion(const Document &doc, mlir::lsp::Position pos);

  Transport &transport;
  std::map<std::string, Document> documents; // by file path
  bool initialized = false;
  bool shutdown = false;
};

} // namespace mlir::dtf::lsp
