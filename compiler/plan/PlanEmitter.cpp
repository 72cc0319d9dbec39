// From the dtf dialect to the plan's protobuf: values numbered per program,
// attributes in the kernels' terms, variables with their roles.
#include "compiler/plan/PlanEmitter.h"
#include "schema/PlanSchema.h"
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Cut.h"
#include "dialects/Dtf/Transforms/Fusion.h"
#include "dialects/Dtf/Transforms/Passes.h"
#include "dtf/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"

using namespace mlir;
using namespace mlir::dtf;
namespace pb = ::dtf::plan;

namespace {

pb::DType dtypeOf(Type t) {
  if (t.isF32())
    return pb::F32;
  if (t.isF64())
    return pb::F64;
  if (t.isF16())
    return pb::F16;
  if (t.isBF16())
    return pb::BF16;
  if (t.isInteger(1))
    return pb::BOOL;
  if (t.isInteger(32))
    return pb::I32;
  if (t.isInteger(64))
    return pb::I64;
  return pb::DTYPE_UNSPECIFIED;
}

const char *dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(1))
    return "bool";
  if (t.isInteger(32))
    return "i32";
  return "i64";
}

void fillType(RankedTensorType type, pb::TensorType *out) {
  out->set_dtype(dtypeOf(type.getElementType()));
  for (int64_t d : type.getShape())
    out->mutable_shape()->add_dims(ShapedType::isDynamic(d) ? -1 : d);
}

std::string locationOf(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" +
            std::to_string(file.getColumn()));
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string s = locationOf(inner); !s.empty())
        return s;
  if (auto named = dyn_cast<NameLoc>(loc))
    return locationOf(named.getChildLoc());
  return "";
}

/// A constant's elements, little-endian, row-major; bools one byte each.
bool fillTensor(ElementsAttr value, pb::TensorValue *out) {
  auto type = cast<RankedTensorType>(value.getType());
  fillType(type, out->mutable_type());
  std::string bytes;
  Type element = type.getElementType();
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return false;
  if (element.isF32()) {
    for (float v : dense.getValues<float>())
      bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  } else if (element.isF64()) {
    for (double v : dense.getValues<double>())
      bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  } else if (element.isInteger(1)) {
    for (bool v : dense.getValues<bool>())
      bytes.push_back(v ? 1 : 0);
  } else if (element.isInteger(32)) {
    for (int32_t v : dense.getValues<int32_t>())
      bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  } else if (element.isInteger(64)) {
    for (int64_t v : dense.getValues<int64_t>())
      bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  } else if (element.isF16() || element.isBF16()) {
    for (APFloat v : dense.getValues<APFloat>()) {
      uint16_t bits = static_cast<uint16_t>(v.bitcastToAPInt().getZExtValue());
      bytes.append(reinterpret_cast<const char *>(&bits), sizeof bits);
    }
  } else {
    return false;
  }
  out->set_data(std::move(bytes));
  return true;
}

class ProgramEmitter {
public:
  /// `readAs` renames the variables that reads see (evaluation reads the
  /// moving averages of the weights when the model keeps them).
  ProgramEmitter(func::FuncOp func, pb::Program *program, pb::Plan *plan,
                 llvm::StringMap<std::string> readAs = {})
      : func(func), program(program), plan(plan), readAs(std::move(readAs)) {}
  /// A program of the cut: its dtf.fused ops are copies of the train_step's
  /// or eval's, and run the kernels those were given.
  ProgramEmitter &sharingKernels() {
    sharedKernels = true;
    return *this;
  }

  LogicalResult run();

private:
  /// One op of the function (not its return).
  LogicalResult emitOp(Operation &op);
  /// A dtf.fused op: the program op, and its Kernel (made once per index).
  LogicalResult emitFused(FusedOp fused, pb::Op *out);
  /// A dtf.fused op of a cut program: its `kernel` attribute names the
  /// kernel that its original in @train_step or @eval was given.
  LogicalResult sharedKernel(FusedOp fused) {
    auto k = fused->getAttrOfType<IntegerAttr>("kernel");
    if (!plan || !k || k.getInt() < 0 || k.getInt() >= plan->kernels_size())
      return fused.emitError() << "is not a copy of a fused op of @train_step "
                                  "or @eval";
    return success();
  }

  int32_t define(Value v) {
    int32_t id = nextId++;
    ids[v] = id;
    pb::Value *value = program->add_values();
    value->set_id(id);
    fillType(cast<RankedTensorType>(v.getType()), value->mutable_type());
    return id;
  }
  /// A value aliasing variable `name` (the runtime's read_variable), made
  /// once per program, and serving the held tensor (dtf.held) of the update
  /// that first takes it; a shard's (dtf.variable_shard) right before each
  /// update of it, as dtfc's ps programs have always read shards.
  int32_t variable(StringRef name, Operation *user) {
    auto it = variableValues.find(name);
    if (it != variableValues.end())
      return it->second;
    StringAttr symbol = StringAttr::get(user->getContext(), name);
    int32_t id = nextId++;
    pb::Value *value = program->add_values();
    value->set_id(id);
    fillType(variableTypeOf(user, symbol), value->mutable_type());
    pb::Op *read = program->add_ops();
    read->set_name("dtf.read_variable");
    read->add_outputs(id);
    (*read->mutable_attrs())["name"].set_s(name.str());
    if (auto held = user->getAttrOfType<StringAttr>("dtf.held"))
      read->set_held(held.getValue().str());
    if (!isa_and_nonnull<VariableShardOp>(
            SymbolTable::lookupNearestSymbolFrom(user, symbol)))
      variableValues[name] = id;
    return id;
  }
  LogicalResult convertAttr(Operation *op, NamedAttribute attr, pb::Op *out);

  func::FuncOp func;
  pb::Program *program;
  pb::Plan *plan;
  DenseMap<Value, int32_t> ids;
  llvm::StringMap<int32_t> variableValues;
  int32_t nextId = 0;
  llvm::StringMap<std::string> readAs;
  bool sharedKernels = false;
};

LogicalResult ProgramEmitter::convertAttr(Operation *op, NamedAttribute attr,
                                          pb::Op *out) {
  StringRef name = attr.getName().strref();
  Attribute value = attr.getValue();
  if (name == "dtf.device") {
    out->set_device(cast<StringAttr>(value).getValue().str());
    return success();
  }
  if (name == "dtf.held") {
    out->set_held(cast<StringAttr>(value).getValue().str());
    return success();
  }
  if (isa<FlatSymbolRefAttr, TypeAttr>(value))
    return success(); // variables become inputs; types are on the values
  pb::AttrValue &v = (*out->mutable_attrs())[name.str()];
  // The enums are integer attributes underneath, and one classof cannot tell
  // them apart: go by the attribute's name.
  if (name == "padding")
    v.set_s(stringifyPadding(cast<PaddingAttr>(value).getValue()).str());
  else if (name == "predicate")
    v.set_s(stringifyComparePredicate(cast<ComparePredicateAttr>(value).getValue()).str());
  else if (auto b = dyn_cast<BoolAttr>(value))
    v.set_b(b.getValue());
  else if (isa<UnitAttr>(value))
    v.set_b(true);
  else if (auto i = dyn_cast<IntegerAttr>(value))
    v.set_i(i.getType().isUnsignedInteger() ? int64_t(i.getValue().getZExtValue())
                                            : i.getValue().getSExtValue());
  else if (auto f = dyn_cast<FloatAttr>(value))
    v.set_f(f.getValueAsDouble());
  else if (auto s = dyn_cast<StringAttr>(value))
    v.set_s(s.getValue().str());
  else if (auto a = dyn_cast<DenseI64ArrayAttr>(value))
    for (int64_t x : a.asArrayRef())
      v.mutable_ints()->add_values(x);
  else if (auto a = dyn_cast<DenseF64ArrayAttr>(value))
    for (double x : a.asArrayRef())
      v.mutable_floats()->add_values(x);
  else if (auto e = dyn_cast<ElementsAttr>(value)) {
    if (!fillTensor(e, v.mutable_tensor()))
      return op->emitError() << "cannot write this constant into a plan";
  } else
    return op->emitError() << "cannot write attribute '" << name << "' into a plan";
  return success();
}

LogicalResult ProgramEmitter::run() {
  program->set_name(func.getSymName().str());
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        pb::Fetch *fetch = program->add_fetches();
        auto name = func.getResultAttrOfType<StringAttr>(i, "dtf.name");
        fetch->set_name(name ? name.getValue().str() : "result" + std::to_string(i));
        fetch->set_value(ids.lookup(v));
      }
      continue;
    }
    if (failed(emitOp(op)))
      return failure();
  }
  return success();
}

LogicalResult ProgramEmitter::emitFused(FusedOp fused, pb::Op *out) {
  if (!plan)
    return fused.emitError() << "cannot be nested in a fused region";
  // Plan.kernels in emission order: the op takes its plan index, in the plan
  // and in the module (where the kernel generator reads it).
  const int k = plan->kernels_size();
  pb::Kernel *kernel = plan->add_kernels();
  fused.setKernel(k);
  (*out->mutable_attrs())["kernel"].set_i(k);
  kernel->set_name("dtf_fused_" + std::to_string(k));
  kernel->set_cpu_symbol(kernel->name());
  // The region with its own numbering: arguments first, then each op.
  pb::Program body;
  ProgramEmitter inner(func, &body, nullptr);
  Block &block = fused.getBody().front();
  // An update's variable and slots: the kernel's first inputs, as the
  // op-by-op update takes them (its body is that update).
  Operation *update = fusedUpdateOp(fused);
  SmallVector<StringRef> inPlace =
      update ? fusableUpdateSymbols(update) : SmallVector<StringRef>();
  for (StringRef name : inPlace) {
    auto var = SymbolTable::lookupNearestSymbolFrom<VariableOp>(
        fused, StringAttr::get(fused.getContext(), name));
    if (!var)
      return fused.emitError()
             << "updates @" << name << ", which is not a variable";
    int32_t id = inner.nextId++;
    pb::Value *value = body.add_values();
    value->set_id(id);
    fillType(var.getTensorType(), value->mutable_type());
    inner.variableValues[name] = id;
    kernel->add_inputs(id);
  }
  for (BlockArgument arg : block.getArguments())
    kernel->add_inputs(inner.define(arg));
  for (Operation &op : block) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      for (Value v : yield.getValues())
        kernel->add_outputs(inner.ids.lookup(v));
      continue;
    }
    if (failed(inner.emitOp(op)))
      return failure();
    kernel->add_ops(op.getName().getStringRef().str());
    kernel->add_locations(locationOf(op.getLoc()));
  }
  *kernel->mutable_values() = body.values();
  *kernel->mutable_body() = body.ops();
  // Parameters: each input's buffer by how it is indexed, each output's,
  // then the element count (FusedKernels.h in the runtime reads them).
  SmallVector<int64_t> shape = fusedIterationShape(fused);
  int operand = 0;
  for (size_t k = 0; k < inPlace.size(); ++k) {
    pb::KernelParam *p = kernel->add_params();
    p->set_kind("buffer");
    p->set_operand(operand++);
    p->set_meaning("inout"); // read and written at element i
  }
  if (Operation *row = fusedRowOp(fused)) {
    // A row kernel: one iteration per row of the last axis (docs/
    // plan-format.md "Row kernels"): each operand "same"/"output", "row"
    // or "row-index"; a "row-index-error" word after the output when a
    // "row-index" is among them; then the row count and the row's size.
    int labels = -1; // the "row-index" operand, if any
    for (Value in : fused.getInputs()) {
      pb::KernelParam *p = kernel->add_params();
      p->set_kind("buffer");
      p->set_operand(operand++);
      p->set_meaning(rowParamMeaning(row, in.getType(), shape, false));
      if (p->meaning() == "row-index")
        labels = p->operand();
    }
    pb::KernelParam *p = kernel->add_params();
    p->set_kind("buffer");
    p->set_operand(operand++);
    p->set_meaning(
        rowParamMeaning(row, fused->getResult(0).getType(), shape, true));
    if (labels >= 0) {
      // Where the kernel reports a label outside [0, C): the last buffer,
      // naming the labels' operand ("Labels outside the classes").
      p = kernel->add_params();
      p->set_kind("buffer");
      p->set_operand(labels);
      p->set_meaning("row-index-error");
    }
    for (const char *meaning : {"elements", "row-size"}) {
      p = kernel->add_params();
      p->set_kind("i64");
      p->set_meaning(meaning);
    }
    return success();
  }
  if (fusedDropoutOp(fused)) {
    // A dropout kernel (docs/plan-format.md "Dropout kernels"): x (or dy)
    // and the output, then the word dtf-run fills before each run with the
    // step's stream key and the first element (naming x, whose shape says
    // where a tower's examples start), then the element count.
    for (const char *meaning : {"same", "output", "dropout-key"}) {
      pb::KernelParam *p = kernel->add_params();
      p->set_kind("buffer");
      p->set_operand(std::string(meaning) == "output" ? 1 : 0);
      p->set_meaning(meaning);
    }
    pb::KernelParam *p = kernel->add_params();
    p->set_kind("i64");
    p->set_meaning("elements");
    return success();
  }
  for (Value in : fused.getInputs()) {
    std::optional<FusedIndex> index =
        fusedIndexOf(cast<RankedTensorType>(in.getType()), shape);
    if (!index)
      return fused.emitError() << "input " << operand << " of type "
                               << in.getType()
                               << " cannot be indexed over the region's shape";
    pb::KernelParam *p = kernel->add_params();
    p->set_kind("buffer");
    p->set_operand(operand++);
    p->set_meaning(fusedIndexName(*index));
    if (*index == FusedIndex::Prefix)
      p->set_meaning(
          "prefix:" +
          std::to_string(fusedPrefixDivisor(
              cast<RankedTensorType>(in.getType()), shape)));
  }
  // A reduction's output: "reduce:<spec>" (Fusion.h).
  bool reduced = false;
  for (const std::string &spec : fusedResultSpecs(fused)) {
    pb::KernelParam *p = kernel->add_params();
    p->set_kind("buffer");
    p->set_operand(operand++);
    p->set_meaning(spec.empty() ? "output" : "reduce:" + spec);
    reduced = reduced || !spec.empty();
    // A column reduction also has the chunked entry point (CpuKernels.cpp).
    if (isColumnSpec(spec))
      kernel->set_cpu_columns_symbol(kernel->name() + "_columns");
  }
  // The element count of the loop; a reduced kernel loops over its reduced
  // outputs and also takes R and N of the [O, R, N] view of the shape.
  for (const char *meaning : {"elements", "reduced", "inner"}) {
    if (!reduced && std::string(meaning) != "elements")
      break;
    pb::KernelParam *p = kernel->add_params();
    p->set_kind("i64");
    p->set_meaning(meaning);
  }
  return success();
}

LogicalResult ProgramEmitter::emitOp(Operation &op) {
  // The cut's transfers to the ps are the program's sends and recvs.
  if (auto push = dyn_cast<PushOp>(op)) {
    pb::Transfer *t = program->add_sends();
    t->set_key(push.getKey().str());
    t->set_to("ps");
    t->set_variable(push.getVariable().str());
    for (auto [k, v] : llvm::enumerate(push.getValues())) {
      auto it = ids.find(v);
      if (it == ids.end())
        return op.emitError() << "pushes a value defined outside its program";
      k == 0 ? t->set_value(it->second) : t->set_rows_value(it->second);
    }
    t->set_sparse(push.getSparse());
    t->set_skippable(push.getSkippable());
    return success();
  }
  if (auto pushed = dyn_cast<PushedOp>(op)) {
    pb::Transfer *t = program->add_recvs();
    t->set_key(pushed.getKey().str());
    t->set_variable(pushed.getVariable().str());
    for (auto [k, v] : llvm::enumerate(pushed.getValues()))
      k == 0 ? t->set_value(define(v)) : t->set_rows_value(define(v));
    if (IntegerAttr offset = pushed.getRowOffsetAttr())
      t->set_row_offset(offset.getInt());
    if (IntegerAttr rows = pushed.getRowsAttr())
      t->set_rows(rows.getInt());
    t->set_sparse(pushed.getSparse());
    t->set_skippable(pushed.getSkippable());
    // The ps feeds each recv under its key (a sparse one's rows under
    // key#rows).
    pb::Feed *feed = program->add_feeds();
    feed->set_name(t->key());
    feed->set_value(t->value());
    if (t->sparse()) {
      feed = program->add_feeds();
      feed->set_name(t->key() + "#rows");
      feed->set_value(t->rows_value());
    }
    return success();
  }
  {
    // Variables an update writes (or a moving average reads) are its first
    // inputs, in the order the op names them; their reads come before it.
    SmallVector<StringRef> symbolOperands = updateSymbols(&op);
    std::vector<int32_t> symbolIds;
    for (StringRef s : symbolOperands)
      symbolIds.push_back(variable(s, &op));

    pb::Op *out = program->add_ops();
    out->set_name(op.getName().getStringRef().str());
    out->set_location(locationOf(op.getLoc()));
    if (auto read = dyn_cast<ReadVariableOp>(op)) {
      auto renamed = readAs.find(read.getName());
      (*out->mutable_attrs())["name"].set_s(
          renamed != readAs.end() ? renamed->second : read.getName().str());
    }
    for (int32_t id : symbolIds)
      out->add_inputs(id);
    for (Value operand : op.getOperands()) {
      auto it = ids.find(operand);
      if (it == ids.end())
        return op.emitError() << "uses a value defined outside its program";
      out->add_inputs(it->second);
    }
    for (NamedAttribute attr : op.getAttrDictionary())
      if (failed(convertAttr(&op, attr, out)))
        return failure();
    if (auto fused = dyn_cast<FusedOp>(op)) {
      if (fusedUpdateOp(fused))
        (*out->mutable_attrs())["inplace"].set_i(int64_t(symbolIds.size()));
      if (failed(sharedKernels ? sharedKernel(fused) : emitFused(fused, out)))
        return failure();
    }
    for (Value result : op.getResults())
      out->add_outputs(define(result));
    if (auto input = dyn_cast<InputOp>(op)) {
      pb::Feed *feed = program->add_feeds();
      feed->set_name(input.getName().str());
      feed->set_value(out->outputs(0));
    }
    // What kernels cannot derive from their inputs: the result's dtype and
    // shape (-1 for the batch).
    if (isa<CastOp, ArgmaxOp, OneHotOp>(op))
      (*out->mutable_attrs())["out_dtype"].set_s(
          dtypeName(cast<RankedTensorType>(op.getResult(0).getType()).getElementType()));
    if (isa<ReshapeOp, BroadcastToOp>(op)) {
      pb::AttrValue &shape = (*out->mutable_attrs())["out_shape"];
      shape.mutable_ints();
      for (int64_t d : cast<RankedTensorType>(op.getResult(0).getType()).getShape())
        shape.mutable_ints()->add_values(ShapedType::isDynamic(d) ? -1 : d);
    }
  }
  return success();
}

void fillInitializer(InitializerAttr init, pb::Initializer *out) {
  out->set_kind(stringifyInitKind(init.getKind()).str());
  if (DictionaryAttr params = init.getParams()) {
    for (NamedAttribute p : params) {
      if (p.getName() == "seed") {
        out->set_seed(cast<IntegerAttr>(p.getValue()).getInt());
        continue;
      }
      (*out->mutable_params())[p.getName().str()] = init.getParam(p.getName(), 0.0);
    }
  }
}

double numberOr(Attribute a, double fallback = 0) {
  return mlir::dtf::numberOf(a).value_or(fallback);
}
std::string stringOf(Attribute a) {
  auto s = dyn_cast_or_null<StringAttr>(a);
  return s ? s.getValue().str() : "";
}

void fillData(DictionaryAttr d, pb::DataSource *out) {
  out->set_kind(stringOf(d.get("kind")));
  out->set_path(stringOf(d.get("path")));
  out->set_split(stringOf(d.get("split")));
  out->set_label(stringOf(d.get("label")));
  if (auto h = d.getAs<BoolAttr>("header"))
    out->set_header(h.getValue());
  else if (out->kind() == "csv")
    out->set_header(true);
  out->set_examples(static_cast<int64_t>(numberOr(d.get("examples"))));
  out->set_seed(static_cast<int64_t>(numberOr(d.get("seed"))));
  out->set_every(static_cast<int64_t>(numberOr(d.get("every"))));
  if (out->kind() == "tfrecord") {
    std::string compression = stringOf(d.get("compression"));
    out->set_compression(compression.empty() ? "none" : compression);
    out->set_skip_corrupt(stringOf(d.get("on_corrupt")) == "skip");
    if (auto features = d.getAs<ArrayAttr>("features"))
      for (Attribute f : features)
        out->add_features(stringOf(f));
  }
}

void fillTraining(DictionaryAttr t, pb::Plan &plan) {
  pb::Training *out = plan.mutable_training();
  out->set_batch(static_cast<int64_t>(numberOr(t.get("batch"), 32)));
  out->set_steps(static_cast<int64_t>(numberOr(t.get("steps"), 1000)));
  if (t.get("seed"))
    out->set_seed(static_cast<int64_t>(numberOr(t.get("seed"))));
  out->set_loss(stringOf(t.get("loss")));
  if (auto opt = t.getAs<DictionaryAttr>("optimizer")) {
    pb::Optimizer *o = out->mutable_optimizer();
    o->set_kind(stringOf(opt.get("kind")));
    pb::Schedule *lr = o->mutable_learning_rate();
    if (auto schedule = opt.getAs<DictionaryAttr>("learning_rate")) {
      lr->set_kind(stringOf(schedule.get("kind")));
      lr->set_learning_rate(numberOr(schedule.get(
          schedule.get("initial_learning_rate") ? "initial_learning_rate"
                                                : "learning_rate")));
      lr->set_alpha(numberOr(schedule.get("alpha")));
      if (Attribute target = schedule.get("warmup_target"))
        lr->set_warmup_target(numberOr(target));
      lr->set_warmup_steps(
          static_cast<int64_t>(numberOr(schedule.get("warmup_steps"))));
      lr->set_decay_steps(static_cast<int64_t>(numberOr(schedule.get("decay_steps"))));
      lr->set_decay_rate(numberOr(schedule.get("decay_rate")));
      if (auto s = schedule.getAs<BoolAttr>("staircase"))
        lr->set_staircase(s.getValue());
      if (auto b = schedule.getAs<ArrayAttr>("boundaries"))
        for (Attribute x : b)
          lr->add_boundaries(static_cast<int64_t>(numberOr(x)));
      if (auto v = schedule.getAs<ArrayAttr>("values"))
        for (Attribute x : v)
          lr->add_values(numberOr(x));
    } else {
      lr->set_kind("constant");
      lr->set_learning_rate(numberOr(opt.get("learning_rate"), 0.001));
    }
    for (NamedAttribute p : opt)
      if (p.getName() != "kind" && p.getName() != "learning_rate" &&
          isa<FloatAttr, IntegerAttr>(p.getValue()))
        (*o->mutable_params())[p.getName().str()] = numberOr(p.getValue());
  }
  if (auto d = t.getAs<DictionaryAttr>("data"))
    fillData(d, out->mutable_data());
  if (auto d = t.getAs<DictionaryAttr>("eval"))
    fillData(d, out->mutable_eval());
  out->set_replication(t.get("replication") ? stringOf(t.get("replication")) : "between_graph");
  if (auto u = t.getAs<DictionaryAttr>("update")) {
    out->set_update(stringOf(u.get("kind")));
    out->set_replicas_to_aggregate(static_cast<int64_t>(numberOr(u.get("replicas_to_aggregate"))));
    out->set_total_num_replicas(static_cast<int64_t>(numberOr(u.get("total_num_replicas"))));
  } else {
    out->set_update("async");
  }
  if (auto c = t.getAs<DictionaryAttr>("clip_gradients"))
    out->set_clip_global_norm(numberOr(c.get("clip_norm")));
  out->set_moving_average_decay(numberOr(t.get("moving_average")));
  if (auto c = t.getAs<DictionaryAttr>("checkpoint")) {
    out->set_checkpoint_every(numberOr(c.get("every")));
    out->set_checkpoint_unit(stringOf(c.get("unit")));
    out->set_checkpoint_keep(static_cast<int64_t>(numberOr(c.get("keep"), 5)));
  }
  if (auto s = t.getAs<DictionaryAttr>("summary")) {
    out->set_summary_every(numberOr(s.get("every")));
    out->set_summary_unit(stringOf(s.get("unit")));
    if (auto names = s.getAs<ArrayAttr>("values"))
      for (Attribute n : names)
        out->add_summaries(stringOf(n));
  }
  if (auto m = t.getAs<ArrayAttr>("metrics"))
    for (Attribute n : m)
      out->add_metrics(stringOf(n));
  if (auto s = t.getAs<DictionaryAttr>("session")) {
    pb::SessionOptions *session = plan.mutable_session();
    if (auto b = s.getAs<BoolAttr>("soft_placement"))
      session->set_soft_placement(b.getValue());
    if (auto b = s.getAs<BoolAttr>("log_device_placement"))
      session->set_log_device_placement(b.getValue());
    if (auto b = s.getAs<BoolAttr>("allow_tf32"))
      session->set_allow_tf32(b.getValue());
    session->set_inter_op_threads(static_cast<int32_t>(numberOr(s.get("inter_op_threads"))));
    session->set_intra_op_threads(static_cast<int32_t>(numberOr(s.get("intra_op_threads"))));
    session->set_gpu_towers(static_cast<int32_t>(numberOr(s.get("gpu_towers"))));
  }
}

/// Every task's program: dtf-cut-train-step, dtf-cut-stages and
/// dtf-shard-ps-update run on a copy of the module, whose fused ops already
/// name their kernels, and each function they make is written as its
/// program. `evalReads` as the eval's.
LogicalResult emitCut(ModuleOp module,
                      const llvm::StringMap<std::string> &evalReads,
                      pb::Plan &plan) {
  OwningOpRef<ModuleOp> cut(module.clone());
  // An error names the op of the user's source, not the copy's IR.
  MLIRContext *context = module.getContext();
  const bool printOps = context->shouldPrintOpOnDiagnostic();
  context->printOpOnDiagnostic(false);
  auto restore = llvm::make_scope_exit([&] { context->printOpOnDiagnostic(printOps); });
  PassManager pm(context);
  pm.addPass(createDtfCutTrainStep());
  pm.addPass(createDtfCutStages());
  pm.addPass(createDtfShardPsUpdate());
  if (failed(pm.run(*cut)))
    return failure();
  auto emit = [&](StringRef func, const std::string &name, pb::Program *out,
                  llvm::StringMap<std::string> readAs = {}) {
    auto f = cut->lookupSymbol<func::FuncOp>(func);
    if (!f)
      return LogicalResult(cut->emitError() << "the cut made no @" << func);
    if (failed(ProgramEmitter(f, out, &plan, std::move(readAs))
                   .sharingKernels()
                   .run()))
      return failure();
    out->set_name(name);
    return success();
  };
  if (failed(emit(kWorkerStep, "worker_step", plan.mutable_worker_step())) ||
      failed(emit(kPsUpdate, "ps_update", plan.mutable_ps_update())))
    return failure();
  for (int k = 0;
       cut->lookupSymbol<func::FuncOp>(kStagePrefix + std::to_string(k)); ++k)
    if (failed(emit(kStagePrefix + std::to_string(k),
                    "worker_step stage " + std::to_string(k), plan.add_stages())))
      return failure();
  if (cut->lookupSymbol<func::FuncOp>(kLookupWorkerStep)) {
    pb::Lookups *l = plan.mutable_lookups();
    if (failed(emit(kLookupWorkerStep, "worker_step", l->mutable_worker_step())) ||
        failed(emit(kLookupPsUpdate, "ps_update", l->mutable_ps_update())) ||
        failed(emit(kLookupEval, "eval", l->mutable_eval(), evalReads)))
      return failure();
  }
  // (dtf-cut-stages refused an op placed beyond the largest replica.)
  return success();
}

} // namespace

LogicalResult mlir::dtf::emitPlan(ModuleOp module, StringRef source, pb::Plan &plan) {
  plan.set_format_version(::dtf::plan::kPlanFormatVersion);
  plan.set_source(source.str());
  plan.set_compiler_version(std::string("dtfc ") + DTF_VERSION_STRING);
  if (auto name = module->getAttrOfType<StringAttr>("dtf.model"))
    plan.set_model(name.getValue().str());
  if (auto placement = module->getAttrOfType<DictionaryAttr>("dtf.placement"))
    plan.set_ps_strategy(stringOf(placement.get("ps_strategy")));
  for (auto var : module.getOps<VariableOp>()) {
    pb::Variable *out = plan.add_variables();
    out->set_name(var.getSymName().str());
    fillType(var.getTensorType(), out->mutable_type());
    fillInitializer(var.getInitializer(), out->mutable_initializer());
    out->set_trainable(var.getTrainable());
    if (auto device = var->getAttrOfType<StringAttr>("dtf.device"))
      out->set_device(device.getValue().str());
    auto parts = var->getAttrOfType<IntegerAttr>("dtf.partitions");
    out->set_partitions(parts ? parts.getInt() : 1);
    if (var.getSymName() == "global_step")
      out->set_role("global_step");
    else if (auto of = var->getAttrOfType<FlatSymbolRefAttr>("dtf.slot_of")) {
      out->set_role(var->hasAttr("dtf.moving_average") ? "moving_average" : "slot");
      out->set_slot_of(of.getValue().str());
    } else
      out->set_role("model");
    if (auto optimizer = var->getAttrOfType<StringAttr>("dtf.optimizer"))
      out->set_optimizer(optimizer.getValue().str());
    VariableOp owner = var;
    if (auto of = var->getAttrOfType<FlatSymbolRefAttr>("dtf.slot_of"))
      if (auto table = module.lookupSymbol<VariableOp>(of.getAttr()))
        owner = table;
    if (auto dynamic = owner->getAttrOfType<DictionaryAttr>("dtf.dynamic")) {
      pb::DynamicTable *d = out->mutable_dynamic();
      d->set_enabled(true);
      d->set_admit_after(
          cast<IntegerAttr>(dynamic.get("admit_after")).getInt());
      d->set_evict_after(
          cast<IntegerAttr>(dynamic.get("evict_after")).getInt());
    }
  }
  auto train = module.lookupSymbol<func::FuncOp>("train_step");
  auto eval = module.lookupSymbol<func::FuncOp>("eval");
  if (!train || !eval)
    return module.emitError() << "a plan needs @train_step and @eval (run "
                                 "dtf-autodiff and dtf-optimize)";
  llvm::StringMap<std::string> averages;
  for (const pb::Variable &var : plan.variables())
    if (var.role() == "moving_average")
      averages[var.slot_of()] = var.name();
  const llvm::StringMap<std::string> evalReads = averages;
  if (failed(ProgramEmitter(train, plan.mutable_train_step(), &plan).run()) ||
      failed(ProgramEmitter(eval, plan.mutable_eval(), &plan, std::move(averages)).run()))
    return failure();
  if (auto t = module->getAttrOfType<DictionaryAttr>("dtf.train"))
    fillTraining(t, plan);
  // The cut for ps/worker training: every task's program.
  return emitCut(module, evalReads, plan);
}
