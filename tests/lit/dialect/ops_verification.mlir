// Every error of the ops, one named function per error. Shape errors come from
// the shared rules of ir/ops/OpSemantics.h.
// RUN: autoddl-opt %s -split-input-file -verify-diagnostics

func.func @linear_contraction_mismatch(%x: tensor<8x16xf32>, %w: tensor<32x12xf32>) -> tensor<8x32xf32> {
  // expected-error@+1 {{'sbp.linear' op expected}}
  %y = sbp.linear %x, %w : (tensor<8x16xf32>, tensor<32x12xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

func.func @wrong_result_type(%x: tensor<8x16xf32>) -> tensor<8x15xf32> {
  // expected-error@+1 {{'sbp.relu' op expected result #0 of type tensor<8x16xf32>, got tensor<8x15xf32>}}
  %y = sbp.relu %x : (tensor<8x16xf32>) -> tensor<8x15xf32>
  return %y : tensor<8x15xf32>
}

// -----

func.func @unsupported_element_type(%x: tensor<8xf64>) -> tensor<8xf64> {
  // expected-error@+1 {{'sbp.relu' op expected operand #0 to be a static tensor of f32, bf16, f16, i32 or i64, got tensor<8xf64>}}
  %y = sbp.relu %x : (tensor<8xf64>) -> tensor<8xf64>
  return %y : tensor<8xf64>
}

// -----

func.func @attention_two_operands(%q: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error@+1 {{'sbp.attention' op expected}}
  %a = sbp.attention %q, %q {num_heads = 4 : i64, head_dim = 4 : i64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %a : tensor<2x8x16xf32>
}

// -----

func.func @missing_required_attribute(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error@+1 {{'sbp.rotary' op requires attribute 'head_dim'}}
  %y = sbp.rotary %x {num_heads = 4 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

func.func @reshape_changes_element_count(%x: tensor<2x64xf32>) -> tensor<16x4xf32> {
  // expected-error@+1 {{'sbp.reshape' op expected}}
  %y = sbp.reshape %x {shape = array<i64: 16, 4>} : (tensor<2x64xf32>) -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @collective_without_signature(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.all_reduce' op expected an sbp.sig giving the layouts it converts between, got none}}
  %y = sbp.all_reduce %x on @mesh mesh_axes = [1] : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @all_gather_wrong_dim(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.all_gather' op expected S(1) -> B on mesh axis 'tp', got S(0) -> B}}
  %y = sbp.all_gather %x on @mesh mesh_axes = [1] gather_dim = 1 {sbp.sig = #sbp.sig<@mesh, ([B, S(0)]) -> ([B, B])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @all_reduce_changes_other_axis(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.all_reduce' op expected mesh axis 'dp' (not in mesh_axes) unchanged, got S(0) -> B}}
  %y = sbp.all_reduce %x on @mesh mesh_axes = [1] {sbp.sig = #sbp.sig<@mesh, ([S(0), P]) -> ([B, B])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @all_reduce_wrong_reduction(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.all_reduce' op expected P(max) -> B on mesh axis 'tp', got P -> B}}
  %y = sbp.all_reduce %x on @mesh mesh_axes = [1] {reduction = #sbp.reduction<max>, sbp.sig = #sbp.sig<@mesh, ([B, P]) -> ([B, B])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @reduce_scatter_axis_out_of_range(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.reduce_scatter' op expected mesh axes in [0, 2), got 2}}
  %y = sbp.reduce_scatter %x on @mesh mesh_axes = [2] scatter_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([B, P]) -> ([B, S(0)])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @collective_repeated_axis(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.reduce_scatter' op expected distinct mesh axes, got 1 twice}}
  %y = sbp.reduce_scatter %x on @mesh mesh_axes = [1, 1] scatter_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([B, P]) -> ([B, S(0)])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @all_to_all_same_dims(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.all_to_all' op expected split_dim and concat_dim to differ, got 0 for both}}
  %y = sbp.all_to_all %x on @mesh mesh_axes = [1] split_dim = 0 concat_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([B, S(0)]) -> ([B, S(0)])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @local_relayout_needs_communication(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.local_relayout' op expected B -> S, B -> P or S -> P on mesh axis 'dp', got S(0) -> B}}
  %y = sbp.local_relayout %x on @mesh mesh_axes = [0] {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([B, B])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sbp.mesh @mesh [dp = 2, tp = 4]
func.func @collective_signature_on_other_mesh(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error@+1 {{'sbp.all_gather' op expected sbp.sig on @other, got one on @mesh}}
  %y = sbp.all_gather %x on @other mesh_axes = [0] gather_dim = 0 {sbp.sig = #sbp.sig<@mesh, ([S(0), B]) -> ([B, B])>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @send_without_recv(%x: tensor<8xf32>) {
  // expected-error@+1 {{'sbp.send' op expected one sbp.recv on channel 7, got 0}}
  sbp.send %x to stage 1 channel 7 : tensor<8xf32>
  return
}

// -----

func.func @send_recv_type_mismatch(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'sbp.send' op expected the sbp.recv on channel 0 to have type 'tensor<8xf32>', got 'tensor<4xf32>'}}
  sbp.send %x to stage 1 channel 0 : tensor<8xf32>
  // expected-note@+1 {{the sbp.recv}}
  %y = sbp.recv from stage 0 channel 0 : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @recv_without_send() -> tensor<8xf32> {
  // expected-error@+1 {{'sbp.recv' op expected one sbp.send on channel 5, got 0}}
  %y = sbp.recv from stage 0 channel 5 : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

sbp.mesh @mesh [dp = 2]
sbp.mesh @stage1 [dp = 2] {first_device = 2 : i64}
func.func @recv_from_own_stage() -> tensor<8xf32> {
  // expected-error@+1 {{'sbp.recv' op expected a peer stage other than its own (1), got 1}}
  %y = sbp.recv from stage 1 channel 0 {sbp.placement = #sbp.placement<stage = 1, mesh = @mesh>} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @negative_channel(%x: tensor<8xf32>) {
  // expected-error@+1 {{'sbp.send' op expected a channel >= 0, got -1}}
  sbp.send %x to stage 1 channel -1 : tensor<8xf32>
  return
}

// -----

// A peer stage beyond the module's meshes (one per pipeline stage) names a
// stage that does not exist.
sbp.mesh @stage0 [dp = 2]
sbp.mesh @stage1 [dp = 2] {first_device = 2 : i64}
func.func @send_beyond_the_stages(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{'sbp.send' op expected a peer stage below 2 (the module declares 2 sbp.mesh, one per pipeline stage), got 99}}
  sbp.send %x to stage 99 channel 0 : tensor<8xf32>
  %y = sbp.recv from stage 0 channel 0 : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

sbp.mesh @stage0 [dp = 2]
sbp.mesh @stage1 [dp = 2] {first_device = 2 : i64}
func.func @recv_beyond_the_stages(%x: tensor<8xf32>) -> tensor<8xf32> {
  sbp.send %x to stage 1 channel 0 : tensor<8xf32>
  // expected-error@+1 {{'sbp.recv' op expected a peer stage below 2 (the module declares 2 sbp.mesh, one per pipeline stage), got 2}}
  %y = sbp.recv from stage 2 channel 0 : tensor<8xf32>
  return %y : tensor<8xf32>
}
