// RUN: autoddl-opt %s -split-input-file -sbp-fuse-activations | FileCheck %s

// GELU as an exporter writes it before opset 20: x * (1 + erf(x / sqrt 2)) * 0.5.
// CHECK-LABEL: func.func @erf_gelu
// CHECK-NEXT: %[[G:.*]] = sbp.gelu %arg0 {approximate = "none"}
// CHECK-NEXT: return %[[G]]
func.func @erf_gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = sbp.constant dense<1.41421354> : tensor<f32>
  %one = sbp.constant dense<1.0> : tensor<f32>
  %half = sbp.constant dense<0.5> : tensor<f32>
  %d = sbp.primitive "Div"(%x, %sqrt2) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = sbp.primitive "Erf"(%d) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = sbp.primitive "Add"(%e, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = sbp.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = sbp.primitive "Mul"(%m, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// The halving first: (x * 0.5) * (1 + erf(x * (1/sqrt 2))).
// CHECK-LABEL: func.func @erf_gelu_half_first
// CHECK-NEXT: sbp.gelu %arg0 {approximate = "none"}
// CHECK-NEXT: return
func.func @erf_gelu_half_first(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %rsqrt2 = sbp.constant dense<0.707106769> : tensor<f32>
  %one = sbp.constant dense<1.0> : tensor<f32>
  %half = sbp.constant dense<0.5> : tensor<f32>
  %d = sbp.primitive "Mul"(%x, %rsqrt2) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = sbp.primitive "Erf"(%d) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = sbp.primitive "Add"(%one, %e) : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %h = sbp.primitive "Mul"(%half, %x) : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = sbp.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// GPT-2's tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
// CHECK-LABEL: func.func @tanh_gelu
// CHECK-NEXT: sbp.gelu %arg0 {approximate = "tanh"}
// CHECK-NEXT: return
func.func @tanh_gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %three = sbp.constant dense<3.0> : tensor<f32>
  %c = sbp.constant dense<0.044715> : tensor<f32>
  %s = sbp.constant dense<0.797884583> : tensor<f32>
  %one = sbp.constant dense<1.0> : tensor<f32>
  %half = sbp.constant dense<0.5> : tensor<f32>
  %p = sbp.primitive "Pow"(%x, %three) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %q = sbp.primitive "Mul"(%c, %p) : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = sbp.add %x, %q : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %u = sbp.primitive "Mul"(%r, %s) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %t = sbp.primitive "Tanh"(%u) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = sbp.primitive "Add"(%t, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %h = sbp.primitive "Mul"(%x, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = sbp.mul %h, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Near miss: erf(x / 2) is not GELU's; everything stays.
// CHECK-LABEL: func.func @erf_wrong_constant
// CHECK-NOT: sbp.gelu
// CHECK: sbp.primitive "Erf"
func.func @erf_wrong_constant(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %two = sbp.constant dense<2.0> : tensor<f32>
  %one = sbp.constant dense<1.0> : tensor<f32>
  %half = sbp.constant dense<0.5> : tensor<f32>
  %d = sbp.primitive "Div"(%x, %two) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = sbp.primitive "Erf"(%d) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = sbp.primitive "Add"(%e, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = sbp.mul %x, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = sbp.primitive "Mul"(%m, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// x * sigmoid(x) is SiLU.
// CHECK-LABEL: func.func @silu
// CHECK-NEXT: sbp.silu %arg0
// CHECK-NEXT: return
func.func @silu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = sbp.primitive "Sigmoid"(%x) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = sbp.mul %s, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Llama's MLP: silu(gate) * up is SwiGLU.
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT: sbp.swiglu %arg0, %arg1
// CHECK-NEXT: return
func.func @swiglu(%gate: tensor<2x8xf32>, %up: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = sbp.primitive "Sigmoid"(%gate) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %g = sbp.primitive "Mul"(%gate, %s) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = sbp.mul %g, %up : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Near miss: x * sigmoid(y) is no SiLU.
// CHECK-LABEL: func.func @sigmoid_of_another
// CHECK-NOT: sbp.silu
// CHECK: sbp.primitive "Sigmoid"
func.func @sigmoid_of_another(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = sbp.primitive "Sigmoid"(%y) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %z = sbp.mul %x, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %z : tensor<2x8xf32>
}
