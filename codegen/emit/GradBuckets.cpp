//===- GradBuckets.cpp - data-parallel gradient buckets -------------------===//
//
// The CUDA program's gradient buckets: which parameters, after which op,
// and the runtime configuration (GradSync) that all-reduces them.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/GradBuckets.h"
#include "codegen/emit/SourceText.h"

namespace autoddl::codegen::emit {

/// Groups the stage's parameters into data-parallel gradient buckets of about
/// 25 MiB of fp32 gradients (PyTorch DDP's default), in the order backward
/// completes them; gradients partial over tp fill buckets of their own, summed
/// over dp x tp (over tp alone when dp = 1). Returns, per (step, weight half?),
/// the buckets complete after that step's lines. Parameters shared by several
/// pipeline devices (tied, Chimera) are left to the optimizer step, which sums
/// them over their devices first.
std::map<std::pair<size_t, bool>, std::vector<int>>
GradBuckets::assign(int stage, const std::vector<Step> &steps,
                    bool splitBackward,
                    const std::vector<uint64_t> &deviceMask) {
  std::map<std::pair<size_t, bool>, std::vector<int>> after;
  constexpr int64_t kBucketBytes = int64_t(25) << 20;
  // The execution order of the backward halves: (step index, weight half).
  std::vector<std::vector<std::pair<size_t, bool>>> sequences(1);
  for (size_t i = steps.size(); i-- > 0;) {
    sequences[0].push_back({i, false});
    if (!splitBackward)
      sequences[0].push_back({i, true});
  }
  if (splitBackward) {
    sequences.emplace_back();
    for (size_t i = steps.size(); i-- > 0;)
      sequences[1].push_back({i, true});
  }
  // The last write of each parameter (a weight-half write wins under zb-h1:
  // W runs after B).
  std::map<int, std::pair<size_t, bool>> last;
  for (const auto &seq : sequences)
    for (const auto &pos : seq) {
      const Step &st = steps[pos.first];
      for (int t : pos.second ? st.paramsWeight : st.paramsInput)
        if (__builtin_popcountll(deviceMask[size_t(t)]) == 1)
          last[t] = pos;
    }
  for (const auto &seq : sequences) {
    // The open bucket of each kind: [0] dp only, [1] partial over tp too.
    Bucket open[2];
    int64_t bytes[2] = {0, 0};
    std::pair<size_t, bool> closeAt[2];
    for (int k = 0; k < 2; ++k) {
      open[k].stage = stage;
      open[k].tpPartial = k == 1;
    }
    auto close = [&](int k) {
      after[closeAt[k]].push_back(int(buckets_.size()));
      buckets_.push_back(open[k]);
      open[k].params.clear();
      bytes[k] = 0;
    };
    for (const auto &pos : seq) {
      const Step &st = steps[pos.first];
      for (int t : pos.second ? st.paramsWeight : st.paramsInput) {
        const int k = cx_.L.tpPartialGrads.count(t) ? 1 : 0;
        if (k == 0 && cx_.plan.knobs.dp == 1) // nothing to sum
          continue;
        Bucket &b = open[k];
        auto it = last.find(t);
        if (it == last.end() || it->second != pos ||
            std::find(b.params.begin(), b.params.end(), t) != b.params.end())
          continue;
        b.params.push_back(t);
        b.weightPart = splitBackward && pos.second;
        bytes[k] += 4 * numel(cx_.local(t, cx_.L.tensors[size_t(t)]));
        closeAt[k] = pos;
      }
      for (int k = 0; k < 2; ++k)
        if (bytes[k] >= kBucketBytes)
          close(k);
    }
    for (int k = 0; k < 2; ++k)
      if (!open[k].params.empty())
        close(k);
  }
  return after;
}

/// The cuda program's configure_grad_sync(): tables the harness walks
/// (configure_grad_buckets): each parameter's bucket, and each bucket's stage,
/// the backward passes (micro-batches) that complete it on the device holding
/// it, and whether it sums over dp x tp.
std::string GradBuckets::configText(const pipeline::Schedule &sched) const {
  std::string out =
      "// Data-parallel gradient buckets (~25 MiB of fp32 gradients each, in "
      "the order backward\n// completes them): all-reduced on their own stream "
      "once the last micro-batch's backward\n// has written them, overlapping "
      "the rest of the backward pass.\n";
  out += fmt::format("constexpr int kBuckets = {};\n", buckets_.size());
  out += "static void configure_grad_sync() {\n";
  if (buckets_.empty()) {
    out += "  grad_sync.configure(g.dp, {}, {});\n}\n";
    return out;
  }
  std::map<int, size_t> bucketOf;
  std::vector<std::string> rows;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket &k = buckets_[b];
    for (int t : k.params)
      bucketOf[t] = b;
    int count = 0;
    for (const auto &dev : sched.devices)
      for (const auto &ins : dev)
        if (ins.stage == k.stage &&
            (ins.kind == OpKind::FullBackward ||
             ins.kind ==
                 (k.weightPart ? OpKind::WeightGradient : OpKind::Backward)))
          ++count;
    rows.push_back(fmt::format("{{{}, {}, {}}}", k.stage, count,
                               k.tpPartial ? "true" : "false"));
  }
  std::vector<std::string> of;
  for (int t : layers_.paramOrder()) {
    auto it = bucketOf.find(t);
    of.push_back(it == bucketOf.end() ? "-1" : std::to_string(it->second));
  }
  const std::string ofDecl = "  static const int kBucketOf[] = {";
  const std::string rowsDecl =
      "  static const GradBucket kGradBuckets[kBuckets] = {";
  out += "  // Per row of param_specs(): the bucket of its gradient (-1: none, "
         "the optimizer step\n  // sums it).\n" +
         ofDecl + wrapList(of, ofDecl.size(), "      ") +
         "};\n  // Per bucket: the stage whose backward fills it, the backward "
         "passes that complete\n  // it, whether it sums over dp x tp.\n" +
         rowsDecl + wrapList(rows, rowsDecl.size(), "      ") +
         "};\n  static const std::vector<ParamSpec> specs = param_specs();\n"
         "  configure_grad_buckets(specs, kBucketOf, kGradBuckets, "
         "kBuckets);\n}\n";
  return out;
}

} // namespace autoddl::codegen::emit
