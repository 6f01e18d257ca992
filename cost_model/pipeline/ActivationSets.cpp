//===- ActivationSets.cpp - micro-batches assigned to activation sets -----===//
#include "cost_model/pipeline/ActivationSets.h"

#include <algorithm>
#include <limits>
#include <map>
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

/// Per device: the instruction index at which each message it receives is
/// posted (the first want of it or of a later message of the same sender).
std::vector<std::map<MessageKey, size_t>> postIndices(const Schedule &s) {
  const int p = s.numDevices(), last = s.modelStages() - 1;
  // Per (sender, receiver): the messages in the sender's order.
  std::map<std::pair<int, int>, std::vector<MessageKey>> sent;
  for (int e = 0; e < p; ++e)
    for (const Instruction &ins : s.devices[size_t(e)]) {
      if (ins.kind == OpKind::Forward && ins.stage < last)
        sent[{e, s.deviceOf(ins.stage + 1, ins.direction)}].push_back(
            {ins.stage + 1, ins.microbatch, false});
      else if (isBackward(ins.kind) && ins.stage > 0)
        sent[{e, s.deviceOf(ins.stage - 1, ins.direction)}].push_back(
            {ins.stage - 1, ins.microbatch, true});
    }
  std::vector<std::map<MessageKey, size_t>> posted(static_cast<size_t>(p));
  for (int d = 0; d < p; ++d) {
    std::map<MessageKey, size_t> wanted;
    const auto &list = s.devices[size_t(d)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Instruction &ins = list[i];
      if (ins.kind == OpKind::Forward && ins.stage > 0)
        wanted.emplace(MessageKey{ins.stage, ins.microbatch, false}, i);
      else if (isBackward(ins.kind) && ins.stage < last)
        wanted.emplace(MessageKey{ins.stage, ins.microbatch, true}, i);
    }
    for (const auto &[link, order] : sent) {
      if (link.second != d || link.first == d)
        continue; // another receiver's, or a stage passing to itself
      size_t post = std::numeric_limits<size_t>::max();
      for (size_t q = order.size(); q-- > 0;) {
        auto w = wanted.find(order[q]);
        if (w != wanted.end())
          post = std::min(post, w->second);
        posted[size_t(d)][order[q]] = post;
      }
    }
  }
  return posted;
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
  // Per device, (stage, micro-batch): when its set is taken and given back,
  // on the device's instruction positions (a read at slot s: s - 0.5).
  struct Life {
    double take = std::numeric_limits<double>::infinity(), giveBack = -1;
  };
  std::vector<std::map<std::pair<int, int>, Life>> lives(
      static_cast<size_t>(p));
  for (int d = 0; d < p; ++d) {
    const auto &list = s.devices[size_t(d)];
    for (size_t i = 0; i < list.size(); ++i) {
      Life &l = lives[size_t(d)][{list[i].stage, list[i].microbatch}];
      l.take = std::min(l.take, double(i));
      l.giveBack = std::max(l.giveBack, double(i));
    }
  }
  const auto posted = postIndices(s);
  for (int d = 0; d < p; ++d)
    for (const auto &[key, index] : posted[size_t(d)]) {
      auto it = lives[size_t(d)].find({std::get<0>(key), std::get<1>(key)});
      if (it != lives[size_t(d)].end())
        it->second.take = std::min(it->second.take, double(index));
    }
  for (const SetRead &r : reads) {
    if (r.device < 0 || r.device >= p ||
        r.slot > s.devices[size_t(r.device)].size())
      return OrError<ActivationSets>::failure(
          "activation sets: a read at slot " + std::to_string(r.slot) +
          " of device " + std::to_string(r.device) +
          ", which the schedule does not have");
    auto it = lives[size_t(r.device)].find({r.stage, r.microbatch});
    if (it == lives[size_t(r.device)].end())
      return OrError<ActivationSets>::failure(
          "activation sets: a read of stage " + std::to_string(r.stage) +
          " micro-batch " + std::to_string(r.microbatch) + " on device " +
          std::to_string(r.device) + ", which does not run it");
    it->second.giveBack = std::max(it->second.giveBack, double(r.slot) - 0.5);
  }
  for (int d = 0; d < p; ++d) {
    // In take order (ties: stage, then micro-batch, for a fixed table).
    std::vector<std::tuple<double, int, int, double>> order;
    for (const auto &[key, l] : lives[size_t(d)])
      order.emplace_back(l.take, key.first, key.second, l.giveBack);
    std::sort(order.begin(), order.end());
    // Per stage: each set's holder and when it is given back.
    std::map<int, std::vector<std::pair<int, double>>> held;
    for (const auto &[take, stage, mb, giveBack] : order) {
      auto &sets = held[stage];
      size_t set = 0;
      while (set < sets.size() && !(sets[set].second < take))
        ++set;
      SetTake t;
      t.index = size_t(take);
      t.stage = stage;
      t.microbatch = mb;
      t.set = int(set);
      if (set == sets.size())
        sets.push_back({mb, giveBack});
      else
        t.previous = std::exchange(sets[set], {mb, giveBack}).first;
      out.setOf[size_t(stage)][size_t(mb)] = t.set;
      out.count[size_t(stage)] =
          std::max(out.count[size_t(stage)], int(sets.size()));
      out.takes[size_t(d)].push_back(t);
    }
  }
  return out;
}

std::vector<SetRead> stepEndReads(const Schedule &schedule) {
  std::vector<SetRead> reads;
  for (size_t d = 0; d < schedule.devices.size(); ++d)
    for (const Instruction &ins : schedule.devices[d])
      reads.push_back({static_cast<int>(d), ins.stage, ins.microbatch,
                       schedule.devices[d].size()});
  return reads;
}

} // namespace autoddl::pipeline
