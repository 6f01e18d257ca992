//===- KfacRefreshFlag.cpp - `--kfac-refresh K` or `K0,K1,...` ------------===//
#include "tools/autoddl/KfacRefreshFlag.h"

#include "support/UserError.h"

#include <fmt/format.h>

#include <cctype>
#include <string_view>

namespace autoddl::cli {

namespace {

constexpr int kMaxRefresh = 4096; // PipeFisherInput::maxSteps

/// One decimal integer, optionally signed, range-checked later; false on
/// anything else (empty, a fraction, trailing text, too many digits).
bool parseSteps(std::string_view s, long long &out) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+'))
    negative = s[i++] == '-';
  if (i == s.size() || s.size() - i > 9)
    return false;
  long long v = 0;
  for (; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i])))
      return false;
    v = 10 * v + (s[i] - '0');
  }
  out = negative ? -v : v;
  return true;
}

} // namespace

KfacRefreshPin parseKfacRefresh(const std::string &text) {
  KfacRefreshPin pin;
  if (text.empty())
    return pin;
  std::vector<long long> values;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(',', begin);
    const std::string_view item = std::string_view(text).substr(
        begin, end == std::string::npos ? std::string_view::npos : end - begin);
    long long v = 0;
    if (!parseSteps(item, v))
      throw UserError(fmt::format(
          "--kfac-refresh: expected a number of steps or a comma-separated "
          "list of them, one per pipeline device, got \"{}\"",
          text));
    values.push_back(v);
    if (end == std::string::npos)
      break;
    begin = end + 1;
  }
  const long long lowest = values.size() == 1 ? 0 : 1;
  for (long long v : values)
    if (v < lowest || v > kMaxRefresh)
      throw UserError(fmt::format(
          "--kfac-refresh: expected 1..{} steps, got {}", kMaxRefresh, v));
  if (values.size() == 1)
    pin.all = static_cast<int>(values.front());
  else
    for (long long v : values)
      pin.perDevice.push_back(static_cast<int>(v));
  return pin;
}

pipeline::KfacFilling parseKfacFill(const std::string &text) {
  if (text.empty())
    return pipeline::KfacFilling::Items;
  if (auto filling = pipeline::parseKfacFilling(text))
    return *filling;
  throw UserError(
      fmt::format("--kfac-fill: expected items or fluid, got \"{}\"", text));
}

} // namespace autoddl::cli
