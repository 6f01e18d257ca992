// RUN: autoddl-opt %s -split-input-file -sbp-fuse-rotary | FileCheck %s

// Llama's apply_rotary_pos_emb on the head view: q·cos + rotate_half(q)·sin,
// the tables constant for positions 0..T-1 with theta 10000.
// CHECK-LABEL: func.func @rotary
// CHECK: %[[R:.*]] = sbp.rotary %arg0 {head_dim = 8 : i64, num_heads = 2 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: %[[S:.*]] = sbp.reshape %[[R]] {shape = array<i64: 2, 4, 2, 8>}
// CHECK-NEXT: %[[T:.*]] = sbp.transpose %[[S]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: return %[[T]]
func.func @rotary(%q: tensor<2x4x16xf32>) -> tensor<2x2x4x8xf32> {
  %cos = sbp.constant dense<[[[1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00], [5.40302306e-01, 9.95004165e-01, 9.99950000e-01, 9.99999500e-01, 5.40302306e-01, 9.95004165e-01, 9.99950000e-01, 9.99999500e-01], [-4.16146837e-01, 9.80066578e-01, 9.99800007e-01, 9.99998000e-01, -4.16146837e-01, 9.80066578e-01, 9.99800007e-01, 9.99998000e-01], [-9.89992497e-01, 9.55336489e-01, 9.99550034e-01, 9.99995500e-01, -9.89992497e-01, 9.55336489e-01, 9.99550034e-01, 9.99995500e-01]]]> : tensor<1x4x8xf32>
  %sin = sbp.constant dense<[[[0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00], [8.41470985e-01, 9.98334166e-02, 9.99983333e-03, 9.99999833e-04, 8.41470985e-01, 9.98334166e-02, 9.99983333e-03, 9.99999833e-04], [9.09297427e-01, 1.98669331e-01, 1.99986667e-02, 1.99999867e-03, 9.09297427e-01, 1.98669331e-01, 1.99986667e-02, 1.99999867e-03], [1.41120008e-01, 2.95520207e-01, 2.99955002e-02, 2.99999550e-03, 1.41120008e-01, 2.95520207e-01, 2.99955002e-02, 2.99999550e-03]]]> : tensor<1x4x8xf32>
  %zero = sbp.constant dense<0> : tensor<1xi64>
  %half = sbp.constant dense<4> : tensor<1xi64>
  %end = sbp.constant dense<9223372036854775807> : tensor<1xi64>
  %last = sbp.constant dense<-1> : tensor<1xi64>
  %one = sbp.constant dense<1> : tensor<1xi64>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %cu = sbp.primitive "Unsqueeze"(%cos, %one) : (tensor<1x4x8xf32>, tensor<1xi64>) -> tensor<1x1x4x8xf32>
  %su = sbp.primitive "Unsqueeze"(%sin, %one) : (tensor<1x4x8xf32>, tensor<1xi64>) -> tensor<1x1x4x8xf32>
  %x1 = sbp.primitive "Slice"(%q4, %zero, %half, %last, %one) : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %x2 = sbp.primitive "Slice"(%q4, %half, %end, %last, %one) : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %n = sbp.primitive "Neg"(%x2) : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %rh = sbp.primitive "Concat"(%n, %x1) {axis = -1 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x8xf32>
  %qc = sbp.primitive "Mul"(%q4, %cu) : (tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %qs = sbp.primitive "Mul"(%rh, %su) : (tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %y = sbp.add %qc, %qs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// theta is read from the table (Llama 3: 500000).
// CHECK-LABEL: func.func @rotary_llama3_theta
// CHECK: sbp.rotary %arg0 {head_dim = 8 : i64, num_heads = 2 : i64, theta = 5.000000e+05 : f64}
func.func @rotary_llama3_theta(%q: tensor<2x4x16xf32>) -> tensor<2x2x4x8xf32> {
  %cos = sbp.constant dense<[[[1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00], [5.40302306e-01, 9.99292977e-01, 9.99999000e-01, 9.99999999e-01, 5.40302306e-01, 9.99292977e-01, 9.99999000e-01, 9.99999999e-01], [-4.16146837e-01, 9.97172906e-01, 9.99996000e-01, 9.99999994e-01, -4.16146837e-01, 9.97172906e-01, 9.99996000e-01, 9.99999994e-01], [-9.89992497e-01, 9.93642786e-01, 9.99991000e-01, 9.99999987e-01, -9.89992497e-01, 9.93642786e-01, 9.99991000e-01, 9.99999987e-01]]]> : tensor<1x4x8xf32>
  %sin = sbp.constant dense<[[[0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00], [8.41470985e-01, 3.75971677e-02, 1.41421309e-03, 5.31829589e-05, 8.41470985e-01, 3.75971677e-02, 1.41421309e-03, 5.31829589e-05], [9.09297427e-01, 7.51411713e-02, 2.82842335e-03, 1.06365918e-04, 9.09297427e-01, 7.51411713e-02, 2.82842335e-03, 1.06365918e-04], [1.41120008e-01, 1.12578922e-01, 4.24262796e-03, 1.59548876e-04, 1.41120008e-01, 1.12578922e-01, 4.24262796e-03, 1.59548876e-04]]]> : tensor<1x4x8xf32>
  %zero = sbp.constant dense<0> : tensor<1xi64>
  %half = sbp.constant dense<4> : tensor<1xi64>
  %end = sbp.constant dense<9223372036854775807> : tensor<1xi64>
  %last = sbp.constant dense<-1> : tensor<1xi64>
  %one = sbp.constant dense<1> : tensor<1xi64>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %cu = sbp.primitive "Unsqueeze"(%cos, %one) : (tensor<1x4x8xf32>, tensor<1xi64>) -> tensor<1x1x4x8xf32>
  %su = sbp.primitive "Unsqueeze"(%sin, %one) : (tensor<1x4x8xf32>, tensor<1xi64>) -> tensor<1x1x4x8xf32>
  %x1 = sbp.primitive "Slice"(%q4, %zero, %half, %last, %one) : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %x2 = sbp.primitive "Slice"(%q4, %half, %end, %last, %one) : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %n = sbp.primitive "Neg"(%x2) : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %rh = sbp.primitive "Concat"(%n, %x1) {axis = -1 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x8xf32>
  %qc = sbp.primitive "Mul"(%q4, %cu) : (tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %qs = sbp.primitive "Mul"(%rh, %su) : (tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %y = sbp.add %qc, %qs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Near miss: tables for positions 1..T (a cache offset) are not the ones
// sbp.rotary applies; everything stays.
// CHECK-LABEL: func.func @positions_from_one
// CHECK-NOT: sbp.rotary
// CHECK: sbp.primitive "Concat"
func.func @positions_from_one(%q: tensor<2x4x16xf32>) -> tensor<2x2x4x8xf32> {
  %cos = sbp.constant dense<[[[5.40302306e-01, 9.95004165e-01, 9.99950000e-01, 9.99999500e-01, 5.40302306e-01, 9.95004165e-01, 9.99950000e-01, 9.99999500e-01], [-4.16146837e-01, 9.80066578e-01, 9.99800007e-01, 9.99998000e-01, -4.16146837e-01, 9.80066578e-01, 9.99800007e-01, 9.99998000e-01], [-9.89992497e-01, 9.55336489e-01, 9.99550034e-01, 9.99995500e-01, -9.89992497e-01, 9.55336489e-01, 9.99550034e-01, 9.99995500e-01], [-6.53643621e-01, 9.21060994e-01, 9.99200107e-01, 9.99992000e-01, -6.53643621e-01, 9.21060994e-01, 9.99200107e-01, 9.99992000e-01]]]> : tensor<1x4x8xf32>
  %sin = sbp.constant dense<[[[8.41470985e-01, 9.98334166e-02, 9.99983333e-03, 9.99999833e-04, 8.41470985e-01, 9.98334166e-02, 9.99983333e-03, 9.99999833e-04], [9.09297427e-01, 1.98669331e-01, 1.99986667e-02, 1.99999867e-03, 9.09297427e-01, 1.98669331e-01, 1.99986667e-02, 1.99999867e-03], [1.41120008e-01, 2.95520207e-01, 2.99955002e-02, 2.99999550e-03, 1.41120008e-01, 2.95520207e-01, 2.99955002e-02, 2.99999550e-03], [-7.56802495e-01, 3.89418342e-01, 3.99893342e-02, 3.99998933e-03, -7.56802495e-01, 3.89418342e-01, 3.99893342e-02, 3.99998933e-03]]]> : tensor<1x4x8xf32>
  %zero = sbp.constant dense<0> : tensor<1xi64>
  %half = sbp.constant dense<4> : tensor<1xi64>
  %end = sbp.constant dense<9223372036854775807> : tensor<1xi64>
  %last = sbp.constant dense<-1> : tensor<1xi64>
  %one = sbp.constant dense<1> : tensor<1xi64>
  %qr = sbp.reshape %q {shape = array<i64: 2, 4, 2, 8>} : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q4 = sbp.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %cu = sbp.primitive "Unsqueeze"(%cos, %one) : (tensor<1x4x8xf32>, tensor<1xi64>) -> tensor<1x1x4x8xf32>
  %su = sbp.primitive "Unsqueeze"(%sin, %one) : (tensor<1x4x8xf32>, tensor<1xi64>) -> tensor<1x1x4x8xf32>
  %x1 = sbp.primitive "Slice"(%q4, %zero, %half, %last, %one) : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %x2 = sbp.primitive "Slice"(%q4, %half, %end, %last, %one) : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %n = sbp.primitive "Neg"(%x2) : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %rh = sbp.primitive "Concat"(%n, %x1) {axis = -1 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x8xf32>
  %qc = sbp.primitive "Mul"(%q4, %cu) : (tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %qs = sbp.primitive "Mul"(%rh, %su) : (tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %y = sbp.add %qc, %qs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}
