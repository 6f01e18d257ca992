//===- ActivationSetsTest.cpp - micro-batches assigned to activation sets -===//
//
// The counts are worked from the schedules' rules (DESIGN.md §5b): 1F1B holds
// p - s micro-batches on stage s, GPipe all m, one device accumulating one.
// Every assignment is also checked against the lists themselves: two
// micro-batches share a set only when the first's last use (and its reads)
// precedes the second's first instruction.
//
//===----------------------------------------------------------------------===//
#include "cost_model/pipeline/ActivationSets.h"
#include "tests/unit/pipeline/PipelineTestUtil.h"

#include <map>

namespace autoddl::pipeline {
namespace {

using testing::config;
using testing::makeSchedule;

/// A read of every (stage, micro-batch) each device runs, at its list's end.
std::vector<SetRead> stepEndReads(const Schedule &schedule) {
  std::vector<SetRead> reads;
  for (size_t d = 0; d < schedule.devices.size(); ++d)
    for (const Instruction &ins : schedule.devices[d])
      reads.push_back({static_cast<int>(d), ins.stage, ins.microbatch,
                       schedule.devices[d].size()});
  return reads;
}

ActivationSets setsOf(const Schedule &s, const std::vector<SetRead> &r = {}) {
  auto sets = assignActivationSets(s, r);
  EXPECT_TRUE(sets) << sets.error();
  return sets ? *sets : ActivationSets{};
}

/// No set holds two micro-batches at once on any device (by instruction
/// positions; reads counted at their slot).
void expectNoOverlap(const Schedule &s, const ActivationSets &a,
                     const std::vector<SetRead> &reads = {}) {
  for (int d = 0; d < s.numDevices(); ++d) {
    std::map<std::pair<int, int>, std::pair<double, double>> span;
    const auto &list = s.devices[size_t(d)];
    for (size_t i = 0; i < list.size(); ++i) {
      auto [it, isNew] = span.try_emplace({list[i].stage, list[i].microbatch},
                                          double(i), double(i));
      it->second.second = double(i);
      (void)isNew;
    }
    for (const SetRead &r : reads)
      if (r.device == d) {
        auto &sp = span[{r.stage, r.microbatch}];
        sp.second = std::max(sp.second, double(r.slot) - 0.5);
      }
    for (const auto &[x, sx] : span)
      for (const auto &[y, sy] : span) {
        if (x >= y || x.first != y.first)
          continue;
        if (a.setOf[size_t(x.first)][size_t(x.second)] !=
            a.setOf[size_t(y.first)][size_t(y.second)])
          continue;
        EXPECT_TRUE(sx.second < sy.first || sy.second < sx.first)
            << "device " << d << " stage " << x.first << ": micro-batches "
            << x.second << " and " << y.second << " share a set while alive";
      }
  }
}

TEST(ActivationSets, OneFOneBKeepsPMinusSOnStageS) {
  Schedule s = makeSchedule(config(ScheduleKind::OneFOneB, 4, 8));
  ActivationSets a = setsOf(s);
  EXPECT_EQ(a.count, (std::vector<int>{4, 3, 2, 1}));
  // Stage 3 (last): every micro-batch in set 0, each after the previous one.
  EXPECT_EQ(a.setOf[3], std::vector<int>(8, 0));
  // Stage 0: micro-batch 4 takes micro-batch 0's set after B0.
  EXPECT_EQ(a.setOf[0][4], a.setOf[0][0]);
  expectNoOverlap(s, a);
}

TEST(ActivationSets, OneFOneBBoundedByMicroBatches) {
  Schedule s = makeSchedule(config(ScheduleKind::OneFOneB, 4, 2));
  EXPECT_EQ(setsOf(s).count, (std::vector<int>{2, 2, 2, 1}));
}

TEST(ActivationSets, GPipeKeepsEveryMicroBatch) {
  Schedule s = makeSchedule(config(ScheduleKind::GPipe, 2, 8));
  EXPECT_EQ(setsOf(s).count, (std::vector<int>{8, 8}));
}

TEST(ActivationSets, AccumulationOnOneDeviceKeepsOne) {
  for (ScheduleKind kind :
       {ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1}) {
    Schedule s = makeSchedule(config(kind, 1, 8));
    ActivationSets a = setsOf(s);
    EXPECT_EQ(a.count, std::vector<int>{1});
    EXPECT_EQ(a.takes[0].size(), 8u);
    EXPECT_EQ(a.takes[0][1].previous, 0);
  }
}

TEST(ActivationSets, ZeroBubbleHoldsUntilTheWeightGradient) {
  Schedule s = makeSchedule(config(ScheduleKind::ZeroBubbleH1, 4, 8));
  ActivationSets a = setsOf(s);
  // W of micro-batch j runs after B of j + s: stage s holds s more.
  for (int st = 0; st < 4; ++st)
    EXPECT_GE(a.count[size_t(st)], 4 - st);
  expectNoOverlap(s, a);
}

TEST(ActivationSets, InterleavedAndChimeraNeverShareALiveSet) {
  for (auto c : {config(ScheduleKind::Interleaved, 2, 8, 2),
                 config(ScheduleKind::Interleaved, 4, 8, 2),
                 config(ScheduleKind::Chimera, 2, 8),
                 config(ScheduleKind::Chimera, 4, 8)}) {
    Schedule s = makeSchedule(c);
    ActivationSets a = setsOf(s);
    for (int n : a.count) {
      EXPECT_GE(n, 1);
      EXPECT_LE(n, c.microbatches);
    }
    expectNoOverlap(s, a);
  }
}

TEST(ActivationSets, AReadKeepsTheSetUntilItsSlot) {
  Schedule s = makeSchedule(config(ScheduleKind::OneFOneB, 1, 4));
  // A read of micro-batch 0 at the list's end: it keeps its own set.
  std::vector<SetRead> reads = {{0, 0, 0, s.devices[0].size()}};
  ActivationSets a = setsOf(s, reads);
  EXPECT_EQ(a.count, std::vector<int>{2});
  expectNoOverlap(s, a, reads);
  // One read right after micro-batch 0's backward (slot 2) frees it for F1.
  EXPECT_EQ(setsOf(s, {{0, 0, 0, 2}}).count, std::vector<int>{1});
}

TEST(ActivationSets, BadReadIsAnError) {
  Schedule s = makeSchedule(config(ScheduleKind::OneFOneB, 2, 2));
  EXPECT_FALSE(assignActivationSets(s, {{0, 1, 0, 0}})); // stage 1 not on 0
  EXPECT_FALSE(assignActivationSets(s, {{0, 0, 0, 99}}));
  EXPECT_FALSE(assignActivationSets(s, {{5, 0, 0, 0}}));
}

/// Every schedule of a small grid, with no reads, K-FAC's step-end reads and
/// a read per device mid-list: the counts alone (countActivationSets, what
/// the planner prices) are the table's counts.
TEST(ActivationSets, CountsAloneAreTheTablesCounts) {
  std::vector<ScheduleConfig> grid;
  for (int p : {1, 2, 3, 4, 6, 8})
    for (int m : {1, 2, 3, 4, 5, 8, 12, 16}) {
      for (auto k : {ScheduleKind::OneFOneB, ScheduleKind::GPipe,
                     ScheduleKind::ZeroBubbleH1})
        grid.push_back(config(k, p, m));
      if (p > 1 && m % p == 0) {
        for (int v : {2, 3, 4})
          grid.push_back(config(ScheduleKind::Interleaved, p, m, v));
        if (p % 2 == 0)
          grid.push_back(config(ScheduleKind::Chimera, p, m));
      }
    }
  for (const ScheduleConfig &c : grid) {
    auto schedule = generateSchedule(c);
    if (!schedule)
      continue; // a configuration the schedule refuses
    const Schedule &s = *schedule;
    std::vector<SetRead> mid;
    for (int d = 0; d < s.numDevices(); ++d) {
      const auto &list = s.devices[size_t(d)];
      mid.push_back(
          {d, list.front().stage, list.front().microbatch, list.size() / 2});
    }
    for (const auto &reads : {std::vector<SetRead>{}, stepEndReads(s), mid}) {
      auto table = assignActivationSets(s, reads);
      auto counts = countActivationSets(s, reads);
      ASSERT_TRUE(table && counts);
      EXPECT_EQ(*counts, table->count)
          << scheduleName(c.kind) << " p=" << c.stages
          << " m=" << c.microbatches << " v=" << c.chunks << " with "
          << reads.size() << " reads";
    }
  }
  Schedule s = makeSchedule(config(ScheduleKind::OneFOneB, 2, 2));
  EXPECT_FALSE(countActivationSets(s, {{0, 1, 0, 0}})); // stage 1 not on 0
}

} // namespace
} // namespace autoddl::pipeline
