//===- SbpInterfaces.td - SbpOpInterface ---------------------*- tablegen -*-===//
#ifndef AUTODDL_SBP_INTERFACES_TD
#define AUTODDL_SBP_INTERFACES_TD

include "mlir/IR/OpBase.td"

def SbpOpInterface : OpInterface<"SbpOpInterface"> {
  let cppNamespace = "::autoddl::sbp";
  let description = [{
    A model op's SBP signatures: the combinations of per-mesh-axis layouts its
    operands and results may take, and how each transposes in backward.

    Signatures are listed for one mesh axis (a "1-D signature", as OneFlow's
    `GetSbp`). On an n-axis mesh the valid signatures are the per-axis products:
    each axis independently picks one 1-D signature (OneFlow's
    `GetNdSbpSignatureList`), filtered by divisibility of the split dimensions
    (see `enumerateNdSignatures` in ir/dialect/SbpLayout.h). The all-broadcast
    signature is valid for every op and is not listed.

    Every method's default reads the one table of SBP rules, ir/ops/SbpRules.h,
    which the planner reads too (ir/dialect/Signatures.cpp converts): an op's
    rules are an entry there, not code on the op.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's 1-D signatures, operands first, in the order a planner should
        prefer them when costs tie. All-broadcast is implied and not listed.
      }],
      "::llvm::SmallVector<::autoddl::sbp::SbpSignature>", "getSbpSignatures",
      (ins), /*methodBody=*/[{}],
      /*defaultImplementation=*/[{
        return ::autoddl::sbp::tableSignatures($_op);
      }]>,
    InterfaceMethod<[{
        Splits of dimension `dim` of value `valueIndex` (operands, then results)
        must fall on multiples of this many elements: a head dimension packed as
        H*D splits only at head boundaries (granule D).
      }],
      "int64_t", "getSplitGranule", (ins "unsigned":$valueIndex, "int64_t":$dim),
      /*methodBody=*/[{}],
      /*defaultImplementation=*/[{
        return ::autoddl::sbp::tableSplitGranule($_op, valueIndex, dim);
      }]>,
    InterfaceMethod<[{
        The 1-D signature of this op's backward for the forward signature
        `forward`: the layouts of the results' gradients (as inputs) and of the
        operands' gradients (as outputs). The default is the SBP dual: S(d) stays
        S(d), B becomes P and P becomes B (a broadcast value's gradient arrives as
        partial sums, and a partial value's gradient is needed in full), except
        that an operand without a gradient (integer ids, targets) keeps its
        forward layout.
      }],
      "::autoddl::sbp::SbpSignature", "getBackwardSignature",
      (ins "const ::autoddl::sbp::SbpSignature &":$forward),
      /*methodBody=*/[{}],
      /*defaultImplementation=*/[{
        return ::autoddl::sbp::tableBackwardSignature($_op, forward);
      }]>
  ];
}

#endif // AUTODDL_SBP_INTERFACES_TD
