//===- ClosedFormTest.cpp - simulator vs closed forms for equal times
//------===//
//
// With equal per-stage times and free point-to-point transfers every schedule
// has a textbook bubble; the simulator must reproduce it exactly. Formulas and
// their sources: docs/pipeline-simulator.md §4 (pipelines.md §1-§3).
//
//===----------------------------------------------------------------------===//
#include "tests/unit/pipeline/PipelineTestUtil.h"

#include <algorithm>

namespace autoddl::pipeline {
namespace {

using testing::config;
using testing::run;

constexpr double kEps = 1e-9;

struct Times {
  double f, b;
};

TEST(ClosedForm, GPipeAndOneFOneB) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 3, 4, 8, 16})
        for (Times t : {Times{1, 2}, Times{1.5, 2.5}, Times{1, 1}}) {
          SCOPED_TRACE(std::string(scheduleName(kind)) +
                       " p=" + std::to_string(p) + " m=" + std::to_string(m));
          SimulationResult r =
              run(config(kind, p, m), StageTimes::uniform(p, t.f, t.b));
          // Fill and drain each cost p-1 slots of f and b: makespan
          // (m+p-1)(f+b), bubble fraction (p-1)/(m+p-1) (GPipe paper;
          // Narayanan et al. SC'21 eq. for PipeDream-Flush).
          EXPECT_NEAR(r.makespan, (m + p - 1) * (t.f + t.b), kEps);
          EXPECT_NEAR(r.bubbleFraction, double(p - 1) / (m + p - 1), kEps);
          for (int s = 0; s < p; ++s) {
            // Every stage idles (p-1)(f+b): the same per-device bubble.
            EXPECT_NEAR(r.devices[s].idle, (p - 1) * (t.f + t.b), kEps);
            EXPECT_NEAR(r.devices[s].busy, m * (t.f + t.b), kEps);
            // GPipe holds all m micro-batches; 1F1B stage s holds its
            // min(p-s-1, m) warm-up forwards plus one: min(p-s, m).
            double peak = kind == ScheduleKind::GPipe ? m : std::min(p - s, m);
            EXPECT_EQ(r.devices[s].peakActivations, peak);
          }
        }
}

TEST(ClosedForm, InterleavedDividesBubbleByChunks) {
  for (int p : {2, 3, 4, 8})
    for (int v : {2, 3, 4})
      for (int groups : {1, 2, 4})
        for (Times t : {Times{1, 2}, Times{1, 1}}) {
          int m = groups * p;
          SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) +
                       " m=" + std::to_string(m));
          SimulationResult r = run(config(ScheduleKind::Interleaved, p, m, v),
                                   StageTimes::uniform(p, t.f, t.b));
          // Narayanan et al. SC'21 (interleaved schedule): each device idles
          // (p-1)(f+b)/v, so the fraction is (p-1)/(v*m + p-1).
          EXPECT_NEAR(r.bubbleFraction, double(p - 1) / (v * m + p - 1), kEps);
          EXPECT_NEAR(r.makespan, m * (t.f + t.b) + (p - 1) * (t.f + t.b) / v,
                      kEps);
          for (int s = 0; s < p; ++s)
            EXPECT_NEAR(r.devices[s].idle, (p - 1) * (t.f + t.b) / v, kEps);
          // Device 0 holds its 2(p-1) + (v-1)p warm-up chunk forwards plus
          // one, each 1/v of a stage: (vp + p - 1)/v = p(1 + (p-1)/(pv))
          // (Korthikanti et al.); with m == p all m*v forwards run first.
          double peak = m == p ? m : double(v * p + p - 1) / v;
          EXPECT_NEAR(r.devices[0].peakActivations, peak, kEps);
        }
}

TEST(ClosedForm, ZeroBubbleH1) {
  struct Split {
    double f, bwd, w; // bwd = B + W, the CLI's --bwd
  };
  for (int p : {2, 3, 4, 8})
    for (int m : {p, 2 * p, 3 * p + 1, 32})
      for (Split t : {Split{1, 2, 1}, Split{1, 2, 0.8}, Split{1, 2, 0.5},
                      Split{2, 3, 1}}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " f=" + std::to_string(t.f) + " w=" + std::to_string(t.w));
        SimulationResult r = run(config(ScheduleKind::ZeroBubbleH1, p, m),
                                 StageTimes::uniform(p, t.f, t.bwd, t.w));
        double b = t.bwd - t.w;
        // Qi et al. ICLR'24 (zero bubble, ZB-H1): idles (p-1)(T_F + T_B - T_W)
        // per device (T_B = input-gradient part), valid while T_W <= T_F; in
        // the CLI's terms (p-1)(f + bwd - 2w).
        double idle = (p - 1) * (t.f + b - t.w);
        EXPECT_NEAR(r.makespan, m * (t.f + t.bwd) + idle, kEps);
        for (int s = 0; s < p; ++s) {
          EXPECT_NEAR(r.devices[s].idle, idle, kEps);
          // F..W in flight stays at p on every stage (1F1B's stage-0 peak).
          EXPECT_EQ(r.devices[s].peakActivations, p);
        }
      }
}

TEST(ClosedForm, ZeroBubbleH1WithWeightGradientLongerThanForward) {
  // Derived with this simulator (docs/pipeline-simulator.md §4.4): when
  // T_W > T_F a deferred W can hide at most one forward's worth of each
  // boundary bubble, so the idle time is (p-1)(T_F + T_B - min(T_W, T_F)).
  for (int p : {2, 4, 8})
    for (double w : {1.5, 2.0, 3.0}) {
      double f = 1, bwd = 2 * w; // B = W = w > f
      SimulationResult r = run(config(ScheduleKind::ZeroBubbleH1, p, 4 * p),
                               StageTimes::uniform(p, f, bwd, w));
      double b = bwd - w;
      EXPECT_NEAR(r.devices[0].idle, (p - 1) * (f + b - std::min(w, f)), kEps);
    }
}

TEST(ClosedForm, ChimeraMatchesPipelinesReferenceTable) {
  // pipelines.md §3.2 (simulated there from the same per-worker rule and
  // agreeing with the Chimera paper's (D-2)/(2N+D-2) for equal F/B slots and
  // with pipe-fisher's D*T_F + (2D-2)*T_B for one basic unit).
  struct Row {
    int d, n;
    double f, b, makespan, idle;
  };
  for (Row row :
       {Row{4, 4, 1, 1, 10, 2}, Row{8, 8, 1, 1, 22, 6}, Row{4, 4, 1, 2, 16, 4},
        Row{8, 8, 1, 2, 36, 12}, Row{4, 8, 1, 1, 18, 2},
        Row{8, 16, 1, 1, 38, 6}, Row{4, 8, 1, 2, 30, 6}}) {
    SCOPED_TRACE("D=" + std::to_string(row.d) + " N=" + std::to_string(row.n));
    SimulationResult r = run(config(ScheduleKind::Chimera, row.d, row.n),
                             StageTimes::uniform(row.d, row.f, row.b));
    EXPECT_NEAR(r.makespan, row.makespan, kEps);
    for (const DeviceResult &device : r.devices)
      EXPECT_NEAR(device.idle, row.idle, kEps);
    if (row.f == row.b) {
      int d = row.d, n = row.n;
      EXPECT_NEAR(r.bubbleFraction, double(d - 2) / (2 * n + d - 2), kEps);
    }
    if (row.n == row.d) {
      // One basic unit: D forwards and 2D-2 backwards on the critical path.
      EXPECT_NEAR(r.makespan, row.d * row.f + (2 * row.d - 2) * row.b, kEps);
    }
    // Chimera paper: activations between (D/2+1) and D micro-batches.
    for (const DeviceResult &device : r.devices) {
      EXPECT_GE(device.peakActivations, row.d / 2 + 1);
      EXPECT_LE(device.peakActivations, row.d);
    }
  }
}

TEST(ClosedForm, ChimeraBeatsOneFOneBAtEqualWork) {
  // Same devices and micro-batches: Chimera's bubble (D-2)/(2N+D-2) is below
  // 1F1B's (p-1)/(m+p-1) (half the fill/drain on each of two directions).
  for (int p : {4, 8}) {
    SimulationResult chimera =
        run(config(ScheduleKind::Chimera, p, p), StageTimes::uniform(p, 1, 1));
    SimulationResult oneF =
        run(config(ScheduleKind::OneFOneB, p, p), StageTimes::uniform(p, 1, 1));
    EXPECT_LT(chimera.makespan, oneF.makespan);
  }
}

TEST(ClosedForm, PointToPointAddsPerHopLatencyToFillAndDrain) {
  // With one micro-batch the step is a single chain: F through p stages,
  // then B back through p stages, with 2(p-1) transfers of c in between, so
  // makespan = p(f + b) + 2(p-1)c.
  for (int p : {2, 3, 5}) {
    double c = 0.25;
    SimulationResult r = run(config(ScheduleKind::OneFOneB, p, 1),
                             StageTimes::uniform(p, 1, 2, 0, c));
    EXPECT_NEAR(r.makespan, p * 3 + 2 * (p - 1) * c, kEps);
  }
}

} // namespace
} // namespace autoddl::pipeline
