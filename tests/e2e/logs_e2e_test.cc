// Live logs and streamed job status end to end: a real coordinator relays
// its tasks' log lines (Admin.StreamLogs over each task's Logs.ReadLog) and
// pushes job status (Jobs.WatchJob); streams end cleanly on both sides when
// their reader leaves, as the daemons' in-flight RPC gauges show.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "nlohmann/json.hpp"
#include "tests/testing/http_get.h"
#include "tests/testing/jobs.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/wait.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kStreamLogs[] = "/cohort.v1.Admin/StreamLogs";
constexpr char kReadLog[] = "/cohort.v1.Logs/ReadLog";
constexpr char kWatchJob[] = "/cohort.v1.Jobs/WatchJob";

// Every line of `target`'s log (no follow), as text.
std::vector<v1::LogLine> ReadAll(Client& client, const std::string& target,
                                 absl::Status* status) {
  std::vector<v1::LogLine> lines;
  *status = client.StreamLogs(target, {}, [&](const v1::LogChunk& chunk) {
    lines.insert(lines.end(), chunk.lines().begin(), chunk.lines().end());
    return true;
  });
  return lines;
}

bool AnyLineHas(const std::vector<v1::LogLine>& lines,
                const std::string& text) {
  for (const v1::LogLine& line : lines) {
    if (line.text().find(text) != std::string::npos) return true;
  }
  return false;
}

class LogsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<SuiteCluster>> cluster = SuiteCluster::Start(
        /*workers=*/1, /*ps=*/0,
        {"--cpu_devices=2", "--metrics_listen=127.0.0.1:0"});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    client_ = cluster_->client.get();
  }
  static void TearDownTestSuite() { delete cluster_; }

  // The /metrics address of `task` ("coordinator" or "worker:0").
  static std::string MetricsOf(const std::string& task) {
    const v1::ClusterState& state = cluster_->state;
    if (task == "coordinator") return state.coordinator_metrics_address();
    for (const v1::TaskStatus& status : state.tasks()) {
      if (absl::StrCat(status.task().type(), ":", status.task().index()) ==
          task) {
        return status.metrics_address();
      }
    }
    ADD_FAILURE() << "no task " << task;
    return "";
  }

  // Waits until `task` has no call of `method` in flight, and had one.
  static bool NoneInFlight(const std::string& task, const std::string& method) {
    const std::string series =
        absl::StrCat("cohort_rpc_server_in_flight{method=\"", method, "\"}");
    std::optional<double> value;
    const bool drained = WaitUntil(
        [&] {
          value = SampleValue(HttpGet(MetricsOf(task), "/metrics"), series);
          return value.has_value() && *value == 0;
        },
        absl::Seconds(30), absl::Milliseconds(100));
    if (!drained) {
      ADD_FAILURE() << task << ": " << series << " is "
                    << (value.has_value() ? std::to_string(*value)
                                          : "absent");
    }
    return drained;
  }

  static inline SuiteCluster* cluster_ = nullptr;
  static inline Client* client_ = nullptr;
};

TEST_F(LogsE2eTest, ATaskLogIsReadThroughTheCoordinator) {
  absl::Status status;
  const std::vector<v1::LogLine> lines = ReadAll(*client_, "worker:0", &status);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(AnyLineHas(lines, "serving on")) << lines[0].text();
  for (const v1::LogLine& line : lines) {
    EXPECT_EQ(line.task(), "worker:0");
    EXPECT_THAT(line.text(), HasSubstr("worker:0"));
  }
  // Seqs rise one by one: nothing between them was lost.
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].seq(), lines[i - 1].seq() + 1);
  }

  const std::vector<v1::LogLine> own = ReadAll(*client_, "coordinator", &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(AnyLineHas(own, "coordinator serving on"));

  v1::LogChunk tail;
  ASSERT_TRUE(client_
                  ->StreamLogs("chief:0", {.tail_lines = 2},
                               [&](const v1::LogChunk& chunk) {
                                 tail.MergeFrom(chunk);
                                 return true;
                               })
                  .ok());
  EXPECT_EQ(tail.lines_size(), 2);
}

TEST_F(LogsE2eTest, AnUnknownTargetIsNotFoundNamingIt) {
  absl::Status status;
  ReadAll(*client_, "worker:7", &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr("\"worker:7\""));
}

TEST_F(LogsE2eTest, FollowingAJobGivesItsTasksLinesAndEndsWithIt) {
  absl::StatusOr<std::string> id = client_->SubmitJob(
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 200, /*step_sleep_ms=*/5));
  ASSERT_TRUE(id.ok()) << id.status();
  std::set<std::string> tasks;
  std::vector<std::string> texts;
  // Returns once the job has ended: follow stops with it.
  const absl::Status followed = client_->StreamLogs(
      *id, {.follow = true}, [&](const v1::LogChunk& chunk) {
        for (const v1::LogLine& line : chunk.lines()) {
          tasks.insert(line.task());
          texts.push_back(line.text());
        }
        return true;
      });
  ASSERT_TRUE(followed.ok()) << followed;
  absl::StatusOr<v1::JobStatus> job = client_->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(tasks, (std::set<std::string>{"chief:0", "worker:0"}));
  // Each agent says which part of the job it ran.
  int attempt_lines = 0;
  for (const std::string& text : texts) {
    if (text.find(absl::StrCat("job ", *id, " attempt")) != std::string::npos) {
      ++attempt_lines;
    }
  }
  EXPECT_GE(attempt_lines, 2) << absl::StrJoin(texts, "\n");
  EXPECT_TRUE(NoneInFlight("coordinator", kStreamLogs));
}

TEST_F(LogsE2eTest, AFollowerThatLeavesEndsTheStreamOnBothSides) {
  int chunks = 0;
  const absl::Status followed = client_->StreamLogs(
      "worker:0", {.follow = true}, [&](const v1::LogChunk&) {
        ++chunks;
        return false;  // leave after the first chunk
      });
  EXPECT_TRUE(followed.ok()) << followed;
  EXPECT_EQ(chunks, 1);
  // The coordinator's relay and the worker's reader both ended.
  EXPECT_TRUE(NoneInFlight("coordinator", kStreamLogs));
  EXPECT_TRUE(NoneInFlight("worker:0", kReadLog));
}

TEST_F(LogsE2eTest, WatchJobPushesEachChangeUntilTheJobEnds) {
  // A job far too long to end by itself: the watcher ends it once it has
  // seen it make progress, so the stream has changes to push before the end
  // however fast or slow this machine is.
  absl::StatusOr<std::string> id = client_->SubmitJob(SlowLinearJob(
      StrategyKind::kMultiWorkerMirrored, 1000000, /*step_sleep_ms=*/5));
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<int64_t> steps;
  bool cancelled = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<v1::JobStatus> final_status =
      client_->WatchJob(*id, [&](const v1::JobStatus& status) {
        steps.push_back(status.step());
        if (status.step() > 0 && !cancelled) {
          cancelled = true;
          EXPECT_TRUE(client_->CancelJob(*id).ok());
        }
        return absl::Now() < deadline;
      });
  ASSERT_TRUE(final_status.ok()) << final_status.status();
  ASSERT_TRUE(cancelled) << "no progress pushed within 60 s";
  ASSERT_EQ(final_status->state(), v1::JOB_CANCELLED)
      << "the stream went on for 60 s after the job was cancelled";
  ASSERT_GE(steps.size(), 2u);
  EXPECT_TRUE(std::is_sorted(steps.begin(), steps.end()));
  EXPECT_EQ(steps.back(), final_status->step());
  // The server ended the stream itself, with OK. It counts the call once
  // the call is done on its side, which may be after the client saw the
  // end.
  const std::string series =
      absl::StrCat("cohort_rpc_server_duration_seconds_count{method=\"",
                   kWatchJob, "\",code=\"OK\"}");
  EXPECT_TRUE(WaitUntil(
      [&] {
        return SampleValue(HttpGet(MetricsOf("coordinator"), "/metrics"),
                           series)
                   .value_or(0) >= 1;
      },
      absl::Seconds(30), absl::Milliseconds(100)))
      << series << " stayed below 1";
  EXPECT_TRUE(NoneInFlight("coordinator", kWatchJob));
}

TEST_F(LogsE2eTest, AWatcherThatLeavesEndsTheStreamOnBothSides) {
  absl::StatusOr<std::string> id = client_->SubmitJob(SlowLinearJob(
      StrategyKind::kMultiWorkerMirrored, 100000, /*step_sleep_ms=*/5));
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<v1::JobStatus> last = client_->WatchJob(
      *id, [](const v1::JobStatus&) { return false; });
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_FALSE(JobEnded(*last));
  EXPECT_TRUE(NoneInFlight("coordinator", kWatchJob));
  EXPECT_TRUE(client_->CancelJob(*id).ok());
  WaitForJobEnd(*client_, *id, absl::Seconds(60));

  absl::StatusOr<v1::JobStatus> unknown =
      client_->WatchJob("job-999", [](const v1::JobStatus&) { return true; });
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

// Hosts' clocks differ. A job's log holds what its tasks logged from its
// submission on, each on its own clock, and relays it on the coordinator's:
// an agent whose clock runs 30 s behind (libfaketime) still has its lines in
// the job's log, at the coordinator's times.
TEST(JobLogAcrossClocksE2eTest, AnAgentWhoseClockIsBehindKeepsItsLinesInTheJobLog) {
  const std::string faketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  if (!std::filesystem::exists(faketime)) {
    GTEST_SKIP() << faketime << " is absent (Debian: libfaketime)";
  }
  ScratchDir dir;
  const std::string spec_json = LocalSpec(/*workers=*/0, /*ps=*/0);
  const std::string chief = nlohmann::json::parse(spec_json)["cluster"]["chief"][0]
                                .get<std::string>();
  absl::StatusOr<std::unique_ptr<CoordinatorProcess>> coordinator =
      CoordinatorProcess::Start(
          dir, {"--cluster_spec=" + dir.Write("cluster.json", spec_json),
                "--launch=none"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  absl::StatusOr<Subprocess> agent = Subprocess::Spawn(
      {.argv = {Binary("cohort-agent"), "--task=chief:0",
                "--coordinator=" + (*coordinator)->address(),
                "--listen=" + chief, "--cpu_devices=2",
                "--state_dir=" + dir.path() + "/agent"},
       .env = {{"LD_PRELOAD", faketime}, {"FAKETIME", "-30s"}},
       .output_file = dir.path() + "/agent.log"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  struct StopOnExit {
    Subprocess& process;
    ~StopOnExit() { process.Stop(absl::Seconds(5)); }
  } stop_on_exit{*agent};
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect((*coordinator)->address());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->WaitForReady(absl::Seconds(60)).ok())
      << ReadFile(dir.path() + "/agent.log").value_or("");

  // The offset is known once a heartbeat has carried it.
  std::optional<int64_t> offset;
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<v1::ClusterState> state = (*client)->GetClusterState();
        if (!state.ok() || state->tasks().empty()) return false;
        if (state->tasks(0).clock_offset_ms() == 0) return false;
        offset = state->tasks(0).clock_offset_ms();
        return true;
      },
      absl::Seconds(30)));
  EXPECT_NEAR(static_cast<double>(*offset), -30000, 5000);

  absl::StatusOr<std::string> id = (*client)->SubmitJob(
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 10, 0));
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus job = WaitForJobEnd(**client, *id, absl::Seconds(60));
  ASSERT_EQ(job.state(), v1::JOB_SUCCEEDED) << job.error();

  absl::Status status;
  const std::vector<v1::LogLine> lines = ReadAll(**client, *id, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(AnyLineHas(lines, absl::StrCat("job ", *id, " attempt 1")))
      << lines.size() << " lines";
  for (const v1::LogLine& line : lines) {
    // On the coordinator's clock: within the job's run, give or take the
    // offset's error (a heartbeat's one-way delay, however busy the
    // machine), and far from the agent's own clock, 30 s off.
    EXPECT_GE(line.time_unix_ms(), job.submit_time_unix_ms() - 10000)
        << line.text();
    EXPECT_LE(line.time_unix_ms(), job.end_time_unix_ms() + 10000)
        << line.text();
  }
}

}  // namespace
}  // namespace cohort::testing
