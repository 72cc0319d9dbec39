// dtfc: compiles a .dtf model into a training plan.
#include "compiler/Registration.h"
#include "dtf/Version.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {

// Exit codes, distinct per kind of failure (as toyc does).
enum ExitCode { kOk = 0, kUsageError = 2, kNotAvailable = 3 };

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.dtf>"),
                               cl::init(""));
cl::opt<std::string> outputFile("o", cl::desc("Write the plan to <file>"),
                                cl::value_desc("file"), cl::init("plan.bin"));

void printVersion(llvm::raw_ostream &os) {
  os << "dtfc " << DTF_VERSION_STRING << " (MLIR " << LLVM_VERSION_STRING
     << ")\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::SetVersionPrinter(printVersion);
  cl::ParseCommandLineOptions(
      argc, argv,
      "dtfc: compiles a dtf model into a training plan\n\n"
      "  dtfc model.dtf -o plan.bin\n");
  if (inputFile.empty()) {
    llvm::errs() << "dtfc: error: no input file (see dtfc --help)\n";
    return kUsageError;
  }
  llvm::errs() << "dtfc: error: cannot compile '" << inputFile
               << "': this build of dtfc has no model-language front end yet\n";
  return kNotAvailable;
}
