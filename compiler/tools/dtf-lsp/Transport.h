// JSON-RPC 2.0 over stdio with LSP's Content-Length framing, strict about
// malformed input: every bad message gets an error response, none ends the
// server or leaves it waiting.
#pragma once

#include "llvm/Support/JSON.h"

#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace mlir::dtf::lsp {

/// JSON-RPC error codes (and LSP's).
enum class RpcError : int {
  ParseError = -32700,
  InvalidRequest = -32600,
  MethodNotFound = -32601,
  InvalidParams = -32602,
  InternalError = -32603,
  ServerNotInitialized = -32002,
};

class Transport {
public:
  Transport(std::FILE *in, std::FILE *out) : in(in), out(out) {}

  /// A request's outcome: a result, or an error code with a message.
  struct Response {
    std::optional<llvm::json::Value> result;
    RpcError code = RpcError::InternalError;
    std::string message;
    static Response ok(llvm::json::Value v) { return {std::move(v), {}, {}}; }
    static Response error(RpcError code, std::string message) {
      return {std::nullopt, code, std::move(message)};
    }
  };
  using RequestHandler =
      std::function<Response(llvm::StringRef method, const llvm::json::Value &params)>;
  /// Returns false to stop the loop (the `exit` notification).
  using NotificationHandler =
      std::function<bool(llvm::StringRef method, const llvm::json::Value &params)>;

  /// Reads and dispatches messages until `exit` or the end of input.
  /// Returns true when it stopped on `exit`.
  bool run(const RequestHandler &onRequest,
           const NotificationHandler &onNotification);

  void notify(llvm::StringRef method, llvm::json::Value params);

private:
  /// The next message body, or nullopt at the end of input. A header block
  /// without a usable Content-Length sets `framingError` and returns "".
  std::optional<std::string> readMessage(std::string &framingError);
  void send(llvm::json::Value message);
  void replyError(llvm::json::Value id, RpcError code, llvm::StringRef message);

  std::FILE *in;
  std::FILE *out;
};

} // namespace mlir::dtf::lsp
