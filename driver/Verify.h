//===- Verify.h - `autoddl verify`: a plan computes what one rank does ----===//
//
// Runs the plan on its ranks and the same model on one rank (tp = pp = dp = 1,
// the global batch as one micro-batch) from the same initial weights and data
// (DESIGN §6, plan invariance), then compares the loss of every step and the
// final parameters (both runs save a checkpoint of full tensors at the last
// step). Both programs go through the driver (Driver.h). Edge code: throws
// UserError on bad input or a failed run.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autoddl::driver {

struct VerifyOptions {
  std::string plan, data, model, keep, backend = "cpu";
  std::string weights; // "" or "onnx": both runs start from the ONNX values
  bool fp32 = false;
  int64_t steps = 5;
  double lossTolerance = 0, paramTolerance = 0; // 0: the backend's default
  std::vector<std::string> trainArgs;           // after --: flags of both runs
};

/// Runs both programs and prints the comparison (every step's losses, the
/// worst parameter difference, "verify: OK" or "verify: FAILED"). Returns
/// whether the plan matched the single-rank run.
bool verify(VerifyOptions o);

} // namespace autoddl::driver
