// RUN: autoddl-opt %s -split-input-file -sbp-fuse-attention | FileCheck %s

// GPT-2's eager attention: heads split, Q·Kᵀ / sqrt(D), an additive causal
// mask, softmax, ·V, heads merged.
// CHECK-LABEL: func.func @causal_attention
// CHECK-NEXT: %[[A:.*]] = sbp.attention %arg0, %arg1, %arg2 {causal = true, head_dim = 8 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: return %[[A]]
func.func @causal_attention(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %sqrtd = sbp.constant dense<2.82842708> : tensor<f32>
  %mask = sbp.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k4 = sbp.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %vr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kt = sbp.transpose %k4 {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = sbp.matmul %q4, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %sc = sbp.primitive "Div"(%s, %sqrtd) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %m = sbp.primitive "Add"(%sc, %mask) : (tensor<2x2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = sbp.softmax %m {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %y = sbp.reshape %ot {shape = array<i64: 2, 4, 16>} : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// The scale after the mask, as a Mul by 1/sqrt(D); the mask a Where of a
// lower-triangular condition; Kᵀ taken in the head transpose (0,2,3,1).
// CHECK-LABEL: func.func @where_mask_scale_after
// CHECK-NEXT: sbp.attention %arg0, %arg1, %arg2 {causal = true, head_dim = 8 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: return
func.func @where_mask_scale_after(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %rsqrtd = sbp.constant dense<0.353553385> : tensor<f32>
  %cond = sbp.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %low = sbp.constant dense<-3.40282347e+38> : tensor<f32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %kt = sbp.transpose %kr {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x8x4xf32>
  %vr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %s = sbp.matmul %q4, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %m = sbp.primitive "Where"(%cond, %s, %low) : (tensor<1x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %sc = sbp.primitive "Mul"(%m, %rsqrtd) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = sbp.softmax %sc {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %y = sbp.reshape %ot {shape = array<i64: 2, 4, 16>} : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Without a mask: bidirectional attention (causal = false).
// CHECK-LABEL: func.func @unmasked_attention
// CHECK-NEXT: sbp.attention %arg0, %arg1, %arg2 {causal = false
func.func @unmasked_attention(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %sqrtd = sbp.constant dense<2.82842708> : tensor<f32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k4 = sbp.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %vr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kt = sbp.transpose %k4 {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = sbp.matmul %q4, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %sc = sbp.primitive "Div"(%s, %sqrtd) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = sbp.softmax %sc {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %y = sbp.reshape %ot {shape = array<i64: 2, 4, 16>} : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Llama's grouped-query attention: 4 query heads, 2 kv heads expanded
// (Unsqueeze, Expand, Reshape: repeat_kv) to 4.
// CHECK-LABEL: func.func @grouped_query_attention
// CHECK-NEXT: sbp.attention %arg0, %arg1, %arg2 {causal = true, head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: return
func.func @grouped_query_attention(%q: tensor<2x4x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x32xf32> {
  %sqrtd = sbp.constant dense<2.82842708> : tensor<f32>
  %mask = sbp.constant dense<[[[[0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 4, 8>} : (tensor<2x4x32xf32>) -> tensor<2x4x4x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %kgr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %kg = sbp.transpose %kgr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %vgr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %vg = sbp.transpose %vgr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %ku = sbp.primitive "Unsqueeze"(%kg) {axes = array<i64: 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x1x4x8xf32>
  %kshape = sbp.constant dense<[2, 2, 2, 4, 8]> : tensor<5xi64>
  %ke = sbp.primitive "Expand"(%ku, %kshape) : (tensor<2x2x1x4x8xf32>, tensor<5xi64>) -> tensor<2x2x2x4x8xf32>
  %k4 = sbp.reshape %ke {shape = array<i64: 2, 4, 4, 8>} : (tensor<2x2x2x4x8xf32>) -> tensor<2x4x4x8xf32>
  %vu = sbp.primitive "Unsqueeze"(%vg) {axes = array<i64: 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x1x4x8xf32>
  %vshape = sbp.constant dense<[2, 2, 2, 4, 8]> : tensor<5xi64>
  %ve = sbp.primitive "Expand"(%vu, %vshape) : (tensor<2x2x1x4x8xf32>, tensor<5xi64>) -> tensor<2x2x2x4x8xf32>
  %v4 = sbp.reshape %ve {shape = array<i64: 2, 4, 4, 8>} : (tensor<2x2x2x4x8xf32>) -> tensor<2x4x4x8xf32>
  %kt = sbp.transpose %k4 {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x4x8xf32>) -> tensor<2x4x8x4xf32>
  %s = sbp.matmul %q4, %kt : (tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x4x4xf32>
  %sc = sbp.primitive "Div"(%s, %sqrtd) : (tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
  %m = sbp.primitive "Add"(%mask, %sc) : (tensor<1x1x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = sbp.softmax %m {axis = -1 : i64} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %y = sbp.reshape %ot {shape = array<i64: 2, 4, 32>} : (tensor<2x4x4x8xf32>) -> tensor<2x4x32xf32>
  return %y : tensor<2x4x32xf32>
}

// -----

// Near miss: the mask hides the past (upper-triangular), so it is not causal
// and nothing fuses.
// CHECK-LABEL: func.func @anticausal_mask
// CHECK-NOT: sbp.attention
// CHECK: sbp.softmax
func.func @anticausal_mask(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %sqrtd = sbp.constant dense<2.82842708> : tensor<f32>
  %mask = sbp.constant dense<[[0.0, 0.0, 0.0, 0.0], [-1.0e+09, 0.0, 0.0, 0.0], [-1.0e+09, -1.0e+09, 0.0, 0.0], [-1.0e+09, -1.0e+09, -1.0e+09, 0.0]]> : tensor<4x4xf32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k4 = sbp.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %vr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kt = sbp.transpose %k4 {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = sbp.matmul %q4, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %sc = sbp.primitive "Div"(%s, %sqrtd) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %m = sbp.primitive "Add"(%sc, %mask) : (tensor<2x2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = sbp.softmax %m {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %y = sbp.reshape %ot {shape = array<i64: 2, 4, 16>} : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Near miss: a scale of 1/D is not attention's 1/sqrt(D).
// CHECK-LABEL: func.func @wrong_scale
// CHECK-NOT: sbp.attention
// CHECK: sbp.softmax
func.func @wrong_scale(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %dd = sbp.constant dense<8.0> : tensor<f32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k4 = sbp.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %vr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kt = sbp.transpose %k4 {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = sbp.matmul %q4, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %sc = sbp.primitive "Div"(%s, %dd) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = sbp.softmax %sc {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %y = sbp.reshape %ot {shape = array<i64: 2, 4, 16>} : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
