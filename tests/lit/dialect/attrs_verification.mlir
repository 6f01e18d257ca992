// Every error of the attributes and of the mesh, one named function per error.
// RUN: autoddl-opt %s -split-input-file -verify-diagnostics

// expected-error@+1 {{expected one size per axis name, got 2 names and 1 sizes}}
"sbp.mesh"() <{sym_name = "mesh", axis_names = ["dp", "tp"], shape = array<i64: 2>}> : () -> ()

// -----

// expected-error@+1 {{expected distinct axis names, got 'dp' twice}}
sbp.mesh @mesh [dp = 2, dp = 4]

// -----

// expected-error@+1 {{expected axis 'tp' of size >= 1, got 0}}
sbp.mesh @mesh [dp = 2, tp = 0]

// -----

// expected-error@+1 {{expected first_device >= 0, got -8}}
sbp.mesh @mesh [dp = 2] {first_device = -8 : i64}

// -----

sbp.mesh @mesh [dp = 2]
// expected-error@+1 {{expected a split dimension >= 0, got -1}}
func.func @negative_split_dim(%x: tensor<8xf32> {sbp.nd = #sbp.nd<@mesh, [S(-1)]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2]
// expected-error@+1 {{expected S(<dim>), B or P, got 'R'}}
func.func @unknown_layout(%x: tensor<8xf32> {sbp.nd = #sbp.nd<@mesh, [R]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2]
// expected-error@+1 {{expected a reduction (sum, max, min), got 'mean'}}
func.func @unknown_reduction(%x: tensor<8xf32> {sbp.nd = #sbp.nd<@mesh, [P(mean)]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
// expected-error@+1 {{sbp.nd of argument #0: expected 2 layout entries (one per axis of @mesh), got 1}}
func.func @entry_count(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0)]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
// expected-error@+1 {{sbp.nd of argument #0: expected the split dimension on mesh axis 'tp' to be below the tensor rank 2, got 2}}
func.func @split_dim_out_of_range(%x: tensor<8x16xf32> {sbp.nd = #sbp.nd<@mesh, [B, S(2)]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
// Both axes split dim 0: 6 is not divisible by 2 * 4.
// expected-error@+1 {{sbp.nd of argument #0: expected the size of dimension 0 to be divisible by 8 (split over mesh axes dp, tp), got 6}}
func.func @indivisible_split(%x: tensor<6x16xf32> {sbp.nd = #sbp.nd<@mesh, [S(0), S(0)]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2]
// expected-error@+1 {{expected @nowhere to name an sbp.mesh, got no such mesh}}
func.func @unknown_mesh(%x: tensor<8xf32> {sbp.nd = #sbp.nd<@nowhere, [B]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2]
// expected-error@+1 {{expected sbp.nd as the only sbp argument attribute, got 'sbp.sig'}}
func.func @wrong_argument_attribute(%x: tensor<8xf32> {sbp.sig = #sbp.nd<@mesh, [B]>}) {
  return
}

// -----

sbp.mesh @mesh [dp = 2]
func.func @signature_arity(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{expected sbp.sig with 1 operand and 1 result layouts, got 2 and 1}}
  %y = sbp.relu %x {sbp.sig = #sbp.sig<@mesh, ([S(0)], [B]) -> ([S(0)])>} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @signature_indivisible_result(%x: tensor<8x16xf32>, %w: tensor<6x16xf32>) -> tensor<8x6xf32> {
  // expected-error@+1 {{sbp.sig operand #1: expected the size of dimension 0 to be divisible by 4 (split over mesh axes tp), got 6}}
  %y = sbp.linear %x, %w {sbp.sig = #sbp.sig<@mesh, ([B, B], [B, S(0)]) -> ([B, S(1)])>} : (tensor<8x16xf32>, tensor<6x16xf32>) -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

// expected-note@+1 {{valid on one axis: (S(0), B) -> (S(0)); (B, S(0)) -> (S(1)); (S(1), S(1)) -> (P); (P, B) -> (P); (B, P) -> (P); (B, B) -> (B)}}
sbp.mesh @mesh [dp = 2, tp = 4]
func.func @signature_not_of_op(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) -> tensor<8x32xf32> {
  // Splitting x by columns and w by rows (its N) is not a matmul signature.
  // expected-error@+1 {{expected a signature of sbp.linear on mesh axis 'tp', got (S(1), S(0)) -> (S(1))}}
  %y = sbp.linear %x, %w {sbp.sig = #sbp.sig<@mesh, ([S(0), S(1)], [B, S(0)]) -> ([S(0), S(1)])>} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

sbp.mesh @mesh [tp = 4]
func.func @attention_splits_inside_a_head(%q: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
  // Two heads of 4 cannot be split four ways: the pieces must be whole heads.
  // expected-error@+1 {{sbp.sig operand #0: expected the size of dimension 2 to be divisible by 16 (split over mesh axes tp in pieces of 4), got 8}}
  %a = sbp.attention %q, %q, %q {num_heads = 2 : i64, head_dim = 4 : i64, sbp.sig = #sbp.sig<@mesh, ([S(2)], [S(2)], [S(2)]) -> ([S(2)])>} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  return %a : tensor<2x8x8xf32>
}

// -----

sbp.mesh @mesh [tp = 2]
func.func @packed_qkv_with_grouped_kv(%qkv: tensor<2x8x32xf32>) -> tensor<2x8x16xf32> {
  // A packed [q | k | v] splits by heads only when its three segments are equal (G = H): with
  // G != H its last dimension is one piece.
  // expected-error@+1 {{sbp.sig operand #0: expected the size of dimension 2 to be divisible by 64 (split over mesh axes tp in pieces of 32), got 32}}
  %a = sbp.attention %qkv {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 4 : i64, sbp.sig = #sbp.sig<@mesh, ([S(2)]) -> ([S(2)])>} : (tensor<2x8x32xf32>) -> tensor<2x8x16xf32>
  return %a : tensor<2x8x16xf32>
}

// -----

sbp.mesh @mesh [tp = 4]
func.func @packed_qkv_splits_inside_a_head(%qkv: tensor<2x8x24xf32>) -> tensor<2x8x8xf32> {
  // Two heads of q, k and v cannot be split four ways: per device 3 whole head slices of 4.
  // expected-error@+1 {{sbp.sig operand #0: expected the size of dimension 2 to be divisible by 48 (split over mesh axes tp in pieces of 12), got 24}}
  %a = sbp.attention %qkv {num_heads = 2 : i64, head_dim = 4 : i64, sbp.sig = #sbp.sig<@mesh, ([S(2)]) -> ([S(2)])>} : (tensor<2x8x24xf32>) -> tensor<2x8x8xf32>
  return %a : tensor<2x8x8xf32>
}

// -----

sbp.mesh @mesh [dp = 2]
sbp.mesh @stage1 [dp = 2] {first_device = 2 : i64}
func.func @placement_on_other_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{expected sbp.sig on the placement's mesh @stage1, got @mesh}}
  %y = sbp.relu %x {sbp.placement = #sbp.placement<stage = 1, mesh = @stage1>, sbp.sig = #sbp.sig<@mesh, ([S(0)]) -> ([S(0)])>} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

sbp.mesh @stage0 [dp = 2]
sbp.mesh @stage1 [dp = 2] {first_device = 2 : i64}
func.func @placement_beyond_the_stages(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{'sbp.relu' op expected a pipeline stage below 2 (the module declares 2 sbp.mesh, one per pipeline stage), got 7}}
  %y = sbp.relu %x {sbp.placement = #sbp.placement<stage = 7, mesh = @stage1>} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

sbp.mesh @mesh [dp = 2]
func.func @negative_stage(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{expected a pipeline stage >= 0, got -1}}
  %y = sbp.relu %x {sbp.placement = #sbp.placement<stage = -1, mesh = @mesh>} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @negative_layer(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{expected sbp.layer to be an integer >= 0, got -3 : i64}}
  %y = sbp.relu %x {sbp.layer = -3 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

sbp.mesh @mesh [dp = 2]
func.func @argument_layout_on_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{expected sbp.nd on a function argument, got it on an op}}
  %y = sbp.relu %x {sbp.nd = #sbp.nd<@mesh, [B]>} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @unknown_discardable_attribute(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{expected a discardable attribute of the sbp dialect (sbp.sig, sbp.placement, sbp.layer, sbp.classes), got 'sbp.stage'}}
  %y = sbp.relu %x {sbp.stage = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @classes_on_other_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{expected sbp.classes on an sbp.cross_entropy, got it on sbp.relu}}
  %y = sbp.relu %x {sbp.classes = 8 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @classes_past_logits(%l: tensor<4x10xf32>, %t: tensor<4xi32>) -> tensor<f32> {
  // expected-error@+1 {{expected sbp.classes at most}}
  %y = sbp.cross_entropy %l, %t {sbp.classes = 11 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// 10 columns pad 9 classes for 2 parts (5 + 4 and a zero); 7 classes pad to 8, not 10.
func.func @classes_not_a_padding(%l: tensor<4x10xf32>, %t: tensor<4xi32>) -> tensor<f32> {
  %ok = sbp.cross_entropy %l, %t {sbp.classes = 9 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  // expected-error@+1 {{expected sbp.classes = 7 to be the logits' 10 columns, or a vocabulary that tensor parallelism pads to them}}
  %y = sbp.cross_entropy %l, %t {sbp.classes = 7 : i64} : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %y : tensor<f32>
}
