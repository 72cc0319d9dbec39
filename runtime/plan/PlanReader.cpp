// Reading plan.bin and checking its structure before anything runs.
#include "runtime/plan/PlanReader.h"
#include "runtime/plan/FusedKernels.h"
#include "dtf/OpTable.h"

#include "runtime/plan/PlanTypes.h"
#include "schema/Placement.h"
#include "schema/PlanSeal.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <cstdint>
#include <functional>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unordered_map>
#include <vector>

namespace dtf::plan {
namespace {

// Larger files are not plans: dtfc writes variables' initializers, not their
// values, so even big models give plans of a few megabytes.
constexpr size_t kMaxPlanBytes = size_t(1) << 31;
// The most bytes of all variables together: far beyond any machine, but it
// keeps a corrupted dimension from passing as a real (absurd) shape.
constexpr int64_t kMaxVariableBytes = int64_t(1) << 42;
constexpr int kMaxRank = 16;

void setKind(PlanErrorKind *kind, PlanErrorKind value) {
  if (kind)
    *kind = value;
}

const AttrValue *findAttr(const Op &op, const char *name) {
  auto it = op.attrs().find(name);
  return it == op.attrs().end() ? nullptr : &it->second;
}

// The ops whose leading inputs are variables they update in place, and how
// many leading inputs are variables (the variable and its slots).
Status checkType(const TensorType &type, const std::string &where) {
  ::dtf::DType dtype = ::dtf::DType::F32;
  Status s = toDType(type.dtype(), &dtype);
  if (!s.isOk())
    return errorStatus(where, " has ", s.message());
  if (type.shape().dims_size() > kMaxRank)
    return errorStatus(where, " has rank ", type.shape().dims_size(),
                       "; the runtime supports up to ", kMaxRank);
  for (int64_t d : type.shape().dims())
    if (d < -1)
      return errorStatus(where, " has a negative dimension ", d,
                         " (only -1, the batch, may be negative)");
  return Status::ok();
}

// A string attribute that must be there and non-empty.
Status requireName(const Program &program, int i, const std::string &what,
                   std::string *out) {
  const AttrValue *name = findAttr(program.ops(i), "name");
  if (!name || name->value_case() != AttrValue::kS || name->s().empty())
    return errorStatus(what, ": ", describeOp(program, i),
                       " needs a string attribute 'name'");
  *out = name->s();
  return Status::ok();
}

Status checkArity(const Program &program, int i, const std::string &what,
                  int minIn, int maxIn, int minOut, int maxOut) {
  const Op &op = program.ops(i);
  if (op.inputs_size() < minIn || op.inputs_size() > maxIn)
    return errorStatus(what, ": ", describeOp(program, i), " takes ",
                       minIn == maxIn ? strCat(minIn)
                                      : strCat(minIn, "..", maxIn),
                       " inputs, the plan gives it ", op.inputs_size());
  if (op.outputs_size() < minOut || op.outputs_size() > maxOut)
    return errorStatus(what, ": ", describeOp(program, i), " has ",
                       minOut == maxOut ? strCat(minOut)
                                        : strCat(minOut, "..", maxOut),
                       " results, the plan gives it ", op.outputs_size());
  return Status::ok();
}

// Op `i` against its ODS definition (dtf/OpTable.h, generated from the
// dialect): an op of the dialect, with as many inputs (the variables an
// update names first) and results as it takes, of the element types its
// constraints allow, and every attribute it needs, of its kind.
Status checkSpec(const Program &program, int i, const std::string &what,
                 const std::function<const TensorType &(int32_t)> &typeOf) {
  const Op &op = program.ops(i);
  const dtf::ops::OpSpec *spec = dtf::ops::findSpec(op.name());
  if (!spec)
    return errorStatus(what, ": ", describeOp(program, i),
                       " is not an op of the dtf dialect (a plan of another "
                       "dtfc? recompile it with this one)");
  auto count = [](const dtf::ops::ValueSpec *specs, int n, int *min, int *max) {
    *min = 0;
    *max = 0;
    for (int k = 0; k < n; ++k) {
      *min += specs[k].arity == dtf::ops::Arity::kOne;
      *max = specs[k].arity == dtf::ops::Arity::kVariadic || *max < 0 ? -1 : *max + 1;
    }
  };
  int minIn, maxIn, minOut, maxOut;
  count(spec->inputs, spec->numInputs, &minIn, &maxIn);
  count(spec->outputs, spec->numOutputs, &minOut, &maxOut);
  minIn += spec->variables;
  if (maxIn >= 0)
    maxIn += spec->variables;
  DTF_RETURN_IF_ERROR(checkArity(program, i, what, minIn,
                                 maxIn < 0 ? INT32_MAX : maxIn, minOut,
                                 maxOut < 0 ? INT32_MAX : maxOut));
  // Element types, where every operand (or result) is exactly one value.
  auto checkTypes = [&](const dtf::ops::ValueSpec *specs, int n, int first,
                        const google::protobuf::RepeatedField<int32_t> &ids,
                        const char *kind) -> Status {
    if (n != ids.size() - first)
      return Status::ok();
    for (int k = 0; k < n; ++k) {
      const TensorType &t = typeOf(ids[first + k]);
      if (!(specs[k].dtypes & (1u << unsigned(t.dtype()))))
        return errorStatus(what, ": ", describeOp(program, i), " ", kind, " '",
                           specs[k].name, "' (", kind, " ", first + k,
                           ") of type ", typeString(t),
                           " is not of an element type the op takes");
    }
    return Status::ok();
  };
  DTF_RETURN_IF_ERROR(checkTypes(spec->inputs, spec->numInputs,
                                 spec->variables, op.inputs(), "input"));
  DTF_RETURN_IF_ERROR(
      checkTypes(spec->outputs, spec->numOutputs, 0, op.outputs(), "result"));
  for (int k = 0; k < spec->numAttrs; ++k) {
    const dtf::ops::AttrSpec &a = spec->attrs[k];
    const AttrValue *value = findAttr(op, a.name);
    if (!value) {
      if (a.required)
        return errorStatus(what, ": ", describeOp(program, i),
                           " needs attribute '", a.name, "'");
      continue;
    }
    static constexpr AttrValue::ValueCase kCase[] = {
        AttrValue::kI,    AttrValue::kF,    AttrValue::kB,
        AttrValue::kS,    AttrValue::kInts, AttrValue::kTensor,
        AttrValue::kFloats};
    static constexpr const char *kKind[] = {"an integer", "a number", "a bool",
                                            "a string", "a list of integers",
                                            "a tensor", "a list of numbers"};
    const int kind = int(a.kind);
    if (value->value_case() != kCase[kind])
      return errorStatus(what, ": ", describeOp(program, i), " attribute '",
                         a.name, "' must be ", kKind[kind]);
  }
  return Status::ok();
}

// max_pool_with_argmax's argmax (output 1) and max_pool_grad_with_argmax's
// (input 0) must be i32 [N, OH, OW, ceil(C / 4)] for the pooled values
// `pooled` (output 0, or the gradient's dy) of [N, OH, OW, C]: the kernels
// read four window-position bytes to an element (docs/plan-format.md, "Max
// pooling with its argmax").
Status checkPoolArgmax(const Program &program, int i, const std::string &what,
                       const TensorType &pooled, const TensorType &argmax) {
  ::dtf::DType dtype = ::dtf::DType::F32;
  (void)toDType(argmax.dtype(), &dtype);
  std::vector<int64_t> want = dimsOf(pooled.shape());
  if (want.size() == 4 && want[3] >= 0)
    want[3] = (want[3] + 3) / 4;
  if (want.size() != 4 || dtype != ::dtf::DType::I32 ||
      dimsOf(argmax.shape()) != want)
    return errorStatus(
        what, ": ", describeOp(program, i), " needs its argmax of type ",
        typeString(::dtf::DType::I32, want),
        " (four window-position bytes to an i32) for pooled "
        "values of type ",
        typeString(pooled), ", the plan gives ", typeString(argmax));
  return Status::ok();
}

} // namespace


bool isKnownInitializer(std::string_view kind) {
  return kind.empty() || kind == "zeros" || kind == "ones" ||
         kind == "constant" || kind == "uniform" || kind == "normal" ||
         kind == "truncated_normal" || kind == "glorot_uniform" ||
         kind == "he_normal" || kind == "orthogonal";
}

Status validateProgram(const Program &program, const std::string &what) {
  const int numValues = program.values_size();
  std::unordered_map<int32_t, int> index;
  index.reserve(numValues);
  for (int v = 0; v < numValues; ++v) {
    const Value &value = program.values(v);
    if (value.id() < 0)
      return errorStatus(what, ": value id ", value.id(), " is negative");
    if (!index.emplace(value.id(), v).second)
      return errorStatus(what, ": value ", value.id(), " is declared twice");
    DTF_RETURN_IF_ERROR(
        checkType(value.type(), strCat(what, ": value ", value.id())));
  }
  auto lookup = [&](int32_t id) {
    auto it = index.find(id);
    return it == index.end() ? -1 : it->second;
  };

  // Where each value comes from: a feed, or the op that defines it.
  std::vector<char> fed(numValues, 0);
  std::vector<int> definedBy(numValues, -1);
  std::vector<char> fromReadVariable(numValues, 0);
  std::set<std::string, std::less<>> feedNames;
  for (const Feed &feed : program.feeds()) {
    if (feed.name().empty())
      return errorStatus(what, ": a feed has no name");
    if (!feedNames.insert(feed.name()).second)
      return errorStatus(what, ": feed '", printable(feed.name()),
                         "' is given twice");
    int v = lookup(feed.value());
    if (v < 0)
      return errorStatus(what, ": feed '", printable(feed.name()),
                         "' names value ", feed.value(),
                         ", which is not declared");
    if (fed[v])
      return errorStatus(what, ": value ", feed.value(),
                         " is fed by two feeds");
    fed[v] = 1;
  }

  for (int i = 0; i < program.ops_size(); ++i) {
    const Op &op = program.ops(i);
    if (op.name().empty())
      return errorStatus(what, ": ", describeOp(program, i), " has no op name");
    for (int32_t id : op.inputs()) {
      int v = lookup(id);
      if (v < 0)
        return errorStatus(what, ": ", describeOp(program, i), " reads value ",
                           id, ", which is not declared");
      if (!fed[v] && definedBy[v] < 0)
        return errorStatus(what, ": ", describeOp(program, i), " reads value ",
                           id,
                           " before any op defines it (the ops must be in "
                           "execution order)");
    }
    const bool isInput = op.name() == dtf::ops::kInput;
    for (int32_t id : op.outputs()) {
      int v = lookup(id);
      if (v < 0)
        return errorStatus(what, ": ", describeOp(program, i),
                           " defines value ", id, ", which is not declared");
      if (definedBy[v] >= 0)
        return errorStatus(what, ": ", describeOp(program, i),
                           " defines value ", id, ", already defined by ",
                           describeOp(program, definedBy[v]));
      if (fed[v] && !isInput)
        return errorStatus(what, ": ", describeOp(program, i),
                           " defines value ", id,
                           ", which is fed: only dtf.input may define a fed "
                           "value");
      definedBy[v] = i;
    }

    DTF_RETURN_IF_ERROR(checkSpec(program, i, what, [&](int32_t id) -> const TensorType & {
      return program.values(lookup(id)).type();
    }));

    // What the spec cannot say of the ops the executor implements itself
    // (their arity and attributes' kinds it has checked).
    std::string name;
    if (isInput) {
      DTF_RETURN_IF_ERROR(requireName(program, i, what, &name));
    } else if (op.name() == dtf::ops::kReadVariable) {
      DTF_RETURN_IF_ERROR(requireName(program, i, what, &name));
      fromReadVariable[lookup(op.outputs(0))] = 1;
    } else if (op.name() == dtf::ops::kConstant) {
      const AttrValue *value = findAttr(op, "value");
      ::dtf::DType dtype = ::dtf::DType::F32;
      std::vector<int64_t> dims;
      Status s = checkTensorValue(value->tensor(), &dtype, &dims);
      if (!s.isOk())
        return errorStatus(what, ": ", describeOp(program, i), ": ",
                           s.message());
      const TensorType &declared = program.values(lookup(op.outputs(0))).type();
      ::dtf::DType declaredDType = ::dtf::DType::F32;
      (void)toDType(declared.dtype(), &declaredDType);
      if (dtype != declaredDType || !shapeFits(dimsOf(declared.shape()), dims))
        return errorStatus(what, ": ", describeOp(program, i),
                           " holds a constant of type ",
                           typeString(dtype, dims), " for a value of type ",
                           typeString(declared));
    } else if (op.name() == dtf::ops::kMaxPoolWithArgmax) {
      DTF_RETURN_IF_ERROR(checkPoolArgmax(
          program, i, what, program.values(lookup(op.outputs(0))).type(),
          program.values(lookup(op.outputs(1))).type()));
    } else if (op.name() == dtf::ops::kMaxPoolGradWithArgmax) {
      DTF_RETURN_IF_ERROR(checkPoolArgmax(
          program, i, what, program.values(lookup(op.inputs(1))).type(),
          program.values(lookup(op.inputs(0))).type()));
    }
    const int updated = updatedOperands(op);
    for (int k = 0; k < updated && k < op.inputs_size(); ++k)
      if (!fromReadVariable[lookup(op.inputs(k))])
        return errorStatus(what, ": ", describeOp(program, i),
                           " updates input ", k,
                           " in place, so it must be a dtf.read_variable "
                           "result (value ",
                           op.inputs(k), " is not)");
  }

  for (int v = 0; v < numValues; ++v)
    if (fed[v] && definedBy[v] >= 0 &&
        program.ops(definedBy[v]).name() != dtf::ops::kInput)
      return errorStatus(what, ": value ", program.values(v).id(),
                         " is both fed and computed");

  std::set<std::string, std::less<>> fetchNames;
  for (const Fetch &fetch : program.fetches()) {
    if (fetch.name().empty())
      return errorStatus(what, ": a fetch has no name");
    if (!fetchNames.insert(fetch.name()).second)
      return errorStatus(what, ": fetch '", printable(fetch.name()),
                         "' is given twice");
    int v = lookup(fetch.value());
    if (v < 0 || (!fed[v] && definedBy[v] < 0))
      return errorStatus(what, ": fetch '", printable(fetch.name()),
                         "' names value ", fetch.value(),
                         ", which no op defines");
  }
  return Status::ok();
}

namespace {

// An initializer's parameters: finite numbers of the ones its kind takes,
// a spread that is not negative, a range that is not empty.
// The learning-rate schedule's numbers, where the runtime reads them (for
// summaries and a fed learning rate): a cosine_decay's as dtfc checks them.
Status checkSchedule(const Schedule &schedule, const std::string &name) {
  if (schedule.kind() != "cosine_decay")
    return Status::ok();
  const std::string where = strCat(name, ": the cosine_decay schedule");
  if (!(std::isfinite(schedule.learning_rate()) &&
        schedule.learning_rate() >= 0))
    return errorStatus(where, " has initial_learning_rate ",
                       schedule.learning_rate(), "; it must be 0 or more");
  if (schedule.decay_steps() < 1)
    return errorStatus(where, " has decay_steps ", schedule.decay_steps(),
                       "; it must be at least 1");
  if (!(std::isfinite(schedule.alpha()) && schedule.alpha() >= 0))
    return errorStatus(where, " has alpha ", schedule.alpha(),
                       "; it must be 0 or more");
  if (schedule.has_warmup_target() &&
      !(std::isfinite(schedule.warmup_target()) &&
        schedule.warmup_target() > 0))
    return errorStatus(where, " has warmup_target ", schedule.warmup_target(),
                       "; it must be positive");
  if (schedule.warmup_steps() < 0)
    return errorStatus(where, " has warmup_steps ", schedule.warmup_steps(),
                       "; it must be 0 or more");
  return Status::ok();
}

Status checkInitializer(const Variable &var, const std::string &where) {
  const Initializer &init = var.initializer();
  for (const auto &[param, value] : init.params())
    if (!std::isfinite(value))
      return errorStatus(where, ": its ", printable(init.kind()),
                         " initializer has ", printable(param), " = ", value,
                         "; an initializer's parameters are finite numbers");
  auto param = [&](const char *key, double fallback) {
    auto it = init.params().find(key);
    return it == init.params().end() ? fallback : it->second;
  };
  if (param("stddev", 0) < 0)
    return errorStatus(where, ": its ", printable(init.kind()),
                       " initializer has a negative stddev ",
                       param("stddev", 0));
  if (init.kind() == "orthogonal" && var.type().shape().dims_size() < 2)
    return errorStatus(where,
                       ": the orthogonal initializer needs a variable "
                       "of rank 2 or more, got ",
                       typeString(var.type()));
  if (init.kind() == "uniform" && param("minval", 0) > param("maxval", 1))
    return errorStatus(where, ": its uniform initializer has minval ",
                       param("minval", 0), " above maxval ",
                       param("maxval", 1));
  return Status::ok();
}

// The variables: unique names, known dtypes, static shapes that fit
// together, known initializers; `variables` by name.
Status checkVariables(
    const Plan &plan, const std::string &name,
    std::unordered_map<std::string, const Variable *> *variables) {
  int64_t totalBytes = 0;
  for (const Variable &var : plan.variables()) {
    const std::string where =
        strCat(name, ": variable '", printable(var.name()), "'");
    if (var.name().empty())
      return errorStatus(name, ": a variable has no name");
    if (!variables->emplace(var.name(), &var).second)
      return errorStatus(where, " is declared twice");
    DTF_RETURN_IF_ERROR(checkType(var.type(), where));
    std::vector<int64_t> dims = dimsOf(var.type().shape());
    for (int64_t d : dims)
      if (d < 0)
        return errorStatus(where, " has type ", typeString(var.type()),
                           "; a variable needs a static shape (no batch "
                           "dimension)");
    ::dtf::DType dtype = ::dtf::DType::F32;
    (void)toDType(var.type().dtype(), &dtype);
    const int64_t limit = kMaxVariableBytes / int64_t(dtypeSize(dtype));
    int64_t elements = staticElements(dims, limit);
    if (elements < 0 ||
        totalBytes + elements * int64_t(dtypeSize(dtype)) > kMaxVariableBytes)
      return errorStatus(where, " of type ", typeString(var.type()),
                         " is too large (the variables may hold at most ",
                         kMaxVariableBytes, " bytes together)");
    totalBytes += elements * int64_t(dtypeSize(dtype));
    if (!isKnownInitializer(var.initializer().kind()))
      return errorStatus(where, " has an unknown initializer '",
                         printable(var.initializer().kind()),
                         "' (known: zeros, ones, constant, uniform, normal, "
                         "truncated_normal, glorot_uniform, he_normal, "
                         "orthogonal)");
    DTF_RETURN_IF_ERROR(checkInitializer(var, where));
    const int64_t rows = dims.empty() ? 1 : dims[0];
    if (var.partitions() < 0 || var.partitions() > std::max<int64_t>(rows, 1))
      return errorStatus(where, " has partitions = ", var.partitions(),
                         "; a variable splits into 1 to ", std::max<int64_t>(rows, 1),
                         " shards (its rows along axis 0)");
    if (!(var.role().empty() || var.role() == "model" || var.role() == "slot" ||
          var.role() == "global_step" || var.role() == "moving_average"))
      return errorStatus(where, " has the unknown role '",
                         printable(var.role()),
                         "' (known: model, slot, global_step, moving_average)");
    // Informational (what updates it), but only a model variable has one.
    if (!var.optimizer().empty() && !var.role().empty() && var.role() != "model")
      return errorStatus(where, " (role '", printable(var.role()),
                         "') names the optimizer '", printable(var.optimizer()),
                         "'; only a model variable is updated by one");
  }
  // A slot or moving average belongs to a variable of the plan.
  for (const Variable &var : plan.variables()) {
    const bool owned = var.role() == "slot" || var.role() == "moving_average";
    if (owned != !var.slot_of().empty() ||
        (owned && (!variables->count(var.slot_of()) ||
                   var.slot_of() == var.name())))
      return errorStatus(name, ": variable '", printable(var.name()),
                         "' (role '", printable(var.role()), "') has slot_of '",
                         printable(var.slot_of()),
                         "'; a slot or moving average names another variable "
                         "of the plan, and only they name one");
  }
  return Status::ok();
}

// The session's threads and towers, within what any machine has.
Status checkSession(const Plan &plan, const std::string &name) {
  const SessionOptions &session = plan.session();
  for (const auto &[what, value, max] :
       {std::tuple{"inter_op_threads", int64_t(session.inter_op_threads()),
                   kMaxSessionThreads},
        std::tuple{"intra_op_threads", int64_t(session.intra_op_threads()),
                   kMaxSessionThreads},
        std::tuple{"gpu_towers", int64_t(session.gpu_towers()),
                   kMaxGpuTowers}})
    if (value < 0 || value > max)
      return errorStatus(name, ": session.", what, " = ", value,
                         " is outside 0..", max,
                         " (0: the default); compile the model again with "
                         "dtfc");
  return Status::ok();
}

} // namespace

Status validatePlan(const Plan &plan, const std::string &name) {
  if (plan.format_version() == 0)
    return errorStatus(name,
                       " is not a dtf plan (it has no format version; plans "
                       "are written by dtfc)");
  if (plan.format_version() > kPlanFormatVersion)
    return errorStatus(name, " was written by a newer dtfc (format ",
                       plan.format_version(), "); this dtf-run reads format ",
                       kPlanFormatVersion);

  std::unordered_map<std::string, const Variable *> variables;
  DTF_RETURN_IF_ERROR(checkVariables(plan, name, &variables));
  DTF_RETURN_IF_ERROR(checkSession(plan, name));

  const Program &train = plan.train_step();
  if (train.ops_size() == 0 || train.fetches_size() == 0)
    return errorStatus(name,
                       " has no train_step program, or it fetches nothing "
                       "(its first fetch is the loss)");

  struct Named {
    const Program *program;
    std::string label;
    bool held; // a ps program: its reads name held tensors
  };
  // A ps program receives its operands: checked as if they were fed (dtfc
  // writes the feeds of its recvs; a recv without one is fed all the same).
  auto asFed = [](const Program &ps) {
    Program p = ps;
    std::set<std::string> fed;
    for (const Feed &f : ps.feeds())
      fed.insert(f.name());
    for (const Transfer &recv : ps.recvs()) {
      if (fed.count(recv.key()))
        continue;
      Feed *feed = p.add_feeds();
      feed->set_name(recv.key());
      feed->set_value(recv.value());
    }
    return p;
  };
  const Program psUpdate = asFed(plan.ps_update());
  const Program lookupPs = asFed(plan.lookups().ps_update());
  std::vector<Named> programs = {{&plan.train_step(), "train_step", false},
                                 {&plan.eval(), "eval", false},
                                 {&plan.worker_step(), "worker_step", false},
                                 {&psUpdate, "ps_update", true},
                                 {&plan.lookups().worker_step(),
                                  "lookups.worker_step", false},
                                 {&lookupPs, "lookups.ps_update", true},
                                 {&plan.lookups().eval(), "lookups.eval", false}};
  if (plan.stages_size() > 0 &&
      (!checkReplicaSpan(plan).isOk() || plan.stages_size() != replicaSpan(plan)))
    return errorStatus(name, ": the plan holds ", plan.stages_size(),
                       " stage programs, but its worker_step spans ",
                       replicaSpan(plan), " worker tasks");
  for (int k = 0; k < plan.stages_size(); ++k)
    programs.push_back({&plan.stages(k), strCat("stage ", k), false});
  for (const Named &p : programs) {
    const Program &program = *p.program;
    if (program.ops_size() == 0 && program.fetches_size() == 0 &&
        program.feeds_size() == 0)
      continue; // no eval program
    const std::string what = strCat(name, ": ", p.label);
    DTF_RETURN_IF_ERROR(validateProgram(program, what));
    std::unordered_map<int32_t, int> index;
    for (int v = 0; v < program.values_size(); ++v)
      index.emplace(program.values(v).id(), v);
    for (int i = 0; i < program.ops_size(); ++i) {
      const Op &op = program.ops(i);
      if (op.name() != dtf::ops::kReadVariable)
        continue;
      const std::string &readName = op.attrs().at("name").s();
      // A ps program reads one axis-0 shard of a partitioned variable as
      // "<variable>/part_<k>": its rows, the other dims whole.
      std::string varName = readName;
      int64_t shard = -1;
      if (p.held) {
        const size_t at = readName.rfind("/part_");
        auto it = at == std::string::npos ? variables.end()
                                          : variables.find(readName.substr(0, at));
        if (it != variables.end() && !variables.count(readName)) {
          varName = it->first;
          shard = std::atoll(readName.c_str() + at + 6);
        }
      }
      auto it = variables.find(varName);
      if (it == variables.end())
        return errorStatus(what, ": ", describeOp(program, i),
                           " reads variable '", printable(readName),
                           "', which the plan does not declare");
      const TensorType &declared = program.values(index[op.outputs(0)]).type();
      const TensorType &varType = it->second->type();
      std::vector<int64_t> dims = dimsOf(varType.shape());
      if (shard >= 0) {
        // A slot is split as its variable is.
        const Variable *owner = it->second;
        if (auto o = variables.find(owner->slot_of()); o != variables.end())
          owner = o->second;
        const int64_t parts = std::max<int64_t>(owner->partitions(), 1);
        if (shard >= parts || dims.empty() ||
            strCat("/part_", shard) != readName.substr(varName.size()))
          return errorStatus(what, ": ", describeOp(program, i),
                             " reads '", printable(readName), "', but '",
                             printable(varName), "' has ", parts,
                             " partition", parts == 1 ? "" : "s");
        dims[0] = dims[0] / parts + (shard < dims[0] % parts ? 1 : 0);
      }
      if (declared.dtype() != varType.dtype() || dimsOf(declared.shape()) != dims)
        return errorStatus(what, ": ", describeOp(program, i),
                           " reads variable '", printable(readName),
                           "' of type ", typeString(varType), " as ",
                           typeString(declared));
    }
  }
  // The loss: the first fetch of the train_step, a floating-point value.
  {
    std::unordered_map<int32_t, int> index;
    for (int v = 0; v < train.values_size(); ++v)
      index.emplace(train.values(v).id(), v);
    const Fetch &loss = train.fetches(0);
    ::dtf::DType dtype = ::dtf::DType::F32;
    (void)toDType(train.values(index[loss.value()]).type().dtype(), &dtype);
    if (!isFloatingPoint(dtype))
      return errorStatus(name, ": train_step's first fetch '",
                         printable(loss.name()),
                         "' is the loss, so it must be floating-point; it is ",
                         dtypeName(dtype));
  }
  const Training &training = plan.training();
  if (training.batch() < 0)
    return errorStatus(name, ": training batch ", training.batch(),
                       " is negative");
  if (training.steps() < 0)
    return errorStatus(name, ": training steps ", training.steps(),
                       " is negative");
  DTF_RETURN_IF_ERROR(
      checkSchedule(training.optimizer().learning_rate(), name));
  return validateKernels(plan, name);
}

Status parsePlan(std::string_view bytes, const std::string &name, Plan *out,
                 PlanErrorKind *kind) {
  setKind(kind, PlanErrorKind::kNone);
  if (bytes.empty()) {
    setKind(kind, PlanErrorKind::kInvalid);
    return errorStatus(name, " is empty (a plan is written by dtfc)");
  }
  if (bytes.size() > size_t(INT32_MAX) ||
      !out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    setKind(kind, PlanErrorKind::kInvalid);
    return errorStatus(name,
                       " is not a readable plan: the protobuf data is "
                       "truncated or corrupted (",
                       bytes.size(), " bytes); compile it again with dtfc");
  }
  // Nothing of a plan is looked at before its bytes are known to be
  // dtfc's, but a newer format is said as such.
  Status s = out->format_version() > kPlanFormatVersion
                 ? Status::ok()
                 : checkSeal(bytes, *out, name);
  if (s.isOk())
    s = validatePlan(*out, name);
  if (!s.isOk()) {
    setKind(kind, out->format_version() > kPlanFormatVersion
                      ? PlanErrorKind::kNewerFormat
                      : PlanErrorKind::kInvalid);
    return s;
  }
  return Status::ok();
}

Status readPlanFile(const std::string &path, Plan *out, PlanErrorKind *kind,
                    std::string *fileBytes) {
  setKind(kind, PlanErrorKind::kNone);
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    setKind(kind, PlanErrorKind::kUnreadable);
    return errorStatus("cannot open plan '", path, "': ", std::strerror(errno));
  }
  std::string bytes;
  char buf[1 << 16];
  size_t n = 0;
  bool tooLarge = false;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    bytes.append(buf, n);
    if (bytes.size() > kMaxPlanBytes) {
      tooLarge = true;
      break;
    }
  }
  const bool failed = std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (failed) {
    setKind(kind, PlanErrorKind::kUnreadable);
    return errorStatus("cannot read plan '", path, "': ", std::strerror(err));
  }
  if (tooLarge) {
    setKind(kind, PlanErrorKind::kInvalid);
    return errorStatus(path, " is larger than ", kMaxPlanBytes,
                       " bytes, which no plan is");
  }
  Status parsed = parsePlan(bytes, path, out, kind);
  if (fileBytes)
    *fileBytes = std::move(bytes);
  return parsed;
}

} // namespace dtf::plan
