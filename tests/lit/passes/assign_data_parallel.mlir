// RUN: autoddl-opt %s -split-input-file -sbp-assign-data-parallel -verify-diagnostics | FileCheck %s
// RUN: autoddl-opt %s -split-input-file -sbp-assign-data-parallel=axis=dp -verify-diagnostics | FileCheck %s --check-prefixes=CHECK,AXIS

// Batch splits flow from the arguments to the loss; parameters stay whole; the
// other mesh axis is all-broadcast.
sbp.mesh @mesh [dp = 2, tp = 4]
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %arg0: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), B]>}
// CHECK-SAME: %arg1: tensor<8xi32> {sbp.nd = #sbp.nd<@mesh, [S(0), B]>}
func.func @mlp(%x: tensor<8x16xf32>, %targets: tensor<8xi32>) -> tensor<f32> {
  // CHECK: sbp.parameter "w" {init = "normal", sbp.sig = #sbp.sig<@mesh, () -> ([B, B])>}
  %w = sbp.parameter "w" {init = "normal"} : tensor<32x16xf32>
  // CHECK: sbp.linear {{.*}}sbp.sig = #sbp.sig<@mesh, ([S(0), B], [B, B]) -> ([S(0), B])>
  %y = sbp.linear %x, %w : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  // CHECK: sbp.gelu {{.*}}sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([S(0), B])>
  %z = sbp.gelu %y : (tensor<8x32xf32>) -> tensor<8x32xf32>
  // CHECK: sbp.cross_entropy {{.*}}sbp.sig = #sbp.sig<@mesh, ([S(0), B], [S(0), B]) -> ([P, B])>
  %loss = sbp.cross_entropy %z, %targets : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// --axis picks the data axis; a batch the axis does not divide stays whole,
// and an op keeps a signature it already has.
sbp.mesh @mesh [tp = 2, dp = 4]
// AXIS-LABEL: func.func @chosen_axis
// AXIS-SAME: %arg0: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, S(0)]>}
// AXIS-SAME: %arg1: tensor<6x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, B]>}
func.func @chosen_axis(%x: tensor<8x16xf32>, %odd: tensor<6x16xf32>) -> (tensor<8x16xf32>, tensor<6x16xf32>) {
  // AXIS: sbp.relu {{.*}}sbp.sig = #sbp.sig<@mesh, ([S(1), B]) -> ([S(1), B])>
  %a = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([S(1), B]) -> ([S(1), B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // AXIS: sbp.relu {{.*}}sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, B])>
  %b = sbp.relu %odd : (tensor<6x16xf32>) -> tensor<6x16xf32>
  return %a, %b : tensor<8x16xf32>, tensor<6x16xf32>
}

// -----

// A model op without a usable split keeps all-broadcast: the layernorm'd
// dimension cannot be split, and a batch of 3 does not divide by 2.
sbp.mesh @mesh [dp = 2]
// CHECK-LABEL: func.func @no_split_fits
func.func @no_split_fits(%x: tensor<3x16xf32>, %g: tensor<16xf32>) -> tensor<3x16xf32> {
  // CHECK: sbp.rmsnorm {{.*}}sbp.sig = #sbp.sig<@mesh, ([B], [B]) -> ([B])>
  %y = sbp.rmsnorm %x, %g : (tensor<3x16xf32>, tensor<16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}

// -----

// With two meshes the pass needs --mesh.
sbp.mesh @a [dp = 2]
// expected-error@+1 {{expected one sbp.mesh (or --mesh=<name>), got 2}}
sbp.mesh @b [dp = 4]
func.func @two_meshes(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = sbp.relu %x : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
