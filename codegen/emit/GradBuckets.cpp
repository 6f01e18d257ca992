//===- GradBuckets.cpp - data-parallel gradient buckets -------------------===//
//
// The CUDA program's gradient buckets: which parameters, after which op,
// and the runtime configuration (GradSync) that all-reduces them.
//
//===----------------------------------------------------------------------===//
#include "codegen/emit/Emitter.h"
#include "codegen/emit/NumberFold.h"

namespace autoddl::codegen::emit {

/// Groups the stage's parameters into data-parallel gradient buckets of about
/// 25 MiB of fp32 gradients (PyTorch DDP's default), in the order backward
/// completes them; gradients partial over tp fill buckets of their own, summed
/// over dp x tp (over tp alone when dp = 1). Returns, per (step, weight half?),
/// the buckets complete after that step's lines. Parameters shared by several
/// pipeline devices (tied, Chimera) are left to the optimizer step, which sums
/// them over their devices first.
std::map<std::pair<size_t, bool>, std::vector<int>>
Emitter::assignBuckets(int stage, const std::vector<Step> &steps) {
  std::map<std::pair<size_t, bool>, std::vector<int>> after;
  constexpr int64_t kBucketBytes = int64_t(25) << 20;
  // The execution order of the backward halves: (step index, weight half).
  std::vector<std::vector<std::pair<size_t, bool>>> sequences(1);
  for (size_t i = steps.size(); i-- > 0;) {
    sequences[0].push_back({i, false});
    if (!splitBackward_)
      sequences[0].push_back({i, true});
  }
  if (splitBackward_) {
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
        if (__builtin_popcountll(deviceMask_[size_t(t)]) == 1)
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
        const int k = L_.tpPartialGrads.count(t) ? 1 : 0;
        if (k == 0 && plan_.knobs.dp == 1) // nothing to sum
          continue;
        Bucket &b = open[k];
        auto it = last.find(t);
        if (it == last.end() || it->second != pos ||
            std::find(b.params.begin(), b.params.end(), t) != b.params.end())
          continue;
        b.params.push_back(t);
        b.weightPart = splitBackward_ && pos.second;
        bytes[k] += 4 * numel(local(t, L_.tensors[size_t(t)]));
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

/// The cuda program's configure_grad_sync(): each bucket's gradients and how
/// many backward passes (micro-batches) complete it on the device holding it.
std::string Emitter::gradSyncConfig(const pipeline::Schedule &sched) const {
  std::string out =
      "// Data-parallel gradient buckets (~25 MiB of fp32 gradients each, in "
      "the order backward\n// completes them): all-reduced on their own stream "
      "once the last micro-batch's backward\n// has written them, overlapping "
      "the rest of the backward pass.\n";
  out += fmt::format("constexpr int kBuckets = {};\n", buckets_.size());
  out += "static void configure_grad_sync() {\n";
  if (buckets_.empty()) {
    out += "  grad_sync.configure(g.dp, {}, {});\n}\n\n";
    return out;
  }
  out +=
      "  std::vector<std::vector<std::pair<float *, int64_t>>> "
      "buckets(kBuckets);\n  std::vector<int> expected(kBuckets, 0);\n"
      "  auto add = [&](Param &p, int b) {\n    buckets[size_t(b)].push_back("
      "{p.grad.data(), p.n});\n    p.bucket = b;\n  };\n";
  std::vector<std::string> blocks;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket &k = buckets_[b];
    int count = 0;
    for (const auto &dev : sched.devices)
      for (const auto &ins : dev)
        if (ins.stage == k.stage &&
            (ins.kind == OpKind::FullBackward ||
             ins.kind ==
                 (k.weightPart ? OpKind::WeightGradient : OpKind::Backward)))
          ++count;
    std::string block = fmt::format("  if (holds_stage({})) {{ // stage {}\n",
                                    k.stage, k.stage);
    // A bucket's gradients in their order; a layer table's runs as a loop.
    std::vector<std::string> adds;
    for (int t : k.params)
      adds.push_back(fmt::format("    add(P.{}, {});\n", names_[size_t(t)], b));
    block += foldRuns(adds, "    ", "l");
    blocks.push_back(block +
                     fmt::format("    expected[{}] = {};\n  }}\n", b, count));
  }
  // Buckets of one shape (a layer's, per layer) as a loop: each bucket is
  // filled on its own, so the order between them does not matter.
  out += foldBlocks(blocks, "  ", true);
  out += "  grad_sync.configure(g.dp, std::move(buckets), "
         "std::move(expected));\n";
  bool anyPartial = false;
  for (const Bucket &k : buckets_)
    anyPartial |= k.tpPartial;
  if (anyPartial) {
    // Collective over the world: every rank splits, whatever it holds.
    out += "  // Gradients partial over tp as well: one all-reduce over the "
           "stage's dp x tp ranks.\n  static const Comm dp_tp = comm_split("
           "int(g.rpp), world().rank);\n";
    std::vector<std::string> comms;
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (buckets_[b].tpPartial)
        comms.push_back(
            fmt::format("  grad_sync.set_bucket_comm({}, dp_tp);\n", b));
    out += foldRuns(comms, "  ", "b");
  }
  out += "}\n\n";
  return out;
}

} // namespace autoddl::codegen::emit
