// Network faults between test hosts while the processes stay alive: a cut
// link (ip link set down), a lossy and slow link (iptables' statistic match
// and tc tbf), with delay as well (a delay_relay), the coordinator cut off,
// a ps host cut off. Nothing may hang:
// every wait here has a deadline, and so must every wait in the daemons.
// Skips, saying why, where test hosts cannot be made (not root).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cohort/client.h"
#include "common/file_util.h"
#include "tests/testing/host_cluster.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/test_hosts.h"

namespace cohort::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// Short, so that a cut link is noticed quickly.
const absl::Duration kHeartbeatTimeout = absl::Seconds(3);

// The time of the first line of a daemon's log that contains `needle`.
std::optional<absl::Time> FirstLogLine(const std::string& log_file,
                                       const std::string& needle) {
  std::istringstream lines(ReadFile(log_file).value_or(""));
  std::string line;
  while (std::getline(lines, line)) {
    if (!absl::StrContains(line, needle) || line.size() < 23) continue;
    absl::Time time;
    std::string error;
    if (absl::ParseTime("%Y-%m-%dT%H:%M:%E3S", line.substr(0, 23),
                        absl::LocalTimeZone(), &time, &error)) {
      return time;
    }
  }
  return std::nullopt;
}

class MultiHostFaultsE2eTest : public TestHostsTest<5> {
 protected:
  // The coordinator on host 1, the chief on 2, workers on 3 and 4.
  absl::StatusOr<std::unique_ptr<HostCluster>> StartAgents(
      absl::Duration heartbeat_timeout = kHeartbeatTimeout) {
    std::vector<std::string> coordinator_flags = {
        absl::StrCat("--state_dir=", dir_.path(), "/coordinator"),
        absl::StrCat("--heartbeat_timeout=",
                     absl::FormatDuration(heartbeat_timeout))};
    return HostCluster::Start(
        hosts_.get(), &dir_,
        {.coordinator_host = 1,
         .tasks = {{"chief", 0, 2}, {"worker", 0, 3}, {"worker", 1, 4}},
         .coordinator_flags = coordinator_flags,
         .agent_flags = {"--cpu_devices=2"}});
  }
};

TEST_F(MultiHostFaultsE2eTest,
       ACutAgentLinkFailsEverySurvivorNamingItAndTheHostRejoinsWhenItReturns) {
  auto cluster = StartAgents();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;
  JobSpec spec =
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 1500, /*sleep=*/5);
  spec.checkpoint_every = 100;
  spec.max_restarts = 2;
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForStep(c.client(), *id, 150, absl::Seconds(60)).state(),
            v1::JOB_RUNNING);
  // Someone follows worker:1's log through the coordinator.
  std::atomic<int> chunks{0};
  std::atomic<bool> leave{false};
  std::future<absl::Status> followed = std::async(std::launch::async, [&] {
    return c.client().StreamLogs("worker:1", {.follow = true},
                                 [&](const v1::LogChunk&) {
                                   ++chunks;
                                   return !leave.load();
                                 });
  });
  ASSERT_TRUE(WaitUntil([&] { return chunks.load() > 0; }, absl::Seconds(30)));

  const absl::Time cut = absl::Now();
  ASSERT_TRUE(hosts_->SetLink(4, false).ok());
  // Both survivors fail their collectives, naming the unreachable task.
  for (const char* survivor : {"chief:0", "worker:0"}) {
    std::optional<absl::Time> failed;
    WaitUntil(
        [&] {
          failed = FirstLogLine(c.TaskLog(survivor), "worker:1 is gone");
          return failed.has_value();
        },
        absl::Seconds(30));
    ASSERT_TRUE(failed.has_value())
        << survivor << " never named worker:1:\n"
        << ReadFile(c.TaskLog(survivor)).value_or("");
    std::cout << survivor << "'s collectives failed "
              << absl::FormatDuration(*failed - cut)
              << " after the cut (heartbeat timeout "
              << absl::FormatDuration(kHeartbeatTimeout) << ")\n";
    EXPECT_LE(*failed - cut, kHeartbeatTimeout + absl::Seconds(1)) << survivor;
  }
  EXPECT_EQ(c.TaskState("worker", 1), v1::DEAD);
  // A cut link sends no reset: the follower ends because worker:1 fell
  // silent, not only once TCP gives up many minutes later.
  const bool ended =
      followed.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  leave = true;  // otherwise it leaves at the relay's next keepalive
  const absl::Status follow = followed.get();
  EXPECT_TRUE(ended) << "following worker:1's log did not end";
  EXPECT_EQ(follow.code(), absl::StatusCode::kUnavailable) << follow;
  EXPECT_THAT(follow.message(), HasSubstr("the log of worker:1 at "));
  EXPECT_THAT(follow.message(), HasSubstr("nothing heard for 10s"));
  const v1::JobStatus restarting = WaitForJob(
      c.client(), *id,
      [](const v1::JobStatus& s) { return s.restarts_size() >= 1; },
      absl::Seconds(30));
  ASSERT_GE(restarting.restarts_size(), 1);
  EXPECT_THAT(restarting.restarts(0).cause(), HasSubstr("worker:1"));

  // The link comes back: the host registers again and the job, placed on
  // every agent again, finishes.
  ASSERT_TRUE(hosts_->SetLink(4, true).ok());
  EXPECT_TRUE(WaitUntil([&] { return c.TaskState("worker", 1) == v1::READY; },
                        absl::Seconds(30)));
  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.num_replicas(), 6);
  EXPECT_THAT(status.placement(), Contains(HasSubstr("worker:1")));
  EXPECT_LT(status.metrics().at("max_weight_error"), 1e-3);
}

TEST_F(MultiHostFaultsE2eTest, ALossySlowLinkStillTrainsWithoutAFalseDeath) {
  auto cluster = StartAgents();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;
  ASSERT_TRUE(hosts_->LimitRate(3, "100mbit").ok());
  ASSERT_TRUE(hosts_->AddLoss(3, 5).ok());
  const std::string data = dir_.path() + "/spirals";
  CommandResult made = RunCommand(
      {Binary("cohort-example-mlp-data"), "--out=" + data, "--files=6"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  JobSpec spec = MlpJob(data, StrategyKind::kMultiWorkerMirrored, 600, "data");
  spec.global_batch_size = 120;
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(240));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.restarts_size(), 0);
  EXPECT_GE(status.metrics().at("accuracy"), kMlpAccuracyBar);
  EXPECT_THAT(c.coordinator().Log(), Not(HasSubstr("is DEAD")));
}

// A broadcast's root is done once its chunks are queued, and a program may
// leave right then. Over a slow link the bytes take seconds to drain, and
// the root's teardown must wait for them while they flow, or its peer never
// gets its data.
TEST_F(MultiHostFaultsE2eTest,
       ARankThatLeavesAtOnceStillDeliversOverASlowLink) {
  // A coordinator that only serves the store, on host 1.
  const std::string spec = dir_.Write(
      "store.json", absl::StrCat(R"({"cluster": {"worker": [")",
                                 hosts_->address(1), R"(:2222"]}})"));
  auto store = CoordinatorProcess::Start(
      dir_, {absl::StrCat("--cluster_spec=", spec), "--launch=none"},
      absl::StrCat(hosts_->address(1), ":7070"), hosts_->Command(1, {}));
  ASSERT_TRUE(store.ok()) << store.status();
  // 100 Mbit/s: 32 MiB take about 3 s to reach host 2.
  ASSERT_TRUE(hosts_->LimitRate(2, "100mbit").ok());
  std::vector<Subprocess> ranks;
  std::vector<std::string> logs;
  for (int rank = 0; rank < 2; ++rank) {
    logs.push_back(absl::StrCat(dir_.path(), "/rank", rank, ".log"));
    absl::StatusOr<Subprocess> process = Subprocess::Spawn(
        {.argv = hosts_->Command(
             rank + 1,
             {TestBinary("collective_rank"),
              absl::StrCat("--store=", (*store)->address()),
              absl::StrCat("--rank=", rank), "--size=2", "--mode=broadcast",
              absl::StrCat("--listen=", hosts_->address(rank + 1), ":0"),
              absl::StrCat("--count=", 8 << 20)}),
         .output_file = logs.back()});
    ASSERT_TRUE(process.ok()) << process.status();
    ranks.push_back(*std::move(process));
  }
  for (int rank = 0; rank < 2; ++rank) {
    const std::optional<ExitStatus> exit = ranks[rank].Wait(absl::Seconds(60));
    ASSERT_TRUE(exit.has_value()) << "rank " << rank << " still running\n"
                                  << ReadFile(logs[rank]).value_or("");
    EXPECT_TRUE(exit->exited() && exit->exit_code() == 0)
        << ReadFile(logs[rank]).value_or("");
  }
}

// The same bad link, with 200 ms more each way: every connection to
// worker:1 (host 4), and its own to the coordinator, goes through a
// delaying relay on host 5. A lost segment and its lost retransmit stall
// TCP for some 2 s at this round trip, and a third loss for 4 s more: the
// heartbeat timeout is sized for such a link, as an operator would size it.
TEST_F(MultiHostFaultsE2eTest,
       ADelayedLossySlowLinkTrainsCorrectlyWithoutAFalseDeath) {
  constexpr absl::Duration kSlowLinkHeartbeatTimeout = absl::Seconds(10);
  auto cluster = HostCluster::Start(
      hosts_.get(), &dir_,
      {.coordinator_host = 1,
       .tasks = {{"chief", 0, 2},
                 {"worker", 0, 3},
                 {"worker", 1, 4, /*relay_host=*/5}},
       .coordinator_flags =
           {absl::StrCat("--state_dir=", dir_.path(), "/coordinator"),
            absl::StrCat("--heartbeat_timeout=",
                         absl::FormatDuration(kSlowLinkHeartbeatTimeout))},
       .agent_flags = {"--cpu_devices=2"},
       .peer_ports = "21000-21015",
       .relay_delay = absl::Milliseconds(200)});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;
  ASSERT_TRUE(hosts_->LimitRate(4, "100mbit").ok());
  ASSERT_TRUE(hosts_->AddLoss(4, 5).ok());
  constexpr int kSteps = 30;
  const JobSpec spec =
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, kSteps, /*sleep=*/0);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(240));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  const absl::Duration took = absl::Now() - start;
  std::cout << kSteps << " steps with worker:1 200 ms away took "
            << absl::FormatDuration(took) << "\n";
  // The relay was in the path: worker:1's peers sent to host 5.
  bool relayed = false;
  for (const v1::RingLink& link : status.links()) {
    if (link.ring() == "agents" && link.to_task() == "worker:1") {
      relayed = absl::StartsWith(link.to_address(), hosts_->address(5) + ":");
    }
  }
  EXPECT_TRUE(relayed) << status.ShortDebugString();
  // So were worker:1's heartbeats: its connection to the coordinator.
  EXPECT_THAT(ReadFile(c.CoordinatorRelayLog(5)).value_or(""),
              HasSubstr("relaying a connection to port 7070"));
  EXPECT_EQ(status.restarts_size(), 0);
  EXPECT_EQ(status.num_replicas(), 6);
  EXPECT_THAT(c.coordinator().Log(), Not(HasSubstr("is DEAD")));

  // Correctly: the same bits as the same job on one host.
  ScratchDir local_dir;
  const v1::JobStatus one_host = RunOnOneHost(spec, /*workers=*/2, local_dir);
  ASSERT_EQ(one_host.state(), v1::JOB_SUCCEEDED) << one_host.error();
  ExpectSameVariables(status, one_host, "with a delayed lossy link");
}

TEST_F(MultiHostFaultsE2eTest,
       CuttingTheCoordinatorOffForThreeSecondsStopsNothing) {
  // The default heartbeat timeout, 5 s: longer than the cut.
  auto cluster = StartAgents(absl::Seconds(5));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;
  JobSpec spec =
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 1500, /*sleep=*/5);
  spec.checkpoint_every = 20;
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus before = WaitForJob(
      c.client(), *id,
      [](const v1::JobStatus& s) { return s.checkpoint_step() >= 40; },
      absl::Seconds(60));
  ASSERT_EQ(before.state(), v1::JOB_RUNNING);

  ASSERT_TRUE(hosts_->SetLink(1, false).ok());
  const int64_t at_cut =
      LoadLatestCheckpoint(before.checkpoint_dir()).value_or(Checkpoint{}).step;
  // The fault's length is the test's input, not a wait on a condition.
  absl::SleepFor(absl::Seconds(3));
  // The chief went on writing checkpoints: the data plane needs no
  // coordinator.
  const int64_t at_restore =
      LoadLatestCheckpoint(before.checkpoint_dir()).value_or(Checkpoint{}).step;
  ASSERT_TRUE(hosts_->SetLink(1, true).ok());
  std::cout << "checkpoint step " << at_cut << " at the cut, " << at_restore
            << " when the link came back\n";
  EXPECT_GT(at_restore, at_cut)
      << "no step completed while the coordinator was cut off";

  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.restarts_size(), 0);
  EXPECT_EQ(status.attempt(), 1);
  EXPECT_THAT(c.coordinator().Log(), Not(HasSubstr("is DEAD")));
  // Every task is back, on the same process.
  absl::StatusOr<v1::ClusterState> state =
      c.coordinator().WaitAllReady(absl::Seconds(30));
  ASSERT_TRUE(state.ok()) << state.status();
  for (const v1::TaskStatus& task : state->tasks()) {
    EXPECT_EQ(task.restart_count(), 0) << task.task().ShortDebugString();
  }
}

TEST_F(MultiHostFaultsE2eTest,
       ACutPsHostMakesWorkersWaitThenTheJobGoesOnOrFailsNamingIt) {
  auto cluster = HostCluster::Start(
      hosts_.get(), &dir_,
      {.coordinator_host = 1,
       .tasks = {{"chief", 0, 2}, {"worker", 0, 3}, {"ps", 0, 4}, {"ps", 1, 5}},
       .coordinator_flags = {absl::StrCat(
           "--heartbeat_timeout=", absl::FormatDuration(kHeartbeatTimeout))},
       .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;

  // Back within the recovery timeout: the job goes on.
  JobSpec spec = SlowLinearJob(StrategyKind::kParameterServer, 600, 5);
  spec.ps.recovery_timeout = absl::Seconds(60);
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForStep(c.client(), *id, 50, absl::Seconds(60)).state(),
            v1::JOB_RUNNING);
  ASSERT_TRUE(hosts_->SetLink(5, false).ok());
  EXPECT_TRUE(WaitUntil([&] { return c.TaskState("ps", 1) == v1::DEAD; },
                        absl::Seconds(30)));
  ASSERT_TRUE(hosts_->SetLink(5, true).ok());
  EXPECT_TRUE(WaitUntil([&] { return c.TaskState("ps", 1) == v1::READY; },
                        absl::Seconds(30)));
  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 600);
  EXPECT_LT(status.metrics().at("max_weight_error"), 1e-2);

  // Gone past the recovery timeout: the job fails, naming the ps task.
  spec.ps.recovery_timeout = absl::Seconds(5);
  spec.steps = 100000;
  id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForStep(c.client(), *id, 20, absl::Seconds(60)).state(),
            v1::JOB_RUNNING);
  ASSERT_TRUE(hosts_->SetLink(5, false).ok());
  const v1::JobStatus failed =
      WaitForJobEnd(c.client(), *id, absl::Seconds(60));
  ASSERT_TRUE(hosts_->SetLink(5, true).ok());
  ASSERT_EQ(failed.state(), v1::JOB_FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("ps:1"));
}

TEST_F(MultiHostFaultsE2eTest,
       APsJobGoesOnWithoutAWorkerHostLostWhileTheCoordinatorRestarts) {
  auto cluster = HostCluster::Start(
      hosts_.get(), &dir_,
      {.coordinator_host = 1,
       .tasks = {{"chief", 0, 2}, {"worker", 0, 3}, {"ps", 0, 4}},
       .coordinator_flags = {absl::StrCat("--state_dir=", dir_.path(),
                                          "/coordinator")},
       .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;
  JobSpec spec = SlowLinearJob(StrategyKind::kParameterServer, 400, 5);
  // Long enough for the chief and the ps task to register with the new
  // coordinator, however busy the machine; the restored attempt waits all
  // of it for the lost worker.
  spec.placement_timeout = absl::Seconds(20);
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForStep(c.client(), *id, 50, absl::Seconds(60)).state(),
            v1::JOB_RUNNING);

  // worker:0's host drops off the network for good, and the coordinator
  // crashes: the restarted one never sees that worker.
  ASSERT_TRUE(hosts_->SetLink(3, false).ok());
  ASSERT_TRUE(c.RestartCoordinator().ok());
  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(120));
  ASSERT_TRUE(hosts_->SetLink(3, true).ok());
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 400);
  EXPECT_EQ(status.attempt(), 2);
  EXPECT_LT(status.metrics().at("max_weight_error"), 1e-2);
  std::vector<std::string> events;
  for (const v1::JobEvent& event : status.events()) {
    events.push_back(event.text());
  }
  EXPECT_THAT(events, Contains(HasSubstr("worker:0 lost (not ready when the "
                                         "attempt was placed: worker:0")));
}

}  // namespace
}  // namespace cohort::testing
