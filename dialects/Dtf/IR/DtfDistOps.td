//===- DtfDistOps.td - the ops of the ps/worker cut ----------*- tablegen -*-===//
//
// The ops that dtfc's cut of the train_step (dtf-cut-train-step and
// dtf-cut-stages, docs/plan-format.md "Per-task programs") puts into the
// per-task programs: an update's operands pushed from the worker to the ps,
// transfers between the stages of a model-parallel replica, embedding rows
// looked up on the ps that holds the table, and the shards of partitioned
// variables that the ps updates (dtf-shard-ps-update).
//
//===----------------------------------------------------------------------===//

#ifndef DTF_DIST_OPS_TD
#define DTF_DIST_OPS_TD

def Dtf_SendOp : Dtf_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "hands a value to another stage of the replica";
  let description = [{
    Placed after the op that makes `value` when a stage `peer` of the same
    replica uses it; `key` names the transfer, `v<value>:<from>-><to>`,
    unique per step.

    ```mlir
    dtf.send %h {key = "v16:1->0", peer = 0 : i64} : tensor<?x500xf32>
    ```
  }];
  let arguments = (ins Dtf_Tensor:$value, StrAttr:$key, I64Attr:$peer);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Dtf_RecvOp : Dtf_Op<"recv", [MemoryEffects<[MemRead]>]> {
  let summary = "waits for a value another stage of the replica made";
  let description = [{
    Placed before the first op of its stage that uses a value made on stage
    `peer`; `key` is the matching `dtf.send`'s.

    ```mlir
    %h = dtf.recv {key = "v16:1->0", peer = 1 : i64} : tensor<?x500xf32>
    ```
  }];
  let arguments = (ins StrAttr:$key, I64Attr:$peer);
  let results = (outs Dtf_Tensor:$value);
  let assemblyFormat = "attr-dict `:` type($value)";
}

def Dtf_PushOp : Dtf_Op<"push", [MemoryEffects<[MemWrite]>]> {
  let summary = "sends an operand of an update to the ps that holds its variable";
  let description = [{
    In a worker's program: after the step, `values` go to the ps task that
    holds `variable` (each of its shards), under `key`, for the update there
    that takes them (`dtf.pushed`). One value, or with `sparse` the (ids,
    rows) pair of a sparse gradient, of which the ps takes the rows it holds.
    The plan writes a push as a `Transfer` of the program's `sends`.

    With `skippable` (dtf-cut-train-step, under mixed_float16's dynamic loss
    scale) the value feeds only updates that the step's
    `dtf.skip_updates_unless` guards: a step whose gradients are not finite
    withholds it, and pushes only what the unguarded updates take (the flag
    itself, the global step's increment).

    ```mlir
    dtf.push %g {key = "W:grad", variable = @W} : tensor<784x10xf32>
    dtf.push %gb {key = "b:grad", variable = @b, skippable} : tensor<10xf32>
    dtf.push %ids, %rows {key = "emb:grad:0", variable = @emb, sparse} : tensor<?x20xi64>, tensor<?x20x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Dtf_Tensor>:$values, StrAttr:$key,
                       FlatSymbolRefAttr:$variable, UnitAttr:$sparse,
                       UnitAttr:$skippable);
  let assemblyFormat = "$values attr-dict `:` type($values)";
  let hasVerifier = 1;
}

def Dtf_PushedOp : Dtf_Op<"pushed", [MemoryEffects<[MemRead]>]> {
  let summary = "on a ps, the operand of an update that the workers pushed";
  let description = [{
    In a ps's program: the value the workers' `dtf.push` of `key` sent (in
    sync mode, the replicas' values aggregated), for the update of `variable`
    that takes it. With `sparse`, the ids (int64, one per row) and the rows of
    a sparse gradient. The plan writes it as a `Transfer` of the program's
    `recvs`, and feeds the value under `key` (a sparse one's rows under
    `key#rows`).

    `rows` (and `row_offset`, 0 when absent), set by dtf-shard-ps-update:
    the pushed value holds rows [row_offset, row_offset + rows) of what the
    worker pushed, one axis-0 shard's (a dense value then has `rows` rows;
    its key is the push's with `/part_<k>`); a sparse one, the ids in that
    range, relative to `row_offset`, and their rows.

    `skippable`: the push's; a push whose `dtf.skip_updates_unless` flag
    (pushed with it) is false lacks this value, which only the updates that
    flag skips would read.

    ```mlir
    %g = dtf.pushed {key = "W:grad", variable = @W} : tensor<784x10xf32>
    %g1 = dtf.pushed {key = "emb:grad/part_1", row_offset = 5 : i64, rows = 5 : i64, variable = @emb} : tensor<5x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$key, FlatSymbolRefAttr:$variable,
                       UnitAttr:$sparse, OptionalAttr<I64Attr>:$row_offset,
                       OptionalAttr<I64Attr>:$rows, UnitAttr:$skippable);
  let results = (outs Variadic<Dtf_Tensor>:$values);
  let assemblyFormat = "attr-dict `:` type($values)";
  let hasVerifier = 1;
}

def Dtf_PsGatherOp : Dtf_Op<"ps_gather", [MemoryEffects<[MemRead]>]> {
  let summary = "rows of a table looked up on the ps tasks that hold it";
  let description = [{
    A `dtf.gather` of `variable` whose rows are fetched from the ps shards
    holding them: the worker sends the step's unique ids, never reads the
    table whole. With `create` (a dynamic table in training) the ps makes
    rows for ids it admits.

    ```mlir
    %e = dtf.ps_gather %ids {variable = "words/embeddings"} : (tensor<?x20xi64>) -> tensor<?x20x64xf32>
    ```
  }];
  let arguments = (ins Dtf_IntTensor:$indices, StrAttr:$variable,
                       UnitAttr:$create);
  let results = (outs Dtf_Tensor:$output);
  let assemblyFormat = "$indices attr-dict `:` functional-type(operands, results)";
}

def Dtf_VariableShardOp : Dtf_Op<"variable_shard",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one axis-0 shard of a partitioned variable, as a ps holds it";
  let description = [{
    Rows [row_offset, row_offset + rows) of the variable (or slot, or moving
    average) `of`, whose type is `of`'s with `rows` rows: what one ps task
    holds of a variable with `dtf.partitions`, named as TensorFlow names
    partitioned variables' shards (`<of>/part_<k>`). dtf-shard-ps-update
    declares them for the updates of `@ps_update` it makes per shard; the
    plan's variables stay the whole ones, and the ps tasks hold the shards
    under these names.

    ```mlir
    dtf.variable_shard @"emb/part_1" of @emb row_offset 5 : tensor<5x4xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$of,
                       I64Attr:$row_offset, TypeAttrOf<Dtf_Tensor>:$type);
  let assemblyFormat = "$sym_name `of` $of `row_offset` $row_offset `:` $type attr-dict";
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

#endif // DTF_DIST_OPS_TD
