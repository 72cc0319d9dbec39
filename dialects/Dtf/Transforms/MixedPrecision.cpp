// dtf-mixed-precision: the train block's precision policy, as the precision
// each library product computes in (`compute_dtype`).
#include "dialects/Dtf/Transforms/Passes.h"
#include "dialects/Dtf/Transforms/Precision.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFMIXEDPRECISION
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

namespace {

// An attribute on the compute op rather than dtf.cast ops around it: the
// kernel rounds its operands on the way into oneDNN's bf16 primitive (the
// reorder it runs anyway for convolutions; f16: to f16 and back to f32; on
// a GPU: bf16 or f16 operand copies for cublasGemmEx and cuDNN's tensor
// ops), and the tensors between ops stay f32, so nothing else in the
// runtime (generated kernels, the ps path) meets a bf16 tensor.
// docs/kernels.md and docs/gpu.md, "Mixed precision".
//
// The library LSTM ops (with their training and gradient forms) are
// products too: oneDNN's bf16 LSTM primitives take x, the weights and h in
// bf16 and keep the bias, the cell state, the sums and the gradients in
// f32; their workspace (i32) is not an operand that is rounded. The GRU ops
// stay f32 although their kernels take compute_dtype alike: oneDNN 2.6 has
// no brgemm kernel for its linear-before-reset GRU, and its reference bf16
// one makes a training step slower than f32 (its backward pass is slower
// than the f32 one; docs/kernels.md, "Mixed precision", and
// bench/results/mixed_precision_recurrent.md).
bool computesInLowPrecision(Operation *op) {
  const bool recurrent = isa<LstmOp, LstmTrainOp, LstmGradOp>(op);
  if (!recurrent && !isa<MatmulOp, Conv2DOp, Conv2DBiasOp, Conv2DBackpropInputOp,
                         Conv2DBackpropFilterOp>(op))
    return false;
  if (op->hasAttr("dtf.keep_f32"))
    return false;
  return llvm::all_of(op->getOperandTypes(), [&](Type t) {
    Type element = cast<ShapedType>(t).getElementType();
    return element.isF32() || (recurrent && !isa<FloatType>(element));
  });
}

struct MixedPrecision
    : public mlir::dtf::impl::DtfMixedPrecisionBase<MixedPrecision> {
  using DtfMixedPrecisionBase::DtfMixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module->getAttrOfType<DictionaryAttr>("dtf.train");
    const std::string chosen = chosenPrecision(module, policy);
    if (!policy.empty() && train) {
      // The override is what the module now says.
      NamedAttrList settings(train);
      settings.set("precision", StringAttr::get(&getContext(), chosen));
      module->setAttr("dtf.train", settings.getDictionary(&getContext()));
    }
    if (chosen != "float32" && chosen != "mixed_bfloat16" &&
        chosen != "mixed_float16") {
      module.emitError() << "precision must be float32, mixed_bfloat16 or "
                            "mixed_float16, not '"
                         << chosen << "'";
      return signalPassFailure();
    }
    // mixed_float16's loss scaling is dtf-loss-scale's (before dtf-autodiff).
    const bool mixed = chosen != "float32";
    auto low = StringAttr::get(&getContext(),
                               chosen == "mixed_float16" ? "f16" : "bf16");
    module.walk([&](Operation *op) {
      if (mixed && computesInLowPrecision(op))
        op->setAttr("compute_dtype", low);
      op->removeAttr("dtf.keep_f32");
    });
  }
};

} // namespace
