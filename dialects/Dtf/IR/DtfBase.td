//===- DtfBase.td - the dtf dialect, its types and attributes -*- tablegen -*-===//
//
// The dialect definition, the tensor type constraints and the attributes shared
// by the ops in DtfOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef DTF_BASE_TD
#define DTF_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Dtf_Dialect : Dialect {
  let name = "dtf";
  let cppNamespace = "::mlir::dtf";
  let summary = "Training graphs of dtf: variables, inputs and tensor ops";
  let description = [{
    The `dtf` dialect holds the model graph that `dtfc` builds from a `.dtf`
    file: variables (module-level symbols with a shape, a dtype and an
    initializer), named inputs, constants, and the tensor ops of neural
    networks (elementwise math with broadcasting, matmul, conv2d, pooling,
    shape ops, reductions, softmax and cross-entropy, gather, dropout).

    Tensors are builtin ranked tensors of f32, f64, f16, bf16, i32, i64 or i1.
    The symbolic batch dimension `B` of the model language is a dynamic dimension
    (`?`): `f32[B, 784]` is `tensor<?x784xf32>`. Every op infers its result
    type from its operands and attributes, and its verifier rejects operands
    whose shapes or dtypes do not fit, with a message that says what was
    expected.

    ```mlir
    dtf.variable @W : tensor<784x10xf32> = #dtf.init<zeros> {trainable}
    func.func @model() -> tensor<?x10xf32> {
      %x = dtf.input "x" : tensor<?x784xf32>
      %w = dtf.read_variable @W : tensor<784x10xf32>
      %y = dtf.matmul %x, %w : (tensor<?x784xf32>, tensor<784x10xf32>) -> tensor<?x10xf32>
      return %y : tensor<?x10xf32>
    }
    ```
  }];
  let hasConstantMaterializer = 1;
  // `dtf.held` (the held tensor an op of ps_update serves) must be a name.
  let hasOperationAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Dtf_FloatElement : AnyTypeOf<[F32, F64, F16, BF16], "floating-point (f32, f64, f16 or bf16)">;
def Dtf_IntElement : AnyTypeOf<[I32, I64], "integer (i32 or i64)">;

def Dtf_Tensor : RankedTensorOf<[F32, F64, F16, BF16, I32, I64, I1]>;
def Dtf_FloatTensor : RankedTensorOf<[F32, F64, F16, BF16]>;
def Dtf_IntTensor : RankedTensorOf<[I32, I64]>;
def Dtf_NumericTensor : RankedTensorOf<[F32, F64, F16, BF16, I32, I64]>;
def Dtf_BoolTensor : RankedTensorOf<[I1]>;

def Dtf_Pair : ConfinedAttr<DenseI64ArrayAttr, [DenseArrayCount<2>]>;

// The precision a library product (matmul, conv2d and its gradients) computes
// in, set by dtf-mixed-precision ("bf16" or "f16"): its f32 operands are
// rounded to nearest even to this dtype, products accumulate in f32 and the result stays f32. Absent:
// f32 throughout.
def Dtf_ComputeDtype : ConfinedAttr<StrAttr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::StringAttr>($_self).getValue() == \"bf16\" || "
          "::llvm::cast<::mlir::StringAttr>($_self).getValue() == \"f16\"">,
    "the compute dtype \"bf16\" or \"f16\"">]>;
// compute_dtype rounds f32 operands; other dtypes compute as they are.
def Dtf_ComputeDtypeOnF32 : PredOpTrait<
    "compute_dtype is set only where every operand is f32",
    CPred<"!$_op.getAttr(\"compute_dtype\") || ::llvm::all_of("
          "$_op.getOperandTypes(), [](::mlir::Type t) { return "
          "::llvm::cast<::mlir::ShapedType>(t).getElementType().isF32(); })">>;
// The same for the recurrent ops, whose i32 workspace is opaque bytes rather
// than an operand that is rounded: every floating-point operand is f32.
def Dtf_ComputeDtypeOnF32Floats : PredOpTrait<
    "compute_dtype is set only where every floating-point operand is f32",
    CPred<"!$_op.getAttr(\"compute_dtype\") || ::llvm::all_of("
          "$_op.getOperandTypes(), [](::mlir::Type t) { ::mlir::Type e = "
          "::llvm::cast<::mlir::ShapedType>(t).getElementType(); return "
          "!::llvm::isa<::mlir::FloatType>(e) || e.isF32(); })">>;

//===----------------------------------------------------------------------===//
// Enums and attributes
//===----------------------------------------------------------------------===//

def Dtf_InitKind : I32EnumAttr<"InitKind", "how a variable is initialized", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"constant", 2>,
    I32EnumAttrCase<"uniform", 3>,
    I32EnumAttrCase<"normal", 4>,
    I32EnumAttrCase<"truncated_normal", 5>,
    I32EnumAttrCase<"glorot_uniform", 6>,
    I32EnumAttrCase<"he_normal", 7>,
    I32EnumAttrCase<"orthogonal", 8>]> {
  let cppNamespace = "::mlir::dtf";
  let genSpecializedAttr = 0;
}

def Dtf_InitializerAttr : AttrDef<Dtf_Dialect, "Initializer"> {
  let mnemonic = "init";
  let summary = "how a variable gets its first value";
  let description = [{
    The kind of initializer and its parameters, as in TensorFlow's initializers:

    | kind | parameters |
    | --- | --- |
    | `zeros`, `ones` | none |
    | `constant` | `value` |
    | `uniform` | `minval`, `maxval` (default 0 and 1), `seed` |
    | `normal`, `truncated_normal` | `mean` (default 0), `stddev` (default 1), `seed` |
    | `glorot_uniform`, `he_normal` | `seed` |
    | `orthogonal` (rank 2 or more) | `gain` (default 1), `seed` |

    ```mlir
    #dtf.init<zeros>
    #dtf.init<truncated_normal, {stddev = 1.000000e-01 : f64}>
    ```
  }];
  let parameters = (ins EnumParameter<Dtf_InitKind>:$kind,
                        OptionalParameter<"::mlir::DictionaryAttr">:$params);
  let assemblyFormat = "`<` $kind (`,` $params^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The parameter `name` as a double, or `fallback` when it is not given.
    double getParam(::llvm::StringRef name, double fallback) const;
    /// True for the kinds that draw random numbers.
    bool isRandom() const;
  }];
}

def Dtf_Padding : I32EnumAttr<"Padding", "padding of convolutions and pooling", [
    I32EnumAttrCase<"valid", 0>,
    I32EnumAttrCase<"same", 1>]> {
  let cppNamespace = "::mlir::dtf";
}

def Dtf_ComparePredicate : I32EnumAttr<"ComparePredicate", "a comparison", [
    I32EnumAttrCase<"eq", 0>,
    I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>,
    I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::dtf";
}

#endif // DTF_BASE_TD
