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

// -----

// Q·Kᵀ as one matmul with transpose_b, the mask added on the left.
// CHECK-LABEL: func.func @transpose_b_scores
// CHECK-NEXT: sbp.attention %arg0, %arg1, %arg2 {causal = true, head_dim = 8 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: return
func.func @transpose_b_scores(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %rsqrtd = sbp.constant dense<0.353553385> : tensor<f32>
  %mask = sbp.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k4 = sbp.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %vr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %s = sbp.matmul %q4, %k4 {transpose_b = true} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %sc = sbp.primitive "Mul"(%rsqrtd, %s) : (tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %m = sbp.primitive "Add"(%mask, %sc) : (tensor<4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = sbp.softmax %m {axis = 3 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %y = sbp.reshape %ot {shape = array<i64: 2, 4, 16>} : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Near miss: the heads are merged back as [B,H*D] per step (transpose
// (0,1,2,3) kept), not [B,T,H*D]; nothing fuses.
// CHECK-LABEL: func.func @heads_not_merged_back
// CHECK-NOT: sbp.attention
// CHECK: sbp.softmax
func.func @heads_not_merged_back(%q: tensor<2x4x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>) -> tensor<2x2x32xf32> {
  %rsqrtd = sbp.constant dense<0.353553385> : tensor<f32>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kr = sbp.reshape %k {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k4 = sbp.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %vr = sbp.reshape %v {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %s = sbp.matmul %q4, %k4 {transpose_b = true} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %sc = sbp.primitive "Mul"(%s, %rsqrtd) : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = sbp.softmax %sc {axis = -1 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = sbp.matmul %p, %v4 : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %y = sbp.reshape %o {shape = array<i64: 2, 2, 32>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x32xf32>
  return %y : tensor<2x2x32xf32>
}

// -----

// torch's scaled_dot_product_attention as the dynamo exporter writes it: Q
// and Kᵀ each scaled by √(1/√D), Kᵀ as reshape [B·H,T,D] -> transpose(0,2,1)
// -> reshape [B,H,D,T], the mask an Add of a [1,1,T,T] constant, and
// Where(IsNaN(p), 0, p) after the softmax.
// CHECK-LABEL: func.func @sdpa_export
// CHECK-NEXT: sbp.attention %arg0, %arg1, %arg2 {causal = true, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: return
func.func @sdpa_export(%q: tensor<1x3x8xf32>, %k: tensor<1x3x8xf32>, %v: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %half = sbp.constant dense<0.707106769> : tensor<f32>
  %zero = sbp.constant dense<0.0> : tensor<f32>
  %mask = sbp.constant dense<[[[[0.0, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, -3.40282347e+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %qr = sbp.reshape %q {shape = array<i64: 1, 3, 2, 4>} : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x4xf32>) -> tensor<1x2x3x4xf32>
  %kr = sbp.reshape %k {shape = array<i64: 1, 3, 2, 4>} : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
  %k4 = sbp.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x4xf32>) -> tensor<1x2x3x4xf32>
  %vr = sbp.reshape %v {shape = array<i64: 1, 3, 2, 4>} : (tensor<1x3x8xf32>) -> tensor<1x3x2x4xf32>
  %v4 = sbp.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x3x2x4xf32>) -> tensor<1x2x3x4xf32>
  %qs = sbp.primitive "Mul"(%q4, %half) : (tensor<1x2x3x4xf32>, tensor<f32>) -> tensor<1x2x3x4xf32>
  %k3 = sbp.reshape %k4 {shape = array<i64: -1, 3, 4>} : (tensor<1x2x3x4xf32>) -> tensor<2x3x4xf32>
  %kt3 = sbp.transpose %k3 {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %kt = sbp.reshape %kt3 {shape = array<i64: 1, 2, 4, 3>} : (tensor<2x4x3xf32>) -> tensor<1x2x4x3xf32>
  %ks = sbp.primitive "Mul"(%kt, %half) : (tensor<1x2x4x3xf32>, tensor<f32>) -> tensor<1x2x4x3xf32>
  %s = sbp.matmul %qs, %ks : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %m = sbp.primitive "Add"(%s, %mask) : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = sbp.softmax %m {axis = -1 : i64} : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %nan = sbp.primitive "IsNaN"(%p) : (tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xi1>
  %g = sbp.primitive "Where"(%nan, %zero, %p) : (tensor<1x2x3x3xi1>, tensor<f32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %o = sbp.matmul %g, %v4 : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x3x4xf32>) -> tensor<1x3x2x4xf32>
  %y = sbp.reshape %ot {shape = array<i64: 1, 3, 8>} : (tensor<1x3x2x4xf32>) -> tensor<1x3x8xf32>
  return %y : tensor<1x3x8xf32>
}

// -----

// GPT-2's q, k and v as Slices of the fused c_attn output [.., 3C] in that
// order: the one-operand attention of the Hugging Face path. A near miss
// below (k and v swapped) keeps its three operands.
// CHECK-LABEL: func.func @packed_qkv
// CHECK-NEXT: sbp.attention %arg0 {causal = true, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: return
func.func @packed_qkv(%x: tensor<1x3x24xf32>) -> tensor<1x3x8xf32> {
  %s0 = sbp.constant dense<0> : tensor<1xi64>
  %s1 = sbp.constant dense<8> : tensor<1xi64>
  %s2 = sbp.constant dense<16> : tensor<1xi64>
  %s3 = sbp.constant dense<24> : tensor<1xi64>
  %ax = sbp.constant dense<2> : tensor<1xi64>
  %q = sbp.primitive "Slice"(%x, %s0, %s1, %ax) : (tensor<1x3x24xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x3x8xf32>
  %k = sbp.primitive "Slice"(%x, %s1, %s2, %ax) : (tensor<1x3x24xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x3x8xf32>
  %v = sbp.primitive "Slice"(%x, %s2, %s3, %ax) : (tensor<1x3x24xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x3x8xf32>
  %a = sbp.attention %q, %k, %v {causal = true, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x3x8xf32>
  return %a : tensor<1x3x8xf32>
}

// CHECK-LABEL: func.func @packed_qkv_swapped
// CHECK: sbp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal
func.func @packed_qkv_swapped(%x: tensor<1x3x24xf32>) -> tensor<1x3x8xf32> {
  %s0 = sbp.constant dense<0> : tensor<1xi64>
  %s1 = sbp.constant dense<8> : tensor<1xi64>
  %s2 = sbp.constant dense<16> : tensor<1xi64>
  %s3 = sbp.constant dense<24> : tensor<1xi64>
  %ax = sbp.constant dense<2> : tensor<1xi64>
  %q = sbp.primitive "Slice"(%x, %s0, %s1, %ax) : (tensor<1x3x24xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x3x8xf32>
  %k = sbp.primitive "Slice"(%x, %s1, %s2, %ax) : (tensor<1x3x24xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x3x8xf32>
  %v = sbp.primitive "Slice"(%x, %s2, %s3, %ax) : (tensor<1x3x24xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x3x8xf32>
  %a = sbp.attention %q, %v, %k {causal = true, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x3x8xf32>
  return %a : tensor<1x3x8xf32>
}
