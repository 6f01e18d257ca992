// RUN: autoddl-opt %s -sbp-fuse-norms -sbp-fuse-activations -sbp-fuse-rotary -sbp-fuse-attention | FileCheck %s

// One layer of tiny-llama (examples/models/tiny-llama.json) as transformers'
// LlamaDecoderLayer exports it, all four fusion passes in a row: the op kinds
// come out as `autoddl import tiny-llama` emits them for the layer
// (rmsnorm, 3 linear, 2 rotary, attention, linear, add, rmsnorm, 2 linear,
// swiglu, linear, add), with the same attributes.
// CHECK-LABEL: func.func @llama_layer
// CHECK-COUNT-9: sbp.parameter
// CHECK-NEXT: %[[N1:.*]] = sbp.rmsnorm %arg0, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64}
// CHECK-NEXT: %[[Q:.*]] = sbp.linear %[[N1]]
// CHECK-NEXT: %[[K:.*]] = sbp.linear %[[N1]]
// CHECK-NEXT: %[[V:.*]] = sbp.linear %[[N1]]
// CHECK-NEXT: %[[RQ:.*]] = sbp.rotary %[[Q]] {head_dim = 16 : i64, num_heads = 4 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: %[[RK:.*]] = sbp.rotary %[[K]] {head_dim = 16 : i64, num_heads = 2 : i64, theta = 1.000000e+04 : f64}
// CHECK-NEXT: %[[A:.*]] = sbp.attention %[[RQ]], %[[RK]], %[[V]] {causal = true, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT: %[[O:.*]] = sbp.linear %[[A]]
// CHECK-NEXT: %[[R1:.*]] = sbp.add %arg0, %[[O]]
// CHECK-NEXT: %[[N2:.*]] = sbp.rmsnorm %[[R1]]
// CHECK-NEXT: %[[GT:.*]] = sbp.linear %[[N2]]
// CHECK-NEXT: %[[UP:.*]] = sbp.linear %[[N2]]
// CHECK-NEXT: %[[SW:.*]] = sbp.swiglu %[[GT]], %[[UP]]
// CHECK-NEXT: %[[DN:.*]] = sbp.linear %[[SW]]
// CHECK-NEXT: %[[R2:.*]] = sbp.add %[[R1]], %[[DN]]
// CHECK-NEXT: return %[[R2]]
func.func @llama_layer(%x: tensor<2x4x64xf32>) -> tensor<2x4x64xf32> {
  %ln1 = sbp.parameter "model.layers.0.input_layernorm.weight" {init = "ones"} : tensor<64xf32>
  %wq = sbp.parameter "model.layers.0.self_attn.q_proj.weight" {init = "normal"} : tensor<64x64xf32>
  %wk = sbp.parameter "model.layers.0.self_attn.k_proj.weight" {init = "normal"} : tensor<32x64xf32>
  %wv = sbp.parameter "model.layers.0.self_attn.v_proj.weight" {init = "normal"} : tensor<32x64xf32>
  %wo = sbp.parameter "model.layers.0.self_attn.o_proj.weight" {init = "normal"} : tensor<64x64xf32>
  %ln2 = sbp.parameter "model.layers.0.post_attention_layernorm.weight" {init = "ones"} : tensor<64xf32>
  %wg = sbp.parameter "model.layers.0.mlp.gate_proj.weight" {init = "normal"} : tensor<176x64xf32>
  %wu = sbp.parameter "model.layers.0.mlp.up_proj.weight" {init = "normal"} : tensor<176x64xf32>
  %wd = sbp.parameter "model.layers.0.mlp.down_proj.weight" {init = "normal"} : tensor<64x176xf32>
  %axes = sbp.constant dense<-1> : tensor<1xi64>
  %two = sbp.constant dense<2.0> : tensor<f32>
  %eps = sbp.constant dense<1.0e-6> : tensor<f32>
  %cos = sbp.constant dense<[[[1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00, 1.00000000e+00], [5.40302306e-01, 9.50415280e-01, 9.95004165e-01, 9.99500042e-01, 9.99950000e-01, 9.99995000e-01, 9.99999500e-01, 9.99999950e-01, 5.40302306e-01, 9.50415280e-01, 9.95004165e-01, 9.99500042e-01, 9.99950000e-01, 9.99995000e-01, 9.99999500e-01, 9.99999950e-01], [-4.16146837e-01, 8.06578410e-01, 9.80066578e-01, 9.98000667e-01, 9.99800007e-01, 9.99980000e-01, 9.99998000e-01, 9.99999800e-01, -4.16146837e-01, 8.06578410e-01, 9.80066578e-01, 9.98000667e-01, 9.99800007e-01, 9.99980000e-01, 9.99998000e-01, 9.99999800e-01], [-9.89992497e-01, 5.82753611e-01, 9.55336489e-01, 9.95503374e-01, 9.99550034e-01, 9.99955000e-01, 9.99995500e-01, 9.99999550e-01, -9.89992497e-01, 5.82753611e-01, 9.55336489e-01, 9.95503374e-01, 9.99550034e-01, 9.99955000e-01, 9.99995500e-01, 9.99999550e-01]]]> : tensor<1x4x16xf32>
  %sin = sbp.constant dense<[[[0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00, 0.00000000e+00], [8.41470985e-01, 3.10983593e-01, 9.98334166e-02, 3.16175064e-02, 9.99983333e-03, 3.16227239e-03, 9.99999833e-04, 3.16227761e-04, 8.41470985e-01, 3.10983593e-01, 9.98334166e-02, 3.16175064e-02, 9.99983333e-03, 3.16227239e-03, 9.99999833e-04, 3.16227761e-04], [9.09297427e-01, 5.91127117e-01, 1.98669331e-01, 6.32033979e-02, 1.99986667e-02, 6.32451316e-03, 1.99999867e-03, 6.32455490e-04, 9.09297427e-01, 5.91127117e-01, 1.98669331e-01, 6.32033979e-02, 1.99986667e-02, 6.32451316e-03, 1.99999867e-03, 6.32455490e-04], [1.41120008e-01, 8.12648897e-01, 2.95520207e-01, 9.47260913e-02, 2.99955002e-02, 9.48669068e-03, 2.99999550e-03, 9.48683156e-04, 1.41120008e-01, 8.12648897e-01, 2.95520207e-01, 9.47260913e-02, 2.99955002e-02, 9.48669068e-03, 2.99999550e-03, 9.48683156e-04]]]> : tensor<1x4x16xf32>
  %zero = sbp.constant dense<0> : tensor<1xi64>
  %half = sbp.constant dense<8> : tensor<1xi64>
  %end = sbp.constant dense<9223372036854775807> : tensor<1xi64>
  %one = sbp.constant dense<1> : tensor<1xi64>
  %sqrtd = sbp.constant dense<4.00000000e+00> : tensor<f32>
  %mask = sbp.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kvshape = sbp.constant dense<[2, 2, 2, 4, 16]> : tensor<5xi64>
  %n1sq = sbp.primitive "Pow"(%x, %two) : (tensor<2x4x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %n1var = sbp.primitive "ReduceMean"(%n1sq, %axes) : (tensor<2x4x64xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %n1ve = sbp.primitive "Add"(%n1var, %eps) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %n1s = sbp.primitive "Sqrt"(%n1ve) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n1r = sbp.primitive "Reciprocal"(%n1s) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n1n = sbp.primitive "Mul"(%x, %n1r) : (tensor<2x4x64xf32>, tensor<2x4x1xf32>) -> tensor<2x4x64xf32>
  %n1 = sbp.primitive "Mul"(%ln1, %n1n) : (tensor<64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %q = sbp.linear %n1, %wq {transpose_weight = true} : (tensor<2x4x64xf32>, tensor<64x64xf32>) -> tensor<2x4x64xf32>
  %k = sbp.linear %n1, %wk {transpose_weight = true} : (tensor<2x4x64xf32>, tensor<32x64xf32>) -> tensor<2x4x32xf32>
  %v = sbp.linear %n1, %wv {transpose_weight = true} : (tensor<2x4x64xf32>, tensor<32x64xf32>) -> tensor<2x4x32xf32>
  %q4r = sbp.reshape %q {shape = array<i64: 2, 4, 4, 16>} : (tensor<2x4x64xf32>) -> tensor<2x4x4x16xf32>
  %q4 = sbp.transpose %q4r {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %k4r = sbp.reshape %k {shape = array<i64: 2, 4, 2, 16>} : (tensor<2x4x32xf32>) -> tensor<2x4x2x16xf32>
  %k4 = sbp.transpose %k4r {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x16xf32>) -> tensor<2x2x4x16xf32>
  %v4r = sbp.reshape %v {shape = array<i64: 2, 4, 2, 16>} : (tensor<2x4x32xf32>) -> tensor<2x4x2x16xf32>
  %v4 = sbp.transpose %v4r {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x16xf32>) -> tensor<2x2x4x16xf32>
  %qrcu = sbp.primitive "Unsqueeze"(%cos, %one) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %qrsu = sbp.primitive "Unsqueeze"(%sin, %one) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %qrx1 = sbp.primitive "Slice"(%q4, %zero, %half, %axes, %one) : (tensor<2x4x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x4x4x8xf32>
  %qrx2 = sbp.primitive "Slice"(%q4, %half, %end, %axes, %one) : (tensor<2x4x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x4x4x8xf32>
  %qrn = sbp.primitive "Neg"(%qrx2) : (tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %qrrh = sbp.primitive "Concat"(%qrn, %qrx1) {axis = -1 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x16xf32>
  %qrc = sbp.primitive "Mul"(%q4, %qrcu) : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %qrs = sbp.primitive "Mul"(%qrrh, %qrsu) : (tensor<2x4x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x4x4x16xf32>
  %qr = sbp.primitive "Add"(%qrc, %qrs) : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %krcu = sbp.primitive "Unsqueeze"(%cos, %one) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %krsu = sbp.primitive "Unsqueeze"(%sin, %one) : (tensor<1x4x16xf32>, tensor<1xi64>) -> tensor<1x1x4x16xf32>
  %krx1 = sbp.primitive "Slice"(%k4, %zero, %half, %axes, %one) : (tensor<2x2x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x8xf32>
  %krx2 = sbp.primitive "Slice"(%k4, %half, %end, %axes, %one) : (tensor<2x2x4x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x8xf32>
  %krn = sbp.primitive "Neg"(%krx2) : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %krrh = sbp.primitive "Concat"(%krn, %krx1) {axis = -1 : i64} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x16xf32>
  %krc = sbp.primitive "Mul"(%k4, %krcu) : (tensor<2x2x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x2x4x16xf32>
  %krs = sbp.primitive "Mul"(%krrh, %krsu) : (tensor<2x2x4x16xf32>, tensor<1x1x4x16xf32>) -> tensor<2x2x4x16xf32>
  %kr = sbp.primitive "Add"(%krc, %krs) : (tensor<2x2x4x16xf32>, tensor<2x2x4x16xf32>) -> tensor<2x2x4x16xf32>
  %kxu = sbp.primitive "Unsqueeze"(%kr, %half) : (tensor<2x2x4x16xf32>, tensor<1xi64>) -> tensor<2x2x1x4x16xf32>
  %kxe = sbp.primitive "Expand"(%kxu, %kvshape) : (tensor<2x2x1x4x16xf32>, tensor<5xi64>) -> tensor<2x2x2x4x16xf32>
  %kx = sbp.reshape %kxe {shape = array<i64: 2, 4, 4, 16>} : (tensor<2x2x2x4x16xf32>) -> tensor<2x4x4x16xf32>
  %vxu = sbp.primitive "Unsqueeze"(%v4, %half) : (tensor<2x2x4x16xf32>, tensor<1xi64>) -> tensor<2x2x1x4x16xf32>
  %vxe = sbp.primitive "Expand"(%vxu, %kvshape) : (tensor<2x2x1x4x16xf32>, tensor<5xi64>) -> tensor<2x2x2x4x16xf32>
  %vx = sbp.reshape %vxe {shape = array<i64: 2, 4, 4, 16>} : (tensor<2x2x2x4x16xf32>) -> tensor<2x4x4x16xf32>
  %kt = sbp.transpose %kx {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x16x4xf32>
  %sc = sbp.matmul %qr, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %scs = sbp.primitive "Div"(%sc, %sqrtd) : (tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
  %scm = sbp.primitive "Add"(%scs, %mask) : (tensor<2x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = sbp.softmax %scm {axis = -1 : i64} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %o = sbp.matmul %p, %vx : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %ot = sbp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %att = sbp.reshape %ot {shape = array<i64: 2, 4, 64>} : (tensor<2x4x4x16xf32>) -> tensor<2x4x64xf32>
  %ao = sbp.linear %att, %wo {transpose_weight = true} : (tensor<2x4x64xf32>, tensor<64x64xf32>) -> tensor<2x4x64xf32>
  %r1 = sbp.add %x, %ao : (tensor<2x4x64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %n2sq = sbp.primitive "Pow"(%r1, %two) : (tensor<2x4x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %n2var = sbp.primitive "ReduceMean"(%n2sq, %axes) : (tensor<2x4x64xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %n2ve = sbp.primitive "Add"(%n2var, %eps) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %n2s = sbp.primitive "Sqrt"(%n2ve) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n2r = sbp.primitive "Reciprocal"(%n2s) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n2n = sbp.primitive "Mul"(%r1, %n2r) : (tensor<2x4x64xf32>, tensor<2x4x1xf32>) -> tensor<2x4x64xf32>
  %n2 = sbp.primitive "Mul"(%ln2, %n2n) : (tensor<64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %g = sbp.linear %n2, %wg {transpose_weight = true} : (tensor<2x4x64xf32>, tensor<176x64xf32>) -> tensor<2x4x176xf32>
  %u = sbp.linear %n2, %wu {transpose_weight = true} : (tensor<2x4x64xf32>, tensor<176x64xf32>) -> tensor<2x4x176xf32>
  %gs = sbp.primitive "Sigmoid"(%g) : (tensor<2x4x176xf32>) -> tensor<2x4x176xf32>
  %silu = sbp.primitive "Mul"(%g, %gs) : (tensor<2x4x176xf32>, tensor<2x4x176xf32>) -> tensor<2x4x176xf32>
  %sw = sbp.mul %silu, %u : (tensor<2x4x176xf32>, tensor<2x4x176xf32>) -> tensor<2x4x176xf32>
  %dn = sbp.linear %sw, %wd {transpose_weight = true} : (tensor<2x4x176xf32>, tensor<64x176xf32>) -> tensor<2x4x64xf32>
  %r2 = sbp.add %r1, %dn : (tensor<2x4x64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  return %r2 : tensor<2x4x64xf32>
}
