//===- ActivationSets.cpp - micro-batches assigned to activation sets -----===//
#include "cost_model/pipeline/ActivationSets.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <string>
#include <tuple>
#include <utility>

namespace autoddl::pipeline {
namespace {

/// A pipeline message as its receiver names it: the receiving stage, the
/// micro-batch, and whether it is a gradient (else an activation).
using MessageKey = std::tuple<int, int, bool>;

bool isBackward(OpKind kind) {
  return kind == OpKind::Backward || kind == OpKind::FullBackward;
}

/// A device's (stage, micro-batch) pairs on flat arrays: its stages get local
/// indices 0..n-1 (a device runs at most 2v of them), so a table per pair is
/// n x m entries, not stages x m, and no map is walked (planning prices
/// thousands of schedules of up to millions of instructions).
struct DeviceIndex {
  std::vector<int> local;  // per model stage: its index on the device, or -1
  std::vector<int> stages; // per local index: the model stage
  int m = 0;
  DeviceIndex(const std::vector<Instruction> &list, int modelStages, int mbs)
      : local(size_t(modelStages), -1), m(mbs) {
    for (const Instruction &ins : list)
      if (local[size_t(ins.stage)] < 0) {
        local[size_t(ins.stage)] = int(stages.size());
        stages.push_back(ins.stage);
      }
  }
  /// The pair's slot, or -1 when the device does not run the stage.
  long slot(int stage, int microbatch) const {
    if (stage < 0 || stage >= int(local.size()) || local[size_t(stage)] < 0 ||
        microbatch < 0 || microbatch >= m)
      return -1;
    return long(local[size_t(stage)]) * m + microbatch;
  }
  size_t size() const { return stages.size() * size_t(m); }
};

/// When a (stage, micro-batch) set is taken and given back, on the device's
/// instruction positions (a read at slot s: s - 0.5); giveBack < 0: the
/// device does not hold it.
struct Life {
  double take = std::numeric_limits<double>::infinity(), giveBack = -1;
};

/// Lowers each take to the index at which the device posts the message that
/// fills the set (the first want of it or of a later message of the same
/// sender), per device.
void applyPosts(const Schedule &s, const std::vector<DeviceIndex> &index,
                std::vector<std::vector<Life>> &lives) {
  const int p = s.numDevices(), last = s.modelStages() - 1;
  // Per sender, per receiver (a few: the pipeline neighbours): the messages
  // in the sender's order.
  using Link = std::pair<int, std::vector<MessageKey>>;
  std::vector<std::vector<Link>> sent(static_cast<size_t>(p));
  auto add = [&](int e, int to, MessageKey key) {
    for (Link &l : sent[size_t(e)])
      if (l.first == to) {
        l.second.push_back(key);
        return;
      }
    sent[size_t(e)].push_back({to, {key}});
  };
  for (int e = 0; e < p; ++e)
    for (const Instruction &ins : s.devices[size_t(e)]) {
      if (ins.kind == OpKind::Forward && ins.stage < last)
        add(e, s.deviceOf(ins.stage + 1, ins.direction),
            {ins.stage + 1, ins.microbatch, false});
      else if (isBackward(ins.kind) && ins.stage > 0)
        add(e, s.deviceOf(ins.stage - 1, ins.direction),
            {ins.stage - 1, ins.microbatch, true});
    }
  // Per receiver, its links by sender (a stage passing to itself is none).
  std::vector<std::vector<const std::vector<MessageKey> *>> into(
      static_cast<size_t>(p));
  for (int e = 0; e < p; ++e)
    for (const Link &l : sent[size_t(e)])
      if (l.first != e && l.first >= 0 && l.first < p)
        into[size_t(l.first)].push_back(&l.second);
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  for (int d = 0; d < p; ++d) {
    const DeviceIndex &ix = index[size_t(d)];
    // Per (slot, gradient): the first instruction wanting the message.
    std::vector<size_t> wanted(2 * ix.size(), kNever);
    const auto &list = s.devices[size_t(d)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Instruction &ins = list[i];
      const bool grad = isBackward(ins.kind);
      if ((ins.kind == OpKind::Forward && ins.stage > 0) ||
          (grad && ins.stage < last)) {
        size_t &w =
            wanted[2 * size_t(ix.slot(ins.stage, ins.microbatch)) + grad];
        w = std::min(w, i);
      }
    }
    // A message's post: the earliest want of it or of a later one on its
    // link; the last link naming a message decides (as a map written in
    // link order would).
    std::vector<size_t> posted(2 * ix.size(), kNever);
    std::vector<char> named(2 * ix.size(), 0);
    for (const std::vector<MessageKey> *order : into[size_t(d)]) {
      size_t post = kNever;
      for (size_t q = order->size(); q-- > 0;) {
        const auto &[stage, mb, grad] = (*order)[q];
        const long at = ix.slot(stage, mb);
        if (at < 0)
          continue; // no want and no life on this device
        const size_t key = 2 * size_t(at) + grad;
        post = std::min(post, wanted[key]);
        posted[key] = post;
        named[key] = 1;
      }
    }
    for (size_t key = 0; key < posted.size(); ++key)
      if (named[key] && lives[size_t(d)][key / 2].giveBack >= 0)
        lives[size_t(d)][key / 2].take =
            std::min(lives[size_t(d)][key / 2].take, double(posted[key]));
  }
}

/// Per device: its (stage, micro-batch) index and the life of each set,
/// posts and reads applied; "" or why a read is wrong.
struct Lifetimes {
  std::vector<DeviceIndex> index;
  std::vector<std::vector<Life>> lives;
};
std::string lifetimes(const Schedule &s, const std::vector<SetRead> &reads,
                      Lifetimes &out) {
  const int p = s.numDevices(), stages = s.modelStages();
  const int m = s.config.microbatches;
  std::vector<DeviceIndex> &index = out.index;
  std::vector<std::vector<Life>> &lives = out.lives;
  lives.resize(static_cast<size_t>(p));
  for (int d = 0; d < p; ++d) {
    const auto &list = s.devices[size_t(d)];
    index.emplace_back(list, stages, m);
    lives[size_t(d)].assign(index.back().size(), Life{});
    for (size_t i = 0; i < list.size(); ++i) {
      Life &l =
          lives[size_t(d)]
               [size_t(index.back().slot(list[i].stage, list[i].microbatch))];
      l.take = std::min(l.take, double(i));
      l.giveBack = std::max(l.giveBack, double(i));
    }
  }
  applyPosts(s, index, lives);
  for (const SetRead &r : reads) {
    if (r.device < 0 || r.device >= p ||
        r.slot > s.devices[size_t(r.device)].size())
      return "activation sets: a read at slot " + std::to_string(r.slot) +
             " of device " + std::to_string(r.device) +
             ", which the schedule does not have";
    const long at = index[size_t(r.device)].slot(r.stage, r.microbatch);
    if (at < 0 || lives[size_t(r.device)][size_t(at)].giveBack < 0)
      return "activation sets: a read of stage " + std::to_string(r.stage) +
             " micro-batch " + std::to_string(r.microbatch) + " on device " +
             std::to_string(r.device) + ", which does not run it";
    Life &l = lives[size_t(r.device)][size_t(at)];
    l.giveBack = std::max(l.giveBack, double(r.slot) - 0.5);
  }
  return "";
}

} // namespace

OrError<ActivationSets>
assignActivationSets(const Schedule &s, const std::vector<SetRead> &reads) {
  const int p = s.numDevices(), stages = s.modelStages();
  const int m = s.config.microbatches;
  ActivationSets out;
  out.count.assign(size_t(stages), 0);
  out.setOf.assign(size_t(stages), std::vector<int>(size_t(m), -1));
  out.takes.assign(size_t(p), {});
  Lifetimes lt;
  if (std::string why = lifetimes(s, reads, lt); !why.empty())
    return OrError<ActivationSets>::failure(why);
  const std::vector<DeviceIndex> &index = lt.index;
  const std::vector<std::vector<Life>> &lives = lt.lives;
  for (int d = 0; d < p; ++d) {
    const DeviceIndex &ix = index[size_t(d)];
    // In take order (ties: stage, then micro-batch, for a fixed table).
    std::vector<std::tuple<double, int, int, double>> order;
    for (size_t at = 0; at < ix.size(); ++at)
      if (const Life &l = lives[size_t(d)][at]; l.giveBack >= 0)
        order.emplace_back(l.take, ix.stages[at / size_t(m)],
                           int(at % size_t(m)), l.giveBack);
    std::sort(order.begin(), order.end());
    // Per local stage: each set's holder, the sets given back (by when) and
    // the free ones (by index). Takes come in order, so a set given back
    // before one take is free for every later one: the lowest free set is
    // the lowest given back before the take.
    using Busy = std::pair<double, int>; // (given back at, set)
    struct Held {
      std::vector<int> holder;
      std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
      std::priority_queue<int, std::vector<int>, std::greater<int>> free;
    };
    std::vector<Held> held(ix.stages.size());
    for (const auto &[take, stage, mb, giveBack] : order) {
      Held &h = held[size_t(ix.local[size_t(stage)])];
      while (!h.busy.empty() && h.busy.top().first < take) {
        h.free.push(h.busy.top().second);
        h.busy.pop();
      }
      SetTake t;
      t.index = size_t(take);
      t.stage = stage;
      t.microbatch = mb;
      if (h.free.empty()) {
        t.set = int(h.holder.size());
        h.holder.push_back(mb);
      } else {
        t.set = h.free.top();
        h.free.pop();
        t.previous = std::exchange(h.holder[size_t(t.set)], mb);
      }
      h.busy.push({giveBack, t.set});
      out.setOf[size_t(stage)][size_t(mb)] = t.set;
      out.count[size_t(stage)] =
          std::max(out.count[size_t(stage)], int(h.holder.size()));
      out.takes[size_t(d)].push_back(t);
    }
  }
  return out;
}

OrError<std::vector<int>>
countActivationSets(const Schedule &s, const std::vector<SetRead> &reads) {
  const int p = s.numDevices(), stages = s.modelStages();
  const int m = s.config.microbatches;
  Lifetimes lt;
  if (std::string why = lifetimes(s, reads, lt); !why.empty())
    return OrError<std::vector<int>>::failure(why);
  std::vector<int> count(size_t(stages), 0);
  std::vector<int> cover;
  for (int d = 0; d < p; ++d) {
    const DeviceIndex &ix = lt.index[size_t(d)];
    const std::vector<Life> &lives = lt.lives[size_t(d)];
    // Positions doubled (a read's give-back is at a half slot); a set is
    // held from 2 x take to 2 x giveBack inclusive.
    cover.assign(2 * s.devices[size_t(d)].size() + 2, 0);
    for (size_t ls = 0; ls < ix.stages.size(); ++ls) {
      std::fill(cover.begin(), cover.end(), 0);
      for (int mb = 0; mb < m; ++mb) {
        const Life &l = lives[ls * size_t(m) + size_t(mb)];
        if (l.giveBack < 0)
          continue;
        ++cover[size_t(2 * l.take)];
        --cover[size_t(2 * l.giveBack) + 1];
      }
      int held = 0, peak = 0;
      for (int c : cover)
        peak = std::max(peak, held += c);
      int &n = count[size_t(ix.stages[ls])];
      n = std::max(n, peak);
    }
  }
  return count;
}

bool setsShareGradients(ScheduleKind kind, bool laterReads) {
  return kind != ScheduleKind::ZeroBubbleH1 && !laterReads;
}

} // namespace autoddl::pipeline
