// `cohortctl up` and `cohortctl status`, as a user runs them.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CohortctlE2eTest, UpWithNoArgumentsBringsUpTheDefaultCluster) {
  ScratchDir dir;
  // `up` keeps its state under $XDG_STATE_HOME; `status` finds it there.
  // An empty TF_CONFIG (`export TF_CONFIG=`) names no cluster.
  const std::map<std::string, std::string> env = {
      {"XDG_STATE_HOME", dir.path()}, {"TF_CONFIG", ""}};
  const std::string port_file = dir.path() + "/cohort/local/coordinator.port";
  absl::StatusOr<Subprocess> up =
      Subprocess::Spawn({.argv = {Binary("cohortctl"), "up"},
                         .env = env,
                         .output_file = dir.path() + "/up.log"});
  ASSERT_TRUE(up.ok()) << up.status();

  nlohmann::json status;
  const bool ready = WaitUntil(
      [&] {
        if (!ReadFile(port_file).ok()) return false;
        CommandResult result = RunCommand(
            {Binary("cohortctl"), "status", "--json"}, absl::Seconds(5), env);
        if (result.exit_code != 0) return false;
        status = nlohmann::json::parse(result.output, nullptr, false);
        if (status.is_discarded() || status["tasks"].size() != 3) return false;
        for (const auto& task : status["tasks"]) {
          if (task["state"] != "READY") return false;
        }
        return true;
      },
      absl::Seconds(30), absl::Milliseconds(200));
  ASSERT_TRUE(ready) << status.dump(2)
                     << ReadFile(dir.path() + "/up.log").value_or("");

  std::vector<int64_t> pids;
  std::map<std::string, int> types;
  for (const auto& task : status["tasks"]) {
    ++types[task["type"].get<std::string>()];
    EXPECT_GT(task["pid"].get<int64_t>(), 0) << task.dump();
    pids.push_back(task["pid"].get<int64_t>());
    if (task["type"] != "ps") {
      // The default local cluster's agents have 2 CPU devices each.
      ASSERT_EQ(task["devices"].size(), 2) << task.dump();
      EXPECT_EQ(task["devices"][0]["name"], "cpu:0");
      EXPECT_EQ(task["devices"][1]["name"], "cpu:1");
    }
  }
  EXPECT_EQ(types, (std::map<std::string, int>{
                       {"chief", 1}, {"worker", 1}, {"ps", 1}}));

  // The table is readable and agrees.
  CommandResult table =
      RunCommand({Binary("cohortctl"), "status"}, absl::Seconds(5), env);
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("3/3 tasks ready"));
  EXPECT_THAT(table.output, HasSubstr("worker:0"));
  // Any command finds it through --state_dir, from anywhere.
  CommandResult by_dir = RunCommand(
      {Binary("cohortctl"), "status",
       absl::StrCat("--state_dir=", dir.path(), "/cohort/local")},
      absl::Seconds(5), {{"XDG_STATE_HOME", dir.path() + "/elsewhere"}});
  EXPECT_EQ(by_dir.exit_code, 0) << by_dir.output;
  EXPECT_THAT(by_dir.output, HasSubstr("3/3 tasks ready"));
  // The command `up` suggests works as printed, from anywhere.
  std::vector<std::string> suggested;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string log = ReadFile(dir.path() + "/up.log").value_or("");
        const size_t at = log.find("Try: cohortctl ");
        const size_t end = log.find("   (Ctrl-C", at);
        if (at == std::string::npos || end == std::string::npos) return false;
        suggested = absl::StrSplit(log.substr(at + 5, end - at - 5), ' ',
                                   absl::SkipEmpty());
        return true;
      },
      absl::Seconds(30)))
      << ReadFile(dir.path() + "/up.log").value_or("");
  ASSERT_GE(suggested.size(), 3u);
  EXPECT_EQ(suggested.back(), "status");
  suggested.front() = Binary("cohortctl");
  CommandResult tried = RunCommand(suggested, absl::Seconds(5),
                                   {{"XDG_STATE_HOME", dir.path() + "/none"}});
  EXPECT_EQ(tried.exit_code, 0) << tried.output;
  EXPECT_THAT(tried.output, HasSubstr("3/3 tasks ready"));
  // A second `up` of the same state dir is refused, and leaves the first
  // findable.
  CommandResult again =
      RunCommand({Binary("cohortctl"), "up"}, absl::Seconds(30), env);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_THAT(again.output, HasSubstr("is already up ("));
  EXPECT_TRUE(ReadFile(port_file).ok());

  // ^C (here SIGTERM) stops everything.
  up->Signal(SIGTERM);
  std::optional<ExitStatus> exit = up->Wait(absl::Seconds(15));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->exited() && exit->exit_code() == 0) << exit->ToString();
  EXPECT_TRUE(WaitAllGone(pids, absl::Seconds(5)));
  KillIfAlive(pids);
  // Stopping can take seconds while a job checkpoints: it is not silent.
  absl::StatusOr<std::string> log = ReadFile(dir.path() + "/up.log");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_THAT(*log, HasSubstr("cohortctl up: stopping the cluster; a running "
                              "job is checkpointed first (up to 10s)"));
}

// `cohortctl up` under $XDG_STATE_HOME=dir, in the background, and the
// status it serves once every task is READY.
class UpProcess {
 public:
  UpProcess(const ScratchDir& dir, std::vector<std::string> flags)
      : env_({{"XDG_STATE_HOME", dir.path()}}) {
    std::vector<std::string> argv = {Binary("cohortctl"), "up"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<Subprocess> up = Subprocess::Spawn(
        {.argv = argv, .env = env_, .output_file = dir.path() + "/up.log"});
    if (up.ok()) process_.emplace(*std::move(up));
    log_ = dir.path() + "/up.log";
  }
  ~UpProcess() {
    if (process_.has_value() && process_->running()) {
      process_->Stop(absl::Seconds(15));
    }
  }

  // The status once all 3 tasks are READY; null on timeout.
  nlohmann::json WaitReady() {
    nlohmann::json status;
    const bool ready = WaitUntil(
        [&] {
          CommandResult result =
              RunCommand({Binary("cohortctl"), "status", "--json"},
                         absl::Seconds(5), env_);
          if (result.exit_code != 0) return false;
          status = nlohmann::json::parse(result.output, nullptr, false);
          if (status.is_discarded() || status["tasks"].size() != 3)
            return false;
          for (const auto& task : status["tasks"]) {
            if (task["state"] != "READY") return false;
          }
          return true;
        },
        absl::Seconds(30), absl::Milliseconds(200));
    return ready ? status : nlohmann::json();
  }
  Subprocess& process() { return *process_; }
  std::string Log() const { return ReadFile(log_).value_or(""); }

 private:
  std::map<std::string, std::string> env_;
  std::optional<Subprocess> process_;
  std::string log_;
};

std::vector<int64_t> Pids(const nlohmann::json& status) {
  std::vector<int64_t> pids;
  for (const auto& task : status["tasks"]) pids.push_back(task["pid"]);
  return pids;
}

TEST(CohortctlE2eTest,
     UpStartsANewClusterUnlessAskedToResumeAndLeavesNoOrphans) {
  ScratchDir dir;
  std::vector<int64_t> first_pids;
  std::string first_uid;
  {
    UpProcess up(dir, {});
    const nlohmann::json status = up.WaitReady();
    ASSERT_FALSE(status.is_null()) << up.Log();
    EXPECT_EQ(status["incarnation"], 1);
    first_uid = status["cluster_uid"].get<std::string>();
    EXPECT_EQ(first_uid.size(), 32u) << status.dump(2);
    first_pids = Pids(status);
    // The coordinator dies for real (SIGKILL), and so does `up`: its tasks
    // are left running.
    const pid_t coordinator = status["coordinator_pid"].get<pid_t>();
    ASSERT_EQ(kill(coordinator, SIGKILL), 0);
    up.process().Signal(SIGKILL);
    up.process().Wait(absl::Seconds(10));
    // Until it is gone, it holds the state dir's lock.
    ASSERT_TRUE(WaitAllGone({coordinator}, absl::Seconds(30)));
  }
  for (int64_t pid : first_pids) EXPECT_TRUE(ProcessAlive(pid)) << pid;

  {
    // Resumed: the same address, so the tasks still running are adopted.
    UpProcess up(dir, {"--resume"});
    const nlohmann::json status = up.WaitReady();
    ASSERT_FALSE(status.is_null()) << up.Log();
    EXPECT_EQ(status["incarnation"], 2);
    EXPECT_EQ(status["cluster_uid"], first_uid);
    EXPECT_EQ(Pids(status), first_pids) << status.dump(2);
    // Killed again, then a plain `up`: a new cluster, which stops the
    // leftovers of the old one before it starts its own.
    const pid_t coordinator = status["coordinator_pid"].get<pid_t>();
    ASSERT_EQ(kill(coordinator, SIGKILL), 0);
    up.process().Signal(SIGKILL);
    up.process().Wait(absl::Seconds(10));
    ASSERT_TRUE(WaitAllGone({coordinator}, absl::Seconds(30)));
  }
  UpProcess fresh(dir, {});
  const nlohmann::json status = fresh.WaitReady();
  ASSERT_FALSE(status.is_null()) << fresh.Log();
  EXPECT_EQ(status["incarnation"], 1);
  EXPECT_NE(status["cluster_uid"], first_uid);  // a new cluster
  for (const auto& task : status["tasks"]) {
    EXPECT_EQ(task["restart_count"], 0) << task.dump();
  }
  EXPECT_TRUE(WaitAllGone(first_pids, absl::Seconds(10)))
      << "the first cluster's tasks outlived a new `up`";
  EXPECT_TRUE(std::filesystem::exists(
      dir.path() + "/cohort/local/previous/coordinator_state.json"));

  const std::vector<int64_t> pids = Pids(status);
  fresh.process().Signal(SIGTERM);
  EXPECT_TRUE(fresh.process().Wait(absl::Seconds(15)).has_value());
  EXPECT_TRUE(WaitAllGone(pids, absl::Seconds(5)));
  KillIfAlive(first_pids);
  KillIfAlive(pids);
}

TEST(CohortctlE2eTest, ASignalWhileTasksAreNotReadyStopsTheClusterAtOnce) {
  ScratchDir dir;
  // The worker's port is held here, so that it never becomes READY and
  // `up` waits out --ready_timeout unless the signal ends the wait.
  const int held = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  absl::Cleanup close_held = [held] { close(held); };
  sockaddr_in address{};
  address.sin_family = AF_INET;
  ASSERT_EQ(inet_pton(AF_INET, "127.0.0.1", &address.sin_addr), 1);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(held, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(held, 1), 0);
  ASSERT_EQ(getsockname(held, reinterpret_cast<sockaddr*>(&address), &length),
            0);
  absl::StatusOr<int> chief_port = PickUnusedPort("127.0.0.1");
  ASSERT_TRUE(chief_port.ok()) << chief_port.status();
  const std::string spec = dir.path() + "/spec.json";
  ASSERT_TRUE(
      WriteFileAtomically(
          spec,
          nlohmann::json{
              {"cluster",
               {{"chief", {absl::StrCat("127.0.0.1:", *chief_port)}},
                {"worker",
                 {absl::StrCat("127.0.0.1:", ntohs(address.sin_port))}}}}}
              .dump())
          .ok());

  UpProcess up(dir,
               {absl::StrCat("--cluster_spec=", spec), "--ready_timeout=10m"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        return absl::StrContains(up.Log(),
                                 "cohortctl up: coordinator listening on");
      },
      absl::Seconds(30)))
      << up.Log();
  up.process().Signal(SIGTERM);
  // The stop's own bound (10 s for the tasks, then the coordinator's), far
  // inside the 10 minutes the wait for READY had left.
  const std::optional<ExitStatus> exit = up.process().Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value()) << up.Log();
  EXPECT_THAT(up.Log(), HasSubstr("cohortctl up: stopping the cluster"));
  EXPECT_THAT(up.Log(),
              HasSubstr("cohortctl up: coordinator exited with code"));
  EXPECT_TRUE(exit->exited() && exit->exit_code() == 0)
      << exit->ToString() << "\n"
      << up.Log();
}

TEST(CohortctlE2eTest, ACoordinatorOnAnotherAddressIsFoundThereEvenOnANewPort) {
  ScratchDir dir;
  const std::string port_file = dir.path() + "/cohort/local/coordinator.port";
  int port = 0;
  std::vector<int64_t> first_pids;
  {
    // `status` finds it through the state dir at 127.0.0.2, where it
    // listens; nothing listens at 127.0.0.1 on that port.
    UpProcess up(dir, {"--listen=127.0.0.2:0"});
    const nlohmann::json status = up.WaitReady();
    ASSERT_FALSE(status.is_null()) << up.Log();
    EXPECT_THAT(status["coordinator_address"].get<std::string>(),
                ::testing::StartsWith("127.0.0.2:"));
    port = std::atoi(ReadFile(port_file).value_or("0").c_str());
    ASSERT_GT(port, 0);
    first_pids = Pids(status);
    up.process().Signal(SIGTERM);
    ASSERT_TRUE(up.process().Wait(absl::Seconds(15)).has_value());
    ASSERT_TRUE(WaitAllGone(first_pids, absl::Seconds(10)));
  }
  // Its saved address is taken by then: the resumed coordinator serves on
  // another port of the same host, where `status` finds it.
  const int taken = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(taken, 0);
  // Past the old connections in TIME_WAIT; without SO_REUSEPORT, which
  // gRPC sets, its bind still fails.
  const int on = 1;
  ASSERT_EQ(setsockopt(taken, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)), 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(inet_pton(AF_INET, "127.0.0.2", &address.sin_addr), 1);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0)
      << std::strerror(errno);
  ASSERT_EQ(listen(taken, 1), 0);
  UpProcess resumed(dir, {"--resume"});
  const nlohmann::json status = resumed.WaitReady();
  close(taken);
  ASSERT_FALSE(status.is_null()) << resumed.Log();
  EXPECT_THAT(resumed.Log(),
              HasSubstr(absl::StrCat(
                  "cannot serve on the saved address 127.0.0.2:", port)));
  EXPECT_THAT(resumed.Log(),
              HasSubstr("cohortctl up: coordinator listening on 127.0.0.2:"));
  EXPECT_THAT(status["coordinator_address"].get<std::string>(),
              ::testing::StartsWith("127.0.0.2:"));
  const std::vector<int64_t> pids = Pids(status);
  resumed.process().Signal(SIGTERM);
  EXPECT_TRUE(resumed.process().Wait(absl::Seconds(15)).has_value());
  EXPECT_TRUE(WaitAllGone(pids, absl::Seconds(5)));
  KillIfAlive(first_pids);
  KillIfAlive(pids);
}

TEST(CohortctlE2eTest, AWatchThatLostTheCoordinatorSaysTheJobMayStillRun) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 0, {"--cpu_devices=2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& coordinator = *cluster->coordinator;
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(coordinator.address());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> id = (*client)->SubmitJob(
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 100000, 5));
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string out = dir.path() + "/watch.log";
  absl::StatusOr<Subprocess> watch = Subprocess::Spawn(
      {.argv = {Binary("cohortctl"),
                absl::StrCat("--coordinator=", coordinator.address()), "watch",
                *id},
       .output_file = out});
  ASSERT_TRUE(watch.ok()) << watch.status();
  // Once it has shown the job, the coordinator dies.
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(out).value_or("").empty(); },
                        absl::Seconds(30)));
  coordinator.process().Signal(SIGKILL);
  coordinator.process().Wait(absl::Seconds(10));
  coordinator.ForgetProcess();
  const std::optional<ExitStatus> ended = watch->Wait(absl::Seconds(60));
  ASSERT_TRUE(ended.has_value()) << ReadFile(out).value_or("");
  EXPECT_EQ(ended->exit_code(), 3) << ReadFile(out).value_or("");
  EXPECT_THAT(ReadFile(out).value_or(""),
              HasSubstr(absl::StrCat("job ", *id, " may still be running")));
  KillIfAlive(coordinator.seen());
}

TEST(CohortctlE2eTest, StatusAgainstNothingIsAClearError) {
  ScratchDir dir;
  CommandResult result =
      RunCommand({Binary("cohortctl"), "--coordinator=127.0.0.1:1",
                  "--timeout=1s", "status"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(result.output, HasSubstr("127.0.0.1:1"));
  EXPECT_THAT(result.output,
              HasSubstr("no coordinator answers there: is it running, and do "
                        "--coordinator or COHORT_COORDINATOR name it?"));

  // An address `up` left behind is named as such: its cluster is gone.
  std::filesystem::create_directories(dir.path() + "/state");
  const std::string port_file = dir.Write("state/coordinator.port", "1");
  result = RunCommand({Binary("cohortctl"),
                       absl::StrCat("--state_dir=", dir.path(), "/state"),
                       "--timeout=1s", "status"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr(absl::StrCat(
                                 "no coordinator answers there: the "
                                 "address is the one `cohortctl up` left "
                                 "in ",
                                 port_file, "; is that cluster still up?")));

  // A port file or an environment that holds no address says so, and
  // where it came from.
  dir.Write("state/coordinator.port", "4O00\n");
  result = RunCommand({Binary("cohortctl"),
                       absl::StrCat("--state_dir=", dir.path(), "/state"),
                       "--timeout=1s", "status"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat("port \"4O00\" is not a number (from ",
                                     port_file, ")")));
  result = RunCommand({Binary("cohortctl"), "--timeout=1s", "status"},
                      absl::Seconds(10),
                      {{"COHORT_COORDINATOR", "127.0.0.1:99999"}});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("port 99999 is out of range 1..65535 (from "
                        "$COHORT_COORDINATOR)"));
  // A bad credential is not blamed on the address.
  const std::string empty_token = dir.Write("empty-token", "");
  result = RunCommand({Binary("cohortctl"), "--coordinator=127.0.0.1:1",
                       absl::StrCat("--auth_token_file=", empty_token),
                       "--timeout=1s", "status"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat("--auth_token_file: ", empty_token,
                                     " is empty\n")));

  // A watch retries for a while (a coordinator may be restarting), then
  // says what failed, not merely that nothing came. The job's fate is
  // unknown, not failed: a script must not submit it again.
  result = RunCommand({Binary("cohortctl"), "--coordinator=127.0.0.1:1",
                       "--timeout=1s", "watch", "1"});
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("cohortctl: job 1 was not seen: whether it runs is "
                        "unknown until the coordinator answers"));
  EXPECT_THAT(result.output,
              HasSubstr("watching job 1: no answer from the coordinator for "));
  EXPECT_THAT(result.output, HasSubstr("; last error: Jobs.WatchJob to "
                                       "127.0.0.1:1: failed to connect"));

  // A submission that got no answer may have reached the coordinator: the
  // error names the id to submit again with, which cannot make two jobs.
  result = RunCommand(
      {Binary("cohortctl"), "--coordinator=127.0.0.1:1", "--timeout=1s",
       "submit", "--library=" + ExampleLibrary("cohort_example_linear"),
       "--init=linear_init", "--step=linear_step", "--dataset=linear_data",
       "--steps=10", "--global_batch=8", "--submission_id=nightly-7"});
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_THAT(result.output, HasSubstr("(3 tries); if one reached the "
                                       "coordinator, the job exists: "
                                       "submitting again with submission id "
                                       "nightly-7 returns it"));
  EXPECT_THAT(result.output,
              HasSubstr("run the same command with --submission_id=nightly-7"));

  result = RunCommand({Binary("cohortctl"), "frobnicate"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("unknown command \"frobnicate\""));
}

TEST(CohortctlE2eTest, ACoordinatorBehindASlowLinkIsReached) {
  // A round trip of 300 ms: a handshake takes longer than the 100 ms one
  // attempt to connect used to get, yet well within the call's --timeout.
  ScratchDir dir;
  const std::string spec = dir.Write("cluster.json", LocalSpec(1, 0));
  auto coordinator = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--launch=none"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string port =
      (*coordinator)
          ->address()
          .substr((*coordinator)->address().rfind(':') + 1);
  const std::string ready = dir.path() + "/relay.ready";
  absl::StatusOr<Subprocess> relay = Subprocess::Spawn(
      {.argv = {TestBinary("delay_relay"), "--listen_host=127.0.0.2",
                "--target_host=127.0.0.1", absl::StrCat("--ports=", port),
                "--delay=150ms", absl::StrCat("--ready_file=", ready)},
       .output_file = dir.path() + "/relay.log"});
  ASSERT_TRUE(relay.ok()) << relay.status();
  const absl::Cleanup stop_relay = [&] { relay->Stop(absl::Seconds(5)); };
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(ready); },
                        absl::Seconds(10)))
      << ReadFile(dir.path() + "/relay.log").value_or("");

  const CommandResult result = RunCommand(
      {Binary("cohortctl"), absl::StrCat("--coordinator=127.0.0.2:", port),
       "--timeout=20s", "status"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("chief:0"));
  EXPECT_THAT(ReadFile(dir.path() + "/relay.log").value_or(""),
              HasSubstr("relaying a connection to port"));
}

TEST(CohortctlE2eTest, AJobTheClusterCannotRunExitsTwoNamingWhy) {
  // A ParameterServer job on a cluster without ps tasks: the coordinator
  // refuses it, and the fix is the caller's, like bad flags.
  ScratchDir dir;
  const std::string spec = dir.Write("cluster.json", LocalSpec(1, 0));
  auto coordinator = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--launch=none"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const CommandResult result = RunCommand(
      {Binary("cohortctl"),
       absl::StrCat("--coordinator=", (*coordinator)->address()), "submit",
       "--library=" + ExampleLibrary("cohort_example_linear"),
       "--init=linear_init", "--step=linear_step", "--dataset=linear_data",
       "--steps=10", "--global_batch=8", "--strategy=parameter_server"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output, HasSubstr("FAILED_PRECONDITION: "));
  EXPECT_THAT(result.output,
              HasSubstr("strategy ParameterServer needs ps tasks, and the "
                        "cluster spec has none"));
}

TEST(CohortctlE2eTest, BadFlagsAndArgumentsExitTwoNamingTheProblem) {
  struct Case {
    std::vector<std::string> argv;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{Binary("cohortctl"), "status", "--bogus_flag"},
       "cohortctl: unknown flag --bogus_flag (see --help)"},
      {{Binary("cohortctl"), "--coordinator=localhost", "status"},
       "the coordinator's address: invalid address \"localhost\": no port; "
       "expected \"host:port\" (from --coordinator)"},
      // `up` starts a coordinator; it does not use the one named.
      {{Binary("cohortctl"), "--coordinator=127.0.0.1:1", "up"},
       "cohortctl up: --coordinator names a running coordinator; `up` starts "
       "one: pass --listen=HOST:PORT"},
      {{Binary("cohortctl"), "--timeout=0s", "status"},
       "cohortctl: --timeout must be positive and finite, got 0"},
      {{Binary("cohortctl"), "--timeout=inf", "status"},
       "cohortctl: --timeout must be positive and finite, got inf"},
      {{Binary("cohort-coordinator"), "--heartbeat_timeout=abc"},
       "cohort-coordinator: --heartbeat_timeout: Illegal value 'abc'"},
      {{Binary("cohort-coordinator"), "--heartbeat_timeout", "abc"},
       "cohort-coordinator: --heartbeat_timeout: Illegal value 'abc'"},
      {{Binary("cohort-coordinator"), "--heartbeat_timeout=5"},
       "Illegal value '5' specified for flag 'heartbeat_timeout' (a duration "
       "needs a unit: 500ms, 5s, 2m, 1h30m or inf)"},
      {{Binary("cohort-coordinator"), "--heartbeat_timeout"},
       "--heartbeat_timeout needs a value (--heartbeat_timeout=VALUE)"},
      {{Binary("cohort-bench"), "allreduce", "--format=xml"},
       "--format must be table or csv, not \"xml\""},
      {{Binary("cohort-bench"), "allreduce", "--rank=0"},
       "--rank needs --store=HOST:PORT"},
      {{Binary("cohort-bench"), "allreduce", "--rank=2", "--ranks=2",
        "--store=127.0.0.1:1"},
       "--rank=2 is out of range for --ranks=2"},
      {{Binary("cohort-example-mlp-data"), "--out=/nonexistent/x",
        "--examples=10000000000"},
       "--examples=10000000000 is over the 100000000 this generator holds in "
       "memory at once"},
      {{Binary("cohort-ps-bench"), "help"},
       "unexpected argument \"help\" (it takes flags only; see --help)"},
      {{Binary("cohortctl"), "status", "--cluster_spec=spec.json"},
       "cohortctl status: --cluster_spec is for `cohortctl up`, not "
       "`cohortctl status`"},
      {{Binary("cohortctl"), "jobs", "--wait"},
       "--wait is for `cohortctl submit`, not `cohortctl jobs`"},
      {{Binary("cohortctl"), "cancel", "1", "--follow"},
       "--follow is for `cohortctl logs`, not `cohortctl cancel`"},
      // A trace is JSON already; --json would be ignored without a word.
      {{Binary("cohortctl"), "trace", "1", "--json"},
       "--json is for `cohortctl status` and `cohortctl submit` and "},
      {{Binary("cohortctl"), "up", "--json"}, ", not `cohortctl up`"},
      {{Binary("cohortctl"), "cancel", "abc"},
       "cohortctl cancel: \"abc\" is not a job id: job ids are positive "
       "integers"},
      {{Binary("cohortctl"), "job", "007"}, "\"007\" is not a job id"},
      {{Binary("cohortctl"), "up", "--ready_timeout=0s"},
       "--ready_timeout must be positive, got 0"},
      {{Binary("cohort-bench"), "allreduce", "--min_time=-1s"},
       "--min_time must not be negative, got -1s"},
      {{Binary("cohortctl"), "submit", "--library=x.so", "--step=s",
        "--steps=1", "--global_batch=1", "--ps_shards=4"},
       "--ps_shards is for --strategy=parameter_server, not "
       "--strategy=multi_worker_mirrored"},
  };
  for (const Case& c : cases) {
    const CommandResult result = RunCommand(c.argv, absl::Seconds(10));
    EXPECT_EQ(result.exit_code, 2) << c.argv[0] << "\n" << result.output;
    EXPECT_THAT(result.output, HasSubstr(c.expected));
  }
  // A library too large to submit is refused by its size, before it is
  // read: with 2 GB of address space, reading the (sparse) 8 GiB would fail.
  {
    ScratchDir big;
    const std::string library = big.Write("libhuge.so", "");
    std::filesystem::resize_file(library, uintmax_t{8} << 30);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizers reserve terabytes of address space at start.
    const char* limit = "";
#else
    const char* limit = "ulimit -v 2000000 && ";
#endif
    const CommandResult result = RunCommand(
        {"/bin/sh", "-c",
         absl::StrCat(limit,
                      "exec \"$0\" submit --library=\"$1\" --step=s "
                      "--steps=1 --global_batch=1 --coordinator=127.0.0.1:1"),
         Binary("cohortctl"), library},
        absl::Seconds(30));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_THAT(result.output, HasSubstr("is 8589934592 bytes, over the"));
  }
  // `up` exits as its coordinator did when the spec is refused.
  ScratchDir dir;
  const std::string spec = dir.Write("bad.json", "{not json");
  const CommandResult up = RunCommand(
      {Binary("cohortctl"), "up", absl::StrCat("--cluster_spec=", spec),
       absl::StrCat("--state_dir=", dir.path(), "/state")},
      absl::Seconds(30));
  EXPECT_EQ(up.exit_code, 2) << up.output;
  EXPECT_THAT(up.output, HasSubstr("$: not valid JSON"));
  // So is a TF_CONFIG, which names the cluster when no spec is given.
  const CommandResult tf_config =
      RunCommand({Binary("cohortctl"), "up",
                  absl::StrCat("--state_dir=", dir.path(), "/state")},
                 absl::Seconds(30), {{"TF_CONFIG", R"({"cluster": )"}});
  EXPECT_EQ(tf_config.exit_code, 2) << tf_config.output;
  EXPECT_THAT(tf_config.output, HasSubstr("TF_CONFIG: $: not valid JSON"));
  // There is nothing to resume in a state dir that kept no cluster.
  const CommandResult resume =
      RunCommand({Binary("cohortctl"), "up", "--resume",
                  absl::StrCat("--state_dir=", dir.path(), "/empty")},
                 absl::Seconds(30));
  EXPECT_EQ(resume.exit_code, 2) << resume.output;
  EXPECT_THAT(resume.output,
              HasSubstr(absl::StrCat("--resume: no cluster was kept in ",
                                     dir.path(), "/empty")));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/empty"));
}

TEST(CohortctlE2eTest, EveryBinaryHasHelp) {
  for (const char* binary :
       {"cohortctl", "cohort-coordinator", "cohort-agent", "cohort-ps"}) {
    CommandResult result = RunCommand({Binary(binary), "--help"});
    EXPECT_EQ(result.exit_code, 0) << binary << result.output;
    EXPECT_THAT(result.output, HasSubstr("--auth_token_file")) << binary;
    EXPECT_THAT(result.output, Not(HasSubstr("--flagfile"))) << binary;
  }
}

}  // namespace
}  // namespace cohort::testing
