// dtf-loss-scale: mixed_float16's dynamic loss scale, as two variables and
// the module attribute dtf-autodiff and dtf-optimize build the step from.
#include "dialects/Dtf/IR/DtfDialect.h"
#include "dialects/Dtf/Transforms/Passes.h"
#include "dialects/Dtf/Transforms/Precision.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::dtf {
#define GEN_PASS_DEF_DTFLOSSSCALE
#include "dialects/Dtf/Transforms/Passes.h.inc"
} // namespace mlir::dtf

using namespace mlir;
using namespace mlir::dtf;

namespace {

// TensorFlow's LossScaleOptimizer defaults (Keras' initial_scale and
// dynamic_growth_steps).
constexpr double kInitialScale = 32768.0; // 2^15
constexpr int64_t kGrowthSteps = 2000;

struct LossScale : public mlir::dtf::impl::DtfLossScaleBase<LossScale> {
  using DtfLossScaleBase::DtfLossScaleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module->getAttrOfType<DictionaryAttr>("dtf.train");
    const std::string chosen = chosenPrecision(module, policy);
    // bf16 has f32's range (Keras' mixed_bfloat16 scales nothing); the
    // setting is kept but unused under float32 and mixed_bfloat16.
    if (chosen != "mixed_float16" || module->hasAttr("dtf.loss_scale"))
      return;
    auto setting =
        train ? train.getAs<DictionaryAttr>("loss_scale") : DictionaryAttr();
    auto kind = setting ? setting.getAs<StringAttr>("kind") : StringAttr();
    const bool dynamic = !kind || kind.getValue() == "dynamic";
    auto initial =
        setting ? setting.getAs<FloatAttr>("initial_scale") : FloatAttr();
    auto growth = setting ? setting.getAs<IntegerAttr>("dynamic_growth_steps")
                          : IntegerAttr();
    const double scale = initial ? initial.getValueAsDouble() : kInitialScale;
    if (!(scale >= 1 && scale <= 3.4e38)) {
      module.emitError() << "loss_scale's initial_scale must be at least 1 "
                            "and a finite f32, got "
                         << scale;
      return signalPassFailure();
    }

    OpBuilder b(module.getContext());
    b.setInsertionPointToStart(module.getBody());
    SymbolTable symbols(module);
    auto variable = [&](StringRef name, Type element,
                        InitializerAttr init) -> FlatSymbolRefAttr {
      if (!symbols.lookup(name)) {
        auto v = b.create<VariableOp>(module.getLoc(), name,
                                      RankedTensorType::get({}, element), init,
                                      /*trainable=*/false);
        v->setAttr("dtf.loss_scale", b.getUnitAttr());
        symbols.insert(v);
      }
      return FlatSymbolRefAttr::get(b.getContext(), name);
    };
    NamedAttrList attrs;
    attrs.append("scale",
                 variable("loss_scale", b.getF32Type(),
                          InitializerAttr::get(
                              b.getContext(), InitKind::constant,
                              b.getDictionaryAttr(b.getNamedAttr(
                                  "value", b.getF64FloatAttr(scale))))));
    if (dynamic) {
      FlatSymbolRefAttr count =
          variable("loss_scale_good_steps", b.getI64Type(),
                   InitializerAttr::get(b.getContext(), InitKind::zeros,
                                        DictionaryAttr()));
      // dtf.adjust_loss_scale updates both in place, so a ps/worker cluster
      // must hold them on one ps: the count is placed as the scale's slot
      // (TensorFlow keeps both in the loss scale's optimizer).
      if (Operation *v = symbols.lookup(count.getValue());
          v && !v->hasAttr("dtf.slot_of"))
        v->setAttr("dtf.slot_of",
                   FlatSymbolRefAttr::get(b.getContext(), "loss_scale"));
      attrs.append("good_steps", count);
      attrs.append("growth_steps", b.getI64IntegerAttr(growth ? growth.getInt()
                                                              : kGrowthSteps));
    }
    module->setAttr("dtf.loss_scale", attrs.getDictionary(b.getContext()));
  }
};

} // namespace
