// Reading plan.bin: the file, the protobuf, the format version, and a
// structural check of everything the executor relies on.
#pragma once

#include "schema/PlanSchema.h"
#include "schema/Status.h"

#include "plan.pb.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dtf::plan {

/// What kind of failure a load met, for the caller's exit code.
enum class PlanErrorKind {
  kNone,
  /// The file could not be opened or read.
  kUnreadable,
  /// Not a plan, a corrupted or truncated one, or one that breaks a rule.
  kInvalid,
  /// A plan of a newer format than kPlanFormatVersion.
  kNewerFormat,
};

/// Reads, parses and validates the plan in `path`. Errors name the file and
/// what is wrong ("plan.bin: train_step op #3 (model.dtf:4:7 dtf.add): input
/// value 9 is used before it is defined"); `kind`, when given, says which
/// kind of failure it was; `fileBytes`, when given, gets the file's bytes
/// (dtf-run fingerprints them without reading the file again).
Status readPlanFile(const std::string &path, Plan *out,
                    PlanErrorKind *kind = nullptr,
                    std::string *fileBytes = nullptr);

/// The same for bytes already in memory; `name` stands for the file.
Status parsePlan(std::string_view bytes, const std::string &name, Plan *out,
                 PlanErrorKind *kind = nullptr);

/// Checks a parsed plan: the format version, the variables (unique names,
/// static shapes, known initializers), and both programs (validateProgram,
/// plus read_variable against the variables). The train_step must fetch
/// something, its first fetch being the loss; an eval program with no ops is
/// taken as "no eval".
Status validatePlan(const Plan &plan, const std::string &name);

/// The structural rules of one program, independent of variables: value ids
/// unique and >= 0 with known dtypes and dims >= -1; every op input defined
/// by an earlier op or a feed; every output declared and defined once; feeds
/// and fetches naming declared, defined values under unique names; and the
/// operands and attributes of the ops the executor implements itself
/// (dtf.input, dtf.constant, dtf.read_variable, dtf.assign_add). `what`
/// names the program in messages ("plan.bin: train_step").
Status validateProgram(const Program &program, const std::string &what);

/// True for an Initializer.kind the runtime implements ("" means zeros).
bool isKnownInitializer(std::string_view kind);

} // namespace dtf::plan
