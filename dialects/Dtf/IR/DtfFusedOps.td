//===- DtfFusedOps.td - fused elementwise regions -----------*- tablegen -*-===//
//
// The op dtf-fuse makes of a chain of elementwise ops: one loop over the
// elements of the result shape, compiled to one generated kernel.
//
//===----------------------------------------------------------------------===//

#ifndef DTF_FUSED_OPS_TD
#define DTF_FUSED_OPS_TD


def Dtf_FusedOp : Dtf_Op<"fused", [IsolatedFromAbove, RecursiveMemoryEffects]> {
  let summary = "elementwise ops fused into one generated kernel";
  let description = [{
    Runs the ops of its region, elementwise ops over one iteration shape (the
    shape of every result), as one loop. The region's arguments are the
    inputs; each input either has the iteration shape, holds one element
    (a scalar, broadcast), or has static trailing dims of the shape (a bias,
    broadcast along the leading dims). `dtf.yield` gives the results. `kernel`
    names the generated kernel (`Plan.kernels`), set by dtf-fuse.

    ```mlir
    %h = dtf.fused (%x, %b) {kernel = 0 : i64} : (tensor<?x500xf32>, tensor<500xf32>) -> tensor<?x500xf32> {
    ^bb0(%a: tensor<?x500xf32>, %c: tensor<500xf32>):
      %s = dtf.add %a, %c : (tensor<?x500xf32>, tensor<500xf32>) -> tensor<?x500xf32>
      %r = dtf.relu %s : tensor<?x500xf32>
      dtf.yield %r : tensor<?x500xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Dtf_Tensor>:$inputs, I64Attr:$kernel);
  let results = (outs Variadic<Dtf_Tensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body";
  let hasVerifier = 1;
}

def Dtf_YieldOp : Dtf_Op<"yield", [Pure, Terminator, HasParent<"FusedOp">]> {
  let summary = "the results of a dtf.fused region";
  let arguments = (ins Variadic<Dtf_Tensor>:$values);
  // An update's region yields nothing: `dtf.yield` alone.
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // DTF_FUSED_OPS_TD
