//===- ParamTable.cpp - a generated program's parameter table ------------===//
#include "backends/common/harness/ParamTable.h"

#include "backends/common/Zero.h" // zero_padded_size, zero_shard

#include <algorithm>
#include <stdexcept>

namespace autoddl::rt::harness {

Slice param_slice(const Shape &full, int split_dim, int segments, int64_t tp,
                  int64_t rank) {
  if (split_dim < 0)
    return Slice::whole(full);
  if (segments <= 1)
    return Slice::whole(full).split_padded(split_dim, tp, rank);
  Shape view = full;
  view[size_t(split_dim)] /= segments;
  view.insert(view.begin() + split_dim, int64_t(segments));
  return Slice::whole(view).split(split_dim + 1, tp, rank);
}

void lay_out(ParamBlock &b, const char *name, const Shape &full, int split_dim,
             int segments, uint64_t devices, const ProgramSpec &spec,
             int64_t rtp, int64_t rpp) {
  b.name = name;
  b.full = full;
  b.split_dim = split_dim;
  b.held = (devices >> rpp) & 1;
  b.slice = param_slice(full, split_dim, segments, spec.tp, rtp);
  b.n = b.slice.numel();
  const int64_t largest =
      param_slice(full, split_dim, segments, spec.tp, 0).numel();
  b.padded = zero_padded_size(largest, spec.dp);
}

GradRange grad_range(const ParamBlock &b, uint64_t devices,
                     const ProgramSpec &spec, int64_t rpp, int64_t rtp,
                     int64_t rdp, bool dp_shards) {
  GradRange r;
  if (!b.held)
    return r;
  r.n = b.n;
  r.counted = (b.split_dim >= 0 || rtp == 0) &&
              rpp == __builtin_ctzll(devices) && (dp_shards || rdp == 0);
  if (dp_shards) {
    const ZeroShard s = zero_shard(b.padded, spec.dp, rdp);
    r.offset = s.offset;
    r.n = std::max<int64_t>(0, std::min(s.size, b.n - s.offset));
  }
  return r;
}

int device_group(uint64_t devices, std::vector<uint64_t> &seen, bool &is_new) {
  is_new = false;
  if (__builtin_popcountll(devices) <= 1)
    return -1;
  for (size_t k = 0; k < seen.size(); ++k)
    if (seen[k] == devices)
      return int(k);
  if (seen.size() == 64)
    throw std::runtime_error("too many shared-parameter groups");
  seen.push_back(devices);
  is_new = true;
  return int(seen.size() - 1);
}

} // namespace autoddl::rt::harness
