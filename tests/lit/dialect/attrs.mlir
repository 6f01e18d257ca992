// Round trip of the attributes: layouts, nd-SBP, signatures, placement.
// RUN: autoddl-opt %s | autoddl-opt | FileCheck %s

sbp.mesh @mesh [dp = 2, tp = 4]
sbp.mesh @cube [x = 2, y = 2, z = 2]

// CHECK-LABEL: func.func @layouts
// CHECK-SAME: #sbp.nd<@mesh, [S(0), B]>
// CHECK-SAME: #sbp.nd<@mesh, [B, S(1)]>
// CHECK-SAME: #sbp.nd<@mesh, [P, P(max)]>
// CHECK-SAME: #sbp.nd<@cube, [S(0), S(0), S(1)]>
func.func @layouts(%a: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), B]>},
                   %b: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, S(1)]>},
                   %c: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [P(sum), P(max)]>},
                   %d: tensor<8x16xf32> {sbp.nd = #sbp.nd<@cube, [S(0), S(0), S(1)]>}) {
  return
}

// The standalone forms of one axis's layout.
// CHECK-LABEL: func.func @axis_layouts
// CHECK: axes = [#sbp.split<1>, #sbp.broadcast, #sbp.partial, #sbp.partial<min>]
func.func @axis_layouts() attributes {axes = [#sbp.split<1>, #sbp.broadcast, #sbp.partial<sum>, #sbp.partial<min>]} {
  return
}

// A 3-D signature of linear: the Agarwal-style 3-D matmul of
// /work/shared/reference/autoddl.md §3.6 (x (S0, S1, B), w (B, S0, S1)).
// CHECK-LABEL: func.func @signature_3d
// CHECK: sbp.sig = #sbp.sig<@cube, ([S(0), S(1), B], [B, S(1), S(0)]) -> ([S(0), P, S(1)])>
func.func @signature_3d(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) -> tensor<8x32xf32> {
  %y = sbp.linear %x, %w {sbp.sig = #sbp.sig<@cube, ([S(0), S(1), B], [B, S(1), S(0)]) -> ([S(0), P, S(1)])>} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// A packed [q | k | v] (G = H) split by heads on tp: S(2) of the packed operand is per segment
// (each device the same 2 of the 4 heads of q, k and v), granule 3D = 12 of the 48 columns.
// CHECK-LABEL: func.func @packed_qkv_heads
// CHECK: sbp.sig = #sbp.sig<@mesh, ([S(0), S(2)]) -> ([S(0), S(2)])>
func.func @packed_qkv_heads(%qkv: tensor<2x8x48xf32>) -> tensor<2x8x16xf32> {
  %a = sbp.attention %qkv {num_heads = 4 : i64, head_dim = 4 : i64, causal = true, sbp.sig = #sbp.sig<@mesh, ([S(0), S(2)]) -> ([S(0), S(2)])>} : (tensor<2x8x48xf32>) -> tensor<2x8x16xf32>
  return %a : tensor<2x8x16xf32>
}

// A parameter's signature has no inputs; ZeRO-style sharding splits it on dp.
// CHECK-LABEL: func.func @parameter_signature
// CHECK: sbp.placement = #sbp.placement<stage = 0, mesh = @mesh>
// CHECK-SAME: sbp.sig = #sbp.sig<@mesh, () -> ([S(0), S(1)])>
func.func @parameter_signature() -> tensor<8x16xf32> {
  %w = sbp.parameter "w" {init = "normal", sbp.sig = #sbp.sig<@mesh, () -> ([S(0), S(1)])>, sbp.placement = #sbp.placement<stage = 0, mesh = @mesh>} : tensor<8x16xf32>
  return %w : tensor<8x16xf32>
}
