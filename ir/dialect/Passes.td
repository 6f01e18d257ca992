//===- Passes.td - sbp passes ---------------------------------*- tablegen -*-===//
//
// One naming chain per pass: flag sbp-<verb>-<noun> -> def <Name>Pass ->
// transforms/<Name>.cpp -> tests/lit/passes/<name>.mlir.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_SBP_PASSES_TD
#define AUTODDL_SBP_PASSES_TD

include "mlir/Pass/PassBase.td"

def AssignDataParallelPass : Pass<"sbp-assign-data-parallel", "::mlir::ModuleOp"> {
  let summary = "gives every model op without `sbp.sig` a data-parallel signature";
  let description = [{
    On the chosen mesh axis, every op takes the 1-D signature that splits the
    most activations along their first (batch) dimension while keeping
    parameters broadcast; on every other axis, all-broadcast. Function arguments
    get `sbp.nd` the same way. Ops that already carry `sbp.sig` are left alone,
    so a planner's partial choice can be completed. This is the baseline plan
    and the way tests annotate an imported model before boxing.
  }];
  let options = [
    Option<"meshName", "mesh", "std::string", /*default=*/"\"\"",
           "the sbp.mesh to use (default: the module's only mesh)">,
    Option<"axisName", "axis", "std::string", /*default=*/"\"\"",
           "the data-parallel mesh axis (default: the mesh's first axis)">
  ];
  let dependentDialects = ["::autoddl::sbp::SbpDialect"];
}

def InsertBoxingPass : Pass<"sbp-insert-boxing", "::mlir::ModuleOp"> {
  let summary = "inserts the collectives that convert between mismatched nd-SBPs";
  let description = [{
    Where a value's nd-SBP (its producer's `sbp.sig` result, or a function
    argument's `sbp.nd`) differs from the layout its consumer's `sbp.sig` reads
    it in, inserts a sequence of 1-D transitions, one mesh axis at a time:
    S->B all_gather, P->B all_reduce, P->S reduce_scatter, S(i)->S(j)
    all_to_all; B->S, B->P and S->P are local (sbp.local_relayout). Axes are
    un-split from the innermost (last) mesh axis outwards and re-split from the
    outermost inwards, so every step is a collective within one mesh-axis group.

    Every consumer without `sbp.sig`, or whose operand has no known layout, is
    reported; then the pass fails.
  }];
  let dependentDialects = ["::autoddl::sbp::SbpDialect"];
}

#endif // AUTODDL_SBP_PASSES_TD
