//===- ChromeTraceTest.cpp - the Chrome-trace writer and pipeline adapter -===//
#include "cost_model/pipeline/PipelineTrace.h"
#include "tests/unit/pipeline/PipelineTestUtil.h"

#include <nlohmann/json.hpp>

namespace autoddl::pipeline {
namespace {

using testing::config;
using testing::makeSchedule;

TEST(ChromeTrace, RendersMetadataAndCompleteEvents) {
  trace::ChromeTrace chrome;
  chrome.nameProcess(3, "rank 3");
  chrome.nameThread(3, 1, "nccl stream");
  chrome.add({3,
              1,
              "all_reduce",
              "comm",
              10.5,
              2.0,
              {{"bytes", std::int64_t{4096}}, {"algo", std::string("ring")}}});
  nlohmann::json doc = nlohmann::json::parse(chrome.render());
  const nlohmann::json &events = doc.at("traceEvents");
  ASSERT_EQ(events.size(), 4u); // process name, thread name + sort, 1 event
  EXPECT_EQ(events[0]["name"], "process_name");
  EXPECT_EQ(events[0]["args"]["name"], "rank 3");
  EXPECT_EQ(events[1]["name"], "thread_name");
  EXPECT_EQ(events[1]["tid"], 1);
  const nlohmann::json &x = events[3];
  EXPECT_EQ(x["ph"], "X");
  EXPECT_EQ(x["pid"], 3);
  EXPECT_EQ(x["ts"], 10.5);
  EXPECT_EQ(x["dur"], 2.0);
  EXPECT_EQ(x["cat"], "comm");
  EXPECT_EQ(x["args"]["bytes"], 4096);
  EXPECT_EQ(x["args"]["algo"], "ring");
}

TEST(PipelineTrace, OneRowPerStageOneEventPerInstruction) {
  Schedule s = makeSchedule(config(ScheduleKind::ZeroBubbleH1, 3, 4));
  OrError<SimulationResult> r = simulate(s, StageTimes::uniform(3, 1, 2, 1));
  ASSERT_TRUE(bool(r)) << r.error();
  nlohmann::json doc =
      nlohmann::json::parse(pipelineTrace(s, *r, 1000).render());
  int complete = 0, threadNames = 0;
  for (const nlohmann::json &event : doc.at("traceEvents")) {
    if (event["ph"] == "M" && event["name"] == "thread_name") {
      EXPECT_EQ(event["args"]["name"],
                "stage " + std::to_string(event["tid"].get<int>()));
      ++threadNames;
    }
    if (event["ph"] != "X")
      continue;
    ++complete;
    std::string name = event["name"];
    int microbatch = event["args"]["microbatch"];
    EXPECT_EQ(name.substr(1), std::to_string(microbatch));
    // Times are in µs: 1 time unit = 1000 µs, every F lasts f = 1.
    if (name[0] == 'F') {
      EXPECT_DOUBLE_EQ(event["dur"].get<double>(), 1000.0);
    }
  }
  EXPECT_EQ(threadNames, 3);
  // p x m x {F, B, W}
  EXPECT_EQ(complete, 3 * 4 * 3);
}

} // namespace
} // namespace autoddl::pipeline
