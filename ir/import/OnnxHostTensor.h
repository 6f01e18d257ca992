//===- OnnxHostTensor.h - host tensors of the constant evaluator (internal)
//===//
//
// What OnnxConstants.cpp and OnnxHostTensor.cpp share: element types' widths
// and rounding, and allocation under the size limit. Errors throw
// std::invalid_argument.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/import/OnnxConstants.h"

#include <string>
#include <vector>

namespace autoddl::import::host {

[[noreturn]] void bad(const std::string &m);
/// The element count of a shape (negative sizes and int64 overflow refused).
int64_t product(const std::vector<int64_t> &s);
/// A zero tensor of `type` and `shape`, refused past 2^26 elements.
HostTensor make(int32_t type, std::vector<int64_t> shape);
bool isFloat(int32_t type);
/// v rounded to what an element of `type` holds.
long double fit(int32_t type, long double v);
/// Bytes per element; 0 for a type the evaluator does not hold.
int64_t width(int32_t type);

} // namespace autoddl::import::host
