//===- ScheduleTest.cpp - per-device instruction lists
//---------------------===//
//
// The lists are what the code generator emits, so their exact order matters:
// each expected order below is worked from the generation rule cited in
// Schedule.cpp (and docs/pipeline-simulator.md §2).
//
//===----------------------------------------------------------------------===//
#include "tests/unit/pipeline/PipelineTestUtil.h"

#include <map>
#include <tuple>

namespace autoddl::pipeline {
namespace {

using testing::config;
using testing::makeSchedule;
using testing::orderOf;

TEST(ScheduleNames, RoundTripAndRejectUnknown) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
        ScheduleKind::Chimera, ScheduleKind::ZeroBubbleH1})
    EXPECT_EQ(parseScheduleName(scheduleName(kind)), kind);
  EXPECT_FALSE(parseScheduleName("pipedream"));
  EXPECT_EQ(validScheduleNames(), "gpipe, 1f1b, interleaved, chimera, zb-h1");
}

// Devices' orders worked from their schedule's rule (`why`), as a table.
struct OrderCase {
  const char *why;
  ScheduleConfig cfg;
  std::vector<std::pair<int, const char *>> orders; // device, its order
};

TEST(ScheduleOrder, EachDeviceFollowsItsScheduleRule) {
  const OrderCase cases[] = {
      {"GPipe runs all forwards, then all backwards",
       config(ScheduleKind::GPipe, 2, 3),
       {{0, "F0 F1 F2 B0 B1 B2"}, {1, "F0 F1 F2 B0 B1 B2"}}},
      {"1F1B: stage s warms up with w = p-s-1 forwards (3 on stage 0, 1 on "
       "stage 2), then (F, B) pairs, then w Bs; the last stage (w = 0) "
       "strictly alternates",
       config(ScheduleKind::OneFOneB, 4, 8),
       {{0, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"},
        {2, "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7"},
        {3, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"}}},
      {"1F1B with fewer micro-batches than stages: w = min(p-s-1, m) = "
       "min(3, 2) = 2 on stage 0, GPipe",
       config(ScheduleKind::OneFOneB, 4, 2),
       {{0, "F0 F1 B0 B1"}, {3, "F0 B0 F1 B1"}}},
      {"interleaved with m = p (Megatron: num_microbatches == p): all m*v "
       "forwards are warm-up",
       config(ScheduleKind::Interleaved, 2, 2, 2),
       {{1, "F0 F1 F0:c1 F1:c1 B0:c1 B1:c1 B0 B1"}}},
      {"Chimera with m = 2p: two basic units; the second unit's leading a = "
       "2 slots of worker 0 start with the first unit's pending down "
       "backwards",
       config(ScheduleKind::Chimera, 4, 8),
       {{0, "F0 F1 f4 b4 f5 b5 B0 F2 B1 F3 f6 b6 f7 b7 B2 B3"}}},
      {"ZB-H1 lags W(j) by the stage index: right after B(j) on stage 0; "
       "after B(j+3) on the last stage, its last three Ws drained at the end",
       config(ScheduleKind::ZeroBubbleH1, 4, 6),
       {{0, "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5"},
        {3, "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5"}}},
  };
  for (const OrderCase &c : cases) {
    SCOPED_TRACE(c.why);
    const Schedule s = makeSchedule(c.cfg);
    for (const auto &[device, order] : c.orders)
      EXPECT_EQ(orderOf(s.devices[size_t(device)]), order);
  }
}

TEST(ScheduleOrder, InterleavedFollowsMegatronTable) {
  // p=4, v=2, m=8. Device 0 warm-up = 2(p-0-1) + (v-1)p = 10 forwards. The
  // k-th forward runs chunk (k/4)%2 on micro-batch (k/8)*4 + k%4, so chunks
  // switch every p = 4 forwards; backwards start at the last chunk (v-1).
  Schedule s = makeSchedule(config(ScheduleKind::Interleaved, 4, 8, 2));
  EXPECT_EQ(orderOf(s.devices[0]),
            "F0 F1 F2 F3 F0:c1 F1:c1 F2:c1 F3:c1 F4 F5 "
            "F6 B0:c1 F7 B1:c1 F4:c1 B2:c1 F5:c1 B3:c1 F6:c1 B0 F7:c1 B1 "
            "B2 B3 B4:c1 B5:c1 B6:c1 B7:c1 B4 B5 B6 B7");
  // Device 3 warm-up = 0 + 4 = 4 forwards.
  EXPECT_EQ(orderOf(s.devices[3]).substr(0, 30),
            "F0 F1 F2 F3 F0:c1 B0:c1 F1:c1 ");
  // Chunk c of device d is virtual stage c*p + d.
  for (const Instruction &op : s.devices[3])
    EXPECT_EQ(op.stage, op.chunk * 4 + 3);
}

TEST(ScheduleOrder, ChimeraMatchesPipeFisherRule) {
  // pipelines.md §3.1, D = N = 4: worker 0 "Fd Fd Fu Bu Fu Bu Bd Bd", worker 1
  // "Fd Fu Fd Fu Bu Bd Bu Bd"; workers 2 and 3 mirror them. Down micro-batches
  // are 0,1 and up ones 2,3 (lower case).
  Schedule s = makeSchedule(config(ScheduleKind::Chimera, 4, 4));
  EXPECT_EQ(orderOf(s.devices[0]), "F0 F1 f2 b2 f3 b3 B0 B1");
  EXPECT_EQ(orderOf(s.devices[1]), "F0 f2 F1 f3 b2 B0 b3 B1");
  EXPECT_EQ(orderOf(s.devices[2]), "f2 F0 f3 F1 B0 b2 B1 b3");
  EXPECT_EQ(orderOf(s.devices[3]), "f2 f3 F0 B0 F1 B1 b2 b3");
  // Worker s holds down stage s and up stage p-1-s.
  for (int d = 0; d < 4; ++d)
    for (const Instruction &op : s.devices[d])
      EXPECT_EQ(op.stage, op.direction == Direction::Down ? d : 3 - d);
}

// Every schedule computes each (stage, direction, micro-batch) exactly once
// per kind, on the device that owns the stage.
TEST(ScheduleStructure, EveryWorkItemExactlyOnceOnItsDevice) {
  for (ScheduleConfig cfg :
       {config(ScheduleKind::GPipe, 3, 5), config(ScheduleKind::OneFOneB, 5, 3),
        config(ScheduleKind::OneFOneB, 1, 4),
        config(ScheduleKind::Interleaved, 3, 6, 3),
        config(ScheduleKind::Interleaved, 4, 12, 2),
        config(ScheduleKind::Chimera, 6, 12),
        config(ScheduleKind::Chimera, 2, 4),
        config(ScheduleKind::ZeroBubbleH1, 4, 3),
        config(ScheduleKind::ZeroBubbleH1, 3, 9)}) {
    SCOPED_TRACE(std::string(scheduleName(cfg.kind)) +
                 " p=" + std::to_string(cfg.stages) +
                 " m=" + std::to_string(cfg.microbatches));
    Schedule s = makeSchedule(cfg);
    ASSERT_EQ(static_cast<int>(s.devices.size()), cfg.stages);
    std::map<std::tuple<int, int, int, int>, int> seen; // kind, stage, dir, mb
    for (int d = 0; d < cfg.stages; ++d)
      for (const Instruction &op : s.devices[d]) {
        EXPECT_EQ(s.deviceOf(op.stage, op.direction), d);
        ++seen[{static_cast<int>(op.kind), op.stage,
                static_cast<int>(op.direction), op.microbatch}];
      }
    // Chimera: each pipeline carries m/2 micro-batches through p stages;
    // otherwise one pipeline carries m through p*v stages.
    int kinds = cfg.kind == ScheduleKind::ZeroBubbleH1 ? 3 : 2;
    EXPECT_EQ(static_cast<int>(seen.size()),
              kinds * cfg.microbatches * cfg.stages * cfg.chunks);
    for (const auto &[key, count] : seen)
      EXPECT_EQ(count, 1);
  }
}

} // namespace
} // namespace autoddl::pipeline
