//===- Sha256.h - SHA-256 of a byte string (FIPS 180-4) -------------------===//
//
// plan.json records the SHA-256 of the model file it was planned from, so a
// plan can be matched to its model (`sha256sum model.json` prints the same).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>

namespace autoddl::planner {

/// Lower-case hex digest (64 characters) of `data`.
std::string sha256Hex(std::string_view data);

} // namespace autoddl::planner
