//===- KfacRefreshFlag.h - `--kfac-refresh K` or `K0,K1,...` --------------===//
//
// The value of `--kfac-refresh` of `autoddl plan --optimizer kfac` and
// `autoddl simulate --pipefisher`: one K for every pipeline device
// (PipeFisherInput::refreshSteps) or one K_d per device
// (PipeFisherInput::deviceRefreshSteps); docs/pipefisher.md §4. Also their
// `--kfac-fill items|fluid` (PipeFisherInput::filling).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/pipeline/PipeFisher.h" // KfacFilling

#include <string>
#include <vector>

namespace autoddl::cli {

struct KfacRefreshPin {
  int all = 0;                // "K": > 0 pins every device; 0: not pinned
  std::vector<int> perDevice; // "K0,K1,...": one per pipeline device
  bool pinned() const { return all > 0 || !perDevice.empty(); }
};

/// "" or "0" -> not pinned; "3" -> all = 3; "2,4" -> perDevice {2, 4}. Each
/// value 1..4096 (one value may be 0). Throws UserError naming the flag.
KfacRefreshPin parseKfacRefresh(const std::string &text);

/// "items" or "fluid" (`--kfac-fill`); "" -> items. Throws UserError naming
/// the flag on another value.
pipeline::KfacFilling parseKfacFill(const std::string &text);

} // namespace autoddl::cli
