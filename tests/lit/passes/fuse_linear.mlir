// RUN: autoddl-opt %s -split-input-file -sbp-fuse-linear | FileCheck %s

// GPT-2's Conv1D as exported: reshape [B·T,K], a 2-D linear, reshape back.
// CHECK-LABEL: func.func @flattened_linear
// CHECK-NEXT: %[[Y:.*]] = sbp.linear %arg0, %arg1, %arg2 {transpose_weight = false} : (tensor<2x3x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
// CHECK-NEXT: return %[[Y]]
func.func @flattened_linear(%x: tensor<2x3x4xf32>, %w: tensor<4x6xf32>, %b: tensor<6xf32>) -> tensor<2x3x6xf32> {
  %f = sbp.reshape %x {shape = array<i64: -1, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %l = sbp.linear %f, %w, %b {transpose_weight = false} : (tensor<6x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<6x6xf32>
  %y = sbp.reshape %l {shape = array<i64: 2, 3, 6>} : (tensor<6x6xf32>) -> tensor<2x3x6xf32>
  return %y : tensor<2x3x6xf32>
}

// -----

// Reshaped back to another leading shape: not the same linear, kept.
// CHECK-LABEL: func.func @other_leading_shape
// CHECK: sbp.reshape
// CHECK: sbp.linear
// CHECK: sbp.reshape
func.func @other_leading_shape(%x: tensor<2x3x4xf32>, %w: tensor<4x6xf32>) -> tensor<3x2x6xf32> {
  %f = sbp.reshape %x {shape = array<i64: -1, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %l = sbp.linear %f, %w {transpose_weight = false} : (tensor<6x4xf32>, tensor<4x6xf32>) -> tensor<6x6xf32>
  %y = sbp.reshape %l {shape = array<i64: 3, 2, 6>} : (tensor<6x6xf32>) -> tensor<3x2x6xf32>
  return %y : tensor<3x2x6xf32>
}

// -----

// A reshape to the shape its operand has (view(-1, T) of [1,T] ids) goes.
// CHECK-LABEL: func.func @identity_reshape
// CHECK-NEXT: return %arg0
func.func @identity_reshape(%ids: tensor<1x16xi32>) -> tensor<1x16xi32> {
  %r = sbp.reshape %ids {shape = array<i64: -1, 16>} : (tensor<1x16xi32>) -> tensor<1x16xi32>
  return %r : tensor<1x16xi32>
}
