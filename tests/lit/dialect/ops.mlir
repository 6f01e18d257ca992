// Round trip of every op: pretty form, and through the generic form.
// RUN: autoddl-opt %s | autoddl-opt | FileCheck %s
// RUN: autoddl-opt %s -mlir-print-op-generic | autoddl-opt | FileCheck %s

// CHECK: sbp.mesh @mesh [dp = 2, tp = 4]
sbp.mesh @mesh [dp = 2, tp = 4]
// CHECK: sbp.mesh @stage1 [dp = 2, tp = 4] {first_device = 8 : i64}
sbp.mesh @stage1 [dp = 2, tp = 4] {first_device = 8 : i64}

// CHECK-LABEL: func.func @gpt_block
func.func @gpt_block(%ids: tensor<2x8xi32>, %targets: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK: sbp.parameter "wte" {init = "normal", init_std = 2.000000e-02 : f64} : tensor<64x16xf32>
  %wte = sbp.parameter "wte" {init = "normal", init_std = 0.02 : f64} : tensor<64x16xf32>
  %wpe = sbp.parameter "wpe" {init = "normal"} : tensor<8x16xf32>
  %g = sbp.parameter "ln.weight" {init = "ones"} : tensor<16xf32>
  %b = sbp.parameter "ln.bias" {init = "zeros"} : tensor<16xf32>
  %wqkv = sbp.parameter "attn.c_attn.weight" {init = "normal"} : tensor<16x48xf32>
  %bqkv = sbp.parameter "attn.c_attn.bias" {init = "zeros"} : tensor<48xf32>
  // CHECK: sbp.embedding %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  %e = sbp.embedding %ids, %wte : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.positional
  %h = sbp.positional %e, %wpe : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.layernorm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64, sbp.layer = 0 : i64}
  %n = sbp.layernorm %h, %g, %b {epsilon = 1.0e-5 : f64, sbp.layer = 0 : i64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.linear %{{.*}}, %{{.*}}, %{{.*}} {transpose_weight = false}
  %qkv = sbp.linear %n, %wqkv, %bqkv {transpose_weight = false} : (tensor<2x8x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  // CHECK: sbp.attention %{{.*}} {causal = true, head_dim = 4 : i64, num_heads = 4 : i64}
  %a = sbp.attention %qkv {num_heads = 4 : i64, head_dim = 4 : i64, causal = true} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.add
  %r = sbp.add %h, %a : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.gelu %{{.*}} {approximate = "tanh"}
  %act = sbp.gelu %r {approximate = "tanh"} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.linear %{{.*}}, %{{.*}} {transpose_weight = true} : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  %logits = sbp.linear %act, %wte {transpose_weight = true} : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
  // CHECK: sbp.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  %loss = sbp.cross_entropy %logits, %targets : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @llama_pieces
func.func @llama_pieces(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %up: tensor<2x8x16xf32>,
                        %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x8x16xf32> {
  // CHECK: sbp.rmsnorm
  %n = sbp.rmsnorm %x, %g {epsilon = 1.0e-6 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.rotary %{{.*}} {head_dim = 4 : i64, num_heads = 4 : i64, theta = 1.000000e+04 : f64}
  %q = sbp.rotary %n {num_heads = 4 : i64, head_dim = 4 : i64, theta = 10000.0 : f64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, head_dim = 4 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64}
  %a = sbp.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 4 : i64, causal = true} : (tensor<2x8x16xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.silu
  %s = sbp.silu %a : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.swiglu
  %w = sbp.swiglu %s, %up : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.mul
  %m = sbp.mul %w, %x : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: sbp.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  %scores = sbp.matmul %m, %x {transpose_b = true} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  // CHECK: sbp.softmax %{{.*}} {axis = -1 : i64}
  %p = sbp.softmax %m {axis = -1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %p : tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @vgg_pieces
func.func @vgg_pieces(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<8x16xf32> {
  // CHECK: sbp.conv2d %{{.*}}, %{{.*}}, %{{.*}} {padding = 1 : i64, stride = 1 : i64}
  %c = sbp.conv2d %x, %w, %b {stride = 1 : i64, padding = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: sbp.relu
  %r = sbp.relu %c : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: sbp.pool2d %{{.*}} {kernel = 2 : i64, kind = "max"}
  %p = sbp.pool2d %r {kind = "max", kernel = 2 : i64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: sbp.flatten %{{.*}} {start_dim = 1 : i64}
  %f = sbp.flatten %p {start_dim = 1 : i64} : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  // CHECK: sbp.reshape %{{.*}} {shape = array<i64: 16, 8>}
  %s = sbp.reshape %f {shape = array<i64: 16, 8>} : (tensor<2x64xf32>) -> tensor<16x8xf32>
  // CHECK: sbp.transpose %{{.*}} {perm = array<i64: 1, 0>}
  %t = sbp.transpose %s {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  // CHECK: sbp.bias_add
  %bias = sbp.parameter "fc.bias" {init = "zeros"} : tensor<16xf32>
  %o = sbp.bias_add %t, %bias : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %o : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @gcn_pieces
func.func @gcn_pieces(%adj: tensor<6x6xf32>, %x: tensor<6x4xf32>, %y: tensor<6x4xf32>) -> tensor<6x6xf32> {
  // CHECK: sbp.spmm %{{.*}}, %{{.*}} {nnz = 12 : i64}
  %h = sbp.spmm %adj, %x {nnz = 12 : i64} : (tensor<6x6xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  // CHECK: sbp.sddmm %{{.*}}, %{{.*}}, %{{.*}} {nnz = 12 : i64}
  %s = sbp.sddmm %adj, %h, %y {nnz = 12 : i64} : (tensor<6x6xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x6xf32>
  // CHECK: sbp.edge_softmax %{{.*}}, %{{.*}} {nnz = 12 : i64, scale = 5.000000e-01 : f64}
  %a = sbp.edge_softmax %adj, %s {nnz = 12 : i64, scale = 0.5 : f64} : (tensor<6x6xf32>, tensor<6x6xf32>) -> tensor<6x6xf32>
  return %a : tensor<6x6xf32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: sbp.all_reduce %{{.*}} on @mesh mesh_axes = [1] {sbp.sig = #sbp.sig<@mesh, ([S(0), P]) -> ([S(0), B])>} : tensor<8x16xf32>
  %0 = sbp.all_reduce %x on @mesh mesh_axes = [1] {sbp.sig = #sbp.sig<@mesh, ([S(0), P]) -> ([S(0), B])>} : tensor<8x16xf32>
  // CHECK: sbp.all_reduce %{{.*}} on @mesh mesh_axes = [0] {reduction = #sbp.reduction<max>
  %1 = sbp.all_reduce %0 on @mesh mesh_axes = [0] {reduction = #sbp.reduction<max>, sbp.sig = #sbp.sig<@mesh, ([P(max), B]) -> ([B, B])>} : tensor<8x16xf32>
  // CHECK: sbp.local_relayout %{{.*}} on @mesh mesh_axes = [0, 1]
  %2 = sbp.local_relayout %1 on @mesh mesh_axes = [0, 1] {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([S(0), P])>} : tensor<8x16xf32>
  // CHECK: sbp.reduce_scatter %{{.*}} on @mesh mesh_axes = [1] scatter_dim = 1
  %3 = sbp.reduce_scatter %2 on @mesh mesh_axes = [1] scatter_dim = 1 {sbp.sig = #sbp.sig<@mesh, ([S(0), P]) -> ([S(0), S(1)])>} : tensor<8x16xf32>
  // CHECK: sbp.all_to_all %{{.*}} on @mesh mesh_axes = [0] split_dim = 1 concat_dim = 0
  %4 = sbp.all_to_all %3 on @mesh mesh_axes = [0] split_dim = 1 concat_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([S(0), S(1)]) -> ([S(1), S(1)])>} : tensor<8x16xf32>
  // CHECK: sbp.all_gather %{{.*}} on @mesh mesh_axes = [1] gather_dim = 1
  %5 = sbp.all_gather %4 on @mesh mesh_axes = [1] gather_dim = 1 {sbp.sig = #sbp.sig<@mesh, ([S(1), S(1)]) -> ([S(1), B])>} : tensor<8x16xf32>
  return %5 : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @pipeline
func.func @pipeline(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: sbp.send %{{.*}} to stage 1 channel 0 {sbp.placement = #sbp.placement<stage = 0, mesh = @mesh>} : tensor<8x16xf32>
  sbp.send %x to stage 1 channel 0 {sbp.placement = #sbp.placement<stage = 0, mesh = @mesh>} : tensor<8x16xf32>
  // CHECK: sbp.recv from stage 0 channel 0 {sbp.placement = #sbp.placement<stage = 1, mesh = @stage1>} : tensor<8x16xf32>
  %y = sbp.recv from stage 0 channel 0 {sbp.placement = #sbp.placement<stage = 1, mesh = @stage1>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
