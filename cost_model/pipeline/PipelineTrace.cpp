//===- PipelineTrace.cpp - a simulated pipeline step as a Chrome trace ---===//
#include "cost_model/pipeline/PipelineTrace.h"

namespace autoddl::pipeline {

trace::ChromeTrace pipelineTrace(const Schedule &schedule,
                                 const SimulationResult &result,
                                 double microsecondsPerUnit) {
  trace::ChromeTrace chrome;
  chrome.nameProcess(0, "pipeline " +
                            std::string(scheduleName(schedule.config.kind)));
  for (int d = 0; d < schedule.numDevices(); ++d)
    chrome.nameThread(0, d, "stage " + std::to_string(d));
  for (const ExecutedInstruction &executed : result.timeline) {
    const Instruction &op = executed.op;
    trace::TraceEvent event;
    event.thread = executed.device;
    event.name =
        std::string(opKindLetter(op.kind)) + std::to_string(op.microbatch);
    event.category = op.kind == OpKind::Forward ? "forward" : "backward";
    event.startUs = executed.start * microsecondsPerUnit;
    event.durationUs = (executed.end - executed.start) * microsecondsPerUnit;
    event.args = {
        {"microbatch", std::int64_t{op.microbatch}},
        {"chunk", std::int64_t{op.chunk}},
        {"stage", std::int64_t{op.stage}},
        {"direction",
         std::string(op.direction == Direction::Down ? "down" : "up")},
        {"kind", std::string(op.kind == OpKind::FullBackward
                                 ? "B (full backward)"
                                 : std::string(opKindLetter(op.kind)))},
    };
    chrome.add(std::move(event));
  }
  return chrome;
}

} // namespace autoddl::pipeline
