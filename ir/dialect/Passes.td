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

def FuseActivationsPass : Pass<"sbp-fuse-activations", "::mlir::ModuleOp"> {
  let summary = "fuses decomposed GELUs, SiLUs and SwiGLUs of an imported graph";
  let description = [{
    Rewrites, where every constant matches within 1e-4 relative:
    - 0.5·x·(1 + erf(x/√2)) (a Div by √2 or a Mul by 1/√2, the halving on
      either side) -> `sbp.gelu` approximate "none";
    - 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) -> `sbp.gelu` "tanh";
    - x·sigmoid(x) -> `sbp.silu`; silu(gate)·up of one shape -> `sbp.swiglu`.
    Anything else (another constant, sigmoid of another value) stays as its
    primitives.
  }];
  let dependentDialects = ["::autoddl::sbp::SbpDialect"];
}

def FuseLinearPass : Pass<"sbp-fuse-linear", "::mlir::ModuleOp"> {
  let summary = "takes an export's flattened linears and no-op reshapes out";
  let description = [{
    Rewrites reshape([B,T,N]) of a linear over reshape([B·T,K]) of x [B,T,K]
    (the 2-D GEMM GPT-2's Conv1D exports as) into the linear of x, and drops
    a reshape to the shape its operand already has.
  }];
  let dependentDialects = ["::autoddl::sbp::SbpDialect"];
}

def FuseNormsPass : Pass<"sbp-fuse-norms", "::mlir::ModuleOp"> {
  let summary = "fuses decomposed LayerNorms and RMSNorms of an imported graph";
  let description = [{
    Rewrites, over the last axis only (ReduceMean with keepdims):
    - (x - mean(x)) / sqrt(mean((x - mean(x))²) + eps) · gamma (+ beta)
      -> `sbp.layernorm`;
    - x / sqrt(mean(x²) + eps) · gamma (Div, Mul by Reciprocal, or Mul by
      Rsqrt; the square a Pow by 2 or x·x) -> `sbp.rmsnorm`.
    gamma (and beta) must be rank-1 of the normalised size; a normalisation
    without gamma, or over another axis, stays as its primitives.
  }];
  let dependentDialects = ["::autoddl::sbp::SbpDialect"];
}

def FuseAttentionPass : Pass<"sbp-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "fuses decomposed (causal, grouped-query) attention of an imported graph";
  let description = [{
    Rewrites reshape([B,T,H*D]) of transpose(0,2,1,3) of
    softmax(mask(scale · Q·Kᵀ))·V, where Q, K and V are the head reshapes
    ([B,T,H,D] transposed to [B,H,T,D]) of q, k, v `[B,T,*]`, Kᵀ a transpose
    of K's last two dims (or `transpose_b`), the scale 1/√D (a Mul or a Div by
    √D, before or after the mask), the mask absent or causal (an Add of a
    constant that is 0 on and below the diagonal and ≤ -1e4 above it, or a
    Where of a lower-triangular boolean constant), into one `sbp.attention`.
    K and V may be grouped-query expansions (Unsqueeze, Expand to
    [B,G,H/G,T,D], reshape to [B,H,T,D]) of G kv heads: num_kv_heads = G.
    Another scale, a non-causal mask or heads laid out otherwise stay as
    their primitives.
  }];
  let dependentDialects = ["::autoddl::sbp::SbpDialect"];
}

def FuseRotaryPass : Pass<"sbp-fuse-rotary", "::mlir::ModuleOp"> {
  let summary = "fuses the rotary embedding of a Llama export into sbp.rotary";
  let description = [{
    Rewrites x·cos + rotate_half(x)·sin, where x is a head view
    (transpose(0,2,1,3) of reshape [B,T,H,D]) of x0 `[B,T,H*D]`,
    rotate_half(x) = Concat(Neg(Slice(x, D/2:D)), Slice(x, 0:D/2)) on the last
    axis, and cos and sin (through an Unsqueeze) are constant tables `[..,T,D]`
    equal, within 1e-3, to cos/sin(t·θ^(-2i/D)) repeated over both halves for
    positions 0..T-1 (θ read from the table), into the head view of
    `sbp.rotary` x0 with that θ. Run it before sbp-fuse-attention. Tables
    computed in the graph (not constants), another layout of the pairs, or
    positions not starting at 0 stay as their primitives.
  }];
  let dependentDialects = ["::autoddl::sbp::SbpDialect"];
}

#endif // AUTODDL_SBP_PASSES_TD
