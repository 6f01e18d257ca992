// RUN: autoddl-opt %s -split-input-file -sbp-insert-boxing -verify-diagnostics | FileCheck %s

sbp.mesh @mesh [dp = 2, tp = 4]

// Layouts that agree need nothing.
// CHECK-LABEL: func.func @agreeing_layouts
func.func @agreeing_layouts(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), B]>}) -> tensor<8x16xf32> {
  // CHECK-NEXT: sbp.relu %arg0
  // CHECK-NEXT: return
  %y = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([S(0), B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// The Megatron row-parallel linear: its partial sum on tp is all-reduced for
// a consumer that reads it whole; the dp split is untouched.
// CHECK-LABEL: func.func @partial_to_broadcast
func.func @partial_to_broadcast(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), S(1)]>},
                                %w: tensor<32x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, S(1)]>}) -> tensor<8x32xf32> {
  %y = sbp.linear %x, %w {sbp.sig = #sbp.sig<@mesh, ([S(0), S(1)], [B, S(1)]) -> ([S(0), P])>} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  // CHECK: %[[Y:.*]] = sbp.linear
  // CHECK-NEXT: %[[R:.*]] = sbp.all_reduce %[[Y]] on @mesh mesh_axes = [1] {sbp.sig = #sbp.sig<@mesh, ([S(0), P]) -> ([S(0), B])>}
  // CHECK-NEXT: sbp.gelu %[[R]]
  %z = sbp.gelu %y {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([S(0), B])>} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  return %z : tensor<8x32xf32>
}

// One 1-D collective per kind of change.
// CHECK-LABEL: func.func @one_axis_changes
func.func @one_axis_changes(%s0: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), B]>},
                            %p: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, P]>},
                            %b: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, B]>}) {
  // CHECK: sbp.all_gather %arg0 on @mesh mesh_axes = [0] gather_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([B, B])>}
  %0 = sbp.relu %s0 {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: sbp.all_to_all %arg0 on @mesh mesh_axes = [0] split_dim = 1 concat_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([S(1), B])>}
  %1 = sbp.relu %s0 {sbp.sig = #sbp.sig<@mesh, ([S(1), B]) -> ([S(1), B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: sbp.reduce_scatter %arg1 on @mesh mesh_axes = [1] scatter_dim = 1 {sbp.sig = #sbp.sig<@mesh, ([B, P]) -> ([B, S(1)])>}
  %2 = sbp.relu %p {sbp.sig = #sbp.sig<@mesh, ([B, S(1)]) -> ([B, S(1)])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: sbp.local_relayout %arg2 on @mesh mesh_axes = [0, 1] {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([S(0), S(1)])>}
  %3 = sbp.relu %b {sbp.sig = #sbp.sig<@mesh, ([S(0), S(1)]) -> ([S(0), S(1)])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // CHECK: sbp.local_relayout %arg0 on @mesh mesh_axes = [0] {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([P, B])>}
  %4 = sbp.add %s0, %s0 {sbp.sig = #sbp.sig<@mesh, ([P, B], [P, B]) -> ([P, B])>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// Both consumers reading the same new layout share one conversion.
// CHECK-LABEL: func.func @shared_conversion
func.func @shared_conversion(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), B]>}) {
  // CHECK: %[[G:.*]] = sbp.all_gather %arg0
  // CHECK-NEXT: sbp.relu %[[G]]
  // CHECK-NEXT: sbp.gelu %[[G]]
  // CHECK-NOT: sbp.all_gather
  %0 = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = sbp.gelu %x {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// Two axes change: the inner (last) axis is gathered first, so each step is a
// collective within one mesh-axis group.
// CHECK-LABEL: func.func @two_axes_to_broadcast
func.func @two_axes_to_broadcast(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), S(1)]>}) {
  // CHECK: %[[A:.*]] = sbp.all_gather %arg0 on @mesh mesh_axes = [1] gather_dim = 1 {sbp.sig = #sbp.sig<@mesh, ([S(0), S(1)]) -> ([S(0), B])>}
  // CHECK-NEXT: %[[B:.*]] = sbp.all_gather %[[A]] on @mesh mesh_axes = [0] gather_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([B, B])>}
  // CHECK-NEXT: sbp.relu %[[B]]
  %0 = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// Both axes split dim 0 (device (i, j) holds row block 4i + j). Gathering the
// outer axis alone would not give contiguous blocks, so the inner axis is
// gathered first and sliced again afterwards.
// CHECK-LABEL: func.func @nested_split
func.func @nested_split(%x: tensor<16x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), S(0)]>}) {
  // CHECK: %[[A:.*]] = sbp.all_gather %arg0 on @mesh mesh_axes = [1] gather_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([S(0), S(0)]) -> ([S(0), B])>}
  // CHECK-NEXT: %[[B:.*]] = sbp.all_gather %[[A]] on @mesh mesh_axes = [0] gather_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([B, B])>}
  // CHECK-NEXT: %[[C:.*]] = sbp.local_relayout %[[B]] on @mesh mesh_axes = [1] {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, S(0)])>}
  // CHECK-NEXT: sbp.relu %[[C]]
  %0 = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([B, S(0)]) -> ([B, S(0)])>} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  return
}

// A partial max is all-reduced with max, then sliced.
// CHECK-LABEL: func.func @partial_max_to_split
func.func @partial_max_to_split(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, P(max)]>}) {
  // CHECK: %[[A:.*]] = sbp.all_reduce %arg0 on @mesh mesh_axes = [1] {reduction = #sbp.reduction<max>, sbp.sig = #sbp.sig<@mesh, ([B, P(max)]) -> ([B, B])>}
  // CHECK-NEXT: sbp.local_relayout %[[A]] on @mesh mesh_axes = [1] {sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, S(0)])>}
  %0 = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([B, S(0)]) -> ([B, S(0)])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// Boxing keeps the consumer's placement and layer on what it inserts.
// CHECK-LABEL: func.func @keeps_placement
func.func @keeps_placement(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), B]>}) {
  // CHECK: sbp.all_gather {{.*}}sbp.layer = 3 : i64, sbp.placement = #sbp.placement<stage = 0, mesh = @mesh>
  %0 = sbp.relu %x {sbp.layer = 3 : i64, sbp.placement = #sbp.placement<stage = 0, mesh = @mesh>, sbp.sig = #sbp.sig<@mesh, ([B, B]) -> ([B, B])>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Every unannotated consumer and every operand of unknown layout is reported.
sbp.mesh @mesh [dp = 2]
func.func @unannotated(%x: tensor<8xf32>, %y: tensor<8xf32> {sbp.nd = #sbp.nd<@mesh, [S(0)]>}) {
  // expected-error@+1 {{expected an sbp.sig on every sbp op before boxing, got none (run sbp-assign-data-parallel or a planner first)}}
  %0 = sbp.relu %y : (tensor<8xf32>) -> tensor<8xf32>
  // expected-error@+1 {{expected a known layout for operand #0 (an sbp.sig on its producer or sbp.nd on the argument), got none}}
  %1 = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([B]) -> ([B])>} : (tensor<8xf32>) -> tensor<8xf32>
  // expected-error@+1 {{expected a boxing for operand #0 from #sbp.nd<@mesh, [S(0)]> to #sbp.nd<@mesh, [P(max)]>, got none: cannot produce P(max) from S(0)}}
  %2 = sbp.all_reduce %y on @mesh mesh_axes = [0] {reduction = #sbp.reduction<max>, sbp.sig = #sbp.sig<@mesh, ([P(max)]) -> ([B])>} : tensor<8xf32>
  return
}

// -----

sbp.mesh @mesh [dp = 2]
sbp.mesh @stage1 [dp = 2] {first_device = 2 : i64}
func.func @across_meshes(%x: tensor<8xf32> {sbp.nd = #sbp.nd<@mesh, [S(0)]>}) {
  // expected-error@+1 {{expected operand #0 on mesh @stage1, got one on @mesh (values cross meshes through sbp.send/sbp.recv)}}
  %0 = sbp.relu %x {sbp.sig = #sbp.sig<@stage1, ([S(0)]) -> ([S(0)])>} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// Megatron's MLP on tp (LiBai's layouts): column-parallel fc, gelu on the
// split columns, row-parallel proj. Boxing inserts exactly the one forward
// all-reduce of the block, plus a local B -> P for the bias added once.
sbp.mesh @mesh [tp = 4]
// CHECK-LABEL: func.func @megatron_mlp
func.func @megatron_mlp(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [B]>}) -> tensor<8x16xf32> {
  %w1 = sbp.parameter "fc.weight" {init = "normal", sbp.sig = #sbp.sig<@mesh, () -> ([S(1)])>} : tensor<16x64xf32>
  %b1 = sbp.parameter "fc.bias" {init = "zeros", sbp.sig = #sbp.sig<@mesh, () -> ([S(0)])>} : tensor<64xf32>
  %w2 = sbp.parameter "proj.weight" {init = "normal", sbp.sig = #sbp.sig<@mesh, () -> ([S(0)])>} : tensor<64x16xf32>
  %b2 = sbp.parameter "proj.bias" {init = "zeros", sbp.sig = #sbp.sig<@mesh, () -> ([B])>} : tensor<16xf32>
  // CHECK-NOT: sbp.all_reduce
  // CHECK: %[[B2:.*]] = sbp.local_relayout %{{.*}} on @mesh mesh_axes = [0] {sbp.sig = #sbp.sig<@mesh, ([B]) -> ([P])>}
  // CHECK-NEXT: %[[Y:.*]] = sbp.linear %{{.*}}, %{{.*}}, %[[B2]]
  // CHECK-NEXT: %[[R:.*]] = sbp.all_reduce %[[Y]] on @mesh mesh_axes = [0] {sbp.sig = #sbp.sig<@mesh, ([P]) -> ([B])>}
  // CHECK-NEXT: sbp.add %arg0, %[[R]]
  // CHECK-NOT: sbp.all_reduce
  %h = sbp.linear %x, %w1, %b1 {transpose_weight = false, sbp.sig = #sbp.sig<@mesh, ([B], [S(1)], [S(0)]) -> ([S(1)])>} : (tensor<8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %g = sbp.gelu %h {sbp.sig = #sbp.sig<@mesh, ([S(1)]) -> ([S(1)])>} : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = sbp.linear %g, %w2, %b2 {transpose_weight = false, sbp.sig = #sbp.sig<@mesh, ([S(1)], [S(0)], [P]) -> ([P])>} : (tensor<8x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %r = sbp.add %x, %y {sbp.sig = #sbp.sig<@mesh, ([B], [B]) -> ([B])>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
