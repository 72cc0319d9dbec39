// JSON-RPC over stdio for dtf-lsp.
#include "compiler/tools/dtf-lsp/Transport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::dtf::lsp;
using llvm::StringRef;

namespace {

/// Reads one line (up to and without "\n"); false at the end of input.
bool readLine(std::FILE *in, std::string &line) {
  line.clear();
  int c;
  while ((c = std::fgetc(in)) != EOF) {
    if (c == '\n')
      return true;
    line.push_back(static_cast<char>(c));
    if (line.size() > (1 << 16)) // a header line this long is not a header
      return true;
  }
  return !line.empty();
}

constexpr size_t kMaxMessageBytes = size_t(64) << 20;

} // namespace

std::optional<std::string> Transport::readMessage(std::string &framingError) {
  framingError.clear();
  std::optional<size_t> length;
  bool sawHeader = false;
  std::string line;
  while (true) {
    if (!readLine(in, line))
      return std::nullopt;
    StringRef header = StringRef(line).rtrim("\r");
    if (header.empty()) {
      if (!sawHeader)
        continue; // stray blank lines between messages
      break;
    }
    sawHeader = true;
    if (header.consume_front_insensitive("Content-Length:")) {
      unsigned long long n;
      if (header.trim().getAsInteger(10, n) || n == 0 || n > kMaxMessageBytes)
        framingError = "invalid Content-Length '" + header.trim().str() + "'";
      else
        length = n;
    }
  }
  if (!length) {
    if (framingError.empty())
      framingError = "a message without a Content-Length header";
    return std::string();
  }
  std::string body(*length, '\0');
  size_t read = std::fread(body.data(), 1, *length, in);
  if (read != *length) {
    framingError = "the input ended inside a message (" + std::to_string(read) +
                   " of " + std::to_string(*length) + " bytes)";
    return std::string();
  }
  return body;
}

void Transport::send(llvm::json::Value message) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << message;
  os.flush();
  std::fprintf(out, "Content-Length: %zu\r\n\r\n", text.size());
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

void Transport::notify(StringRef method, llvm::json::Value params) {
  send(llvm::json::Object{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
}

void Transport::replyError(llvm::json::Value id, RpcError code, StringRef message) {
  send(llvm::json::Object{
      {"jsonrpc", "2.0"},
      {"id", std::move(id)},
      {"error", llvm::json::Object{{"code", static_cast<int>(code)}, {"message", message}}}});
}

bool Transport::run(const RequestHandler &onRequest,
                    const NotificationHandler &onNotification) {
  std::string framingError;
  while (std::optional<std::string> body = readMessage(framingError)) {
    if (!framingError.empty()) {
      replyError(nullptr, RpcError::ParseError, framingError);
      continue;
    }
    llvm::Expected<llvm::json::Value> doc = llvm::json::parse(*body);
    if (!doc) {
      replyError(nullptr, RpcError::ParseError,
                 "invalid JSON: " + llvm::toString(doc.takeError()));
      continue;
    }
    llvm::json::Object *object = doc->getAsObject();
    if (!object) {
      replyError(nullptr, RpcError::InvalidRequest,
                 "a JSON-RPC message is an object");
      continue;
    }
    // An id is a number or a string; anything else cannot be echoed back.
    llvm::json::Value *idValue = object->get("id");
    bool validId = idValue && (idValue->getAsInteger() || idValue->getAsString() ||
                               idValue->getAsNumber());
    llvm::json::Value id = validId ? *idValue : llvm::json::Value(nullptr);
    if (object->getString("jsonrpc") != std::optional<StringRef>("2.0")) {
      replyError(std::move(id), RpcError::InvalidRequest,
                 "\"jsonrpc\" must be \"2.0\"");
      continue;
    }
    std::optional<StringRef> method = object->getString("method");
    if (!method) {
      if (object->get("result") || object->get("error"))
        continue; // a response to a request we never sent: ignore it
      replyError(std::move(id), RpcError::InvalidRequest,
                 "a request needs a \"method\" string");
      continue;
    }
    if (idValue && !validId) {
      replyError(nullptr, RpcError::InvalidRequest,
                 "\"id\" must be a number or a string");
      continue;
    }
    llvm::json::Value params = nullptr;
    if (llvm::json::Value *p = object->get("params"))
      params = *p;
    if (!idValue) {
      if (!onNotification(*method, params))
        return true;
      continue;
    }
    Response response = onRequest(*method, params);
    if (response.result)
      send(llvm::json::Object{{"jsonrpc", "2.0"}, {"id", std::move(id)},
                              {"result", std::move(*response.result)}});
    else
      replyError(std::move(id), response.code, response.message);
  }
  return false;
}
