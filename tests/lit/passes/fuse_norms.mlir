// RUN: autoddl-opt %s -split-input-file -sbp-fuse-norms | FileCheck %s

// LayerNorm: (x - mean x) / sqrt(mean((x - mean x)^2) + eps) * gamma + beta,
// ReduceMean's axes as opset 18 gives them (an input).
// CHECK-LABEL: func.func @layernorm
// CHECK: %[[G:.*]] = sbp.parameter "ln.weight"
// CHECK: %[[B:.*]] = sbp.parameter "ln.bias"
// CHECK-NEXT: %[[Y:.*]] = sbp.layernorm %arg0, %[[G]], %[[B]] {epsilon = 1.000000e-05 : f64}
// CHECK-NEXT: return %[[Y]]
func.func @layernorm(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %gamma = sbp.parameter "ln.weight" {init = "ones"} : tensor<8xf32>
  %beta = sbp.parameter "ln.bias" {init = "zeros"} : tensor<8xf32>
  %axes = sbp.constant dense<-1> : tensor<1xi64>
  %two = sbp.constant dense<2.0> : tensor<f32>
  %eps = sbp.constant dense<1.0e-5> : tensor<f32>
  %mu = sbp.primitive "ReduceMean"(%x, %axes) : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %d = sbp.primitive "Sub"(%x, %mu) : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %sq = sbp.primitive "Pow"(%d, %two) : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %var = sbp.primitive "ReduceMean"(%sq, %axes) : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %ve = sbp.primitive "Add"(%var, %eps) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %s = sbp.primitive "Sqrt"(%ve) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = sbp.primitive "Div"(%d, %s) : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %g = sbp.primitive "Mul"(%n, %gamma) : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y = sbp.bias_add %g, %beta : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// LayerNorm without beta, the square as d * d, axes as an attribute (opset 13).
// CHECK-LABEL: func.func @layernorm_no_beta
// CHECK: sbp.layernorm %arg0, %{{.*}} {epsilon
// CHECK-NEXT: return
func.func @layernorm_no_beta(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %gamma = sbp.parameter "ln.weight" {init = "ones"} : tensor<8xf32>
  %eps = sbp.constant dense<1.0e-5> : tensor<f32>
  %mu = sbp.primitive "ReduceMean"(%x) {axes = array<i64: 1>, keepdims = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = sbp.primitive "Sub"(%x, %mu) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq = sbp.mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %var = sbp.primitive "ReduceMean"(%sq) {axes = array<i64: -1>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = sbp.primitive "Add"(%eps, %var) : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = sbp.primitive "Sqrt"(%ve) : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = sbp.primitive "Div"(%d, %s) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = sbp.primitive "Mul"(%gamma, %n) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Llama's RMSNorm as the dynamo exporter writes it:
// weight * (x * reciprocal(sqrt(mean(x^2) + eps))).
// CHECK-LABEL: func.func @rmsnorm
// CHECK: %[[W:.*]] = sbp.parameter "norm.weight"
// CHECK-NEXT: %[[Y:.*]] = sbp.rmsnorm %arg0, %[[W]] {epsilon = 9.9999999999999995E-7 : f64}
// CHECK-NEXT: return %[[Y]]
func.func @rmsnorm(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = sbp.parameter "norm.weight" {init = "ones"} : tensor<8xf32>
  %axes = sbp.constant dense<-1> : tensor<1xi64>
  %two = sbp.constant dense<2.0> : tensor<f32>
  %eps = sbp.constant dense<1.0e-6> : tensor<f32>
  %sq = sbp.primitive "Pow"(%x, %two) : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %var = sbp.primitive "ReduceMean"(%sq, %axes) : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %ve = sbp.primitive "Add"(%var, %eps) : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %s = sbp.primitive "Sqrt"(%ve) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %r = sbp.primitive "Reciprocal"(%s) : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = sbp.primitive "Mul"(%x, %r) : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %y = sbp.primitive "Mul"(%w, %n) : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// RMSNorm with an Rsqrt.
// CHECK-LABEL: func.func @rmsnorm_rsqrt
// CHECK: sbp.rmsnorm %arg0
// CHECK-NEXT: return
func.func @rmsnorm_rsqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = sbp.parameter "norm.weight" {init = "ones"} : tensor<8xf32>
  %axes = sbp.constant dense<-1> : tensor<1xi64>
  %eps = sbp.constant dense<1.0e-6> : tensor<f32>
  %sq = sbp.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %var = sbp.primitive "ReduceMean"(%sq, %axes) : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<4x1xf32>
  %ve = sbp.primitive "Add"(%var, %eps) : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = sbp.primitive "Rsqrt"(%ve) : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = sbp.primitive "Mul"(%r, %x) : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = sbp.primitive "Mul"(%n, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Near miss: the mean over axis 1 of [B,T,C] is not a norm over features.
// CHECK-LABEL: func.func @mean_over_sequence
// CHECK-NOT: sbp.rmsnorm
// CHECK: sbp.primitive "Sqrt"
func.func @mean_over_sequence(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = sbp.parameter "norm.weight" {init = "ones"} : tensor<8xf32>
  %axes = sbp.constant dense<1> : tensor<1xi64>
  %two = sbp.constant dense<2.0> : tensor<f32>
  %eps = sbp.constant dense<1.0e-6> : tensor<f32>
  %sq = sbp.primitive "Pow"(%x, %two) : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %var = sbp.primitive "ReduceMean"(%sq, %axes) : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x1x8xf32>
  %ve = sbp.primitive "Add"(%var, %eps) : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %s = sbp.primitive "Sqrt"(%ve) : (tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %n = sbp.primitive "Div"(%x, %s) : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  %y = sbp.primitive "Mul"(%n, %w) : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// A parameter nothing reads stays (the parameter count is the model's); the
// primitives a fusion leaves unused go.
// CHECK-LABEL: func.func @unused_parameter_kept
// CHECK-NEXT: sbp.parameter "unused"
// CHECK-NEXT: return
func.func @unused_parameter_kept(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = sbp.parameter "unused" {init = "ones"} : tensor<8xf32>
  return %x : tensor<4x8xf32>
}
