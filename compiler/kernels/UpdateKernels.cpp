// Generated optimizer updates: the element loop of TensorFlow's raw update
// ops, as runtime/kernels/cpu/Optimizers.cpp computes them.
//
// That file is compiled by GCC for x86-64-v3, which contracts a * b + c into
// one fused multiply-add wherever a product feeds only additions (GCC's
// default -ffp-contract=fast; the first product of a sum of two products).
// The code below spells each of those contractions as llvm.intr.fma and
// leaves every other operation uncontracted (LLVM contracts nothing
// without fast-math flags), so the two agree bit for bit; the tests compare
// them on random inputs (fusion.Models/EveryKernel, fusion.Updates).
#include "compiler/kernels/UpdateKernels.h"
#include "compiler/kernels/ScalarOps.h"

#include "dialects/Dtf/Transforms/Fusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

using namespace mlir;
using namespace mlir::dtf;

namespace {

double floatAttr(Operation *op, StringRef name, double dflt) {
  if (auto f = op->getAttrOfType<FloatAttr>(name))
    return f.getValueAsDouble();
  return dflt;
}

/// The scalars an update rule takes, in T (the variable's type) unless
/// said otherwise.
struct Hyper {
  Value lr;  // T(learning rate)
  Value lrT; // Adam: T(lr * sqrt(1 - beta2^t) / (1 - beta1^t))
};

class UpdateEmitter {
public:
  UpdateEmitter(Operation *update, ArrayRef<Value> buffers)
      : update(update), loc(update->getLoc()) {
    const size_t numInPlace = fusableUpdateSymbols(update).size();
    symbols.assign(buffers.begin(), buffers.begin() + numInPlace);
    inputs.assign(buffers.begin() + numInPlace, buffers.end());
    t = cast<RankedTensorType>(update->getOperand(0).getType())
            .getElementType();
  }

  /// The buffer of the update's operand k (0 the gradient, 1 the learning
  /// rate, 2 Adam's step): a region argument.
  Value operandPointer(unsigned k) const {
    auto arg = cast<BlockArgument>(update->getOperand(k));
    return inputs[arg.getArgNumber()];
  }

  Value constant(OpBuilder &b, Type type, double v) const {
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(type, v));
  }
  /// T(x), as C++'s conversion of a double to T.
  Value inT(OpBuilder &b, double x) const { return constant(b, t, x); }
  /// T(1) - T(x), computed in T as the op-by-op kernel does at run time.
  Value oneMinusInT(OpBuilder &b, double x) const {
    if (t.isF32())
      return constant(b, t, double(1.0f - float(x)));
    return constant(b, t, 1.0 - x);
  }

  /// Element 0 of the update's operand k as a double (the op-by-op kernel's
  /// hyper(): f32 and f64 widened, integers converted).
  Value scalarAsDouble(OpBuilder &b, unsigned k) const {
    auto type = cast<RankedTensorType>(update->getOperand(k).getType());
    Type e = type.getElementType();
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    Value zero = b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(0));
    Value addr = b.create<LLVM::GEPOp>(loc, ptr, e, operandPointer(k),
                                       ArrayRef<LLVM::GEPArg>{zero});
    Value v = b.create<LLVM::LoadOp>(loc, e, addr);
    Type f64 = b.getF64Type();
    if (e.isF64())
      return v;
    if (e.isF32())
      return b.create<arith::ExtFOp>(loc, f64, v);
    return b.create<arith::SIToFPOp>(loc, f64, v);
  }
  Value toT(OpBuilder &b, Value d) const {
    if (t.isF64())
      return d;
    return b.create<arith::TruncFOp>(loc, t, d);
  }

  Hyper hyper(OpBuilder &b) const {
    Hyper h;
    Value lr = scalarAsDouble(b, 1);
    h.lr = toT(b, lr);
    if (isa<ApplyAdamOp>(update)) {
      // t = step + 1; lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t), in
      // double (std::pow is libm's pow, as llvm.pow here).
      Type f64 = b.getF64Type();
      Value one = constant(b, f64, 1.0);
      Value step = b.create<arith::AddFOp>(loc, scalarAsDouble(b, 2), one);
      Value b1 = constant(b, f64, floatAttr(update, "beta1", 0.9));
      Value b2 = constant(b, f64, floatAttr(update, "beta2", 0.999));
      Value p2 = b.create<math::PowFOp>(loc, b2, step);
      Value p1 = b.create<math::PowFOp>(loc, b1, step);
      Value num = b.create<arith::MulFOp>(
          loc, lr,
          b.create<math::SqrtOp>(loc, b.create<arith::SubFOp>(loc, one, p2)));
      h.lrT = toT(b, b.create<arith::DivFOp>(
                         loc, num, b.create<arith::SubFOp>(loc, one, p1)));
    }
    return h;
  }

  /// Element i: loads the variable, its slots and the gradient, applies the
  /// rule, stores the variable and slots. Without `given`, the
  /// hyperparameters are computed here, after those loads (the GPU: its
  /// parameters in order of first use).
  LogicalResult element(OpBuilder &b, Value i,
                        std::optional<Hyper> given) const {
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    SmallVector<Value> addr, old;
    for (Value p : symbols) {
      addr.push_back(
          b.create<LLVM::GEPOp>(loc, ptr, t, p, ArrayRef<LLVM::GEPArg>{i}));
      old.push_back(b.create<LLVM::LoadOp>(loc, t, addr.back()));
    }
    Value g = b.create<LLVM::LoadOp>(
        loc, t,
        b.create<LLVM::GEPOp>(loc, ptr, t, operandPointer(0),
                              ArrayRef<LLVM::GEPArg>{i}));
    const Hyper h = given ? *given : hyper(b);
    auto fma = [&](Value x, Value y, Value z) -> Value {
      return b.create<LLVM::FMAOp>(loc, x, y, z);
    };
    auto mul = [&](Value x, Value y) -> Value {
      return b.create<arith::MulFOp>(loc, x, y);
    };
    auto sub = [&](Value x, Value y) -> Value {
      return b.create<arith::SubFOp>(loc, x, y);
    };
    auto add = [&](Value x, Value y) -> Value {
      return b.create<arith::AddFOp>(loc, x, y);
    };
    auto div = [&](Value x, Value y) -> Value {
      return b.create<arith::DivFOp>(loc, x, y);
    };
    auto neg = [&](Value x) -> Value {
      return b.create<arith::NegFOp>(loc, x);
    };
    auto sqrt = [&](Value x) -> Value {
      return b.create<math::SqrtOp>(loc, x);
    };
    SmallVector<Value> next(old);
    Value var = old[0];
    if (auto decay = update->getAttrOfType<FloatAttr>("weight_decay"))
      // Keras 3's decoupled weight decay first: var - var * wd * a, whose
      // last product GCC contracts into the subtraction.
      var = fma(neg(mul(var, inT(b, decay.getValueAsDouble()))), h.lr, var);
    if (isa<ApplySgdOp>(update)) {
      // var -= a * g
      next[0] = fma(neg(h.lr), g, var);
    } else if (auto o = dyn_cast<ApplyMomentumOp>(update)) {
      Value mu = inT(b, o.getMomentum().convertToDouble());
      // accum = accum * mu + g
      Value accum = fma(old[1], mu, g);
      next[1] = accum;
      if (o.getUseNesterov())
        // var -= g * a + accum * mu * a
        next[0] = sub(var, fma(g, h.lr, mul(mul(accum, mu), h.lr)));
      else
        // var -= accum * a
        next[0] = fma(neg(accum), h.lr, var);
    } else if (isa<ApplyAdamOp>(update)) {
      Value omb1 = oneMinusInT(b, floatAttr(update, "beta1", 0.9));
      Value omb2 = oneMinusInT(b, floatAttr(update, "beta2", 0.999));
      Value eps = inT(b, floatAttr(update, "epsilon", 1e-8));
      // m += (g - m) * (1 - b1); v += (g * g - v) * (1 - b2)
      Value m = fma(sub(g, old[1]), omb1, old[1]);
      Value v = fma(fma(g, g, neg(old[2])), omb2, old[2]);
      next[1] = m;
      next[2] = v;
      // var -= lr_t * m / (sqrt(v) + eps)
      next[0] = sub(var, div(mul(h.lrT, m), add(sqrt(v), eps)));
    } else if (isa<ApplyAdagradOp>(update)) {
      Value eps = inT(b, floatAttr(update, "epsilon", 0.0));
      // accum += g * g; var -= a * g / (sqrt(accum) + eps)
      Value accum = fma(g, g, old[1]);
      next[1] = accum;
      next[0] = sub(var, div(mul(h.lr, g), add(sqrt(accum), eps)));
    } else if (isa<ApplyRmspropOp>(update)) {
      Value omr = oneMinusInT(b, floatAttr(update, "decay", 0.9));
      Value mu = inT(b, floatAttr(update, "momentum", 0.0));
      Value eps = inT(b, floatAttr(update, "epsilon", 1e-10));
      // ms += (g * g - ms) * (1 - rho)
      Value ms = fma(fma(g, g, neg(old[1])), omr, old[1]);
      // mom = mom * mu + a * g / sqrt(ms + eps); var -= mom
      Value mom = fma(old[2], mu, div(mul(h.lr, g), sqrt(add(ms, eps))));
      next[1] = ms;
      next[2] = mom;
      next[0] = sub(var, mom);
    } else {
      return update->emitError() << "has no generated update kernel";
    }
    for (size_t k = 0; k < addr.size(); ++k)
      b.create<LLVM::StoreOp>(loc, next[k], addr[k]);
    return success();
  }

private:
  Operation *update;
  Location loc;
  SmallVector<Value> symbols, inputs;
  Type t;
};

unsigned numBuffers(FusedOp fused, Operation *update) {
  return unsigned(fusableUpdateSymbols(update).size() +
                  fused.getInputs().size());
}

} // namespace

LogicalResult mlir::dtf::buildCpuUpdateFunc(FusedOp fused, Operation *update,
                                            OpBuilder &b, StringRef name) {
  Location loc = fused.getLoc();
  SmallVector<Value> buffers;
  func::FuncOp func = createCpuKernelEntry(
      b, loc, name, numBuffers(fused, update), buffers);
  Block *entry = &func.getBody().front();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  UpdateEmitter emitter(update, buffers);
  // Once per call: the pow of Adam's bias correction is not per element.
  Hyper h = emitter.hyper(fb);
  Value i;
  OpBuilder lb = createCpuRangeLoop(fb, loc, entry, i);
  return emitter.element(lb, i, h);
}

LogicalResult mlir::dtf::buildGpuUpdateFunc(FusedOp fused, Operation *update,
                                            OpBuilder &b, StringRef name) {
  SmallVector<Value> buffers, none;
  Value i;
  OpBuilder lb = createGpuKernelLoop(
      b, fused.getLoc(), name, numBuffers(fused, update), 0, buffers, none, i);
  UpdateEmitter emitter(update, buffers);
  return emitter.element(lb, i, std::nullopt);
}
