//===- DtfTrainOps.td - gradients and variable updates ------*- tablegen -*-===//
//
// The ops that dtf-autodiff and dtf-optimize add to a model: gradient kernels
// that have no forward counterpart, and updates that write variables.
//
//===----------------------------------------------------------------------===//

#ifndef DTF_TRAIN_OPS_TD
#define DTF_TRAIN_OPS_TD

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

class Dtf_GradOp<string mnemonic, string what, list<Trait> traits = []>
    : Dtf_Op<mnemonic, !listconcat(traits, [Pure])> {
  let summary = "gradient of " # what;
}

// Gradients whose result has the type of one of their operands.
class Dtf_GradLikeOp<string mnemonic, string what, list<string> same>
    : Dtf_GradOp<mnemonic, what, [AllTypesMatch<!listconcat(same, ["output"])>]>;

def Dtf_ReluGradOp : Dtf_GradLikeOp<"relu_grad", "relu: dy where x > 0", ["dy", "x"]> {
  let description = [{
    ```mlir
    %dx = dtf.relu_grad %dy, %x : tensor<?x500xf32>
    ```
  }];
  let arguments = (ins Dtf_NumericTensor:$dy, Dtf_NumericTensor:$x);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($x)";
}

class Dtf_ActivationGradOp<string mnemonic, string what>
    : Dtf_GradLikeOp<mnemonic, what, ["dy", "y"]> {
  let description = [{
    Takes the forward result `y`, not its input.
  }];
  let arguments = (ins Dtf_FloatTensor:$dy, Dtf_FloatTensor:$y);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$dy `,` $y attr-dict `:` type($y)";
}
def Dtf_SigmoidGradOp : Dtf_ActivationGradOp<"sigmoid_grad", "sigmoid: dy * y * (1 - y)">;
def Dtf_TanhGradOp : Dtf_ActivationGradOp<"tanh_grad", "tanh: dy * (1 - y^2)">;

class Dtf_SoftmaxGradOp<string mnemonic, string what>
    : Dtf_GradLikeOp<mnemonic, what, ["dy", "y"]> {
  let arguments = (ins Dtf_FloatTensor:$dy, Dtf_FloatTensor:$y,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$dy `,` $y `axis` $axis attr-dict `:` type($y)";
}
def Dtf_SoftmaxGradOp : Dtf_SoftmaxGradOp<"softmax_grad",
    "softmax from its result: y * (dy - sum(dy * y, axis))">;
def Dtf_LogSoftmaxGradOp : Dtf_SoftmaxGradOp<"log_softmax_grad",
    "log_softmax from its result: dy - exp(y) * sum(dy, axis)">;

def Dtf_Conv2DBackpropInputOp : Dtf_GradOp<"conv2d_backprop_input",
    "conv2d with respect to its input", [Dtf_ComputeDtypeOnF32]> {
  let description = [{
    `input_shape` is the forward input's shape, -1 for the batch dimension,
    which is taken from `dy`. `compute_dtype "bf16"` (dtf-mixed-precision)
    rounds f32 operands to bf16 and accumulates in f32.
  }];
  let arguments = (ins Dtf_FloatTensor:$dy, Dtf_FloatTensor:$filter,
                       Dtf_Padding:$padding, Dtf_Pair:$strides,
                       Dtf_Pair:$dilations, DenseI64ArrayAttr:$input_shape,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$dy `,` $filter `padding` $padding `strides` $strides "
                       "`dilations` $dilations `input_shape` $input_shape "
                       "(`compute_dtype` $compute_dtype^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Value":$dy,
                   "::mlir::Value":$filter, "::mlir::dtf::PaddingAttr":$padding,
                   "::mlir::DenseI64ArrayAttr":$strides,
                   "::mlir::DenseI64ArrayAttr":$dilations,
                   "::mlir::DenseI64ArrayAttr":$input_shape), [{
      build($_builder, $_state, output, dy, filter, padding, strides, dilations,
            input_shape, ::mlir::StringAttr());
    }]>
  ];
}

def Dtf_Conv2DBackpropFilterOp : Dtf_GradOp<"conv2d_backprop_filter",
    "conv2d with respect to its filter", [Dtf_ComputeDtypeOnF32]> {
  let description = [{
    `compute_dtype "bf16"` (dtf-mixed-precision) rounds f32 operands to bf16
    and accumulates in f32.
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$dy,
                       Dtf_Padding:$padding, Dtf_Pair:$strides,
                       Dtf_Pair:$dilations, DenseI64ArrayAttr:$filter_shape,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$x `,` $dy `padding` $padding `strides` $strides "
                       "`dilations` $dilations `filter_shape` $filter_shape "
                       "(`compute_dtype` $compute_dtype^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let builders = [
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Value":$x,
                   "::mlir::Value":$dy, "::mlir::dtf::PaddingAttr":$padding,
                   "::mlir::DenseI64ArrayAttr":$strides,
                   "::mlir::DenseI64ArrayAttr":$dilations,
                   "::mlir::DenseI64ArrayAttr":$filter_shape), [{
      build($_builder, $_state, output, x, dy, padding, strides, dilations,
            filter_shape, ::mlir::StringAttr());
    }]>
  ];
}

class Dtf_PoolGradOp<string mnemonic, string what>
    : Dtf_GradLikeOp<mnemonic, what, ["x"]> {
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$dy,
                       Dtf_Padding:$padding, Dtf_Pair:$window, Dtf_Pair:$strides);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$x `,` $dy `padding` $padding `window` $window `strides` "
                       "$strides attr-dict `:` type($x) `,` type($dy)";
}
def Dtf_MaxPoolGradOp : Dtf_GradLikeOp<"max_pool_grad", "max_pool", ["x"]> {
  let description = [{
    Each `dy` goes to the position of its window's maximum in `x`. With
    `relu`, only where that maximum is positive: `relu_grad(max_pool_grad(x,
    dy), x)` as one pass. dtf-fuse-library makes it for the CPU (a window's
    maximum is the value at the position its `dy` goes to, so the relu's
    mask is the window's); the front end never emits it.

    ```mlir
    %dx = dtf.max_pool_grad %x, %dy padding valid window [2, 2] strides [2, 2] relu
        : tensor<?x28x28x32xf32>, tensor<?x14x14x32xf32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$dy,
                       Dtf_Padding:$padding, Dtf_Pair:$window, Dtf_Pair:$strides,
                       UnitAttr:$relu);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$x `,` $dy `padding` $padding `window` $window `strides` "
                       "$strides (`relu` $relu^)? attr-dict `:` type($x) `,` type($dy)";
}
def Dtf_AvgPoolGradOp : Dtf_PoolGradOp<"avg_pool_grad", "avg_pool">;

// dtf-fuse-library's pair for a CPU-placed max pool and its gradient: the
// forward pass keeps where each window's maximum is, so the gradient reads
// those bytes and dy instead of x (docs/plan-format.md, "Max pooling with
// its argmax").
def Dtf_MaxPoolWithArgmaxOp : Dtf_Op<"max_pool_with_argmax", [Pure]> {
  let summary = "max pooling that also keeps where each window's maximum is";
  let description = [{
    `output` is `max_pool`'s. `argmax` holds one byte per element of
    `output`, packed four to an i32 (its last dimension is ceil(C / 4)): the
    low seven bits are the window position (ky * window[1] + kx) of the
    first maximum in row-major window order (a NaN first stays, a later NaN
    never wins: `max_pool_grad`'s rule), 127 when no position of the window
    lies inside the input; the high bit is set when that maximum is not
    positive (relu's mask, for `max_pool_grad_with_argmax relu`). Windows of
    at most 127 positions. dtf-fuse-library makes it; the front end never
    emits it.

    ```mlir
    %y, %i = dtf.max_pool_with_argmax %x padding valid window [2, 2] strides [2, 2]
        : tensor<?x28x28x32xf32> -> tensor<?x14x14x32xf32>, tensor<?x14x14x8xi32>
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$input, Dtf_Padding:$padding,
                       Dtf_Pair:$window, Dtf_Pair:$strides);
  let results = (outs Dtf_FloatTensor:$output, RankedTensorOf<[I32]>:$argmax);
  let assemblyFormat = "$input `padding` $padding `window` $window `strides` "
                       "$strides attr-dict `:` type($input) `->` type($output) "
                       "`,` type($argmax)";
  let hasVerifier = 1;
}

def Dtf_MaxPoolGradWithArgmaxOp : Dtf_GradOp<"max_pool_grad_with_argmax",
    "max_pool from the argmax max_pool_with_argmax kept"> {
  let description = [{
    `max_pool_grad(x, dy)` (with `relu`, `max_pool_grad relu`) bit for bit,
    from `max_pool_with_argmax`'s `argmax` of that `x` instead of `x`.
    `input_shape` is `x`'s shape, -1 for the batch (taken from `dy`).

    ```mlir
    %dx = dtf.max_pool_grad_with_argmax %i, %dy padding valid window [2, 2] strides [2, 2]
        input_shape [-1, 28, 28, 32] relu
        : (tensor<?x14x14x8xi32>, tensor<?x14x14x32xf32>) -> tensor<?x28x28x32xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32]>:$argmax, Dtf_FloatTensor:$dy,
                       Dtf_Padding:$padding, Dtf_Pair:$window, Dtf_Pair:$strides,
                       DenseI64ArrayAttr:$input_shape, UnitAttr:$relu);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$argmax `,` $dy `padding` $padding `window` $window "
                       "`strides` $strides `input_shape` $input_shape "
                       "(`relu` $relu^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dtf_SumToShapeOp : Dtf_GradLikeOp<"sum_to_shape",
    "broadcasting: dy summed over the dimensions that were broadcast", ["like"]> {
  let description = [{
    Sums `dy` down to the shape of `like` (which it broadcast to).
  }];
  let arguments = (ins Dtf_NumericTensor:$dy, Dtf_NumericTensor:$like);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$dy `,` $like attr-dict `:` type($dy) `to` type($like)";
}

def Dtf_SliceGradOp : Dtf_GradLikeOp<"slice_grad",
    "slice: dy placed at `begin` in zeros of the input's shape", ["x"]> {
  let arguments = (ins Dtf_Tensor:$dy, Dtf_Tensor:$x, DenseI64ArrayAttr:$begin);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$dy `,` $x `begin` $begin attr-dict `:` type($dy) `to` type($x)";
}

def Dtf_TileGradOp : Dtf_GradLikeOp<"tile_grad",
    "tile: dy summed over the repeats, to the input's shape", ["x"]> {
  let description = [{
    Element `i` of the result is the sum of the elements of `dy` whose index
    is `i` modulo the shape of `x` (each of `dy`'s sizes a multiple of `x`'s).

    ```mlir
    %dx = dtf.tile_grad %dy, %x : tensor<?x1x64xf32> to tensor<1x1x64xf32>
    ```
  }];
  let arguments = (ins Dtf_NumericTensor:$dy, Dtf_NumericTensor:$x);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($dy) `to` type($x)";
  let hasVerifier = 1;
}

def Dtf_ReduceGradOp : Dtf_GradLikeOp<"reduce_grad",
    "sum or mean: dy broadcast back over the reduced axes", ["x"]> {
  let arguments = (ins Dtf_NumericTensor:$dy, Dtf_NumericTensor:$x,
                       OptionalAttr<DenseI64ArrayAttr>:$axes, UnitAttr:$keep_dims,
                       UnitAttr:$mean);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$dy `,` $x (`axes` $axes^)? (`keep_dims` $keep_dims^)? "
                       "(`mean` $mean^)? attr-dict `:` type($dy) `to` type($x)";
}

def Dtf_MaxReduceGradOp : Dtf_GradLikeOp<"max_reduce_grad",
    "max: dy to the positions of the maximum", ["x"]> {
  let arguments = (ins Dtf_NumericTensor:$dy, Dtf_NumericTensor:$x,
                       Dtf_NumericTensor:$y, OptionalAttr<DenseI64ArrayAttr>:$axes,
                       UnitAttr:$keep_dims);
  let results = (outs Dtf_NumericTensor:$output);
  let assemblyFormat = "$dy `,` $x `,` $y (`axes` $axes^)? (`keep_dims` $keep_dims^)? "
                       "attr-dict `:` type($dy) `,` type($y) `to` type($x)";
}

class Dtf_XentGradOp<string mnemonic, string what, Type labelType>
    : Dtf_GradLikeOp<mnemonic, what, ["logits"]> {
  let arguments = (ins Dtf_FloatTensor:$dloss, Dtf_FloatTensor:$logits,
                       labelType:$labels);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$dloss `,` $logits `,` $labels attr-dict `:` "
                       "type($dloss) `,` type($logits) `,` type($labels)";
}
def Dtf_SoftmaxCrossEntropyGradOp : Dtf_XentGradOp<"softmax_cross_entropy_grad",
    "softmax_cross_entropy for the logits: dloss * (softmax(logits) - labels)",
    Dtf_FloatTensor>;
def Dtf_SparseSoftmaxCrossEntropyGradOp : Dtf_XentGradOp<
    "sparse_softmax_cross_entropy_grad",
    "sparse_softmax_cross_entropy for the logits: dloss * (softmax(logits) - one_hot(labels))",
    Dtf_IntTensor>;

def Dtf_GatherGradOp : Dtf_GradOp<"gather_grad",
    "gather for its params: dy added into zeros at the rows picked"> {
  let arguments = (ins Dtf_FloatTensor:$dy, Dtf_IntTensor:$indices,
                       DenseI64ArrayAttr:$params_shape);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$dy `,` $indices `params_shape` $params_shape attr-dict "
                       "`:` functional-type(operands, results)";
}

def Dtf_DropoutGradOp : Dtf_GradLikeOp<"dropout_grad",
    "dropout: dy through the same mask, drawn again from the seed", ["dy"]> {
  let arguments = (ins Dtf_FloatTensor:$dy, F64Attr:$rate, I64Attr:$seed);
  let results = (outs Dtf_FloatTensor:$output);
  let assemblyFormat = "$dy `rate` $rate `seed` $seed attr-dict `:` type($dy)";
}

//===----------------------------------------------------------------------===//
// Variable updates
//
// Each optimizer update (apply_* and sparse_apply_*) takes an optional
// `weight_decay`, Keras 3's decoupled weight decay: each element the update
// visits first becomes var - var * weight_decay * lr, then takes the update.
//===----------------------------------------------------------------------===//

class Dtf_UpdateOp<string mnemonic, string what>
    : Dtf_Op<mnemonic, [MemoryEffects<[MemWrite, MemRead]>]> {
  let summary = what;
}

def Dtf_AssignAddOp : Dtf_UpdateOp<"assign_add", "adds a value to a variable"> {
  let description = [{
    ```mlir
    dtf.assign_add @global_step, %one : tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$var, Dtf_NumericTensor:$value);
  let assemblyFormat = "$var `,` $value attr-dict `:` type($value)";
}

def Dtf_ApplySgdOp : Dtf_UpdateOp<"apply_sgd",
    "gradient descent: var -= lr * grad (TensorFlow's ApplyGradientDescent)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, Dtf_FloatTensor:$grad,
                       Dtf_FloatTensor:$lr,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $grad `,` $lr attr-dict `:` type($grad) `,` type($lr)";
}

def Dtf_ApplyMomentumOp : Dtf_UpdateOp<"apply_momentum",
    "momentum (ApplyMomentum): accum = momentum * accum + grad; var -= lr * accum"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$accum,
                       Dtf_FloatTensor:$grad, Dtf_FloatTensor:$lr,
                       F64Attr:$momentum, UnitAttr:$use_nesterov,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $accum `,` $grad `,` $lr `momentum` $momentum "
                       "(`nesterov` $use_nesterov^)? attr-dict `:` type($grad) `,` type($lr)";
}

def Dtf_ApplyAdamOp : Dtf_UpdateOp<"apply_adam",
    "Adam (ApplyAdam), with bias correction from the step count"> {
  let description = [{
    `step` counts the updates before this one (the global step); the bias
    correction uses beta1^(step + 1) and beta2^(step + 1).
  }];
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$m,
                       FlatSymbolRefAttr:$v, Dtf_FloatTensor:$grad,
                       Dtf_FloatTensor:$lr, Dtf_NumericTensor:$step,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $m `,` $v `,` $grad `,` $lr `,` $step `beta1` $beta1 "
                       "`beta2` $beta2 `epsilon` $epsilon attr-dict `:` type($grad) "
                       "`,` type($lr) `,` type($step)";
}

def Dtf_ApplyAdagradOp : Dtf_UpdateOp<"apply_adagrad",
    "Adagrad (ApplyAdagrad): accum += grad^2; var -= lr * grad / sqrt(accum)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$accum,
                       Dtf_FloatTensor:$grad, Dtf_FloatTensor:$lr,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $accum `,` $grad `,` $lr attr-dict `:` type($grad) `,` type($lr)";
}

def Dtf_ApplyRmspropOp : Dtf_UpdateOp<"apply_rmsprop",
    "RMSProp (ApplyRMSProp)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$ms,
                       FlatSymbolRefAttr:$mom, Dtf_FloatTensor:$grad,
                       Dtf_FloatTensor:$lr, F64Attr:$decay, F64Attr:$momentum,
                       F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $ms `,` $mom `,` $grad `,` $lr `decay` $decay "
                       "`momentum` $momentum `epsilon` $epsilon attr-dict `:` "
                       "type($grad) `,` type($lr)";
}

def Dtf_ApplyFtrlOp : Dtf_UpdateOp<"apply_ftrl",
    "FTRL-proximal (ApplyFtrlV2): var re-derived from the accum and linear slots"> {
  let description = [{
    TensorFlow's ApplyFtrlV2 with Keras' `beta` (Keras' Ftrl), elementwise,
    with p = lr_power, g_s = grad + 2 * l2_shrinkage * var and
    l2' = l2 + beta / (2 * lr):

        new_accum = accum + grad^2
        linear   += g_s - (new_accum^-p - accum^-p) / lr * var
        quadratic = new_accum^-p / lr + 2 * l2'
        var       = |linear| > l1 ? (sign(linear) * l1 - linear) / quadratic : 0
        accum     = new_accum

    Every element is re-derived, so an element whose gradient is zero is not
    left as it was: it becomes what its linear and accum slots say (0 for
    one never updated), and l2_shrinkage moves its linear slot.

    ```mlir
    dtf.apply_ftrl @w, @"w/Ftrl", @"w/Ftrl_1", %g, %lr lr_power -5.000000e-01
        l1 0.000000e+00 l2 0.000000e+00 l2_shrinkage 0.000000e+00
        beta 0.000000e+00 : tensor<10x1xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$accum,
                       FlatSymbolRefAttr:$linear, Dtf_FloatTensor:$grad,
                       Dtf_FloatTensor:$lr, F64Attr:$lr_power, F64Attr:$l1,
                       F64Attr:$l2, F64Attr:$l2_shrinkage, F64Attr:$beta,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $accum `,` $linear `,` $grad `,` $lr `lr_power` $lr_power "
                       "`l1` $l1 `l2` $l2 `l2_shrinkage` $l2_shrinkage `beta` $beta "
                       "attr-dict `:` type($grad) `,` type($lr)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sparse updates: the gradient of a variable that is only gathered, as the
// rows it picked (TensorFlow's IndexedSlices)
//===----------------------------------------------------------------------===//

class Dtf_SparseUpdateOp<string mnemonic, string what>
    : Dtf_UpdateOp<mnemonic, what> {
  let description = [{
    `slices` are pairs (indices, rows): integer ids of the variable's rows
    and, for each id, that row's gradient (rows have the shape of indices
    followed by the variable's row shape, as the `dy` of `dtf.gather`).
    Several pairs (a variable gathered more than once) and duplicate ids are
    summed per row before the update, and only the rows present are touched;
    the other rows and their slots keep their values. An id outside
    [0, rows) is an error. dtf-optimize makes these ops from a gradient that
    is one `dtf.gather_grad` or a sum of them.
  }];
  let hasVerifier = 1;
}

def Dtf_SparseApplySgdOp : Dtf_SparseUpdateOp<"sparse_apply_sgd",
    "gradient descent on the rows present: var[i] -= lr * grad[i]"> {
  let arguments = (ins FlatSymbolRefAttr:$var, Dtf_FloatTensor:$lr,
                       Variadic<Dtf_NumericTensor>:$slices,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $lr `,` $slices attr-dict `:` type($lr) `,` type($slices)";
}

def Dtf_SparseApplyMomentumOp : Dtf_SparseUpdateOp<"sparse_apply_momentum",
    "momentum on the rows present (SparseApplyMomentum)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$accum,
                       Dtf_FloatTensor:$lr, Variadic<Dtf_NumericTensor>:$slices,
                       F64Attr:$momentum, UnitAttr:$use_nesterov,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $accum `,` $lr `,` $slices `momentum` $momentum "
                       "(`nesterov` $use_nesterov^)? attr-dict `:` type($lr) `,` type($slices)";
}

def Dtf_SparseApplyAdamOp : Dtf_SparseUpdateOp<"sparse_apply_adam",
    "lazy Adam: m, v and var of the rows present (LazyAdam, SparseAdam)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$m,
                       FlatSymbolRefAttr:$v, Dtf_FloatTensor:$lr,
                       Dtf_NumericTensor:$step, Variadic<Dtf_NumericTensor>:$slices,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $m `,` $v `,` $lr `,` $step `,` $slices `beta1` $beta1 "
                       "`beta2` $beta2 `epsilon` $epsilon attr-dict `:` type($lr) "
                       "`,` type($step) `,` type($slices)";
}

def Dtf_SparseApplyAdagradOp : Dtf_SparseUpdateOp<"sparse_apply_adagrad",
    "Adagrad on the rows present (SparseApplyAdagrad)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$accum,
                       Dtf_FloatTensor:$lr, Variadic<Dtf_NumericTensor>:$slices,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $accum `,` $lr `,` $slices attr-dict `:` type($lr) `,` type($slices)";
}

def Dtf_SparseApplyRmspropOp : Dtf_SparseUpdateOp<"sparse_apply_rmsprop",
    "RMSProp on the rows present (SparseApplyRMSProp)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$ms,
                       FlatSymbolRefAttr:$mom, Dtf_FloatTensor:$lr,
                       Variadic<Dtf_NumericTensor>:$slices, F64Attr:$decay,
                       F64Attr:$momentum, F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $ms `,` $mom `,` $lr `,` $slices `decay` $decay "
                       "`momentum` $momentum `epsilon` $epsilon attr-dict `:` "
                       "type($lr) `,` type($slices)";
}

def Dtf_SparseApplyFtrlOp : Dtf_SparseUpdateOp<"sparse_apply_ftrl",
    "FTRL-proximal on the rows present (SparseApplyFtrlV2)"> {
  let arguments = (ins FlatSymbolRefAttr:$var, FlatSymbolRefAttr:$accum,
                       FlatSymbolRefAttr:$linear, Dtf_FloatTensor:$lr,
                       Variadic<Dtf_NumericTensor>:$slices, F64Attr:$lr_power,
                       F64Attr:$l1, F64Attr:$l2, F64Attr:$l2_shrinkage,
                       F64Attr:$beta, OptionalAttr<F64Attr>:$weight_decay);
  let assemblyFormat = "$var `,` $accum `,` $linear `,` $lr `,` $slices `lr_power` $lr_power "
                       "`l1` $l1 `l2` $l2 `l2_shrinkage` $l2_shrinkage `beta` $beta "
                       "attr-dict `:` type($lr) `,` type($slices)";
}

def Dtf_AssignMovingAverageOp : Dtf_UpdateOp<"assign_moving_average",
    "var -= (1 - momentum) * (var - value): a moving statistic"> {
  let description = [{
    Keeps a non-trainable variable as the moving average of a value the
    training step computes, as batch_norm's moving mean and variance:
    `var = var * momentum + value * (1 - momentum)`. Only the training step
    has it (dtf-autodiff drops it from @eval).

    ```mlir
    dtf.assign_moving_average @"bn/moving_mean", %mean momentum 9.900000e-01 : tensor<64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$var, Dtf_FloatTensor:$value,
                       F64Attr:$momentum);
  let assemblyFormat = "$var `,` $value `momentum` $momentum attr-dict `:` type($value)";
}

def Dtf_MovingAverageUpdateOp : Dtf_UpdateOp<"moving_average_update",
    "avg -= (1 - decay) * (avg - var)"> {
  let description = [{
    With `step_decay`, a scalar computed in the graph, that decay is used
    instead of the attribute: dtf-optimize passes min(decay, (1 + step) /
    (10 + step)), TensorFlow's ExponentialMovingAverage with num_updates, so
    that early averages do not lag behind their variable.
  }];
  let arguments = (ins FlatSymbolRefAttr:$avg, FlatSymbolRefAttr:$var,
                       F64Attr:$decay, Optional<Dtf_FloatTensor>:$step_decay);
  let assemblyFormat = "$avg `,` $var `decay` $decay (`,` $step_decay^ `:` "
                       "type($step_decay))? attr-dict";
}

def Dtf_GlobalNormClipOp : Dtf_Op<"global_norm_clip",
    [Pure, AllTypesMatch<["grads", "clipped"]>]> {
  let summary = "scales gradients so their global norm is at most clip_norm";
  let arguments = (ins Variadic<Dtf_FloatTensor>:$grads, F64Attr:$clip_norm);
  let results = (outs Variadic<Dtf_FloatTensor>:$clipped);
  let assemblyFormat = "$grads `clip_norm` $clip_norm attr-dict `:` type($grads)";
}

//===----------------------------------------------------------------------===//
// Dynamic loss scaling (mixed_float16; dtf-loss-scale, dtf-optimize), with
// TensorFlow's LossScaleOptimizer semantics
//===----------------------------------------------------------------------===//

def Dtf_UnscaleGradientsOp : Dtf_Op<"unscale_gradients",
    [Pure, AllTypesMatch<["grads", "unscaled"]>]> {
  let summary = "divides loss-scaled gradients by the scale; are they all finite";
  let description = [{
    The gradients of the loss times `scale` (dtf-autodiff seeds the backward
    pass with the scale), each divided by `scale` in its own dtype (f32 or
    f64), and `finite`: whether every element of every result is finite
    (neither inf nor NaN), as TensorFlow's `_is_all_finite` of the
    unscaled gradients.

    ```mlir
    %finite, %g:2 = dtf.unscale_gradients %gw, %gb by %scale : tensor<784x10xf32>, tensor<10xf32> by tensor<f32> -> tensor<i1>
    ```
  }];
  let arguments = (ins Variadic<Dtf_FloatTensor>:$grads, Dtf_FloatTensor:$scale);
  let results = (outs Dtf_BoolTensor:$finite, Variadic<Dtf_FloatTensor>:$unscaled);
  let assemblyFormat = "$grads `by` $scale attr-dict `:` type($grads) `by` "
                       "type($scale) `->` type($finite)";
  let hasVerifier = 1;
}

def Dtf_AdjustLossScaleOp : Dtf_UpdateOp<"adjust_loss_scale",
    "the dynamic loss scale's schedule, after one step"> {
  let description = [{
    TensorFlow's dynamic loss scale: when `finite`, the count of finite
    steps `good_steps` (an i64 scalar variable) goes up by one, and once it
    reaches `growth_steps` the scale (an f32 scalar variable) doubles (when
    the double is finite) and the count restarts at 0; when not `finite`,
    the scale halves (never below 1) and the count restarts at 0. The
    step's optimizer updates are skipped then (dtf.skip_updates_unless).

    ```mlir
    dtf.adjust_loss_scale @loss_scale, @loss_scale_good_steps, %finite growth_steps 2000 : tensor<i1>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$scale, FlatSymbolRefAttr:$good_steps,
                       Dtf_BoolTensor:$finite,
                       ConfinedAttr<I64Attr, [IntPositive]>:$growth_steps);
  let assemblyFormat = "$scale `,` $good_steps `,` $finite `growth_steps` "
                       "$growth_steps attr-dict `:` type($finite)";
  let hasVerifier = 1;
}

def Dtf_SkipUpdatesUnlessOp : Dtf_Op<"skip_updates_unless",
    [MemoryEffects<[MemWrite]>]> {
  let summary = "the step's optimizer updates run only when `finite` holds";
  let description = [{
    A step whose loss-scaled gradients are not all finite is skipped, as
    TensorFlow's LossScaleOptimizer skips `apply_gradients`: the optimizer
    updates of the program (apply_*, sparse_apply_*, their generated
    in-place kernels, the moving averages) do not run when `finite` is
    false, so neither the variables nor their slots change. The global
    step's `assign_add` and `dtf.adjust_loss_scale` run either way.

    In a ps/worker cut (dtf-cut-train-step) the worker keeps it (its flag
    says the step withholds its `skippable` pushes) and pushes `finite` to
    the ps, whose `ps_update` starts with its own copy over the pushed flag
    (held by no tensor: every ps runs it), so that each ps skips the updates
    of a non-finite step (in sync mode: of an update any replica's flag
    marks) and the ps holding the scale halves it.

    ```mlir
    dtf.skip_updates_unless %finite : tensor<i1>
    ```
  }];
  let arguments = (ins Dtf_BoolTensor:$finite);
  let assemblyFormat = "$finite attr-dict `:` type($finite)";
  let hasVerifier = 1;
}

// dtf-autodiff's pair for a library LSTM (dtf.lstm): the forward pass of
// the training step keeps oneDNN's workspace (every step's gates and
// states), which its gradient reads instead of running the sequence again
// (docs/plan-format.md, "The LSTM and GRU layers").
def Dtf_LstmTrainOp : Dtf_Op<"lstm_train", [Pure, Dtf_ComputeDtypeOnF32Floats]> {
  let summary = "dtf.lstm in the training step: also keeps its workspace";
  let description = [{
    `output` is `dtf.lstm`'s for the same operands. `workspace` is what
    oneDNN's LSTM primitive keeps for its backward pass (every step's gates
    and states, and without `return_sequences` every step's output too), as
    opaque bytes packed in i32; its length depends on the batch and the
    primitive, so only `dtf.lstm_grad` of the same shapes and the same
    `compute_dtype` reads it. dtf-autodiff makes it; the front end never
    emits it.

    ```mlir
    %h, %ws = dtf.lstm_train %x, %k, %r, %b
        : (tensor<?x28x28xf32>, tensor<28x256xf32>, tensor<64x256xf32>, tensor<256xf32>)
          -> (tensor<?x64xf32>, tensor<?xi32>)
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$kernel,
                       Dtf_FloatTensor:$recurrent_kernel, Dtf_FloatTensor:$bias,
                       UnitAttr:$return_sequences,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output, RankedTensorOf<[I32]>:$workspace);
  let assemblyFormat = "$x `,` $kernel `,` $recurrent_kernel `,` $bias "
                       "(`return_sequences` $return_sequences^)? "
                       "(`compute_dtype` $compute_dtype^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dtf_LstmGradOp : Dtf_Op<"lstm_grad", [Pure, Dtf_ComputeDtypeOnF32Floats]> {
  let summary = "gradient of dtf.lstm for its input and its three variables";
  let description = [{
    From `dtf.lstm_train`'s `output` and `workspace` for the same `x`,
    `kernel`, `recurrent_kernel` and `bias`, and `dy` (the gradient of
    `output`): the gradients of `x`, `kernel`, `recurrent_kernel` and `bias`,
    each of its operand's type (oneDNN's LSTM backward primitive; with
    `compute_dtype "bf16"` its bf16 one, whose gradients are f32).

    ```mlir
    %dx, %dk, %dr, %db = dtf.lstm_grad %x, %k, %r, %b, %h, %ws, %dh
        : (tensor<?x28x28xf32>, tensor<28x256xf32>, tensor<64x256xf32>, tensor<256xf32>,
           tensor<?x64xf32>, tensor<?xi32>, tensor<?x64xf32>)
          -> (tensor<?x28x28xf32>, tensor<28x256xf32>, tensor<64x256xf32>, tensor<256xf32>)
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$kernel,
                       Dtf_FloatTensor:$recurrent_kernel, Dtf_FloatTensor:$bias,
                       Dtf_FloatTensor:$output, RankedTensorOf<[I32]>:$workspace,
                       Dtf_FloatTensor:$dy, UnitAttr:$return_sequences,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$dx, Dtf_FloatTensor:$dkernel,
                      Dtf_FloatTensor:$drecurrent_kernel, Dtf_FloatTensor:$dbias);
  let assemblyFormat = "$x `,` $kernel `,` $recurrent_kernel `,` $bias `,` "
                       "$output `,` $workspace `,` $dy "
                       "(`return_sequences` $return_sequences^)? "
                       "(`compute_dtype` $compute_dtype^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

// dtf-autodiff's pair for a library GRU (dtf.gru), as for the LSTM.
def Dtf_GruTrainOp : Dtf_Op<"gru_train", [Pure, Dtf_ComputeDtypeOnF32Floats]> {
  let summary = "dtf.gru in the training step: also keeps its workspace";
  let description = [{
    `output` is `dtf.gru`'s for the same operands; `workspace` is oneDNN's
    GRU workspace (and without `return_sequences` every step's output), as
    `dtf.lstm_train`'s. dtf-autodiff makes it; the front end never emits it.
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$kernel,
                       Dtf_FloatTensor:$recurrent_kernel, Dtf_FloatTensor:$bias,
                       Dtf_FloatTensor:$recurrent_bias, UnitAttr:$return_sequences,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$output, RankedTensorOf<[I32]>:$workspace);
  let assemblyFormat = "$x `,` $kernel `,` $recurrent_kernel `,` $bias `,` "
                       "$recurrent_bias (`return_sequences` $return_sequences^)? "
                       "(`compute_dtype` $compute_dtype^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Dtf_GruGradOp : Dtf_Op<"gru_grad", [Pure, Dtf_ComputeDtypeOnF32Floats]> {
  let summary = "gradient of dtf.gru for its input and its four variables";
  let description = [{
    From `dtf.gru_train`'s `output` and `workspace` for the same operands,
    and `dy` (the gradient of `output`): the gradients of `x`, `kernel`,
    `recurrent_kernel`, `bias` and `recurrent_bias`, each of its operand's
    type (oneDNN's GRU backward primitive).

    ```mlir
    %dx, %dk, %dr, %db, %drb = dtf.gru_grad %x, %k, %r, %b, %rb, %h, %ws, %dh
        : (tensor<?x28x28xf32>, tensor<28x192xf32>, tensor<64x192xf32>, tensor<192xf32>,
           tensor<192xf32>, tensor<?x64xf32>, tensor<?xi32>, tensor<?x64xf32>)
          -> (tensor<?x28x28xf32>, tensor<28x192xf32>, tensor<64x192xf32>, tensor<192xf32>,
              tensor<192xf32>)
    ```
  }];
  let arguments = (ins Dtf_FloatTensor:$x, Dtf_FloatTensor:$kernel,
                       Dtf_FloatTensor:$recurrent_kernel, Dtf_FloatTensor:$bias,
                       Dtf_FloatTensor:$recurrent_bias, Dtf_FloatTensor:$output,
                       RankedTensorOf<[I32]>:$workspace, Dtf_FloatTensor:$dy,
                       UnitAttr:$return_sequences,
                       OptionalAttr<Dtf_ComputeDtype>:$compute_dtype);
  let results = (outs Dtf_FloatTensor:$dx, Dtf_FloatTensor:$dkernel,
                      Dtf_FloatTensor:$drecurrent_kernel, Dtf_FloatTensor:$dbias,
                      Dtf_FloatTensor:$drecurrent_bias);
  let assemblyFormat = "$x `,` $kernel `,` $recurrent_kernel `,` $bias `,` "
                       "$recurrent_bias `,` $output `,` $workspace `,` $dy "
                       "(`return_sequences` $return_sequences^)? "
                       "(`compute_dtype` $compute_dtype^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // DTF_TRAIN_OPS_TD
