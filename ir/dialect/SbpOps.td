//===- SbpOps.td - mesh, model ops, collectives --------------*- tablegen -*-===//
//
// The model ops follow docs/ir.md exactly: mnemonics, operand order, attribute
// names and types. Their shapes are checked by the shared rules of
// ir/ops/OpSemantics.h (trait OpSemanticsVerified); this file declares only what
// each op takes, so the rules are written once.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_SBP_OPS_TD
#define AUTODDL_SBP_OPS_TD

include "ir/dialect/SbpDialect.td"
include "ir/dialect/SbpAttrs.td"
include "ir/dialect/SbpInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Sbp_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sbp_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// sbp.mesh
//===----------------------------------------------------------------------===//

def Sbp_MeshOp : Sbp_Op<"mesh", [Symbol]> {
  let summary = "a device mesh with named axes";
  let description = [{
    Declares a logical n-dimensional array of devices. Axes are named so that
    plans and diagnostics speak Megatron's vocabulary (`dp`, `tp`, ...); nd-SBP
    attributes refer to the mesh by symbol and to its axes by position.

    ```mlir
    sbp.mesh @mesh [dp = 2, tp = 4]
    sbp.mesh @stage1 [dp = 2, tp = 4] {first_device = 8 : i64}
    ```

    Devices are numbered row-major (the last axis varies fastest) from
    `first_device` (default 0), so a pipeline's stages are meshes over disjoint
    rank ranges. The upstream counterpart is `mesh.mesh @m(shape = 2x4)`.

    Constraints: at least one axis; axis names are non-empty and distinct; sizes
    are >= 1; `first_device >= 0`.
  }];
  let arguments = (ins
      SymbolNameAttr:$sym_name,
      StrArrayAttr:$axis_names,
      DenseI64ArrayAttr:$shape,
      OptionalAttr<I64Attr>:$first_device);
  let assemblyFormat =
      "$sym_name custom<MeshAxes>($axis_names, $shape) attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getRank() { return getShape().size(); }
    int64_t getNumDevices();
    /// Position of the axis called `name`, or -1.
    int64_t getAxisIndex(::llvm::StringRef name);
    ::llvm::StringRef getAxisName(unsigned axis);
  }];
}

//===----------------------------------------------------------------------===//
// Model ops (docs/ir.md)
//===----------------------------------------------------------------------===//

// Verifies an op against ir/ops/OpSemantics.h: operand count, attributes and
// their types, and the result types the shared shape rules infer.
def OpSemanticsVerified : NativeOpTrait<"OpSemanticsVerified"> {
  let cppNamespace = "::autoddl::sbp::OpTrait";
}

// SbpOpInterface's methods read the one SBP rule table (ir/ops/SbpRules.h) by
// default; a model op implements none of them.
class Sbp_ModelOp<string mnemonic>
    : Sbp_Op<mnemonic, [Pure, OpSemanticsVerified, SbpOpInterface]> {
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

class Sbp_UnaryOp<string mnemonic, string what> : Sbp_ModelOp<mnemonic> {
  let summary = what;
  let arguments = (ins AnyRankedTensor:$x);
}

class Sbp_BinaryOp<string mnemonic, string what> : Sbp_ModelOp<mnemonic> {
  let summary = what;
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
}

def Sbp_ParameterOp : Sbp_ModelOp<"parameter"> {
  let summary = "a trainable tensor";
  let description = [{
    One op per trainable tensor, named as the real model names it; a tied weight
    is one `sbp.parameter` used twice. Its `sbp.sig` has no inputs and one
    output: the layout the parameter (and, through ZeRO-style sharding, its
    optimizer state) is stored in.

    ```mlir
    %wte = sbp.parameter "transformer.wte.weight" {init = "normal", init_std = 2.0e-02 : f64} : tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$init, OptionalAttr<F64Attr>:$init_std);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Sbp_EmbeddingOp : Sbp_ModelOp<"embedding"> {
  let summary = "table lookup: [B,T] ids, [V,C] table -> [B,T,C]";
  let arguments = (ins AnyRankedTensor:$ids, AnyRankedTensor:$table);
}

def Sbp_PositionalOp : Sbp_ModelOp<"positional"> {
  let summary = "learned positions: x [B,T,C] + table[0:T]";
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$table);
}

def Sbp_RotaryOp : Sbp_ModelOp<"rotary"> {
  let summary = "rotary position embedding on each head of x [B,T,H*D]";
  let arguments = (ins AnyRankedTensor:$x, I64Attr:$num_heads, I64Attr:$head_dim,
                   OptionalAttr<F64Attr>:$theta);
}

def Sbp_LinearOp : Sbp_ModelOp<"linear"> {
  let summary = "x [...,K] times a weight, plus an optional bias [N]";
  let description = [{
    The weight is `[N,K]` when `transpose_weight` is true (torch `Linear`) and
    `[K,N]` otherwise (GPT-2 `Conv1D`).
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$weight,
                   Optional<AnyRankedTensor>:$bias,
                   OptionalAttr<BoolAttr>:$transpose_weight);
}

def Sbp_MatmulOp : Sbp_ModelOp<"matmul"> {
  let summary = "batched a [...,M,K] times b [...,K,N] (or [...,N,K])";
  let arguments = (ins AnyRankedTensor:$a, AnyRankedTensor:$b,
                   OptionalAttr<BoolAttr>:$transpose_b);
}

def Sbp_BiasAddOp : Sbp_ModelOp<"bias_add"> {
  let summary = "x [...,N] plus a bias [N]";
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$bias);
}

def Sbp_AddOp : Sbp_BinaryOp<"add", "elementwise sum of two tensors of one shape">;
def Sbp_MulOp : Sbp_BinaryOp<"mul", "elementwise product of two tensors of one shape">;

def Sbp_GeluOp : Sbp_ModelOp<"gelu"> {
  let summary = "GELU, exact or with the tanh approximation";
  let arguments = (ins AnyRankedTensor:$x, OptionalAttr<StrAttr>:$approximate);
}
def Sbp_ReluOp : Sbp_UnaryOp<"relu", "max(x, 0)">;
def Sbp_SiluOp : Sbp_UnaryOp<"silu", "x * sigmoid(x)">;
def Sbp_EluOp : Sbp_UnaryOp<"elu", "x if x > 0 else exp(x) - 1">;

def Sbp_SwigluOp : Sbp_ModelOp<"swiglu"> {
  let summary = "silu(gate) * up";
  let arguments = (ins AnyRankedTensor:$gate, AnyRankedTensor:$up);
}

def Sbp_LayernormOp : Sbp_ModelOp<"layernorm"> {
  let summary = "layer normalisation over the last dimension";
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$gamma,
                   Optional<AnyRankedTensor>:$beta, OptionalAttr<F64Attr>:$epsilon);
}

def Sbp_RmsnormOp : Sbp_ModelOp<"rmsnorm"> {
  let summary = "RMS normalisation over the last dimension";
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$gamma,
                   OptionalAttr<F64Attr>:$epsilon);
}

def Sbp_SoftmaxOp : Sbp_ModelOp<"softmax"> {
  let summary = "softmax along `axis`";
  let arguments = (ins AnyRankedTensor:$x, OptionalAttr<I64Attr>:$axis);
}

def Sbp_AttentionOp : Sbp_ModelOp<"attention"> {
  let summary = "fused multi-head attention, causal or not, with grouped kv heads";
  let description = [{
    Operands are q `[B,T,H*D]`, k and v `[B,T,G*D]`, or one fused qkv
    `[B,T,(H+2G)*D]` laid out `[q | k | v]`. Result `[B,T,H*D]`.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$num_heads,
                   I64Attr:$head_dim, OptionalAttr<I64Attr>:$num_kv_heads,
                   OptionalAttr<BoolAttr>:$causal);
}

def Sbp_CrossEntropyOp : Sbp_ModelOp<"cross_entropy"> {
  let summary = "mean cross-entropy of logits [...,V] against i32 targets [...]";
  let arguments = (ins AnyRankedTensor:$logits, AnyRankedTensor:$targets);
}

def Sbp_SquaredErrorOp : Sbp_ModelOp<"squared_error"> {
  let summary = "mean squared error of scores [B,C] against one-hot i32 labels [B]";
  let arguments = (ins AnyRankedTensor:$scores, AnyRankedTensor:$targets);
}

def Sbp_Conv2dOp : Sbp_ModelOp<"conv2d"> {
  let summary = "2-D convolution, NCHW, square stride and padding";
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$weight,
                   Optional<AnyRankedTensor>:$bias, OptionalAttr<I64Attr>:$stride,
                   OptionalAttr<I64Attr>:$padding);
}

def Sbp_Pool2dOp : Sbp_ModelOp<"pool2d"> {
  let summary = "2-D max or average pooling, NCHW";
  let arguments = (ins AnyRankedTensor:$x, StrAttr:$kind, I64Attr:$kernel,
                   OptionalAttr<I64Attr>:$stride);
}

def Sbp_FlattenOp : Sbp_ModelOp<"flatten"> {
  let summary = "merges the dimensions from `start_dim` on into one";
  let arguments = (ins AnyRankedTensor:$x, OptionalAttr<I64Attr>:$start_dim);
}

def Sbp_ReshapeOp : Sbp_ModelOp<"reshape"> {
  let summary = "the same elements in another shape";
  let arguments = (ins AnyRankedTensor:$x, DenseI64ArrayAttr:$shape);
}

def Sbp_TransposeOp : Sbp_ModelOp<"transpose"> {
  let summary = "permutes dimensions: result dim i is operand dim perm[i]";
  let arguments = (ins AnyRankedTensor:$x, DenseI64ArrayAttr:$perm);
}

def Sbp_SpmmOp : Sbp_ModelOp<"spmm"> {
  let summary = "sparse adj [N,M] (nnz stored entries) times dense x [M,F]";
  let arguments = (ins AnyRankedTensor:$adj, AnyRankedTensor:$x, I64Attr:$nnz);
}

def Sbp_SddmmOp : Sbp_ModelOp<"sddmm"> {
  let summary = "x [N,K] times y [M,K] transposed, sampled at mask's stored entries";
  let arguments = (ins AnyRankedTensor:$mask, AnyRankedTensor:$x,
                   AnyRankedTensor:$y, I64Attr:$nnz);
}

def Sbp_EdgeSoftmaxOp : Sbp_ModelOp<"edge_softmax"> {
  let summary = "softmax of scale * scores over each row's stored entries of mask";
  let description = [{
    Graph attention's normalisation: scores is a sparse activation with mask's
    pattern (e.g. sddmm's result); the result has the same pattern.
  }];
  let arguments = (ins AnyRankedTensor:$mask, AnyRankedTensor:$scores,
                   I64Attr:$nnz, OptionalAttr<F64Attr>:$scale);
}

def Sbp_HeadDotOp : Sbp_ModelOp<"head_dot"> {
  let summary = "per head h: x [N,H*C] head h's C columns dotted with att[h]";
  let description = [{
    GATConv's per-node attention terms a·(W h): the result is [N,H].
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$att);
}

def Sbp_GatAggregateOp : Sbp_ModelOp<"gat_aggregate"> {
  let summary = "GATConv's attention and messages over adj's stored entries";
  let description = [{
    out[i, head h] = sum over row i's entries j of alpha_ijh h[j, head h],
    alpha the softmax over the row of LeakyReLU(s_src[j,h] + s_dst[i,h]).
  }];
  let arguments = (ins AnyRankedTensor:$adj, AnyRankedTensor:$s_dst,
                   AnyRankedTensor:$s_src, AnyRankedTensor:$h, I64Attr:$nnz,
                   OptionalAttr<F64Attr>:$negative_slope);
}

//===----------------------------------------------------------------------===//
// Primitives of an imported graph (what the sbp-fuse-* passes match on)
//===----------------------------------------------------------------------===//

def Sbp_ConstantOp : Sbp_Op<"constant",
    [Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant buffer of an imported graph (not a parameter)";
  let description = [{
    The scalars, masks and tables of an exported graph (an epsilon, 1/sqrt(D),
    a causal mask, a rotary table): read by the `sbp-fuse-*` patterns and
    dropped with the primitives they feed.

    ```mlir
    %half = sbp.constant dense<5.000000e-01> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
}

def Sbp_PrimitiveOp : Sbp_Op<"primitive", [Pure]> {
  let summary = "an ONNX operator outside the model vocabulary, kept by name";
  let description = [{
    A node of an imported graph that is not (yet) an op of docs/ir.md: its
    ONNX `op_type`, its inputs in ONNX order and its ONNX attributes, with
    numpy broadcasting. The `sbp-fuse-*` passes rewrite the decomposed
    norms, activations, attention and rotary embeddings built from these into
    the fused model ops; what they do not recognise stays as it is.

    ```mlir
    %e = sbp.primitive "Erf"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %m = sbp.primitive "ReduceMean"(%x) {axes = array<i64: -1>, keepdims = 1 : i64} : (tensor<8x16xf32>) -> tensor<8x1xf32>
    ```

    Constraints: `op_type` is an ONNX operator name (starts with an upper-case
    letter).
  }];
  let arguments = (ins StrAttr:$op_type, Variadic<AnyRankedTensor>:$inputs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
      "$op_type `(` $inputs `)` attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives (inserted by sbp-insert-boxing)
//===----------------------------------------------------------------------===//

// Values are logical tensors, so a collective keeps the type and changes the
// layout: its `sbp.sig` (required) says from which nd-SBP to which, and the
// verifier checks that the change on `mesh_axes` is the one the op performs and
// that the other axes are unchanged.
class Sbp_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Sbp_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Sbp_AllReduceOp : Sbp_CollectiveOp<"all_reduce"> {
  let summary = "P -> B on the given mesh axes";
  let description = [{
    ```mlir
    %1 = sbp.all_reduce %0 on @mesh mesh_axes = [1] {sbp.sig = #sbp.sig<@mesh, ([S(0), P]) -> ([S(0), B])>} : tensor<8x16xf32>
    ```
    Constraints: on each of `mesh_axes` the input is `P(reduction)` and the output
    `B`; other axes are unchanged.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                   DenseI64ArrayAttr:$mesh_axes,
                   DefaultValuedAttr<Sbp_ReductionKindAttr, "ReductionKind::Sum">:$reduction);
  let assemblyFormat = "$input `on` $mesh `mesh_axes` `=` $mesh_axes attr-dict `:` type($input)";
}

def Sbp_AllGatherOp : Sbp_CollectiveOp<"all_gather"> {
  let summary = "S(gather_dim) -> B on the given mesh axes";
  let description = [{
    Constraints: on each of `mesh_axes` the input is `S(gather_dim)` and the output
    `B`; other axes are unchanged.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                   DenseI64ArrayAttr:$mesh_axes, I64Attr:$gather_dim);
  let assemblyFormat = "$input `on` $mesh `mesh_axes` `=` $mesh_axes `gather_dim` `=` $gather_dim attr-dict `:` type($input)";
}

def Sbp_ReduceScatterOp : Sbp_CollectiveOp<"reduce_scatter"> {
  let summary = "P -> S(scatter_dim) on the given mesh axes";
  let description = [{
    Constraints: on each of `mesh_axes` the input is `P(sum)` and the output
    `S(scatter_dim)`; other axes are unchanged.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                   DenseI64ArrayAttr:$mesh_axes, I64Attr:$scatter_dim);
  let assemblyFormat = "$input `on` $mesh `mesh_axes` `=` $mesh_axes `scatter_dim` `=` $scatter_dim attr-dict `:` type($input)";
}

def Sbp_AllToAllOp : Sbp_CollectiveOp<"all_to_all"> {
  let summary = "S(concat_dim) -> S(split_dim) on the given mesh axes";
  let description = [{
    Each device splits its slice along `split_dim`, exchanges the pieces, and
    concatenates what it receives along `concat_dim` (upstream `mesh.all_to_all`'s
    `split_axis` / `concat_axis`).

    Constraints: `split_dim != concat_dim`; on each of `mesh_axes` the input is
    `S(concat_dim)` and the output `S(split_dim)`; other axes are unchanged.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                   DenseI64ArrayAttr:$mesh_axes, I64Attr:$split_dim,
                   I64Attr:$concat_dim);
  let assemblyFormat = "$input `on` $mesh `mesh_axes` `=` $mesh_axes `split_dim` `=` $split_dim `concat_dim` `=` $concat_dim attr-dict `:` type($input)";
}

def Sbp_LocalRelayoutOp : Sbp_CollectiveOp<"local_relayout"> {
  let summary = "changes layout without communication: B -> S, B -> P, S -> P";
  let description = [{
    Each device computes its new piece from what it holds: B -> S(d) keeps its
    slice, B -> P keeps the value on the axis's first device and zeros elsewhere,
    S(d) -> P places its slice in a zero tensor. Boxing emits it so that, after
    `sbp-insert-boxing`, every value is read in the layout it was produced in.

    Constraints: on each of `mesh_axes` the change is one of the three above;
    other axes are unchanged.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                   DenseI64ArrayAttr:$mesh_axes);
  let assemblyFormat = "$input `on` $mesh `mesh_axes` `=` $mesh_axes attr-dict `:` type($input)";
}

def Sbp_SendOp : Sbp_Op<"send"> {
  let summary = "sends a value to another pipeline stage";
  let description = [{
    ```mlir
    sbp.send %h to stage 1 channel 0 : tensor<8x768xf32>
    %h1 = sbp.recv from stage 0 channel 0 : tensor<8x768xf32>
    ```
    Constraints: `stage >= 0`, `channel >= 0`; exactly one `sbp.recv` in the
    module uses the same channel, with the same type; where the op has an
    `sbp.placement`, the peer stage differs from its own.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$stage, I64Attr:$channel);
  let assemblyFormat = "$input `to` `stage` $stage `channel` $channel attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Sbp_RecvOp : Sbp_Op<"recv"> {
  let summary = "receives a value from another pipeline stage";
  let description = [{
    Constraints: `stage >= 0`, `channel >= 0`; exactly one `sbp.send` in the
    module uses the same channel; where the op has an `sbp.placement`, the peer
    stage differs from its own.
  }];
  let arguments = (ins I64Attr:$stage, I64Attr:$channel);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "`from` `stage` $stage `channel` $channel attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // AUTODDL_SBP_OPS_TD
