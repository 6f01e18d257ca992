//===- SbpAttrs.td - mesh-axis layouts, nd-SBP, signatures, placement -*- tablegen -*-===//
//
// One typed attribute per concept. Each description ends with the constraints
// its verifier (or the op it is attached to) checks.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_SBP_ATTRS_TD
#define AUTODDL_SBP_ATTRS_TD

include "ir/dialect/SbpDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Sbp_ReductionKind : I32EnumAttr<"ReductionKind",
    "how partial values on a mesh axis combine into the logical value", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Max", 1, "max">,
  I32EnumAttrCase<"Min", 2, "min">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::autoddl::sbp";
}

def Sbp_ReductionKindAttr
    : EnumAttr<Sbp_Dialect, Sbp_ReductionKind, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

class Sbp_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Sbp_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// One mesh axis: S(d), B, P
//===----------------------------------------------------------------------===//

def Sbp_SplitAttr : Sbp_Attr<"Split", "split"> {
  let summary = "S(d): the tensor is split along dimension d across one mesh axis";
  let description = [{
    Device i of the mesh axis holds the i-th of n equal contiguous slices of the
    tensor along dimension `dim` (n = the axis size). When several mesh axes split
    the same dimension, the earlier axis splits first (mesh-axis order is nesting
    order, as in OneFlow's hierarchical SBP).

    Written `S(d)` inside `#sbp.nd` and `#sbp.sig`; on its own `#sbp.split<d>`.

    Constraints: `dim >= 0`. Where the layout is attached to a value, `dim` is
    less than the tensor's rank and the size of `dim` is divisible by the product
    of the sizes of the mesh axes splitting it.
  }];
  let parameters = (ins "int64_t":$dim);
  let assemblyFormat = "`<` $dim `>`";
  let genVerifyDecl = 1;
}

def Sbp_BroadcastAttr : Sbp_Attr<"Broadcast", "broadcast"> {
  let summary = "B: every device of one mesh axis holds the whole tensor";
  let description = [{
    Written `B` inside `#sbp.nd` and `#sbp.sig`; on its own `#sbp.broadcast`.

    Constraints: none.
  }];
}

def Sbp_PartialAttr : Sbp_Attr<"Partial", "partial"> {
  let summary = "P: the devices of one mesh axis hold partial values of the tensor";
  let description = [{
    Every device holds a tensor of the full shape; combining them elementwise with
    `reduction` (default `sum`) gives the logical tensor. A matmul with its
    contraction dimension split produces `P(sum)`.

    Written `P` (sum) or `P(max)`, `P(min)` inside `#sbp.nd` and `#sbp.sig`; on its
    own `#sbp.partial<sum>`.

    Constraints: none beyond a known reduction.
  }];
  let parameters = (ins
      DefaultValuedParameter<"ReductionKind", "ReductionKind::Sum">:$reduction);
  let assemblyFormat = "(`<` $reduction^ `>`)?";
}

//===----------------------------------------------------------------------===//
// A tensor over a whole mesh, an op's signature, an op's placement
//===----------------------------------------------------------------------===//

def Sbp_NdSbpAttr : Sbp_Attr<"NdSbp", "nd"> {
  let summary = "nd-SBP: a tensor's layout on a device mesh, one entry per mesh axis";
  let description = [{
    `#sbp.nd<@mesh, [S(0), B]>` lays a tensor out on the mesh `@mesh` (an
    `sbp.mesh` symbol): entry i is the layout along mesh axis i, one of
    `#sbp.split`, `#sbp.broadcast`, `#sbp.partial`. Example on `[dp = 2, tp = 4]`:
    `[S(0), S(1)]` splits rows over `dp` and columns over `tp`; `[B, P]` is
    replicated over `dp` and a partial sum over `tp`.

    Constraints: every entry is a split, broadcast or partial attribute. Where the
    layout is attached to a value: `@mesh` names an `sbp.mesh`, the entry count
    equals the mesh's rank, and the split constraints of `#sbp.split` hold.
  }];
  let parameters = (ins
      "::mlir::FlatSymbolRefAttr":$mesh,
      ArrayRefParameter<"::mlir::Attribute", "one layout per mesh axis">:$axes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The layout along mesh axis `axis` as a plain value.
    ::autoddl::sbp::SbpParallel getAxis(unsigned axis) const;
    /// Builds the attribute from plain per-axis layouts.
    static NdSbpAttr get(::mlir::MLIRContext *context,
                         ::mlir::FlatSymbolRefAttr mesh,
                         ::llvm::ArrayRef<::autoddl::sbp::SbpParallel> axes);
  }];
}

def Sbp_SignatureAttr : Sbp_Attr<"Signature", "sig"> {
  let summary = "the nd-SBP an op reads each operand in and writes each result in";
  let description = [{
    `#sbp.sig<@mesh, ([S(0), B], [B, S(1)]) -> ([S(0), S(1)])>` says the op reads
    operand 0 as `[S(0), B]`, operand 1 as `[B, S(1)]`, and writes result 0 as
    `[S(0), S(1)]`. The planner picks one signature per op and attaches it as the
    discardable attribute `sbp.sig`; `sbp-insert-boxing` then inserts collectives
    where a producer's result layout differs from what its consumer reads.

    Constraints: every layout lives on `@mesh`. Where attached to an op: one
    layout per operand and per result, each valid for that value's type (see
    `#sbp.nd`), and, for ops with `SbpOpInterface`, on every mesh axis the
    per-axis signature is one the op lists (or all-broadcast).
  }];
  let parameters = (ins
      "::mlir::FlatSymbolRefAttr":$mesh,
      ArrayRefParameter<"NdSbpAttr", "operand layouts">:$inputs,
      ArrayRefParameter<"NdSbpAttr", "result layouts">:$outputs);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Sbp_PlacementAttr : Sbp_Attr<"Placement", "placement"> {
  let summary = "the pipeline stage an op runs in and the mesh of that stage";
  let description = [{
    `#sbp.placement<stage = 1, mesh = @stage1>` places an op in pipeline stage 1,
    whose devices form the mesh `@stage1`. Each stage has its own `sbp.mesh`
    (its `first_device` says which global ranks it covers); values crossing
    stages travel through `sbp.send` / `sbp.recv`. Attached as the discardable
    attribute `sbp.placement`.

    Constraints: `stage >= 0`. Where attached to an op: `@mesh` names an
    `sbp.mesh`, and an `sbp.sig` on the same op uses the same mesh.
  }];
  let parameters = (ins "int64_t":$stage, "::mlir::FlatSymbolRefAttr":$mesh);
  let assemblyFormat = "`<` `stage` `=` $stage `,` `mesh` `=` $mesh `>`";
  let genVerifyDecl = 1;
}

#endif // AUTODDL_SBP_ATTRS_TD
