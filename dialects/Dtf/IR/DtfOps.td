//===- DtfOps.td - the ops of the dtf dialect ------------------*- tablegen -*-===//
//
// Variables, inputs and constants; elementwise math; linear algebra and
// convolution; shape ops; reductions; losses; gather and dropout.
//
//===----------------------------------------------------------------------===//

#ifndef DTF_OPS_TD
#define DTF_OPS_TD

include "dialects/Dtf/IR/DtfBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Dtf_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dtf_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Variables, inputs, constants
//===----------------------------------------------------------------------===//

def Dtf_VariableOp : Dtf_Op<"variable", [Symbol]> {
  let summary = "a model variable: shape, dtype, initializer, trainable";
  let description = [{
    Declares a variable of the model at module level. Its shape is static (a
    variable has no batch dimension); `trainable` marks the variables the
    optimizer updates. Graphs read it with `dtf.read_variable`.

    ```mlir
    dtf.variable @W1 : tensor<784x500xf32> = #dtf.init<truncated_normal, {stddev = 1.000000e-01 : f64}> {trainable}
    dtf.variable @step : tensor<i64> = #dtf.init<zeros>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Dtf_Tensor>:$type,
                       Dtf_InitializerAttr:$initializer,
                       UnitAttr:$trainable);
  let assemblyFormat = "$sym_name `:` $type `=` qualified($initializer) attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Dtf_ReadVariableOp : Dtf_Op<"read_variable",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "the current value of a variable";
  let description = [{
    Reads the variable named by `name`; the result type is the variable's.

    ```mlir
    %w = dtf.read_variable @W1 : tensor<784x500xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Dtf_Tensor:$value);
  let assemblyFormat = "$name attr-dict `:` type($value)";
}

def Dtf_InputOp : Dtf_Op<"input", [Pure]> {
  let summary = "a named input fed by the data pipeline";
  let description = [{
    An input of the model, fed at every step (TensorFlow's placeholder). A
    dynamic first dimension is the batch.

    ```mlir
    %x = dtf.input "x" : tensor<?x784xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Dtf_Tensor:$value);
  let assemblyFormat = "$name attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Dtf_ConstantOp : Dtf_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "output"]>]> {
  let summary = "a constant tensor";
  let description = [{
    ```mlir
    %c = dtf.constant dense<1.000000e+00> : tensor<10xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// Binary ops broadcast their operands as NumPy and TensorFlow do: shapes are
// aligned at the right, and a dimension of 1 stretches to the other's size.
class Dtf_BroadcastBinaryOp<string mnemonic, Type operandType,
                            list<Trait> traits = []>
    : Dtf_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

class Dtf_ArithmeticOp<string mnemonic, string op, list<Trait> traits = []>
    : Dtf_BroadcastBinaryOp<mnemonic, Dtf_NumericTensor, traits> {
  let summary = "elementwise " # op # " with broadcasting";
  let description = [{
    Both operands have the same dtype; their shapes broadcast.

    ```mlir
    %z = dtf.}] # mnemonic # [{ %x, %b : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
    ```
  }];
  let hasFolder = 1;
}

def Dtf_AddOp : Dtf_ArithmeticOp<"add", "addition", [Commutative]>;
def Dtf_SubOp : Dtf_ArithmeticOp<"sub", "subtraction">;
def Dtf_MulOp : Dtf_ArithmeticOp<"mul", "multiplication", [Commutative]>;
def Dtf_DivOp : Dtf_ArithmeticOp<"div", "division">;
def Dtf_MaximumOp : Dtf_ArithmeticOp<"maximum", "maximum", [Commutative]>;
def Dtf_MinimumOp : Dtf_ArithmeticOp<"minimum", "minimum", [Commutative]>;

def Dtf_PowOp : Dtf_BroadcastBinaryOp<"pow", Dtf_FloatTensor> {
  let summary = "elementwise power with broadcasting";
  let description = [{
    `lhs` raised to `rhs`, on floating-point tensors.

    ```mlir
    %z = dtf.pow %x, %two : (tensor<?x10xf32>, tensor<f32>) -> tensor<?x10xf32>
    ```
  }];
  let hasFolder = 1;
}

def Dtf_CompareOp : Dtf_Op<"compare", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with broadcasting, giving i1";
  let description = [{
    Compares with `eq`, `ne`, `lt`, `le`, `gt` or `ge`; both operands have the
    same dtype, their shapes broadcast, and the result is a tensor of i1.

    ```mlir
    %ok = dtf.compare eq, %pred, %y : (tensor<?xi32>, tensor<?xi32>) -> tensor<?xi1>
    ```
  }];
  let arguments = (ins Dtf_ComparePredicate:$predicate,
                       Dtf_Tensor:$lhs, Dtf_Tensor:$rhs);
  let results = (outs Dtf_BoolTensor:$output);
  let assemblyFormat = "$predicate `,` $lhs `,` $rhs attr-dict `:` "
                       "functional-type(operands, results)";
}

def Dtf_SelectOp : Dtf_Op<"select", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise choice between two tensors, with broadcasting";
  let description = [{
    Takes `on_true` where `condition` holds and `on_false` elsewhere; the three
    shapes broadcast.

    ```mlir
    %z = dtf.select %c, %a, %b : (tensor<?x10xi1>, tensor<?x10xf32>, tensor<f32>) -> tensor<?x10xf32>
    ```
  }];
  let arguments = (ins Dtf_BoolTensor:$condition, Dtf_Tensor:$on_true,
                       Dtf_Tensor:$on_false);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$condition `,` $on_true `,` $on_false attr-dict `:` "
                       "functional-type(operands, results)";
  let hasFolder = 1;
}

class Dtf_UnaryOp<string mnemonic, Type tensorType, string what,
                  list<Trait> traits = []>
    : Dtf_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let summary = "elementwise " # what;
  let description = [{
    ```mlir
    %y = dtf.}] # mnemonic # [{ %x : tensor<?x10xf32>
    ```
  }];
  let arguments = (ins tensorType:$x);
  let results = (outs tensorType:$output);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Dtf_NegOp : Dtf_UnaryOp<"neg", Dtf_NumericTensor, "negation"> {
  let hasFolder = 1;
}
def Dtf_ReluOp : Dtf_UnaryOp<"relu", Dtf_NumericTensor, "max(x, 0)"> {
  let hasFolder = 1;
}
def Dtf_ExpOp : Dtf_UnaryOp<"exp", Dtf_FloatTensor, "exponential">;
def Dtf_LogOp : Dtf_UnaryOp<"log", Dtf_FloatTensor, "natural logarithm">;
def Dtf_SqrtOp : Dtf_UnaryOp<"sqrt", Dtf_FloatTensor, "square root">;
def Dtf_RsqrtOp : Dtf_UnaryOp<"rsqrt", Dtf_FloatTensor, "reciprocal square root">;
def Dtf_SigmoidOp : Dtf_UnaryOp<"sigmoid", Dtf_FloatTensor, "logistic sigmoid 1 / (1 + exp(-x))">;
def Dtf_TanhOp : Dtf_UnaryOp<"tanh", Dtf_FloatTensor, "hyperbolic tangent">;
def Dtf_ErfOp : Dtf_UnaryOp<"erf", Dtf_FloatTensor, "error function (2 / sqrt(pi)) * integral of exp(-t^2) from 0 to x">;
def Dtf_FloorOp : Dtf_UnaryOp<"floor", Dtf_FloatTensor, "largest integer not greater than x">;
def Dtf_CeilOp : Dtf_UnaryOp<"ceil", Dtf_FloatTensor, "smallest integer not less than x">;
def Dtf_RoundOp : Dtf_UnaryOp<"round", Dtf_FloatTensor, "nearest integer, halves to even (TensorFlow's round)">;
def Dtf_AbsOp : Dtf_UnaryOp<"abs", Dtf_NumericTensor, "absolute value (integers wrap: abs(MIN) = MIN)">;

def Dtf_FloorModOp : Dtf_BroadcastBinaryOp<"floor_mod", Dtf_NumericTensor> {
  let summary = "elementwise floor modulo with broadcasting (TensorFlow's FloorMod)";
  let description = [{
    `lhs - floor(lhs / rhs) * rhs`: the remainder has the sign of the divisor
    (Python's `%`), on integers and floats. An integer divisor of 0 is an
    error at run time.

    ```mlir
    %r = dtf.floor_mod %x, %y : (tensor<?x10xi32>, tensor<i32>) -> tensor<?x10xi32>
    ```
  }];
}

def Dtf_BucketizeOp : Dtf_Op<"bucketize", [Pure]> {
  let summary = "the bucket of each element among sorted boundaries (TensorFlow's Bucketize)";
  let description = [{
    Each element becomes the number of `boundaries` not greater than it (the
    index `std::upper_bound` gives), as an i32 of the same shape. The
    boundaries are finite and sorted ascending. Floats compare in their own
    precision (boundaries rounded to it), integers as f64. Not differentiable.

    ```mlir
    %b = dtf.bucketize %x boundaries [0.000000e+00, 1.000000e+01] : tensor<?xf32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins Dtf_NumericTensor:$x, DenseF64ArrayAttr:$boundaries);
  let results = (outs RankedTensorOf<[I32]>:$output);
  let assemblyFormat = "$x `boundaries` $boundaries attr-dict `:` type($x) `->` type($output)";
  let hasVerifier = 1;
}

def Dtf_CastOp : Dtf_Op<"cast", [Pure]> {
  let summary = "elementwise conversion to another dtype";
  let description = [{
    Converts every element to the dtype of the result; the shape stays. A cast
    to i1 gives `x != 0`.

    ```mlir
    %f = dtf.cast %labels : tensor<?xi32> to tensor<?xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$x);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra, convolution, pooling
//===----------------------------------------------------------------------===//

def Dtf_MatmulOp : Dtf_Op<"matmul", [Pure, InferTypeOpAdaptor, Dtf_ComputeDtypeOnF32]> {
  let summary = "matrix product, optionally transposing either operand";
  let description = [{
    `a` is `[..., M, K]` and `b` is `[..., K, N]` (after the transposes that
    `transpose_a` and `transpose_b` ask for); the result is `[..., M, N]`.
    Leading batch dimensions, if any, are equal in both operands.
    `compute_dtype "bf16"` (dtf-mixed-precision) rounds f32 operands to bf16
    and accumulates in f32.

    ```mlir
    %y = dtf.matmul %x, %w : (tensor<?x784xf32>, tensor<784x500xf32>) -> tensor<?x500xf32>
    %g = dtf.matmul %x, %dy transpose_a : (tensor<?x784xf32>, tensor<?x500xf32>) -> tensor<784x500xf32>
    %h = dtf.matmul %x, %w compute_dtype "bf16" : (tensor<?x784xf32>, tensor<784x500xf32>) -> tensor<?x500xf32>
    ```
  }];
  let arguments = (ins Dtf_NumericTensor:$a, Dtf_NumericTensor:$b,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$a `,` $b (`transpose_a` $transpose_a^)? "
                       "(`transpose_b` $transpose_b^)? "
                       "(`compute_dtype` $compute_dtype^)? attr-dict `:` "
                       "functional-type(operands, results)";
  // Without compute_dtype: only dtf-mixed-precision sets it.
  let builders = [
    OpBuilder<(ins "::mlir::Value":$a, "::mlir::Value":$b,
                   CArg<"bool", "false">:$transpose_a,
                   CArg<"bool", "false">:$transpose_b), [{
      build($_builder, $_state, a, b, transpose_a, transpose_b, ::mlir::StringAttr());
    }]>,
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Value":$a, "::mlir::Value":$b,
                   "bool":$transpose_a, "bool":$transpose_b), [{
      build($_builder, $_state, output, a, b, transpose_a, transpose_b, ::mlir::StringAttr());
    }]>
  ];
}

def Dtf_Conv2DOp : Dtf_Op<"conv2d", [Pure, InferTypeOpAdaptor, Dtf_ComputeDtypeOnF32]> {
  let summary = "2-D convolution, NHWC input and HWIO filter";
  let description = [{
    `input` is `[N, H, W, C]`, `filter` is `[KH, KW, C, F]`; the result is
    `[N, OH, OW, F]`. With `valid` padding, `OH = (H - (KH - 1) * DH - 1) / SH + 1`;
    with `same`, `OH = ceil(H / SH)`. `compute_dtype "bf16"`
    (dtf-mixed-precision) rounds f32 operands to bf16 and accumulates in f32.

    ```mlir
    %y = dtf.conv2d %x, %k padding same strides [1, 1] dilations [1, 1]
        : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>) -> tensor<?x28x28x32xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$input, Dtf_FloatTensor:$filter,
                       Dtf_Padding:$padding, Dtf_Pair:$strides,
                       Dtf_Pair:$dilations,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$input `,` $filter `padding` $padding `strides` $strides "
                       "`dilations` $dilations (`compute_dtype` $compute_dtype^)? "
                       "attr-dict `:` "
                       "functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$filter,
                   "::mlir::dtf::Padding":$padding,
                   "::llvm::ArrayRef<int64_t>":$strides,
                   "::llvm::ArrayRef<int64_t>":$dilations), [{
      build($_builder, $_state, input, filter, padding, strides, dilations,
            ::mlir::StringAttr());
    }]>,
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Value":$input,
                   "::mlir::Value":$filter, "::mlir::dtf::Padding":$padding,
                   "::llvm::ArrayRef<int64_t>":$strides,
                   "::llvm::ArrayRef<int64_t>":$dilations), [{
      build($_builder, $_state, output, input, filter, padding, strides,
            dilations, ::mlir::StringAttr());
    }]>
  ];
}

def Dtf_Conv2DBiasOp : Dtf_Op<"conv2d_bias", [Pure, InferTypeOpAdaptor, Dtf_ComputeDtypeOnF32]> {
  let summary = "conv2d, plus a bias of one value per output channel, optionally then relu";
  let description = [{
    `conv2d(input, filter) + bias`, with `relu` then `max(., 0)`, as one
    library call (oneDNN's convolution with a bias and a relu post-op).
    dtf-fuse-library makes it from conv2d, a bias add and relu placed on the
    CPU; the front end never emits it.

    ```mlir
    %y = dtf.conv2d_bias %x, %k, %b padding same strides [1, 1] dilations [1, 1] relu
        : (tensor<?x28x28x1xf32>, tensor<5x5x1x32xf32>, tensor<32xf32>) -> tensor<?x28x28x32xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$input, Dtf_FloatTensor:$filter,
                       Dtf_FloatTensor:$bias, Dtf_Padding:$padding,
                       Dtf_Pair:$strides, Dtf_Pair:$dilations, UnitAttr:$relu,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$input `,` $filter `,` $bias `padding` $padding `strides` $strides "
                       "`dilations` $dilations (`relu` $relu^)? "
                       "(`compute_dtype` $compute_dtype^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

class Dtf_PoolOp<string mnemonic, string what>
    : Dtf_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = what # " pooling over windows of an NHWC tensor";
  let description = [{
    Pools `[N, H, W, C]` over `window` with `strides` and `padding`, giving
    `[N, OH, OW, C]`; the output size follows conv2d's rule.

    ```mlir
    %y = dtf.}] # mnemonic # [{ %x padding valid window [2, 2] strides [2, 2]
        : tensor<?x28x28x32xf32> -> tensor<?x14x14x32xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$input, Dtf_Padding:$padding,
                       Dtf_Pair:$window, Dtf_Pair:$strides);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$input `padding` $padding `window` $window `strides` "
                       "$strides attr-dict `:` type($input) `->` type($output)";
}

def Dtf_MaxPoolOp : Dtf_PoolOp<"max_pool", "max">;
def Dtf_AvgPoolOp : Dtf_PoolOp<"avg_pool", "average">;

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def Dtf_ReshapeOp : Dtf_Op<"reshape", [Pure]> {
  let summary = "the same elements in another shape";
  let description = [{
    The result has the same dtype and number of elements. A dynamic (batch)
    dimension may appear on both sides; the static parts must then divide.

    ```mlir
    %h = dtf.reshape %x : tensor<?x784xf32> -> tensor<?x28x28x1xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$x);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Dtf_TransposeOp : Dtf_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "permutes the dimensions";
  let description = [{
    Dimension `i` of the result is dimension `permutation[i]` of `x`.

    ```mlir
    %t = dtf.transpose %w [1, 0] : tensor<784x500xf32> -> tensor<500x784xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$x, DenseI64ArrayAttr:$permutation);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$x $permutation attr-dict `:` type($x) `->` type($output)";
  let hasFolder = 1;
}

def Dtf_ConcatOp : Dtf_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "joins tensors along an axis";
  let description = [{
    All inputs have the same dtype and rank, and equal sizes except along `axis`
    (negative counts from the end).

    ```mlir
    %c = dtf.concat %a, %b axis 1 : (tensor<?x3xf32>, tensor<?x5xf32>) -> tensor<?x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Dtf_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$inputs `axis` $axis attr-dict `:` "
                       "functional-type(operands, results)";
  let hasFolder = 1;
}

def Dtf_SliceOp : Dtf_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "a contiguous block of a tensor";
  let description = [{
    Takes `size[i]` elements from `begin[i]` in each dimension; a size of -1
    takes the rest of the dimension.

    ```mlir
    %s = dtf.slice %x begin [0, 2] size [-1, 3] : tensor<?x10xf32> -> tensor<?x3xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$x, DenseI64ArrayAttr:$begin,
                       DenseI64ArrayAttr:$size);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$x `begin` $begin `size` $size attr-dict `:` type($x) "
                       "`->` type($output)";
  let hasFolder = 1;
}

def Dtf_BroadcastToOp : Dtf_Op<"broadcast_to", [Pure]> {
  let summary = "stretches a tensor to a larger shape by broadcasting";
  let description = [{
    The shape of `x` broadcasts to the result's shape (aligned at the right,
    dimensions of 1 stretch). A dynamic size of the result is `x`'s size
    there, or, with `batch_of`, the size of `batch_of` at the same position:
    how a variable is repeated over the batch (`broadcast_to(cls, [B, 1, 64])`
    in the language, `batch_of` one of the model's inputs).

    ```mlir
    %b = dtf.broadcast_to %h : tensor<?x1xf32> -> tensor<?x10xf32>
    %c = dtf.broadcast_to %cls batch_of %x : tensor<1x1x64xf32>, tensor<?x784xf32> -> tensor<?x1x64xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$x, Optional<Dtf_Tensor>:$batch_of);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$x (`batch_of` $batch_of^)? attr-dict `:` type($x) "
                       "(`,` type($batch_of)^)? `->` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Dtf_TileOp : Dtf_Op<"tile", [Pure]> {
  let summary = "repeats a tensor along each dimension (TensorFlow's tf.tile)";
  let description = [{
    Dimension `i` of the result is `multiples[i]` copies of dimension `i` of
    `x`, one after the other. A multiple of -1 repeats a dimension of size 1
    over the batch: the result's size there is the size of `batch_of` at the
    same position (`tile(cls, [B, 1, 1])` in the language).

    ```mlir
    %t = dtf.tile %x multiples [1, 3] : tensor<?x4xf32> -> tensor<?x12xf32>
    %c = dtf.tile %cls multiples [-1, 1, 1] batch_of %x : tensor<1x1x64xf32>, tensor<?x784xf32> -> tensor<?x1x64xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$x, DenseI64ArrayAttr:$multiples,
                       Optional<Dtf_Tensor>:$batch_of);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$x `multiples` $multiples (`batch_of` $batch_of^)? "
                       "attr-dict `:` type($x) (`,` type($batch_of)^)? `->` "
                       "type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Dtf_ReduceOp<string mnemonic, string what>
    : Dtf_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = what # " over some axes (all when none are given)";
  let description = [{
    Reduces `x` over `axes` (negative counts from the end; every axis when the
    list is absent). With `keep_dims`, reduced dimensions stay with size 1.

    ```mlir
    %l = dtf.}] # mnemonic # [{ %x : tensor<?xf32> -> tensor<f32>
    %r = dtf.}] # mnemonic # [{ %x axes [1] keep_dims : tensor<?x10xf32> -> tensor<?x1xf32>
    ```
  }];
  let arguments = (ins Dtf_NumericTensor:$x,
                       OptionalAttr<DenseI64ArrayAttr>:$axes,
                       UnitAttr:$keep_dims);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$x (`axes` $axes^)? (`keep_dims` $keep_dims^)? attr-dict "
                       "`:` type($x) `->` type($output)";
}

def Dtf_SumOp : Dtf_ReduceOp<"sum", "sum">;
def Dtf_MeanOp : Dtf_ReduceOp<"mean", "mean">;
def Dtf_MaxOp : Dtf_ReduceOp<"max", "maximum">;

def Dtf_IfTrainingOp : Dtf_Op<"if_training",
    [Pure, AllTypesMatch<["training", "evaluation", "output"]>]> {
  let summary = "one value in the training step, another in evaluation";
  let description = [{
    dtf-autodiff replaces it by `training` in @train_step and by `evaluation`
    in @eval: batch_norm normalizes with the batch's statistics while training
    and with the moving ones in evaluation.

    ```mlir
    %m = dtf.if_training %batch_mean, %moving_mean : tensor<64xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$training, Dtf_Tensor:$evaluation);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$training `,` $evaluation attr-dict `:` type($output)";
}

def Dtf_ArgmaxOp : Dtf_Op<"argmax", [Pure]> {
  let summary = "the index of the largest element along an axis";
  let description = [{
    The result drops `axis` and holds indices as i32 or i64 (the result type
    says which).

    ```mlir
    %c = dtf.argmax %logits axis 1 : tensor<?x10xf32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins Dtf_NumericTensor:$x, I64Attr:$axis);
  let results = (outs Dtf_IntTensor:$output);
  let assemblyFormat = "$x `axis` $axis attr-dict `:` type($x) `->` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Softmax and losses
//===----------------------------------------------------------------------===//

class Dtf_SoftmaxLikeOp<string mnemonic, string what>
    : Dtf_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what # " along an axis";
  let description = [{
    Normalizes along `axis` (default -1, the last).

    ```mlir
    %p = dtf.}] # mnemonic # [{ %logits axis -1 : tensor<?x10xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$logits,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$logits `axis` $axis attr-dict `:` type($logits)";
  let hasVerifier = 1;
}

def Dtf_SoftmaxOp : Dtf_SoftmaxLikeOp<"softmax", "softmax">;
def Dtf_LogSoftmaxOp : Dtf_SoftmaxLikeOp<"log_softmax", "log of softmax">;

def Dtf_SoftmaxCrossEntropyOp : Dtf_Op<"softmax_cross_entropy",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "cross-entropy of softmax(logits) against dense label distributions";
  let description = [{
    `logits` and `labels` are `[..., C]` of the same shape and dtype; the result
    is the loss per example, `[...]`.

    ```mlir
    %l = dtf.softmax_cross_entropy %logits, %p
        : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$logits, Dtf_FloatTensor:$labels);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` "
                       "functional-type(operands, results)";
}

def Dtf_SparseSoftmaxCrossEntropyOp : Dtf_Op<"sparse_softmax_cross_entropy",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "cross-entropy of softmax(logits) against class indices";
  let description = [{
    `logits` is `[..., C]` and `labels` holds class indices `[...]` (i32 or
    i64, each in `[0, C)`); the result is the loss per example, `[...]`.

    ```mlir
    %l = dtf.sparse_softmax_cross_entropy %logits, %y
        : (tensor<?x10xf32>, tensor<?xi32>) -> tensor<?xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$logits, Dtf_IntTensor:$labels);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` "
                       "functional-type(operands, results)";
}

def Dtf_OneHotOp : Dtf_Op<"one_hot", [Pure]> {
  let summary = "one-hot vectors of class indices";
  let description = [{
    Adds a last dimension of size `depth`: `on_value` at the index, `off_value`
    elsewhere (and everywhere for an index outside `[0, depth)`). The result's
    dtype is the result type's.

    ```mlir
    %h = dtf.one_hot %y depth 10 : tensor<?xi32> -> tensor<?x10xf32>
    ```
  }];
  let arguments = (ins Dtf_IntTensor:$indices, I64Attr:$depth,
                       DefaultValuedAttr<F64Attr, "1.0">:$on_value,
                       DefaultValuedAttr<F64Attr, "0.0">:$off_value);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$indices `depth` $depth attr-dict `:` type($indices) "
                       "`->` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gather and dropout
//===----------------------------------------------------------------------===//

def Dtf_GatherOp : Dtf_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "rows of a tensor picked by indices (embedding lookup)";
  let description = [{
    `params` is `[V, ...]`, `indices` holds row numbers in `[0, V)`; the result
    is `indices.shape + params.shape[1:]`.

    ```mlir
    %e = dtf.gather %table, %ids : (tensor<50000x64xf32>, tensor<?x20xi64>) -> tensor<?x20x64xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$params, Dtf_IntTensor:$indices);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$params `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
}

def Dtf_DynamicRowsOp : Dtf_Op<"dynamic_rows", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the rows of a dynamic table (vocab = dynamic) that hold ids";
  let description = [{
    Maps each id (any i32 or i64 value) to the row of the dynamic table
    `table` that holds it, for a `dtf.gather` of the table and its sparse
    update. With `create` (the training step) an id seen for the
    `admit_after`-th time gets a new row, initialized by the table's
    initializer, and every id seen is marked as used in this step (rows not
    used for `evict_after` steps are evicted). Without `create` (evaluation)
    nothing changes. An id without a row maps to row 0, which holds zeros and
    which no update touches (the updates of a dynamic table skip it). The
    runtime keeps the table: see docs/language.md, "Dynamic vocabularies".

    ```mlir
    %rows = dtf.dynamic_rows %ids {table = "ads/embeddings", create} : tensor<?x26xi64> -> tensor<?x26xi64>
    ```
  }];
  let arguments = (ins Dtf_IntTensor:$ids, StrAttr:$table, UnitAttr:$create);
  let results = (outs RankedTensorOf<[I64]>:$rows);
  let assemblyFormat = "$ids attr-dict `:` type($ids) `->` type($rows)";
}

def Dtf_DropoutOp : Dtf_Op<"dropout", [SameOperandsAndResultType]> {
  let summary = "zeroes elements at random while training, scaling the rest";
  let description = [{
    Each element is zeroed with probability `rate` and the others are scaled by
    `1 / (1 - rate)`, as TensorFlow's dropout. Not pure: two dropouts draw
    different masks. `rate` is in `[0, 1)`.

    ```mlir
    %d = dtf.dropout %h rate 5.000000e-01 : tensor<?x500xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$x, F64Attr:$rate,
                       OptionalAttr<I64Attr>:$seed);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$x `rate` $rate attr-dict `:` type($x)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Dtf_LstmOp : Dtf_Op<"lstm", [Pure, Dtf_ComputeDtypeOnF32Floats]> {
  let summary = "an LSTM layer over a whole sequence, as one library call";
  let description = [{
    `x` is `[B, T, F]`, `kernel` `[F, 4 U]`, `recurrent_kernel` `[U, 4 U]`
    and `bias` `[4 U]`, with the gates in the order i, f, c, o (Keras'
    layout). From zero states, step t computes
    `z = x[:, t] @ kernel + h @ recurrent_kernel + bias`,
    `i, f, g, o = sigmoid(z_i), sigmoid(z_f + 1), tanh(z_c), sigmoid(z_o)`,
    `c = f * c + i * g` and `h = o * tanh(c)`: the forget gate's
    pre-activation is offset by 1 (Keras' unit_forget_bias, as a constant).
    The result is the last step's `h`, `[B, U]`, or with `return_sequences`
    every step's, `[B, T, U]`. The front end emits it for an f32 `lstm` layer
    placed on the CPU (dtfc --recurrent=library, the default); anywhere else
    the layer is unrolled into one step's ops per time step. dtf-run runs it
    on oneDNN's LSTM primitive (inference). `compute_dtype "bf16"`
    (dtf-mixed-precision) runs oneDNN's bf16 primitive: x, the kernels and h
    in bf16, the bias, the cell state and the sums in f32, the result f32.

    ```mlir
    %h = dtf.lstm %x, %k, %r, %b
        : (tensor<?x28x28xf32>, tensor<28x256xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$kernel,
                       Dtf_FloatTensor:$recurrent_kernel, Dtf_FloatTensor:$bias,
                       UnitAttr:$return_sequences,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$x `,` $kernel `,` $recurrent_kernel `,` $bias "
                       "(`return_sequences` $return_sequences^)? "
                       "(`compute_dtype` $compute_dtype^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dtf_GruOp : Dtf_Op<"gru", [Pure, Dtf_ComputeDtypeOnF32Floats]> {
  let summary = "a GRU layer over a whole sequence, as one library call";
  let description = [{
    TensorFlow 2's GRU (`reset_after`): `x` is `[B, T, F]`, `kernel`
    `[F, 3 U]`, `recurrent_kernel` `[U, 3 U]`, `bias` and `recurrent_bias`
    `[3 U]`, with the gates in the order z, r, h (Keras' layout). From a zero
    state, step t computes `xz = x[:, t] @ kernel + bias` and
    `hz = h @ recurrent_kernel + recurrent_bias`,
    `z, r = sigmoid(xz_z + hz_z), sigmoid(xz_r + hz_r)`,
    `g = tanh(xz_h + r * hz_h)` and `h = z * h + (1 - z) * g`. The result is
    the last step's `h`, `[B, U]`, or with `return_sequences` every step's,
    `[B, T, U]`. The front end emits it for an f32 `gru` layer placed on the
    CPU (dtfc --recurrent=library, the default); anywhere else the layer is
    unrolled. dtf-run runs it on oneDNN's linear-before-reset GRU primitive
    (inference); `compute_dtype` as for `dtf.lstm` (the GRU has no cell
    state).

    ```mlir
    %h = dtf.gru %x, %k, %r, %b, %rb
        : (tensor<?x28x28xf32>, tensor<28x192xf32>, tensor<64x192xf32>, tensor<192xf32>,
           tensor<192xf32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$kernel,
                       Dtf_FloatTensor:$recurrent_kernel, Dtf_FloatTensor:$bias,
                       Dtf_FloatTensor:$recurrent_bias, UnitAttr:$return_sequences,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$x `,` $kernel `,` $recurrent_kernel `,` $bias `,` "
                       "$recurrent_bias (`return_sequences` $return_sequences^)? "
                       "(`compute_dtype` $compute_dtype^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

include "dialects/Dtf/IR/DtfTrainOps.td"
include "dialects/Dtf/IR/DtfFusedOps.td"
include "dialects/Dtf/IR/DtfDistOps.td"

#endif // DTF_OPS_TD
