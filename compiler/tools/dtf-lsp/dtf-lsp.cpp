// dtf-lsp: the language server for .dtf files (LSP 3.17 over stdio).
#include "compiler/tools/dtf-lsp/LanguageServer.h"
#include "dtf/Version.h"

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--version")) {
      std::printf("dtf-lsp %s\n", DTF_VERSION_STRING);
      return 0;
    }
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("usage: dtf-lsp [--stdio]\n\n"
                  "The dtf language server: an editor starts it and speaks LSP\n"
                  "over its standard input and output. It reports the same\n"
                  "errors as dtfc while you type, and offers hover (dtype,\n"
                  "shape, placement), go to definition, document symbols and\n"
                  "completion. See docs/editors.md.\n");
      return 0;
    }
    if (std::strcmp(argv[i], "--stdio") != 0) {
      std::fprintf(stderr, "dtf-lsp: error: unknown option '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  mlir::dtf::lsp::Transport transport(stdin, stdout);
  mlir::dtf::lsp::LanguageServer server(transport);
  bool exited = transport.run(
      [&](llvm::StringRef method, const llvm::json::Value &params) {
        return server.onRequest(method, params);
      },
      [&](llvm::StringRef method, const llvm::json::Value &params) {
        return server.onNotification(method, params);
      });
  // LSP: exit code 0 only after a shutdown request.
  return exited && server.shutdownRequested() ? 0 : 1;
}
