// Checking a plan's generated kernels, and expanding dtf.fused ops.
#include "runtime/plan/FusedKernels.h"
#include "dtf/OpNames.h"

#include "runtime/plan/PlanReader.h"
#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtf::plan {

namespace {

const char *const kKnownBufferMeanings[] = {
    "same",  "scalar", "suffix",    "output",
    "inout", "row",    "row-index", "row-index-error"};

// "reduce:<spec>": spec one of k, r, 1 per axis, its r and 1 contiguous.
bool isReduceMeaning(const std::string &m) {
  if (m.rfind("reduce:", 0) != 0)
    return false;
  const std::string spec = m.substr(7);
  const size_t first = spec.find_first_not_of('k');
  const size_t last = spec.find_last_not_of('k');
  return first != std::string::npos &&
         spec.find_first_not_of("kr1") == std::string::npos &&
         spec.substr(first, last - first + 1).find('k') == std::string::npos;
}

bool isKnownBufferMeaning(const std::string &m) {
  if (m == "dropout-key" || m == "workspace") // a dropout kernel's per-step
    return true;                              // word; a split tree's memory
  for (const char *k : kKnownBufferMeanings)
    if (m == k)
      return true;
  if (m.rfind("prefix:", 0) == 0)
    return m.size() > 7 && m.size() < 23 &&
           m.find_first_not_of("0123456789", 7) == std::string::npos;
  return isReduceMeaning(m);
}

/// A split column tree's workspace (docs/plan-format.md, "Column reductions
/// over the whole GPU"): at most one, the last buffer (the CPU code, which
/// does not take it, indexes its buffers by position), and only on a kernel
/// whose GPU code is the 32 x 8 column tile with a column reduction: on any
/// other the launch would pass a grid.y the code does not read, or a kernel
/// that reads it would find no memory.
Status checkWorkspace(const Kernel &kernel, const std::string &where) {
  int workspaces = 0, lastBuffer = -1, at = -1;
  bool columns = false;
  for (int p = 0; p < kernel.params_size(); ++p) {
    const KernelParam &param = kernel.params(p);
    if (param.kind() != "buffer")
      continue;
    lastBuffer = p;
    if (param.meaning() == "workspace") {
      ++workspaces;
      at = p;
    }
    const std::string &m = param.meaning();
    columns |= isReduceMeaning(m) && m.back() == 'k';
  }
  if (workspaces == 0)
    return Status::ok();
  if (workspaces > 1)
    return errorStatus(where, " has ", workspaces,
                       " workspace parameters; a split column tree takes one");
  if (at != lastBuffer)
    return errorStatus(where, ": its workspace is parameter ", at,
                       ", not the last buffer (", lastBuffer,
                       "); recompile the plan with dtfc");
  if (!columns || kernel.block() != 32 || kernel.block_y() != 8 ||
      kernel.outputs_per_block() != 32)
    return errorStatus(where,
                       " has a workspace but is not a column reduction's "
                       "32 x 8 tile of 32 outputs (block ",
                       kernel.block(), " x ", kernel.block_y(),
                       ", outputs_per_block ", kernel.outputs_per_block(),
                       "); recompile the plan with dtfc");
  return Status::ok();
}

} // namespace

Program kernelBodyProgram(const Kernel &kernel) {
  Program body;
  *body.mutable_values() = kernel.values();
  *body.mutable_ops() = kernel.body();
  for (int i = 0; i < kernel.inputs_size(); ++i) {
    Feed *feed = body.add_feeds();
    feed->set_name("input" + std::to_string(i));
    feed->set_value(kernel.inputs(i));
  }
  for (int i = 0; i < kernel.outputs_size(); ++i) {
    Fetch *fetch = body.add_fetches();
    fetch->set_name("output" + std::to_string(i));
    fetch->set_value(kernel.outputs(i));
  }
  return body;
}

int inPlaceInputs(const Kernel &kernel) {
  int n = 0;
  for (const KernelParam &param : kernel.params())
    n += param.kind() == "buffer" && param.meaning() == "inout";
  return n;
}

Program updateKernelBodyProgram(const Kernel &kernel) {
  Program body = kernelBodyProgram(kernel);
  const int inout = std::min(inPlaceInputs(kernel), kernel.inputs_size());
  google::protobuf::RepeatedPtrField<Op> ops;
  for (int i = 0; i < inout; ++i) {
    Op *read = ops.Add();
    read->set_name(dtf::ops::kReadVariable);
    read->add_outputs(kernel.inputs(i));
    (*read->mutable_attrs())["name"].set_s("input" + std::to_string(i));
  }
  for (const Op &op : body.ops())
    *ops.Add() = op;
  *body.mutable_ops() = std::move(ops);
  body.mutable_feeds()->DeleteSubrange(0, inout);
  return body;
}

namespace {

const TensorType *
typeOf(const google::protobuf::RepeatedPtrField<Value> &values, int32_t id) {
  for (const Value &v : values)
    if (v.id() == id)
      return &v.type();
  return nullptr;
}

bool sameType(const TensorType &a, const TensorType &b) {
  return a.dtype() == b.dtype() && dimsOf(a.shape()) == dimsOf(b.shape());
}

Status checkFusedOps(const Plan &plan, const Program &program,
                     const std::string &what) {
  for (int i = 0; i < program.ops_size(); ++i) {
    const Op &op = program.ops(i);
    if (op.name() != dtf::ops::kFused)
      continue;
    auto where = [&] { return strCat(what, ": ", describeOp(program, i)); };
    auto attr = op.attrs().find("kernel");
    if (attr == op.attrs().end() || attr->second.value_case() != AttrValue::kI)
      return errorStatus(where(), " needs an integer attribute 'kernel'");
    const int64_t k = attr->second.i();
    if (k < 0 || k >= plan.kernels_size())
      return errorStatus(where(), " runs kernel ", k, ", but the plan has ",
                         plan.kernels_size(), " kernels");
    const Kernel &kernel = plan.kernels(int(k));
    if (op.inputs_size() != kernel.inputs_size() ||
        op.outputs_size() != kernel.outputs_size())
      return errorStatus(where(), " has ", op.inputs_size(), " inputs and ",
                         op.outputs_size(), " outputs; its kernel ",
                         printable(kernel.name()), " has ",
                         kernel.inputs_size(), " and ", kernel.outputs_size());
    const int inout = inPlaceInputs(kernel);
    if (updatedOperands(op) != inout)
      return errorStatus(where(), " updates ", updatedOperands(op),
                         " inputs in place (attribute 'inplace'); its kernel ",
                         printable(kernel.name()), " writes ", inout);
    const bool shard = op.held().find("/part_") != std::string::npos;
    auto check = [&](int32_t opValue, int32_t kernelValue, const char *role,
                     int n) -> Status {
      const TensorType *outer = typeOf(program.values(), opValue);
      const TensorType *inner = typeOf(kernel.values(), kernelValue);
      if (outer && inner && shard && outer->dtype() == inner->dtype()) {
        // An update of one axis-0 shard (a ps program's Op.held
        // "<variable>/part_<k>") runs the kernel over the shard's rows.
        std::vector<int64_t> a = dimsOf(outer->shape()), b = dimsOf(inner->shape());
        if (a.size() == b.size() && !a.empty() &&
            std::equal(a.begin() + 1, a.end(), b.begin() + 1))
          return Status::ok();
      }
      if (outer && inner && !sameType(*outer, *inner))
        return errorStatus(where(), ": its ", role, " ", n, " is ",
                           typeString(*outer), ", but kernel ",
                           printable(kernel.name()), " declares ",
                           typeString(*inner));
      return Status::ok();
    };
    for (int n = 0; n < op.inputs_size(); ++n)
      DTF_RETURN_IF_ERROR(check(op.inputs(n), kernel.inputs(n), "input", n));
    for (int n = 0; n < op.outputs_size(); ++n)
      DTF_RETURN_IF_ERROR(check(op.outputs(n), kernel.outputs(n), "output", n));
  }
  return Status::ok();
}

/// A row kernel's parameters as its generated code reads them (after
/// checkRowKernel; docs/plan-format.md): its k-th operand buffer (same,
/// output, row, row-index) is operand k, its second i64 is C (the GPU
/// interleaves the two kinds, each in its order), and each buffer is indexed
/// by its rank. dtf-run allocates and checks by meaning: a plan that
/// disagrees would read and write out of bounds.
Status checkRowKernelLayout(const Kernel &kernel, const std::string &where) {
  std::vector<const KernelParam *> buffers, i64s;
  for (const KernelParam &p : kernel.params()) {
    const std::string &m = p.meaning();
    if (p.kind() == "i64")
      i64s.push_back(&p);
    else if (m == "same" || m == "output" || m == "row" || m == "row-index")
      buffers.push_back(&p);
  }
  if (std::none_of(i64s.begin(), i64s.end(), [](const KernelParam *p) {
        return p->meaning() == "row-size";
      }))
    return Status::ok(); // not a row kernel
  const int operands = kernel.inputs_size() + kernel.outputs_size();
  bool layout = int(buffers.size()) == operands && i64s.size() == 2 &&
                i64s[0]->meaning() == "elements";
  for (int p = 0; layout && p < operands; ++p)
    layout = buffers[size_t(p)]->operand() == p;
  if (!layout)
    return errorStatus(where, " is a row kernel: its parameters are one "
                              "buffer per operand, in operand order, and "
                              "the i64s elements and row-size, in that order");
  auto typeOfOperand = [&](int o) {
    return typeOf(kernel.values(), o < kernel.inputs_size()
                                       ? kernel.inputs(o)
                                       : kernel.outputs(0));
  };
  int rowsRank = -1;
  for (int p = 0; p < kernel.inputs_size() && rowsRank < 0; ++p)
    if (const TensorType *t = typeOfOperand(p);
        t && buffers[size_t(p)]->meaning() == "same")
      rowsRank = t->shape().dims_size();
  for (int p = 0; p < operands && rowsRank > 0; ++p) {
    const std::string &m = buffers[size_t(p)]->meaning();
    const int want = m == "same" || m == "output" ? rowsRank : rowsRank - 1;
    const TensorType *t = typeOfOperand(p);
    if (!t || t->shape().dims_size() != want)
      return errorStatus(where, ": the buffer of operand ", p, " is '", m,
                         "' (rank ", want, "), but its operand is declared ",
                         t ? typeString(*t) : std::string("nowhere"));
  }
  return Status::ok();
}

/// A row kernel (docs/plan-format.md "Row kernels"): an i64 "row-size"
/// makes one, and only a row kernel has "row" or "row-index" buffers. It is
/// one op; each buffer is "same" (an input in the rows' shape), "output",
/// "row" (one element per row, input or output) or "row-index" (an i32/i64
/// input); its i64s are one "elements" and one "row-size".
Status checkRowKernel(const Kernel &kernel, const std::string &where) {
  int rowSizes = 0, elements = 0, others = 0;
  bool perRow = false;
  for (const KernelParam &p : kernel.params()) {
    if (p.kind() == "i64") {
      rowSizes += p.meaning() == "row-size";
      elements += p.meaning() == "elements";
      others += p.meaning() != "row-size" && p.meaning() != "elements";
    } else if (p.meaning() == "row" || p.meaning() == "row-index" ||
               p.meaning() == "row-index-error") {
      perRow = true;
    } else if (p.meaning() != "same" && p.meaning() != "output") {
      ++others;
    }
  }
  if (rowSizes == 0) {
    if (perRow)
      return errorStatus(where, " has a per-row (row, row-index) parameter "
                                "but no i64 row-size: it is not a row kernel");
    return Status::ok();
  }
  if (rowSizes != 1 || elements != 1 || others != 0)
    return errorStatus(where, " is a row kernel (an i64 row-size) and takes "
                              "one i64 elements, one row-size and buffers "
                              "same, output, row or row-index (and its "
                              "row-index-error) only");
  if (kernel.body_size() != 1 || kernel.outputs_size() != 1)
    return errorStatus(where, " is a row kernel and holds one op with one "
                              "output");
  // Each row-index has one row-index-error word naming it, where the
  // kernel reports a label outside [0, C) (plan-format.md).
  int rowIndices = 0, errorWords = 0;
  for (const KernelParam &p : kernel.params()) {
    if (p.kind() != "buffer" || p.meaning() != "row-index-error")
      continue;
    ++errorWords;
    if (std::none_of(kernel.params().begin(), kernel.params().end(),
                     [&](const KernelParam &q) {
                       return q.kind() == "buffer" &&
                              q.meaning() == "row-index" &&
                              q.operand() == p.operand();
                     }))
      return errorStatus(where, ": a row-index-error parameter names operand ",
                         p.operand(), ", which is not a row-index input");
  }
  for (const KernelParam &p : kernel.params()) {
    if (p.kind() != "buffer" || p.meaning() != "row-index")
      continue;
    ++rowIndices;
    const TensorType *type =
        p.operand() < kernel.inputs_size()
            ? typeOf(kernel.values(), kernel.inputs(p.operand()))
            : nullptr;
    if (!type || (type->dtype() != I32 && type->dtype() != I64))
      return errorStatus(where, ": a row-index parameter is an i32 or i64 "
                                "input (class indices)");
  }
  if (rowIndices != errorWords)
    return errorStatus(where, " has ", rowIndices, " row-index and ",
                       errorWords,
                       " row-index-error parameters, one of each (a plan "
                       "older than its reader: compile the model again "
                       "with dtfc)");
  return Status::ok();
}

/// A dropout kernel (docs/plan-format.md "Dropout kernels"): its body is
/// one dtf.dropout or dtf.dropout_grad on f32 or f64, and its parameters
/// are the buffers x ("same", operand 0), the output ("output", operand 1)
/// and the key word ("dropout-key", naming x), in that order, and one i64
/// elements. A kernel that holds a dropout without the key word, or has the
/// word without a dropout, would draw no mask or a wrong one: refused.
Status checkDropoutKernel(const Kernel &kernel, const std::string &where) {
  int keys = 0;
  for (const KernelParam &p : kernel.params())
    keys += p.kind() == "buffer" && p.meaning() == "dropout-key";
  const bool dropout =
      std::any_of(kernel.body().begin(), kernel.body().end(), [](const Op &op) {
        return op.name() == dtf::ops::kDropout || op.name() == dtf::ops::kDropoutGrad;
      });
  if (!dropout && keys == 0)
    return Status::ok();
  if (!dropout)
    return errorStatus(where, " has a dropout-key parameter but holds no "
                              "dtf.dropout or dtf.dropout_grad");
  if (keys != 1)
    return errorStatus(where, " holds a dropout and has ", keys,
                       " dropout-key parameters; a dropout kernel takes one "
                       "(the step's key: a plan older than its reader? "
                       "compile the model again with dtfc)");
  if (kernel.body_size() != 1 || kernel.inputs_size() != 1 ||
      kernel.outputs_size() != 1)
    return errorStatus(where, " is a dropout kernel and holds one "
                              "dtf.dropout or dtf.dropout_grad alone, with "
                              "one input and one output");
  const TensorType *in = typeOf(kernel.values(), kernel.inputs(0));
  const TensorType *out = typeOf(kernel.values(), kernel.outputs(0));
  if (!in || !out || in->dtype() != out->dtype() ||
      (in->dtype() != F32 && in->dtype() != F64))
    return errorStatus(where,
                       " is a dropout kernel, whose input and output "
                       "are both f32 or both f64; they are ",
                       in ? typeString(*in) : std::string("undeclared"),
                       " and ",
                       out ? typeString(*out) : std::string("undeclared"));
  std::vector<std::string> buffers, i64s;
  for (const KernelParam &p : kernel.params())
    (p.kind() == "i64" ? i64s : buffers)
        .push_back(p.meaning() + ":" + std::to_string(p.operand()));
  const std::vector<std::string> wantBuffers = {"same:0", "output:1",
                                                "dropout-key:0"};
  if (buffers != wantBuffers || i64s != std::vector<std::string>{"elements:0"})
    return errorStatus(where, " is a dropout kernel: its parameters are the "
                              "buffers same (x), output and dropout-key "
                              "(naming x), in that order, and one i64 "
                              "elements");
  return Status::ok();
}

// dtfc names each kernel's CPU functions after it: a symbol of another name
// would run another kernel's code over this one's buffers.
Status checkCpuSymbols(const Kernel &kernel, const std::string &where) {
  for (const auto &[symbol, want] :
       {std::pair{&kernel.cpu_symbol(), kernel.name()},
        std::pair{&kernel.cpu_columns_symbol(), kernel.name() + "_columns"}})
    if (!symbol->empty() && *symbol != want)
      return errorStatus(where, " names the CPU function '", printable(*symbol),
                         "' where dtfc writes '", printable(want),
                         "'; compile the model again with dtfc");
  return Status::ok();
}

} // namespace

Status validateKernels(const Plan &plan, const std::string &name) {
  if (!plan.cpu_object().empty() && plan.cpu_target().empty())
    return errorStatus(name, " has a cpu_object but no cpu_target (the "
                             "baseline it was compiled for)");
  std::set<std::string> names;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const Kernel &kernel = plan.kernels(k);
    const std::string where =
        strCat(name, ": kernel ", k, " '", printable(kernel.name()), "'");
    if (kernel.name().empty())
      return errorStatus(name, ": kernel ", k, " has no name");
    if (!plan.cpu_object().empty() && kernel.cpu_symbol().empty())
      return errorStatus(where, " has no cpu_symbol in the plan's cpu_object");
    if (!names.insert(kernel.name()).second)
      return errorStatus(where, " is named twice");
    DTF_RETURN_IF_ERROR(checkCpuSymbols(kernel, where));
    if (!kernel.cpu_columns_symbol().empty() &&
        std::none_of(kernel.params().begin(), kernel.params().end(),
                     [](const KernelParam &p) {
                       const std::string &m = p.meaning();
                       return m.rfind("reduce:", 0) == 0 && m.back() == 'k' &&
                              m.find_first_not_of('k', 7) != std::string::npos;
                     }))
      return errorStatus(where,
                         " has a cpu_columns_symbol but no column reduction "
                         "(a reduce:<spec> output ending in 'k')");
    if (kernel.block() < 0 || kernel.block_y() < 0 ||
        kernel.outputs_per_block() < 0 || kernel.shared_bytes() < 0 ||
        int64_t(kernel.block()) * std::max(1, kernel.block_y()) > 1024)
      return errorStatus(where, " has a GPU block of ", kernel.block(), " x ",
                         kernel.block_y(),
                         " threads (at most 1024 in all), or a negative "
                         "outputs_per_block or shared_bytes");
    // The two block-wide tree shapes dtfc compiles (docs/plan-format.md,
    // "Reductions on the GPU"): any other outputs_per_block launches a grid
    // that leaves outputs unwritten, or runs a tree off its slots.
    if (kernel.outputs_per_block() != 0) {
      const bool rows = kernel.block() == 256 && kernel.block_y() <= 1 &&
                        kernel.outputs_per_block() == 1;
      const bool columns = kernel.block() == 32 && kernel.block_y() == 8 &&
                           kernel.outputs_per_block() == 32;
      const bool reduces =
          std::any_of(kernel.params().begin(), kernel.params().end(),
                      [](const KernelParam &p) {
                        return p.meaning().rfind("reduce:", 0) == 0;
                      });
      if (!(rows || columns) || !reduces)
        return errorStatus(
            where, " has outputs_per_block ", kernel.outputs_per_block(),
            " with a block of ", kernel.block(), " x ", kernel.block_y(),
            reduces ? "" : " and no reduction",
            ": a reduced kernel's tree is 256 x 1 threads for 1 output or "
            "32 x 8 for 32 (docs/plan-format.md); recompile the plan with "
            "dtfc");
    }
    DTF_RETURN_IF_ERROR(checkWorkspace(kernel, where));
    // An update kernel ("inout" params: the variable and its slots, the
    // first inputs) is one optimizer update and has no outputs.
    const int inout = inPlaceInputs(kernel);
    const bool isUpdate = inout > 0 && kernel.body_size() == 1 &&
                          updatedOperands(kernel.body(0)) == inout &&
                          isDenseUpdate(kernel.body(0).name());
    if (inout > 0 && !isUpdate)
      return errorStatus(where, " has ", inout,
                         " in-place (inout) "
                         "parameters but is not one dense optimizer update");
    if (kernel.inputs_size() == 0 || (kernel.outputs_size() == 0) != isUpdate ||
        kernel.body_size() == 0)
      return errorStatus(where,
                         isUpdate ? " updates in place and has no outputs"
                                  : " needs inputs, outputs and a body of ops");
    for (const Op &op : kernel.body())
      if (op.name() == dtf::ops::kFused || op.name() == dtf::ops::kInput ||
          op.name() == dtf::ops::kReadVariable ||
          (updatedOperands(op) > 0 && !isUpdate))
        return errorStatus(where, " holds a ", printable(op.name()),
                           " op, which cannot be fused");
    // (An update writes only its variable and slots, read from variables.)
    DTF_RETURN_IF_ERROR(validateProgram(
        isUpdate ? updateKernelBodyProgram(kernel) : kernelBodyProgram(kernel),
        where));
    const int operands = kernel.inputs_size() + kernel.outputs_size();
    for (int p = 0; p < kernel.params_size(); ++p) {
      const KernelParam &param = kernel.params(p);
      if (param.kind() == "buffer") {
        if (param.meaning() == "workspace")
          continue; // no operand (checkWorkspace)
        if (param.operand() < 0 || param.operand() >= operands)
          return errorStatus(where, ": parameter ", p, " names operand ",
                             param.operand(), ", but the kernel has ", operands,
                             " (inputs, then outputs)");
        if (!isKnownBufferMeaning(param.meaning()))
          return errorStatus(where, ": parameter ", p,
                             " has an unknown "
                             "meaning '",
                             printable(param.meaning()),
                             "' (same, scalar, suffix, prefix:<D>, inout, "
                             "output, reduce:<spec>, row, row-index, "
                             "row-index-error, dropout-key, workspace)");
        if (param.meaning() == "inout" && param.operand() >= inout)
          return errorStatus(where, ": parameter ", p, " updates operand ",
                             param.operand(), " in place; only the first ",
                             inout, " inputs are (the variable and slots)");
        const bool output =
            param.meaning() == "output" || isReduceMeaning(param.meaning());
        if (param.meaning() != "row" &&
            output != (param.operand() >= kernel.inputs_size()))
          return errorStatus(where, ": parameter ", p,
                             " is an output exactly when its operand is one "
                             "of the outputs");
      } else if (param.kind() == "i64") {
        if (param.meaning() != "elements" && param.meaning() != "reduced" &&
            param.meaning() != "inner" && param.meaning() != "row-size")
          return errorStatus(where, ": parameter ", p,
                             " has an unknown "
                             "meaning '",
                             printable(param.meaning()),
                             "' (elements, reduced, inner, row-size)");
      } else {
        return errorStatus(where, ": parameter ", p, " has an unknown kind '",
                           printable(param.kind()), "' (buffer, i64)");
      }
    }
  }
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const std::string where = strCat(name, ": kernel ", k, " '",
                                     printable(plan.kernels(k).name()), "'");
    DTF_RETURN_IF_ERROR(checkRowKernel(plan.kernels(k), where));
    DTF_RETURN_IF_ERROR(checkRowKernelLayout(plan.kernels(k), where));
    DTF_RETURN_IF_ERROR(checkDropoutKernel(plan.kernels(k), where));
  }
  std::vector<std::pair<const Program *, std::string>> programs = {
      {&plan.train_step(), "train_step"},
      {&plan.eval(), "eval"},
      {&plan.worker_step(), "worker_step"},
      {&plan.ps_update(), "ps_update"},
      {&plan.lookups().worker_step(), "lookups.worker_step"},
      {&plan.lookups().ps_update(), "lookups.ps_update"},
      {&plan.lookups().eval(), "lookups.eval"}};
  for (int k = 0; k < plan.stages_size(); ++k)
    programs.push_back({&plan.stages(k), strCat("stage ", k)});
  for (const auto &[program, label] : programs)
    DTF_RETURN_IF_ERROR(
        checkFusedOps(plan, *program, strCat(name, ": ", label)));
  return Status::ok();
}

bool hasFusedOps(const Program &program) {
  for (const Op &op : program.ops())
    if (op.name() == dtf::ops::kFused)
      return true;
  return false;
}

Status expandFusedOps(const google::protobuf::RepeatedPtrField<Kernel> &kernels,
                      Program *program,
                      const std::function<bool(const Op &)> &only) {
  if (!hasFusedOps(*program))
    return Status::ok();
  int32_t nextId = 0;
  for (const Value &v : program->values())
    nextId = std::max(nextId, v.id() + 1);
  google::protobuf::RepeatedPtrField<Op> ops;
  for (Op &op : *program->mutable_ops()) {
    if (op.name() != dtf::ops::kFused || (only && !only(op))) {
      *ops.Add() = std::move(op);
      continue;
    }
    auto attr = op.attrs().find("kernel");
    const int64_t k = attr == op.attrs().end() ? -1 : attr->second.i();
    if (k < 0 || k >= kernels.size())
      return errorStatus("dtf.fused at ", printable(op.location()),
                         " runs kernel ", k, " of ", kernels.size());
    const Kernel &kernel = kernels.Get(int(k));
    // Body ids -> program ids: inputs and outputs are the op's, the rest new.
    std::unordered_map<int32_t, int32_t> rename;
    for (int n = 0; n < kernel.inputs_size(); ++n)
      rename[kernel.inputs(n)] = op.inputs(n);
    for (int n = 0; n < kernel.outputs_size(); ++n)
      rename[kernel.outputs(n)] = op.outputs(n);
    for (const Value &v : kernel.values()) {
      if (rename.count(v.id()))
        continue;
      rename[v.id()] = nextId;
      Value *added = program->add_values();
      added->set_id(nextId++);
      *added->mutable_type() = v.type();
    }
    for (const Op &inner : kernel.body()) {
      Op *copy = ops.Add();
      *copy = inner;
      if (copy->device().empty())
        copy->set_device(op.device());
      copy->set_held(op.held()); // a ps program's ops serve what it holds
      for (int32_t &id : *copy->mutable_inputs())
        id = rename.at(id);
      for (int32_t &id : *copy->mutable_outputs())
        id = rename.at(id);
    }
  }
  *program->mutable_ops() = std::move(ops);
  return Status::ok();
}

Status expandAllFusedOps(Plan *plan) {
  std::vector<Program *> programs = {
      plan->mutable_train_step(), plan->mutable_eval(),
      plan->mutable_worker_step(), plan->mutable_ps_update()};
  if (plan->has_lookups())
    for (Program *p : {plan->mutable_lookups()->mutable_worker_step(),
                       plan->mutable_lookups()->mutable_ps_update(),
                       plan->mutable_lookups()->mutable_eval()})
      programs.push_back(p);
  for (Program &stage : *plan->mutable_stages())
    programs.push_back(&stage);
  for (Program *p : programs)
    DTF_RETURN_IF_ERROR(expandFusedOps(plan->kernels(), p));
  plan->clear_kernels();
  plan->clear_cpu_object();
  plan->clear_cpu_target();
  return Status::ok();
}

} // namespace dtf::plan
