//===- CompressedCheckpoint.cpp - --checkpoint-compress (BitSnap) ---------===//
#include "backends/common/harness/CompressedCheckpoint.h"

#include "backends/common/CheckpointCompress.h"
#include "backends/common/Fp8State.h"
#include "backends/common/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace autoddl::rt::harness {

namespace {

// An encoded block's first byte.
constexpr uint8_t kDelta = 'D', kQuantized = 'Q', kRaw = 'R';

bool is_moment(const std::string &name) {
  return name.find(".exp_avg") != std::string::npos;
}

void put(std::vector<uint8_t> &out, const void *p, size_t bytes) {
  const auto *b = static_cast<const uint8_t *>(p);
  out.insert(out.end(), b, b + bytes);
}

/// Reads the blob back in order, every read bounds-checked.
struct Reader {
  const std::string &file;
  const uint8_t *p;
  size_t size, at = 0;
  void get(void *dst, size_t bytes) {
    if (bytes > size - at)
      throw std::runtime_error(file +
                               ": a part ends early (a "
                               "checkpoint of another plan, or damaged)");
    std::memcpy(dst, p + at, bytes);
    at += bytes;
  }
};

} // namespace

bool is_optimizer_state(const std::string &name) {
  return is_moment(name) || name.find(".kfac_") != std::string::npos ||
         is_fp8_scaling_entry(name);
}

std::function<void()>
CompressState::full_saved(const std::string &dir,
                          const std::vector<CheckpointEntry> &params) {
  base_dir_ = dir;
  since_full_ = 0;
  base_ = std::make_shared<Base>();
  return [base = base_, params] {
    for (const CheckpointEntry &e : params)
      if (e.data)
        (*base)[e.name].assign(e.data, e.data + e.held_count());
  };
}

std::string CompressState::base_name() const {
  const size_t slash = base_dir_.find_last_of('/');
  return slash == std::string::npos ? base_dir_ : base_dir_.substr(slash + 1);
}

std::string bitsnap_part_file(int rank) {
  return rank == 0 ? kBitsnapFile
                   : "bitsnap." + std::to_string(rank) + ".safetensors";
}

std::vector<float> encode_part(const std::vector<CheckpointEntry> &entries,
                               const CheckpointBlocks &blocks, int rank,
                               const CompressState::Base &base,
                               double &raw_bytes, double &encoded_bytes) {
  // The quantization's chunks on this rank's cores, at most 8: those it is
  // bound to, or, unbound, its share of the host's (the world size stands in
  // for the ranks on one host: it never counts fewer).
  const int64_t ranks = std::max<int64_t>(1, int64_t(blocks.writer.size()));
  const int64_t cores = available_cores(), host = hardware_threads();
  const int threads =
      int(std::clamp<int64_t>(cores < host ? cores : host / ranks, 1, 8));
  std::vector<uint8_t> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CheckpointEntry &e = entries[i];
    if (blocks.writer[size_t(rank)][i] != rank)
      continue; // held by none here, or a lower rank writes the same block
    const int64_t n = e.held_count();
    raw_bytes += 4.0 * double(n);
    auto head = [&](uint8_t kind) {
      out.push_back(kind);
      put(out, &n, 8);
    };
    if (!is_optimizer_state(e.name)) {
      const BitmaskDelta d = delta_encode(base.at(e.name).data(), e.data, n);
      const int64_t changed = int64_t(d.changed.size());
      head(kDelta);
      put(out, &changed, 8);
      put(out, d.mask.data(), d.mask.size());
      put(out, d.changed.data(), d.changed.size() * 4);
      continue;
    }
    // A moment with a NaN or an infinity (a diverging run) stays raw: the
    // companding's logarithm has no level for it.
    if (is_moment(e.name) && std::all_of(e.data, e.data + n, [](float x) {
          return std::isfinite(x);
        })) {
      const ClusterQuantized q =
          cluster_quantize(e.data, n, Companding::SignedLog, 0, threads);
      if (q.bytes() < 4 * n) {
        head(kQuantized);
        put(out, q.codes.data(), q.codes.size());
        put(out, q.centroids.data(), q.centroids.size() * 4);
        continue;
      }
    }
    head(kRaw);
    put(out, e.data, size_t(n) * 4);
  }
  encoded_bytes += double(out.size());
  // At least one float: a tensor of no elements helps no reader.
  std::vector<float> blob(std::max<size_t>(1, (out.size() + 3) / 4), 0.0f);
  if (!out.empty())
    std::memcpy(blob.data(), out.data(), out.size());
  return blob;
}

void decode_part(const std::string &file, const std::vector<float> &blob,
                 int writer, const std::vector<CheckpointEntry> &entries,
                 const CheckpointBlocks &blocks, int rank) {
  Reader r{file, reinterpret_cast<const uint8_t *>(blob.data()),
           blob.size() * 4};
  for (size_t i = 0; i < entries.size(); ++i) {
    if (blocks.writer[size_t(writer)][i] != writer)
      continue; // not in the writer's part
    const CheckpointEntry &e = entries[i];
    // Whether this rank holds the block the writer wrote (else skipped).
    const bool mine = blocks.writer[size_t(rank)][i] == writer;
    uint8_t kind = 0;
    int64_t n = 0;
    r.get(&kind, 1);
    r.get(&n, 8);
    if (n < 0 || n > int64_t(8 * (r.size - r.at)) ||
        (mine && n != e.held_count()) ||
        (kind != kDelta && kind != kQuantized && kind != kRaw))
      throw std::runtime_error(file + ": part." + std::to_string(writer) +
                               " does not hold \"" + e.name +
                               "\" as this plan does (a checkpoint of another "
                               "plan, or damaged)");
    float *dst = mine ? e.data : nullptr;
    std::vector<float> skipped;
    if (!dst) {
      skipped.resize(size_t(n));
      dst = skipped.data();
    }
    if (kind == kRaw) {
      r.get(dst, size_t(n) * 4);
    } else if (kind == kDelta) {
      BitmaskDelta d;
      d.n = n;
      int64_t changed = 0;
      r.get(&changed, 8);
      if (changed < 0 || changed > n)
        throw std::runtime_error(file + ": \"" + e.name +
                                 "\": a delta of more elements than the block");
      d.mask.resize(size_t((n + 7) / 8));
      r.get(d.mask.data(), d.mask.size());
      d.changed.resize(size_t(changed));
      r.get(d.changed.data(), d.changed.size() * 4);
      if (mine)
        delta_decode(d, dst, dst); // in place: the base's values there
    } else {
      ClusterQuantized q;
      q.n = n;
      q.codes.resize(size_t(n));
      r.get(q.codes.data(), q.codes.size());
      q.centroids.resize(size_t((n + kClusterChunk - 1) / kClusterChunk) *
                         kClusterLevels);
      r.get(q.centroids.data(), q.centroids.size() * 4);
      if (mine)
        cluster_dequantize(q, dst);
    }
  }
}

} // namespace autoddl::rt::harness
