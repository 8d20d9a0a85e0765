// Timeline traces end to end: a job submitted with trace_steps on two agents
// of two replicas each; the coordinator reads the agents' spans and aligns
// their clocks; the Chrome trace that cohortctl writes parses, its spans
// nest on every replica's track, and every step holds its collectives.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kTracedSteps = 20;

struct Event {
  std::string name;
  double ts;
  double end;
};

class TraceE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<SuiteCluster>> cluster =
        SuiteCluster::Start(/*workers=*/1, /*ps=*/0, {"--cpu_devices=2"});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    client_ = cluster_->client.get();
  }
  static void TearDownTestSuite() { delete cluster_; }

  static inline SuiteCluster* cluster_ = nullptr;
  static inline Client* client_ = nullptr;
};

TEST_F(TraceE2eTest, ATracedJobsTimelineNestsPerReplicaWithEveryStepsCollectives) {
  JobSpec spec = SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 50,
                               /*step_sleep_ms=*/1);
  spec.trace_steps = kTracedSteps;
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForJobEnd(*client_, *id, absl::Seconds(120)).state(),
            v1::JOB_SUCCEEDED);

  // Through cohortctl, as a user would.
  const std::string out = cluster_->dir.path() + "/trace.json";
  const CommandResult ctl =
      RunCommand({Binary("cohortctl"), "--coordinator=" + cluster_->coordinator->address(),
                  "trace", *id, "--out=" + out},
                 absl::Seconds(60));
  ASSERT_EQ(ctl.exit_code, 0) << ctl.output;
  EXPECT_THAT(ctl.output, HasSubstr("4 replica tracks"));
  std::printf("%s", ctl.output.c_str());
  const std::string nowhere = cluster_->dir.path() + "/missing/trace.json";
  const CommandResult unwritable = RunCommand(
      {Binary("cohortctl"), "--coordinator=" + cluster_->coordinator->address(),
       "trace", *id, "--out=" + nowhere},
      absl::Seconds(60));
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_THAT(unwritable.output, HasSubstr("cannot write " + nowhere +
                                           ": No such file or directory"));

  // To stdout, the trace alone: what it wrote is said on stderr.
  const std::string piped = cluster_->dir.path() + "/piped.json";
  const CommandResult to_stdout = RunCommand(
      {"/bin/sh", "-c",
       absl::StrCat("'", Binary("cohortctl"), "' --coordinator=",
                    cluster_->coordinator->address(), " trace ", *id,
                    " --out=/dev/stdout 2>/dev/null >'", piped, "'")},
      absl::Seconds(60));
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.output;
  std::ifstream piped_file(piped);
  EXPECT_TRUE(nlohmann::json::parse(piped_file, nullptr,
                                    /*allow_exceptions=*/false)
                  .is_object())
      << "the trace on stdout does not parse";

  std::ifstream file(out);
  const nlohmann::json trace =
      nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(trace.is_object()) << "trace.json does not parse";
  EXPECT_EQ(trace["otherData"]["job_id"], *id);
  EXPECT_EQ(trace["otherData"]["clock_offsets"].size(), 2u);

  // Tracks: (pid, tid) -> its complete events.
  std::map<std::pair<int, int>, std::vector<Event>> tracks;
  std::set<int> replicas;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"].get<double>();
    tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
        {e["name"].get<std::string>(), ts, ts + e["dur"].get<double>()});
    replicas.insert(e["tid"].get<int>());
  }
  EXPECT_EQ(replicas, (std::set<int>{0, 1, 2, 3}));
  ASSERT_EQ(tracks.size(), 4u);

  // Rounding to microseconds with three decimals leaves at most this much.
  constexpr double kSlack = 0.002;
  for (auto& [track, events] : tracks) {
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
    });
    // Spans nest: each lies inside the innermost open one, or after it.
    std::vector<const Event*> open;
    for (const Event& e : events) {
      while (!open.empty() && open.back()->end <= e.ts + kSlack) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e.end, open.back()->end + kSlack)
            << e.name << " overlaps " << open.back()->name << " on track "
            << track.first << "/" << track.second;
      }
      open.push_back(&e);
    }
    // Every traced step holds its input, compute and all-reduces.
    int steps = 0;
    for (const Event& step : events) {
      if (step.name != "step") continue;
      ++steps;
      std::set<std::string> inside;
      for (const Event& e : events) {
        if (&e != &step && e.ts >= step.ts - kSlack && e.end <= step.end + kSlack) {
          inside.insert(e.name);
        }
      }
      EXPECT_TRUE(inside.count("allreduce")) << "a step without collectives";
      EXPECT_TRUE(inside.count("compute"));
      EXPECT_TRUE(inside.count("input"));
      EXPECT_TRUE(inside.count("optimizer"));
    }
    EXPECT_EQ(steps, kTracedSteps);
  }
}

TEST_F(TraceE2eTest, AnUntracedJobSaysHowToTraceIt) {
  absl::StatusOr<std::string> id = client_->SubmitJob(
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 5, /*step_sleep_ms=*/0));
  ASSERT_TRUE(id.ok()) << id.status();
  WaitForJobEnd(*client_, *id, absl::Seconds(120));
  absl::StatusOr<v1::TraceData> trace = client_->GetTrace(*id);
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(trace.status().message(), HasSubstr("--trace"));
}

TEST(TraceAgentLostE2eTest, ATraceLackingAnAgentsSpansNamesTheAgent) {
  // A cluster of its own: the suite's must keep its agents.
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, /*workers=*/1, /*ps=*/0, {"--cpu_devices=2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(cluster->coordinator->address());
  ASSERT_TRUE(client.ok()) << client.status();
  JobSpec spec = SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 10,
                               /*step_sleep_ms=*/0);
  spec.trace_steps = 5;
  absl::StatusOr<std::string> id = (*client)->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForJobEnd(**client, *id, absl::Seconds(120)).state(),
            v1::JOB_SUCCEEDED);
  // The worker's agent dies with its spans; relaunched, it holds none.
  const v1::TaskStatus* worker = FindTask(cluster->state, "worker", 0);
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(kill(static_cast<pid_t>(worker->pid()), SIGKILL), 0);
  ASSERT_TRUE(WaitAllGone({worker->pid()}, absl::Seconds(30)));

  const CommandResult ctl = RunCommand(
      {Binary("cohortctl"), "--coordinator=" + cluster->coordinator->address(),
       "trace", *id, "--out=" + dir.path() + "/partial.json"},
      absl::Seconds(60));
  EXPECT_EQ(ctl.exit_code, 0) << ctl.output;
  EXPECT_THAT(ctl.output, HasSubstr("of 2 replica tracks"));
  EXPECT_THAT(ctl.output,
              HasSubstr("cohortctl: warning: not in the trace: worker:0 "));
}

}  // namespace
}  // namespace cohort::testing
