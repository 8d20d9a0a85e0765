#include "client_lib/cohortctl/trace_format.h"

#include <gtest/gtest.h>

namespace cohort::ctl {
namespace {

v1::TraceSpan Span(const std::string& name, int64_t start_ns, int64_t dur_ns,
                   int64_t seq = -1) {
  v1::TraceSpan span;
  span.set_name(name);
  span.set_start_unix_ns(start_ns);
  span.set_duration_ns(dur_ns);
  if (seq >= 0) (*span.mutable_args())["seq"] = std::to_string(seq);
  return span;
}

// Two replicas on two agents; replica 1 starts its all-reduce 300 µs after
// replica 0.
v1::TraceData TwoReplicas() {
  v1::TraceData data;
  data.set_job_id("job-1");
  v1::ReplicaTrace* r0 = data.add_replicas();
  r0->set_replica(0);
  r0->set_task("chief:0");
  *r0->add_spans() = Span("allreduce", 1'100'000, 500'000, 0);
  *r0->add_spans() = Span("step", 1'000'000, 700'000);
  v1::ReplicaTrace* r1 = data.add_replicas();
  r1->set_replica(1);
  r1->set_task("worker:0");
  *r1->add_spans() = Span("allreduce", 1'400'000, 200'000, 0);
  *r1->add_spans() = Span("step", 1'050'000, 650'000);
  return data;
}

const nlohmann::json* Find(const nlohmann::json& trace, const std::string& name,
                           int tid) {
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == name && e["tid"] == tid) return &e;
  }
  return nullptr;
}

// An unparsable "seq" (a corrupt or foreign span) must not end the command.
TEST(ChromeTraceTest, ASpanWhoseSequenceDoesNotParseIsStillDrawn) {
  v1::TraceData data = TwoReplicas();
  (*data.mutable_replicas(1)->mutable_spans(0)->mutable_args())["seq"] = "x7";
  const nlohmann::json trace = ChromeTrace(data);
  EXPECT_NE(Find(trace, "allreduce", 1), nullptr);
}

TEST(ChromeTraceTest, SpansBecomeCompleteEventsOnAProcessPerAgent) {
  const nlohmann::json trace = ChromeTrace(TwoReplicas());
  const nlohmann::json* step = Find(trace, "step", 0);
  ASSERT_NE(step, nullptr);
  EXPECT_DOUBLE_EQ((*step)["ts"].get<double>(), 0.0);  // the first span
  EXPECT_DOUBLE_EQ((*step)["dur"].get<double>(), 700.0);
  const nlohmann::json* other = Find(trace, "step", 1);
  ASSERT_NE(other, nullptr);
  EXPECT_NE((*step)["pid"], (*other)["pid"]);
  int process_names = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++process_names;
  }
  EXPECT_EQ(process_names, 2);
  EXPECT_EQ(trace["otherData"]["start_unix_ns"], 1'000'000);
  EXPECT_TRUE(trace["otherData"]["missing_tasks"].empty());
}

TEST(ChromeTraceTest, AgentsWithoutSpansAreNamedInTheFile) {
  v1::TraceData data = TwoReplicas();
  data.add_missing("worker:1 (failed to connect)");
  const nlohmann::json trace = ChromeTrace(data);
  EXPECT_EQ(trace["otherData"]["missing_tasks"],
            nlohmann::json::array({"worker:1 (failed to connect)"}));
}

TEST(ChromeTraceTest, TheEarlierRankWaitsForTheLaterOneInsideItsCollective) {
  const nlohmann::json trace = ChromeTrace(TwoReplicas());
  const nlohmann::json* wait = Find(trace, "wait for stragglers", 0);
  ASSERT_NE(wait, nullptr);
  EXPECT_DOUBLE_EQ((*wait)["ts"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ((*wait)["dur"].get<double>(), 300.0);
  EXPECT_EQ((*wait)["args"]["waited_for"], "replica 1");
  // The last to arrive waited for no one.
  EXPECT_EQ(Find(trace, "wait for stragglers", 1), nullptr);
}

TEST(ChromeTraceTest, AnEmptyTraceIsStillAFile) {
  const nlohmann::json trace = ChromeTrace(v1::TraceData());
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace["traceEvents"].empty());
}

}  // namespace
}  // namespace cohort::ctl
