// End-to-end tests of the cluster: the real cohort-coordinator, cohort-agent,
// cohort-ps and cohortctl binaries as child processes on loopback.

#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cluster_spec.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/host_port.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/fake_notify_socket.h"
#include "tests/testing/jobs.h"
#include "tests/testing/silent_listener.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/wait.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Every state wait in this file is bounded by one of these.
constexpr absl::Duration kReadyTimeout = absl::Seconds(10);

// The harness's cleanup kills only the processes it saw, not later ones
// that were given their pids.
TEST(ClusterE2eTest, TheHarnessSparesAProcessThatReusedAPid) {
  absl::StatusOr<Subprocess> sleeper =
      Subprocess::Spawn({.argv = {"/bin/sleep", "300"}});
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  // Stop() is a no-op once the child is reaped; it matters when an
  // assertion below ends the test early.
  absl::Cleanup stop_sleeper = [&] { sleeper->Stop(absl::Seconds(1)); };
  const std::optional<SeenProcess> seen = SeeProcess(sleeper->pid());
  ASSERT_TRUE(seen.has_value());
  SeenProcess earlier = *seen;
  earlier.start_ticks -= 1;  // as the pid's previous owner would have been
  KillIfAlive(std::vector<SeenProcess>{earlier});
  // A SIGKILL sent would have ended it well within this (never a false
  // failure: a slow machine can only make the check weaker).
  EXPECT_FALSE(sleeper->Wait(absl::Milliseconds(500)).has_value());
  KillIfAlive(std::vector<SeenProcess>{*seen});
  EXPECT_TRUE(sleeper->Wait(absl::Seconds(30)).has_value());
}

TEST(ClusterE2eTest, LaunchesEveryLocalTaskAndReportsItReady) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 2, 1, {"--cpu_devices=2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const v1::ClusterState* state = &cluster->state;
  ASSERT_EQ(state->tasks_size(), 4);
  for (const v1::TaskStatus& task : state->tasks()) {
    EXPECT_GT(task.pid(), 0);
    EXPECT_TRUE(task.launched());
    EXPECT_EQ(task.restart_count(), 0);
    EXPECT_GE(task.last_heartbeat_age_ms(), 0);
    if (task.task().type() == "ps") {
      EXPECT_EQ(task.ps().shard_id(), task.task().index());
      EXPECT_GT(task.ps().rss_bytes(), 0);
    } else {
      ASSERT_EQ(task.devices_size(), 2) << task.ShortDebugString();
      EXPECT_EQ(task.devices(1).name(), "cpu:1");
    }
  }
  EXPECT_EQ(state->launch_mode(), "local");
  EXPECT_GT(state->uptime_ms(), 0);
  EXPECT_FALSE(state->version().empty());
}

// As systemd starts them (Type=notify, WatchdogSec=): the coordinator and an
// agent each report READY=1 to their unit's notify socket, then keep feeding
// the watchdog while their servers answer.
TEST(ClusterE2eTest, UnderSystemdDaemonsReportReadyAndFeedTheWatchdog) {
  ScratchDir dir;
  const std::string spec = LocalSpec(/*workers=*/0, /*ps=*/0);
  const std::string chief =
      nlohmann::json::parse(spec)["cluster"]["chief"][0].get<std::string>();
  // Each daemon copies NOTIFY_SOCKET and WATCHDOG_USEC from this process's
  // environment when it is spawned.
  FakeNotifySocket coordinator_unit(dir.path() + "/coordinator.notify");
  ASSERT_TRUE(coordinator_unit.bound());
  setenv("WATCHDOG_USEC", "900000", 1);
  absl::StatusOr<std::unique_ptr<CoordinatorProcess>> coordinator =
      CoordinatorProcess::Start(
          dir, {"--cluster_spec=" + dir.Write("cluster.json", spec),
                "--launch=none"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  FakeNotifySocket agent_unit(dir.path() + "/agent.notify");
  ASSERT_TRUE(agent_unit.bound());
  setenv("WATCHDOG_USEC", "900000", 1);
  absl::StatusOr<Subprocess> agent =
      Subprocess::Spawn({.argv = {Binary("cohort-agent"), "--task=chief:0",
                                  "--coordinator=" + (*coordinator)->address(),
                                  "--listen=" + chief},
                         .output_file = dir.path() + "/agent.log"});
  unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_TRUE(coordinator_unit.Await("READY=1", absl::Seconds(30)));
  EXPECT_TRUE(coordinator_unit.Await("WATCHDOG=1", absl::Seconds(30)));
  EXPECT_TRUE(coordinator_unit.Await("WATCHDOG=1", absl::Seconds(30)));
  EXPECT_TRUE(agent_unit.Await("READY=1", absl::Seconds(30)))
      << ReadFile(dir.path() + "/agent.log").value_or("");
  EXPECT_TRUE(agent_unit.Await("WATCHDOG=1", absl::Seconds(30)));
  EXPECT_TRUE(agent_unit.Await("WATCHDOG=1", absl::Seconds(30)));
  agent->Stop(absl::Seconds(10));
}

TEST(ClusterE2eTest, KilledAgentIsMarkedDeadThenRestarted) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(dir, 1, 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& c = *cluster->coordinator;
  const int64_t old_pid = FindTask(cluster->state, "worker", 0)->pid();

  ASSERT_EQ(kill(static_cast<pid_t>(old_pid), SIGKILL), 0);
  // DEAD lasts only the restart backoff (1 s); a slow poll may see the
  // restart instead, which keeps the death's reason.
  absl::StatusOr<v1::ClusterState> state = c.WaitForState(
      [](const v1::ClusterState& s) {
        const v1::TaskStatus* worker = FindTask(s, "worker", 0);
        return worker->state() == v1::DEAD || worker->restart_count() >= 1;
      },
      absl::Seconds(30));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_THAT(FindTask(*state, "worker", 0)->last_error(),
              HasSubstr("killed by signal 9"));

  state = c.WaitForState(
      [](const v1::ClusterState& s) {
        const v1::TaskStatus* worker = FindTask(s, "worker", 0);
        return worker->state() == v1::READY && worker->restart_count() == 1;
      },
      absl::Seconds(15));
  ASSERT_TRUE(state.ok()) << state.status() << c.Log();
  const v1::TaskStatus* worker = FindTask(*state, "worker", 0);
  EXPECT_NE(worker->pid(), old_pid);
  EXPECT_EQ(FindTask(*state, "chief", 0)->restart_count(), 0);
}

// NTP stepping the clock at boot, or `date -s`, makes no heartbeat late and
// no store wait end early: the coordinator's liveness and waits are timed on
// the monotonic clock. The step is an hour, ahead and back.
class WallClockStepTest : public ::testing::TestWithParam<int> {};

TEST_P(WallClockStepTest, KillsNoTaskAndStopsNoJob) {
  ScratchDir dir;
  const std::string step = dir.Write("clock_step", "0\n");
  const std::string spec = dir.Write("cluster.json", LocalSpec(1, 0));
  absl::StatusOr<std::unique_ptr<CoordinatorProcess>> started =
      CoordinatorProcess::Start(
          dir, {absl::StrCat("--cluster_spec=", spec), "--cpu_devices=2"},
          "127.0.0.1:0",
          {"/usr/bin/env", "LD_PRELOAD=" COHORT_CLOCK_STEP_LIBRARY,
           absl::StrCat("COHORT_TEST_CLOCK_STEP_FILE=", step),
           "COHORT_TEST_CLOCK_STEP_PROGRAM=cohort-coordinator"});
  ASSERT_TRUE(started.ok()) << started.status();
  CoordinatorProcess& c = **started;
  absl::StatusOr<v1::ClusterState> ready = c.WaitAllReady(absl::Seconds(30));
  ASSERT_TRUE(ready.ok()) << ready.status() << c.Log();

  // For the coordinator alone: its tasks keep the true clock.
  ASSERT_TRUE(WriteFileAtomically(step, absl::StrCat(GetParam(), "\n")).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return std::filesystem::exists(step + ".applied"); },
                absl::Seconds(30)))
      << "the coordinator never read its wall clock";
  // Ahead, every task heartbeat an hour ago by the wall clock: a sweep on
  // it would declare each one dead at once. Watched for longer than the
  // heartbeat timeout (5 s).
  std::string trouble;
  WaitUntil(
      [&] {
        absl::StatusOr<v1::ClusterState> state = c.State();
        if (!state.ok()) return false;
        for (const v1::TaskStatus& task : state->tasks()) {
          if (task.state() != v1::READY || task.restart_count() != 0) {
            trouble = task.ShortDebugString();
            return true;
          }
        }
        return false;
      },
      absl::Seconds(8));
  EXPECT_EQ(trouble, "") << c.Log();

  // Back, a store wait whose deadline mixed the clocks would have ended an
  // hour ago: the agents' rendezvous would fail. (Ahead, the shim leaves
  // Abseil's timed waits, whose deadlines the kernel keeps on its own clock,
  // an hour long: the job loop would not tick.)
  if (GetParam() > 0) return;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(c.address());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> id = (*client)->SubmitJob(
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 20, 0));
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus job = WaitForJobEnd(**client, *id, absl::Seconds(60));
  EXPECT_EQ(job.state(), v1::JOB_SUCCEEDED) << job.ShortDebugString();
  EXPECT_EQ(job.attempt(), 1);
}

INSTANTIATE_TEST_SUITE_P(AnHour, WallClockStepTest,
                         ::testing::Values(3600, -3600));

TEST(ClusterE2eTest, HungAgentIsDeclaredDeadKilledAndRestarted) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 0, {"--heartbeat_timeout=2s"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& c = *cluster->coordinator;
  const int64_t hung_pid = FindTask(cluster->state, "worker", 0)->pid();

  // Alive but silent: only the heartbeat timeout can tell.
  ASSERT_EQ(kill(static_cast<pid_t>(hung_pid), SIGSTOP), 0);
  absl::StatusOr<v1::ClusterState> state = c.WaitForState(
      [](const v1::ClusterState& s) {
        return FindTask(s, "worker", 0)->state() != v1::READY;
      },
      absl::Seconds(15));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_THAT(FindTask(*state, "worker", 0)->last_error(),
              HasSubstr("no heartbeat for"));

  state = c.WaitForState(
      [](const v1::ClusterState& s) {
        const v1::TaskStatus* worker = FindTask(s, "worker", 0);
        return worker->state() == v1::READY && worker->restart_count() == 1;
      },
      absl::Seconds(10));
  ASSERT_TRUE(state.ok()) << state.status() << c.Log();
  EXPECT_NE(FindTask(*state, "worker", 0)->pid(), hung_pid);
  EXPECT_TRUE(WaitAllGone({hung_pid}, absl::Seconds(10)));
}

// Within the tasks' stop grace (15 s by default), with room for a busy
// machine; an idle one takes about a second.
TEST(ClusterE2eTest, SigtermStopsEveryLaunchedProcess) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(dir, 2, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& c = *cluster->coordinator;
  const std::vector<int64_t> pids = TaskPids(cluster->state);
  ASSERT_EQ(pids.size(), 5);

  c.process().Signal(SIGTERM);
  std::optional<ExitStatus> exit = c.process().Wait(absl::Seconds(30));
  ASSERT_TRUE(exit.has_value()) << "coordinator still running after 30 s";
  EXPECT_TRUE(exit->exited() && exit->exit_code() == 0) << exit->ToString();
  EXPECT_TRUE(WaitAllGone(pids, absl::Seconds(5)))
      << "launched processes outlived the coordinator";
}

TEST(ClusterE2eTest, ATaskThatExitsAtOnceIsDeadWithItsOwnErrorAndBacksOff) {
  // Something else holds the chief's port, so the launched chief cannot
  // serve: its reason is in its own log, and must reach the cluster state.
  const SilentListener held;
  ASSERT_TRUE(held.ok());
  const std::string chief = held.address();

  ScratchDir dir;
  const std::string spec =
      dir.Write("spec.json",
                absl::StrCat(R"({"cluster": {"chief": [")", chief, R"("]}})"));
  auto c = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--restart_backoff=1s",
            // Tasks' logs go to files there, which the coordinator reads.
            absl::StrCat("--state_dir=", dir.path(), "/state")});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<v1::ClusterState> state = (*c)->WaitForState(
      [](const v1::ClusterState& s) {
        const v1::TaskStatus* task = FindTask(s, "chief", 0);
        return task->state() == v1::DEAD && task->restart_count() >= 2;
      },
      absl::Seconds(30));
  ASSERT_TRUE(state.ok()) << state.status() << (*c)->Log();
  EXPECT_THAT(FindTask(*state, "chief", 0)->last_error(),
              HasSubstr(absl::StrCat("its last log line: ")));
  EXPECT_THAT(FindTask(*state, "chief", 0)->last_error(),
              HasSubstr(absl::StrCat("cannot listen on ", chief)));
  // Each failure in a row doubles the wait before the next launch.
  const std::string log = (*c)->Log();
  EXPECT_THAT(log, HasSubstr("; restarting in 1s"));
  EXPECT_THAT(log, HasSubstr("; restarting in 2s"));
}

TEST(ClusterE2eTest, AMissingTaskBinaryIsRefusedAtStartup) {
  ScratchDir dir;
  const std::string spec = dir.Write("spec.json", LocalSpec(1, 0));
  CommandResult result = RunCommand(
      {Binary("cohort-coordinator"), absl::StrCat("--cluster_spec=", spec),
       "--listen=127.0.0.1:0", "--agent_binary=/nonexistent/cohort-agent"},
      absl::Seconds(10));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("--agent_binary: /nonexistent/cohort-agent is not an "
                        "executable file"));
  // Not needed where no task would be launched with it.
  auto c = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--launch=none",
            "--agent_binary=/nonexistent/cohort-agent"});
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(ClusterE2eTest, BadFlagValuesExitTwoNamingTheFlag) {
  ScratchDir dir;
  const std::string spec = dir.Write("spec.json", LocalSpec(1, 0));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--placement_timeout=0", "--placement_timeout must be positive"},
      {"--placement_timeout=inf", "--placement_timeout must be positive"},
      {"--task_stop_grace=-1s", "--task_stop_grace must be positive"},
      {"--heartbeat_timeout=0", "--heartbeat_timeout must be positive"},
      {"--startup_timeout=0", "--startup_timeout must be positive"},
      {"--restart_backoff=0", "--restart_backoff must be positive"},
      {"--restart_backoff_max=100ms",
       "at most --restart_backoff_max, got 1s and 100ms"},
      {"--cpu_devices=0", "--cpu_devices must be at least 1"},
      {"--launch=remote", "--launch: unknown mode \"remote\""},
      {absl::StrCat("--port_file=", dir.path(), "/missing/port"),
       absl::StrCat("--port_file: ", dir.path(),
                    "/missing/port: cannot write: No such file or directory")},
      // A CA alone verifies servers for a client; a daemon would serve
      // plaintext with it.
      {absl::StrCat("--tls_ca_file=",
                    dir.Write("ca.pem",
                              "-----BEGIN CERTIFICATE-----\nAA==\n"
                              "-----END CERTIFICATE-----\n")),
       "--tls_ca_file needs --tls_cert_file and --tls_key_file on a daemon"},
  };
  for (const auto& [flag, expected] : cases) {
    CommandResult result = RunCommand(
        {Binary("cohort-coordinator"), absl::StrCat("--cluster_spec=", spec),
         "--listen=127.0.0.1:0", flag},
        absl::Seconds(10));
    EXPECT_EQ(result.exit_code, 2) << flag << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr(expected)) << flag;
  }
}

// Nor could they reach a task launched here to listen on a loopback name, as
// a hostname that /etc/hosts maps to 127.0.1.1 is. Under --launch=none the
// task chooses where it listens, and the spec is taken.
TEST(ClusterE2eTest, ATaskLaunchedOnLoopbackIsRefusedBesideOtherHosts) {
  ScratchDir dir;
  const std::string spec = dir.Write(
      "spec.json",
      R"({"cluster": {"chief": ["localhost:1"], "worker": ["198.19.255.253:2222"]}})");
  const CommandResult result =
      RunCommand({Binary("cohort-coordinator"),
                  absl::StrCat("--cluster_spec=", spec), "--listen=0.0.0.0:0"},
                 absl::Seconds(10));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("$.cluster.chief[0]: chief:0 at localhost:1 is on this "
                        "host, where localhost resolves only to loopback"));
  EXPECT_THAT(result.output,
              HasSubstr("the spec puts worker:0 at 198.19.255.253:2222 on "
                        "another host, which could never reach the task "
                        "launched to listen there"));

  auto taken = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--launch=none"},
      "0.0.0.0:0");
  EXPECT_TRUE(taken.ok()) << taken.status();
}

// Other hosts' tasks could never reach a coordinator on loopback: it says so
// at startup instead of waiting for them.
TEST(ClusterE2eTest, ACoordinatorOnLoopbackRefusesASpecWithOtherHosts) {
  ScratchDir dir;
  // 198.18.0.0/15 is reserved for benchmarks; no test host has .253.
  const std::string spec = dir.Write(
      "spec.json",
      R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["198.19.255.253:2222"]}})");
  const CommandResult result = RunCommand(
      {Binary("cohort-coordinator"), absl::StrCat("--cluster_spec=", spec),
       "--listen=127.0.0.1:0", "--launch=none"},
      absl::Seconds(10));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("--listen=127.0.0.1:0 is a loopback address, and the "
                        "cluster spec puts worker:0 at 198.19.255.253:2222 on "
                        "other hosts"));
  EXPECT_THAT(result.output, HasSubstr("e.g. --listen=0.0.0.0:0"));

  // A new cluster refused so leaves the previous one of its state dir as
  // it was: not stopped, not set aside.
  const std::string state = dir.path() + "/state";
  const std::string local =
      dir.Write("local.json", R"({"cluster": {"chief": ["127.0.0.1:1"]}})");
  {
    absl::StatusOr<std::unique_ptr<CoordinatorProcess>> previous =
        CoordinatorProcess::Start(
            dir, {absl::StrCat("--cluster_spec=", local), "--launch=none",
                  absl::StrCat("--state_dir=", state)});
    ASSERT_TRUE(previous.ok()) << previous.status();
  }  // stopped: it saved its state
  ASSERT_TRUE(std::filesystem::exists(state + "/coordinator_state.json"));
  const CommandResult refused = RunCommand(
      {Binary("cohort-coordinator"), absl::StrCat("--cluster_spec=", spec),
       "--listen=127.0.0.1:0", "--launch=none", "--new_cluster",
       absl::StrCat("--state_dir=", state)},
      absl::Seconds(10));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("is a loopback address"));
  EXPECT_TRUE(std::filesystem::exists(state + "/coordinator_state.json"));
  EXPECT_FALSE(std::filesystem::exists(state + "/previous"));

  // So does one refused for want of a spec, or of a binary to launch with.
  const std::vector<std::pair<std::vector<std::string>, std::string>> others = {
      {{}, "--new_cluster needs a cluster spec"},
      {{absl::StrCat("--cluster_spec=", local),
        "--agent_binary=/nonexistent/cohort-agent"},
       "--agent_binary: /nonexistent/cohort-agent is not an executable file"}};
  for (const auto& [flags, expected] : others) {
    std::vector<std::string> argv = {Binary("cohort-coordinator"),
                                     "--listen=127.0.0.1:0", "--new_cluster",
                                     absl::StrCat("--state_dir=", state)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const CommandResult result = RunCommand(argv, absl::Seconds(10));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr(expected));
    EXPECT_TRUE(std::filesystem::exists(state + "/coordinator_state.json"));
    EXPECT_FALSE(std::filesystem::exists(state + "/previous"));
  }

  // Or one whose address is taken, which only binding would have found.
  const SilentListener taken;
  ASSERT_TRUE(taken.ok());
  const std::string address = taken.address();
  const CommandResult in_use = RunCommand(
      {Binary("cohort-coordinator"), absl::StrCat("--cluster_spec=", local),
       "--listen=" + address, "--launch=none", "--new_cluster",
       absl::StrCat("--state_dir=", state)},
      absl::Seconds(10));
  EXPECT_NE(in_use.exit_code, 0) << in_use.output;
  EXPECT_THAT(in_use.output, HasSubstr(address));
  EXPECT_TRUE(std::filesystem::exists(state + "/coordinator_state.json"));
  EXPECT_FALSE(std::filesystem::exists(state + "/previous"));
}

TEST(ClusterE2eTest, MalformedSpecsExitTwoWithOneLineNamingThePath) {
  ScratchDir dir;
  struct Case {
    std::string json;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"{not json", "$: not valid JSON"},
      {R"({"cluster": {"worker": "127.0.0.1:2222"}})", "$.cluster.worker: "},
      {R"({"cluster": {"chief": ["a:1", "b:2"]}})", "$.cluster.chief: "},
      {R"({"cluster": {"worker": ["a:99999"]}})", "$.cluster.worker[0]: "},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 4}})",
       "$.task.index: "},
  };
  for (const Case& c : cases) {
    const std::string spec = dir.Write("bad.json", c.json);
    CommandResult result = RunCommand(
        {Binary("cohort-coordinator"), absl::StrCat("--cluster_spec=", spec),
         "--listen=127.0.0.1:0"},
        absl::Seconds(10));
    EXPECT_EQ(result.exit_code, 2) << c.json << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr(c.expected)) << c.json;
    EXPECT_THAT(result.output, HasSubstr(spec));
    // One line, and no crash report.
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
        << result.output;
  }
  // The same through TF_CONFIG.
  CommandResult result = RunCommand(
      {Binary("cohort-coordinator"), "--listen=127.0.0.1:0"}, absl::Seconds(10),
      {{"TF_CONFIG", R"({"cluster": {"worker": ["a:1", "a:1"]}})"}});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("TF_CONFIG: $.cluster.worker[1]: "));
}

// One TF_CONFIG copied to every host, its "task" naming another host's
// entry: the task says so at once instead of waiting to be reached.
TEST(ClusterE2eTest, ATfConfigTaskOfAnotherHostIsNamedAtStartup) {
  for (const std::string type : {"worker", "ps"}) {
    // 198.18.0.0/15 is reserved for benchmarks; no test host has .253.
    const std::string tf_config = absl::StrCat(
        R"({"cluster": {")", type, R"(": ["198.19.255.253:2222"]},)",
        R"("task": {"type": ")", type, R"(", "index": 0}})");
    CommandResult result =
        RunCommand({Binary(type == "ps" ? "cohort-ps" : "cohort-agent"),
                    "--coordinator=127.0.0.1:1"},
                   absl::Seconds(10), {{"TF_CONFIG", tf_config}});
    // A configuration error: systemd does not restart it.
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output,
                HasSubstr("cannot listen on 198.19.255.253:2222: "
                          "198.19.255.253 is not an address of this host"));
    EXPECT_THAT(result.output,
                HasSubstr(absl::StrCat("(TF_CONFIG's address for ", type,
                                       ":0: does its \"task\" name this "
                                       "host's own entry?)")));
  }
}

// Serving on every interface, a task registers TF_CONFIG's address, where
// its peers dial TF_CONFIG's port: serving another port is said at startup
// (right only behind a port mapping).
TEST(ClusterE2eTest, AWildcardListenOnAnotherPortThanTfConfigsIsSaid) {
  const int port = *PickUnusedPort();
  const std::string tf_config =
      absl::StrCat(R"({"cluster": {"worker": ["127.0.0.1:)", port, R"("]},)",
                   R"("task": {"type": "worker", "index": 0}})");
  // No coordinator answers: the agent gives up on it after 1 s and exits,
  // its warning long since written.
  CommandResult result = RunCommand(
      {Binary("cohort-agent"), "--coordinator=127.0.0.1:1",
       "--orphan_timeout=1s", absl::StrCat("--listen=0.0.0.0:", port + 1)},
      absl::Seconds(30), {{"TF_CONFIG", tf_config}});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat(
                  "--listen=0.0.0.0:", port + 1, " serves port ", port + 1,
                  ", but TF_CONFIG puts worker:0 at 127.0.0.1:", port,
                  ", where its peers will dial")));
}

// A spec host that resolves nowhere is named at startup, and its task's
// status says why it has not come once it is overdue; the rest of the
// cluster runs.
TEST(ClusterE2eTest, ASpecHostThatDoesNotResolveIsNamed) {
  ScratchDir dir;
  nlohmann::json spec = nlohmann::json::parse(LocalSpec(1, 0));
  // RFC 6761: names under .invalid never resolve.
  spec["cluster"]["worker"].push_back("worker-1.invalid:2222");
  const std::string path = dir.Write("cluster.json", spec.dump());
  auto coordinator = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", path), "--startup_timeout=2s"},
      "0.0.0.0:0");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  auto& c = **coordinator;
  absl::StatusOr<v1::ClusterState> state = c.WaitForState(
      [](const v1::ClusterState& s) {
        for (const v1::TaskStatus& task : s.tasks()) {
          if (task.task().type() == "worker" && task.task().index() == 1) {
            return !task.last_error().empty();
          }
        }
        return false;
      },
      absl::Seconds(30));
  ASSERT_TRUE(state.ok()) << state.status() << "\n" << c.Log();
  for (const v1::TaskStatus& task : state->tasks()) {
    if (task.task().type() == "worker" && task.task().index() == 1) {
      EXPECT_EQ(task.state(), v1::STARTING);
      EXPECT_THAT(task.last_error(),
                  HasSubstr("nothing has registered as worker:1 (expected at "
                            "worker-1.invalid:2222)"));
      EXPECT_THAT(task.last_error(),
                  HasSubstr("worker-1.invalid does not resolve"));
    }
  }
  EXPECT_THAT(c.Log(), HasSubstr("worker:1 at worker-1.invalid:2222: "
                                 "worker-1.invalid does not resolve"));
}

TEST(ClusterE2eTest, HealthServiceServesOnEveryDaemon) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(dir, 1, 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::string> addresses = {cluster->coordinator->address()};
  for (const auto& task : cluster->state.tasks()) {
    addresses.push_back(task.address());
  }
  ASSERT_EQ(addresses.size(), 4);
  for (const std::string& address : addresses) {
    absl::StatusOr<std::string> health = HealthCheck(address);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING") << address;
  }
}

TEST(ClusterE2eTest, LaunchNoneAdmitsTasksStartedByHandAndRefusesStrangers) {
  ScratchDir dir;
  const std::string spec_json = LocalSpec(1, 1);
  const std::string spec = dir.Write("cluster.json", spec_json);
  auto coordinator = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--launch=none"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  auto& c = **coordinator;
  absl::StatusOr<v1::ClusterState> state = c.State();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->launch_mode(), "none");
  for (const auto& task : state->tasks()) {
    EXPECT_EQ(task.state(), v1::STARTING);
    EXPECT_EQ(task.pid(), 0);
  }

  // Start the three tasks by hand, as systemd would, identity from TF_CONFIG.
  // The ps task serves on every interface at its port, as TensorFlow's
  // servers do, and so registers TF_CONFIG's address for it.
  const ClusterSpec parsed = *ClusterSpec::FromJson(spec_json);
  std::vector<Subprocess> tasks;
  for (const TaskId& task : parsed.tasks()) {
    nlohmann::json tf_config = nlohmann::json::parse(spec_json);
    tf_config["task"] = {{"type", task.type}, {"index", task.index}};
    std::vector<std::string> argv = {
        Binary(task.type == "ps" ? "cohort-ps" : "cohort-agent"),
        absl::StrCat("--coordinator=", c.address())};
    if (task.type == "ps") {
      argv.push_back(absl::StrCat("--listen=0.0.0.0:",
                                  ParseHostPort(*parsed.address(task))->port));
    }
    absl::StatusOr<Subprocess> child = Subprocess::Spawn(
        {.argv = argv,
         .env = {{"TF_CONFIG", tf_config.dump()}},
         .output_file = absl::StrCat(dir.path(), "/", task.type, ".log")});
    ASSERT_TRUE(child.ok()) << child.status();
    tasks.push_back(*std::move(child));
  }
  state = c.WaitAllReady(kReadyTimeout);
  EXPECT_TRUE(state.ok()) << state.status();
  if (state.ok()) {
    for (const auto& task : state->tasks()) {
      EXPECT_FALSE(task.launched());
      EXPECT_GT(task.pid(), 0);
    }
  }

  // An identity the spec does not have is refused, by name; the task exits 2.
  const int free_port = *PickUnusedPort();
  CommandResult stranger =
      RunCommand({Binary("cohort-agent"), "--task=worker:5",
                  absl::StrCat("--listen=127.0.0.1:", free_port),
                  absl::StrCat("--coordinator=", c.address())},
                 absl::Seconds(15));
  EXPECT_EQ(stranger.exit_code, 2) << stranger.output;
  EXPECT_THAT(stranger.output, HasSubstr("unknown task worker:5"));

  // So is a known identity at an address the spec does not give it.
  CommandResult moved =
      RunCommand({Binary("cohort-ps"), "--task=ps:0",
                  absl::StrCat("--listen=127.0.0.1:", free_port),
                  absl::StrCat("--coordinator=", c.address())},
                 absl::Seconds(15));
  EXPECT_EQ(moved.exit_code, 2) << moved.output;
  EXPECT_THAT(moved.output, HasSubstr("but the cluster spec puts ps:0 at"));

  // And a task given another daemon's address for the coordinator's.
  const std::string chief = *parsed.address({"chief", 0});
  CommandResult misdirected =
      RunCommand({Binary("cohort-agent"), "--task=worker:5",
                  absl::StrCat("--listen=127.0.0.1:", free_port),
                  absl::StrCat("--coordinator=", chief)},
                 absl::Seconds(15));
  EXPECT_EQ(misdirected.exit_code, 2) << misdirected.output;
  EXPECT_THAT(misdirected.output,
              HasSubstr(absl::StrCat("Coordinator.Register to ", chief,
                                     ": the server there does not serve "
                                     "this call")));

  // A second process given a live task's identity (one TF_CONFIG "task"
  // copied to two hosts) is refused while the holder beats, then told for
  // good, after 30 s, that two processes share it.
  const std::string worker = *parsed.address({"worker", 0});
  CommandResult duplicate =
      RunCommand({Binary("cohort-agent"), "--task=worker:0",
                  absl::StrCat("--listen=127.0.0.1:", free_port),
                  absl::StrCat("--advertise_address=", worker),
                  absl::StrCat("--coordinator=", c.address())},
                 absl::Seconds(120));
  EXPECT_EQ(duplicate.exit_code, 2) << duplicate.output;
  EXPECT_THAT(duplicate.output,
              HasSubstr("two processes were given the same identity"));
  EXPECT_THAT(c.Log(), HasSubstr("worker:0: refused a registration from pid"));

  // The refusals changed nothing: the cluster is still whole.
  state = c.WaitAllReady(kReadyTimeout);
  EXPECT_TRUE(state.ok()) << state.status();
  for (Subprocess& task : tasks) {
    const ExitStatus exit = task.Stop(absl::Seconds(5));
    EXPECT_TRUE(exit.exited() && exit.exit_code() == 0) << exit.ToString();
  }
  // A clean stop deregisters: the coordinator knows from the task itself,
  // not from its silence.
  state = c.WaitForState(
      [](const v1::ClusterState& s) {
        return std::all_of(s.tasks().begin(), s.tasks().end(),
                           [](const auto& t) { return t.state() == v1::DEAD; });
      },
      absl::Seconds(30));
  ASSERT_TRUE(state.ok()) << state.status();
  for (const v1::TaskStatus& task : state->tasks()) {
    EXPECT_THAT(task.last_error(), HasSubstr("deregistered"))
        << task.ShortDebugString();
  }
}

TEST(ClusterE2eTest, RestartedCoordinatorKnowsTheClusterFromItsStateDir) {
  ScratchDir dir;
  const std::string spec = dir.Write("cluster.json", LocalSpec(1, 1));
  const std::string state_dir = dir.path() + "/state";
  auto first =
      CoordinatorProcess::Start(dir, {absl::StrCat("--cluster_spec=", spec),
                                      absl::StrCat("--state_dir=", state_dir)});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::ClusterState> before =
      (*first)->WaitAllReady(kReadyTimeout);
  ASSERT_TRUE(before.ok()) << before.status();
  const std::string address = (*first)->address();
  // One coordinator per state dir: a second is refused, naming the first.
  const CommandResult second_one = RunCommand(
      {Binary("cohort-coordinator"), absl::StrCat("--state_dir=", state_dir),
       "--listen=127.0.0.1:0"});
  EXPECT_EQ(second_one.exit_code, 2) << second_one.output;
  EXPECT_THAT(second_one.output,
              HasSubstr(absl::StrCat("another coordinator runs on --state_dir ",
                                     state_dir, ": ", state_dir,
                                     "/coordinator.lock is locked by another "
                                     "process (pid ",
                                     (*first)->process().pid(), ")")));

  // The coordinator crashes; its tasks keep running.
  (*first)->process().Signal(SIGKILL);
  ASSERT_TRUE((*first)->process().Wait(absl::Seconds(5)).has_value());
  (*first)->ForgetProcess();

  // A coordinator that launches nothing comes and goes meanwhile: the
  // tasks stay on record for the next one that launches.
  {
    auto interim = CoordinatorProcess::Start(
        dir, {absl::StrCat("--state_dir=", state_dir), "--launch=none"},
        address);
    ASSERT_TRUE(interim.ok()) << interim.status();
    ASSERT_TRUE((*interim)->WaitAllReady(kReadyTimeout).ok())
        << (*interim)->Log();
    (*interim)->ForgetTasks();
  }

  // Restarted with only the state dir (no spec): same address, same tasks,
  // and they register again with the same pids.
  auto second = CoordinatorProcess::Start(
      dir, {absl::StrCat("--state_dir=", state_dir)}, address);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<v1::ClusterState> after =
      (*second)->WaitAllReady(kReadyTimeout);
  ASSERT_TRUE(after.ok()) << after.status() << (*second)->Log();
  EXPECT_EQ(after->incarnation(), before->incarnation() + 2);
  ASSERT_EQ(after->tasks_size(), before->tasks_size());
  for (int i = 0; i < after->tasks_size(); ++i) {
    EXPECT_EQ(after->tasks(i).pid(), before->tasks(i).pid());
    EXPECT_EQ(after->tasks(i).restart_count(), 0);
  }
  // The adopted tasks are still stopped with the coordinator.
  (*second)->process().Signal(SIGTERM);
  ASSERT_TRUE((*second)->process().Wait(absl::Seconds(5)).has_value());
  EXPECT_TRUE(WaitAllGone(TaskPids(*after), absl::Seconds(5)));
  (*first)->ForgetProcess();
}

TEST(ClusterE2eTest, TasksOfACoordinatorGoneForGoodExitAfterTheOrphanTimeout) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 1, {"--task_orphan_timeout=2s"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::vector<int64_t> pids = TaskPids(cluster->state);
  CoordinatorProcess& coordinator = *cluster->coordinator;
  coordinator.process().Signal(SIGKILL);
  ASSERT_TRUE(coordinator.process().Wait(absl::Seconds(5)).has_value());
  coordinator.ForgetProcess();
  // Each task gives up on its own once the coordinator has been silent for
  // 2 s; none is left behind.
  EXPECT_TRUE(WaitAllGone(pids, absl::Seconds(30)));
  const std::string log =
      ReadFile(dir.path() + "/coordinator.log").value_or("");
  EXPECT_THAT(log, HasSubstr("has not answered for 2s (--orphan_timeout)"));
  KillIfAlive(pids);
}

// A job's own code cannot be interrupted. An agent whose attempt is ended
// while a step never returns does not stay stuck behind it for ever, busy
// with a job nobody wants: past its --stop_timeout it exits with code 3,
// the coordinator says why and restarts it, and it takes the next job.
TEST(ClusterE2eTest,
     AnAgentWhoseJobCodeNeverReturnsIsRestartedOnceTheJobIsEnded) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, /*workers=*/0, /*ps=*/0,
                        {"--agent_stop_timeout=2s", "--cpu_devices=2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& c = *cluster->coordinator;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(c.address());
  ASSERT_TRUE(client.ok()) << client.status();

  JobSpec spec = SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 10, 0);
  spec.config_json.insert(1, R"("hang_at_step": 0, )");
  absl::StatusOr<std::string> id = (*client)->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(WaitUntil(
      [&] { return absl::StrContains(c.Log(), "step 0 hangs (hang_at_step)"); },
      absl::Seconds(60)))
      << c.Log();
  ASSERT_TRUE((*client)->CancelJob(*id).ok());

  absl::StatusOr<v1::ClusterState> state = c.WaitForState(
      [](const v1::ClusterState& s) {
        const v1::TaskStatus* chief = FindTask(s, "chief", 0);
        return chief->state() == v1::READY && chief->restart_count() == 1;
      },
      absl::Seconds(60));
  ASSERT_TRUE(state.ok()) << state.status() << c.Log();
  EXPECT_THAT(c.Log(), HasSubstr(absl::StrCat(
                           "job ", *id,
                           " attempt 1 did not stop within 2s of being "
                           "ended")));
  EXPECT_THAT(c.Log(), HasSubstr("exited with code 3 (a job's own code did "
                                 "not return within --stop_timeout"));
  EXPECT_EQ(WaitForJobEnd(**client, *id, absl::Seconds(30)).state(),
            v1::JOB_CANCELLED);

  // The restarted agent runs the next job.
  absl::StatusOr<std::string> next = (*client)->SubmitJob(
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 10, 0));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(WaitForJobEnd(**client, *next, absl::Seconds(60)).state(),
            v1::JOB_SUCCEEDED);
}

}  // namespace
}  // namespace cohort::testing
