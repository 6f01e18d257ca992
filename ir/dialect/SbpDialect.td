//===- SbpDialect.td - the sbp dialect ---------------------*- tablegen -*-===//
//
// The dialect record shared by the attribute, interface and op definitions.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_SBP_DIALECT_TD
#define AUTODDL_SBP_DIALECT_TD

include "mlir/IR/OpBase.td"

def Sbp_Dialect : Dialect {
  let name = "sbp";
  let cppNamespace = "::autoddl::sbp";
  let summary = "Tensors laid out on a device mesh with nd-SBP, and the model ops over them";
  let description = [{
    The `sbp` dialect describes one training step of a model as ops over *logical*
    (global) tensors, each laid out on a named device mesh by an nd-SBP: for every
    mesh axis the tensor is either split along one of its dimensions (`S(d)`),
    broadcast (`B`), or held as partial values that a reduction completes (`P`).
    This is OneFlow's SBP algebra (Yuan et al., arXiv:2110.15032) spelled as typed
    MLIR attributes, close to the upstream `mesh` dialect's `#mesh.shard`.

    The pieces:
    * `sbp.mesh`: a symbol naming the mesh axes and their sizes.
    * `#sbp.split`, `#sbp.broadcast`, `#sbp.partial`: one mesh axis's layout.
    * `#sbp.nd`: a tensor's layout over a whole mesh, one entry per axis.
    * `#sbp.sig`: the layouts an op reads its operands in and writes its results
      in; attached as the discardable attribute `sbp.sig`.
    * `#sbp.placement`: the pipeline stage an op runs in, and that stage's mesh.
    * The model ops (docs/ir.md), each listing its valid SBP signatures through
      `SbpOpInterface`, and the collectives that boxing inserts.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerOps();
  }];
}

#endif // AUTODDL_SBP_DIALECT_TD
