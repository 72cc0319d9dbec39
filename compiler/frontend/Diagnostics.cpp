// Diagnostics of the front end, printed with the source line and a caret.
#include "compiler/frontend/Diagnostics.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <regex>

using namespace mlir;
using namespace mlir::dtf;

std::string mlir::dtf::formatType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << type;
    return s;
  }
  std::string out;
  Type element = tensor.getElementType();
  if (element.isInteger(1))
    out = "bool";
  else {
    llvm::raw_string_ostream os(out);
    os << element;
  }
  out += "[";
  for (auto [i, d] : llvm::enumerate(tensor.getShape())) {
    if (i)
      out += ", ";
    out += ShapedType::isDynamic(d) ? "B" : std::to_string(d);
  }
  out += "]";
  return out;
}

std::string mlir::dtf::rewriteTypesInMessage(StringRef message) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t start = message.find("'tensor<", pos);
    if (start == StringRef::npos)
      break;
    size_t end = message.find(">'", start);
    if (end == StringRef::npos)
      break;
    out += message.substr(pos, start - pos).str();
    // Parse the type text back with a scratch context: cheap, and exact.
    StringRef text = message.substr(start + 1, end - start);
    MLIRContext scratch(MLIRContext::Threading::DISABLED);
    scratch.getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
    Type type = parseType(text, &scratch);
    out += type ? formatType(type) : message.substr(start, end + 2 - start).str();
    pos = end + 2;
  }
  out += message.substr(pos).str();
  // Element types that MLIR quotes, as in "got 'f32' and 'i1'".
  static const std::regex quotedDtype(
      "(got|and|to|is|not|of) '(f32|f64|f16|bf16|i32|i64|i1)'");
  out = std::regex_replace(out, quotedDtype, "$1 $2");
  static const std::regex boolType("(got|and|to|is|not|of) i1\\b");
  return std::regex_replace(out, boolType, "$1 bool");
}

FrontendDiagnostics::FrontendDiagnostics(llvm::SourceMgr &sourceMgr,
                                         MLIRContext *context,
                                         llvm::raw_ostream &os,
                                         unsigned errorLimit)
    : context(context), os(os), errorLimit(errorLimit) {
  // Handlers run newest first and stop at the first that succeeds: ours,
  // registered after the printer, filters and rewrites, then forwards to it.
  printer = std::make_unique<Printer>(sourceMgr, context, os);
  handlerId = context->getDiagEngine().registerHandler(
      [this](Diagnostic &diag) { return handle(diag); });
}

FrontendDiagnostics::~FrontendDiagnostics() {
  context->getDiagEngine().eraseHandler(handlerId);
}

LogicalResult FrontendDiagnostics::handle(Diagnostic &diag) {
  // A network called twice reports an error in its body once.
  std::string key;
  if (auto fileLoc = dyn_cast<FileLineColLoc>(diag.getLocation()))
    key = std::to_string(fileLoc.getLine()) + ":" +
          std::to_string(fileLoc.getColumn()) + ":" + diag.str();
  if (!key.empty() && !seen.insert(key).second)
    return success();
  if (diag.getSeverity() == DiagnosticSeverity::Error)
    ++errors;
  else if (diag.getSeverity() == DiagnosticSeverity::Warning)
    ++warnings;
  if (errors > errorLimit) {
    if (!limitReported) {
      limitReported = true;
      os << "error: too many errors (" << errorLimit
         << "), stopping here; fix these and compile again\n";
    }
    return success();
  }
  // Rebuild the diagnostic with messages in the language's words.
  Diagnostic rewritten(diag.getLocation(), diag.getSeverity());
  rewritten << rewriteTypesInMessage(diag.str());
  for (Diagnostic &note : diag.getNotes())
    rewritten.attachNote(note.getLocation())
        << rewriteTypesInMessage(note.str());
  printer->emitDiagnostic(rewritten);
  return success();
}

void FrontendDiagnostics::printSummary() {
  if (errors == 0)
    return;
  os << errors << (errors == 1 ? " error" : " errors") << " generated.\n";
}
