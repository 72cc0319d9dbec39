// Diagnostics of the front end, printed with the source line and a caret.
#include "compiler/frontend/Diagnostics.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

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
  return out;
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
