//===- ParamTable.h - a generated program's parameter table --------------===//
//
// The generated train.cpp lists every parameter of the model once (name, full
// shape, tp split, init, pipeline devices holding it); the harness lays the
// table out on this rank: which block of each parameter it holds, and how
// large its buffers are. Shared by both backends; each backend's Param adds
// its buffers to ParamBlock.
//
//===----------------------------------------------------------------------===//
#ifndef AUTODDL_BACKENDS_COMMON_HARNESS_PARAMTABLE_H
#define AUTODDL_BACKENDS_COMMON_HARNESS_PARAMTABLE_H

#include "backends/common/Init.h" // Slice
#include "backends/common/harness/Spec.h"

#include <string>
#include <vector>

namespace autoddl::rt::harness {

/// One row of the generated parameter table; ParamT is the backend's Param.
template <typename ParamT> struct ParamSpecOf {
  ParamT *p;
  const char *name;
  Shape full;
  int split_dim;    // S(split_dim) over tp, -1: B
  const char *init; // "normal", "ones" or "zeros"
  double std;
  uint64_t devices; // bit d: pipeline device d holds it
  int segments = 1; // > 1: split_dim is equal parts (q|k|v), each split over tp
};

/// One row of the generated buffer table: a module buffer (a batch norm's
/// running mean or var), whole on every rank of the stage that updates it:
/// no gradient, no optimizer state, no ZeRO shard; checkpointed in
/// model.safetensors under `name` (docs/checkpoints.md "Buffers").
struct BufferSpec {
  float *host; // its values in host memory (the CUDA program's copy)
  const char *name;
  int64_t n;
  uint64_t devices; // bit d: pipeline device d holds it
};

/// The block of a full parameter that tp rank `rank` holds: S(split_dim)
/// (parts of ceil(size / tp) where tp does not divide: a padded vocabulary,
/// whose last blocks are shorter), or with segments > 1 part `rank` of every
/// segment (the full shape viewed with split_dim as [segments, size /
/// segments]; the same row-major elements). split_dim < 0: the whole tensor.
Slice param_slice(const Shape &full, int split_dim, int segments, int64_t tp,
                  int64_t rank);

template <typename ParamT>
Slice param_slice(const ParamSpecOf<ParamT> &s, int64_t tp, int64_t rank) {
  return param_slice(s.full, s.split_dim, s.segments, tp, rank);
}

/// A parameter as this rank holds it, whatever the backend: its tp block of
/// the full tensor. Buffers are `padded` elements (a multiple of dp for ZeRO;
/// the padding stays zero).
struct ParamBlock {
  std::string name;
  Shape full;
  int split_dim = -1; // S(split_dim) over tp, -1: B
  bool held = false;  // this rank runs a stage that uses it
  Slice slice;        // the block held
  int64_t n = 0, padded = 0;
};

/// Fills `b` from its table row for tp rank `rtp` on pipeline device `rpp`.
/// Every tp rank's buffers (and ZeRO shards) are sized by tp rank 0's block,
/// the largest (a padded vocabulary's last blocks are shorter).
void lay_out(ParamBlock &b, const char *name, const Shape &full, int split_dim,
             int segments, uint64_t devices, const ProgramSpec &spec,
             int64_t rtp, int64_t rpp);

template <typename ParamT>
void lay_out(const ParamSpecOf<ParamT> &s, const ProgramSpec &spec, int64_t rtp,
             int64_t rpp) {
  lay_out(*s.p, s.name, s.full, s.split_dim, s.segments, s.devices, spec, rtp,
          rpp);
}

/// A parameter's gradient as this rank's optimizer step reads it, summed over
/// the ranks sharing it (the range of its flat buffer --grad-clip scales), and
/// whether this rank adds its squares to the global gradient norm.
struct GradRange {
  int64_t offset = 0; // into the flat buffer: 0, or the ZeRO shard's start
  int64_t n = 0;      // elements (a ZeRO shard's padding left out)
  bool counted = false;
};

/// `b`'s GradRange on the rank at (rpp, rtp, rdp), `devices` its table row's
/// pipeline devices. `dp_shards`: each dp rank steps its ZeRO shard of the
/// gradient (else all of it, all-reduced over dp). Every distinct element is
/// counted on one rank of the world: a block replicated over tp on tp rank 0,
/// a gradient all-reduced over dp on dp rank 0, one shared by pipeline
/// devices (tied, Chimera) on the lowest of them; tp blocks, ZeRO shards and
/// the stages' own parameters on each holder. Empty where `b` is not held.
GradRange grad_range(const ParamBlock &b, uint64_t devices,
                     const ProgramSpec &spec, int64_t rpp, int64_t rtp,
                     int64_t rdp, bool dp_shards);

/// Parameters held by more than one pipeline device (tied weights, Chimera's
/// two pipelines) sum their gradients over one communicator per set of
/// devices. The index of `devices`' group, adding it to `seen` when new (made
/// in parameter order on every rank, as creating communicators is collective);
/// -1 when one device holds it. Throws past 64 groups.
int device_group(uint64_t devices, std::vector<uint64_t> &seen, bool &is_new);

/// The communicators of those groups, either backend's CommT: of(devices,
/// make) is the group's communicator, make(group) making it when the group
/// is new (on every rank, in parameter order); null for a parameter one
/// device holds.
template <typename CommT> class DeviceGroups {
public:
  template <typename Make> const CommT *of(uint64_t devices, Make make) {
    bool is_new = false;
    const int group = device_group(devices, seen_, is_new);
    if (is_new)
      comms_.push_back(make(group));
    return group >= 0 ? &comms_[size_t(group)] : nullptr;
  }

private:
  std::vector<uint64_t> seen_;
  std::vector<CommT> comms_;
};

} // namespace autoddl::rt::harness

#endif // AUTODDL_BACKENDS_COMMON_HARNESS_PARAMTABLE_H
