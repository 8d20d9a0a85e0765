// Jobs across test hosts (network namespaces joined by a bridge): the
// coordinator runs with --launch=none on a host of its own, and every agent
// and ps task is started on its own host from its TF_CONFIG. Skips, saying
// why, where test hosts cannot be made (not root).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "absl/strings/str_cat.h"
#include "cohort/client.h"
#include "common/checkpoint.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "tests/testing/host_cluster.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/test_hosts.h"

namespace cohort::testing {
namespace {

using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// The record of the first attempt that resumed from a checkpoint; null if
// none did.
const v1::RestartRecord* FirstResumed(const v1::JobStatus& status) {
  for (const v1::RestartRecord& r : status.restarts()) {
    if (!r.resumed_from().empty()) return &r;
  }
  return nullptr;
}

class MultiHostJobsE2eTest : public TestHostsTest<5> {
 protected:
  void SetUp() override {
    TestHostsTest::SetUp();
    if (IsSkipped()) return;
    data_ = dir_.path() + "/spirals";
    CommandResult made = RunCommand(
        {Binary("cohort-example-mlp-data"), "--out=" + data_, "--files=6"});
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }

  std::string data_;
};

// Submits `spec` to `cluster` and waits (2 minutes at most) for its end,
// which must be a success; a failure shows the chief's log.
v1::JobStatus RunToSuccess(HostCluster& cluster, const JobSpec& spec) {
  absl::StatusOr<std::string> id = cluster.client().SubmitJob(spec);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return {};
  v1::JobStatus status =
      WaitForJobEnd(cluster.client(), *id, absl::Seconds(120));
  EXPECT_EQ(status.state(), v1::JOB_SUCCEEDED)
      << status.error() << "\n"
      << ReadFile(cluster.TaskLog("chief:0")).value_or("");
  return status;
}

TEST_F(MultiHostJobsE2eTest,
       MultiWorkerMirroredOnThreeHostsReachesTheBarAndEqualsOneHostBitwise) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster = HostCluster::Start(
      hosts_.get(), &dir_,
      {.coordinator_host = 1,
       .tasks = {{"chief", 0, 2}, {"worker", 0, 3}, {"worker", 1, 4}},
       .coordinator_flags = {absl::StrCat("--state_dir=", dir_.path(),
                                          "/coordinator")},
       .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  JobSpec spec = MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 600, "data");
  spec.global_batch_size = 120;  // 20 per replica
  const v1::JobStatus across = RunToSuccess(**cluster, spec);
  ASSERT_EQ(across.state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(across.num_replicas(), 6);
  EXPECT_GE(across.metrics().at("accuracy"), kMlpAccuracyBar);
  // Between hosts every agent-ring link is gRPC: no shared memory.
  // 3 links in the ring of agents, 2 in each agent between its replicas.
  ASSERT_EQ(across.links_size(), 3 + 3 * 2) << across.ShortDebugString();
  for (const v1::RingLink& link : across.links()) {
    EXPECT_EQ(link.transport(), link.ring() == "agents" ? "grpc" : "in-process")
        << link.ShortDebugString();
    EXPECT_FALSE(link.to_task().empty());
  }

  // The same job on one host, the same replica count and algorithm.
  ScratchDir local_dir;
  const v1::JobStatus one_host = RunOnOneHost(spec, /*workers=*/2, local_dir);
  ASSERT_EQ(one_host.state(), v1::JOB_SUCCEEDED) << one_host.error();
  EXPECT_EQ(one_host.communication_note(), across.communication_note());
  // On one host, neighbouring agents really share memory.
  for (const v1::RingLink& link : one_host.links()) {
    if (link.ring() == "agents") {
      EXPECT_EQ(link.transport(), "shm");
    }
  }

  ExpectSameVariables(across, one_host, "between 3 hosts and one host");
}

// Four agents on four hosts all-reduce directly (every link is a socket),
// one host's four round the ring over shared memory: the direct path adds
// in the ring's order, so the variables are the same, bit for bit.
TEST_F(
    MultiHostJobsE2eTest,
    MultiWorkerMirroredOnFourHostsTakesTheDirectPathAndEqualsOneHostBitwise) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster =
      HostCluster::Start(hosts_.get(), &dir_,
                         {.coordinator_host = 1,
                          .tasks = {{"chief", 0, 2},
                                    {"worker", 0, 3},
                                    {"worker", 1, 4},
                                    {"worker", 2, 5}},
                          .coordinator_flags = {absl::StrCat(
                              "--state_dir=", dir_.path(), "/coordinator")},
                          .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  JobSpec spec = MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 600, "data");
  spec.global_batch_size = 120;  // 15 per replica
  // 128 x 128 weights: a 64 KiB gradient, past the one-shot path's 32 KiB.
  spec.config_json.insert(spec.config_json.size() - 1, R"(, "hidden": 128)");
  const v1::JobStatus across = RunToSuccess(**cluster, spec);
  ASSERT_EQ(across.state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(across.num_replicas(), 8);
  EXPECT_GE(across.metrics().at("accuracy"), kMlpAccuracyBar);
  // No two agents share memory, so their transport favours the direct path.
  for (const v1::RingLink& link : across.links()) {
    if (link.ring() == "agents") {
      EXPECT_EQ(link.transport(), "grpc") << link.ShortDebugString();
    }
  }

  ScratchDir local_dir;
  const v1::JobStatus one_host = RunOnOneHost(spec, /*workers=*/3, local_dir);
  ASSERT_EQ(one_host.state(), v1::JOB_SUCCEEDED) << one_host.error();
  ExpectSameVariables(across, one_host, "between 4 hosts and one host");
}

TEST_F(MultiHostJobsE2eTest,
       ATraceAcrossHostsPutsEveryAgentOnTheCoordinatorsClock) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster =
      HostCluster::Start(hosts_.get(), &dir_,
                         {.coordinator_host = 1,
                          .tasks = {{"chief", 0, 2}, {"worker", 0, 3}},
                          .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  JobSpec spec = SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 30,
                               /*step_sleep_ms=*/1);
  spec.trace_steps = 10;
  Client& client = (*cluster)->client();
  absl::StatusOr<std::string> id = client.SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForJobEnd(client, *id, absl::Seconds(120)).state(),
            v1::JOB_SUCCEEDED);
  absl::StatusOr<v1::TraceData> trace = client.GetTrace(*id);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->replicas_size(), 4);
  ASSERT_EQ(trace->clocks_size(), 2);
  for (const v1::ClockOffset& clock : trace->clocks()) {
    // The test hosts share one kernel clock, so the true offset is 0; the
    // estimate's bound must hold it.
    EXPECT_LE(std::abs(clock.offset_ns()), clock.uncertainty_ns())
        << clock.ShortDebugString();
    EXPECT_GT(clock.uncertainty_ns(), 0);
    std::printf("%s: offset %+.3f ms, +/- %.3f ms\n", clock.task().c_str(),
                clock.offset_ns() / 1e6, clock.uncertainty_ns() / 1e6);
  }
  for (const v1::ReplicaTrace& replica : trace->replicas()) {
    EXPECT_EQ(replica.task(), replica.replica() < 2 ? "chief:0" : "worker:0");
    EXPECT_GT(replica.spans_size(), 10 * 4) << "steps, inputs, computes, "
                                               "collectives";
  }
}

// As deploy/kubernetes runs them: every task serves on 0.0.0.0 and
// registers its spec address. The agents' peer servers then bind 0.0.0.0
// too, and must give their peers the spec's host, not this machine's
// hostname, which the other hosts do not resolve.
TEST_F(MultiHostJobsE2eTest,
       AgentsServingOnEveryInterfaceGiveTheirPeersTheSpecsHost) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster =
      HostCluster::Start(hosts_.get(), &dir_,
                         {.coordinator_host = 1,
                          .tasks = {{"chief", 0, 2}, {"worker", 0, 3}},
                          .agent_flags = {"--cpu_devices=2"},
                          .listen_on_all_interfaces = true});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const v1::JobStatus status = RunToSuccess(
      **cluster,
      MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 200, "data"));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED);
  ASSERT_GT(status.links_size(), 0);
  for (const v1::RingLink& link : status.links()) {
    EXPECT_EQ(link.transport(), link.ring() == "agents" ? "grpc" : "in-process")
        << link.ShortDebugString();
  }
}

// Agent hosts behind a firewall that lets in only the tasks' spec ports
// (HostCluster gives them 7100 and up) and the agents' --peer_ports: a peer
// server on any other port would never be reached, and the job would fail
// once its rendezvous timed out.
TEST_F(MultiHostJobsE2eTest, AgentsBehindAFirewallServeTheirPeersOnPeerPorts) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster =
      HostCluster::Start(hosts_.get(), &dir_,
                         {.coordinator_host = 1,
                          .tasks = {{"chief", 0, 2}, {"worker", 0, 3}},
                          .agent_flags = {"--cpu_devices=2"},
                          .peer_ports = "21000-21015"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (int host : {2, 3}) {
    ASSERT_TRUE(hosts_->Firewall(host, "7100:7199,21000:21015").ok());
  }
  // RING: each replica serves its own peer, so both of an agent's take a
  // port of the range at once.
  JobSpec spec = MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 200, "data");
  spec.communication = Communication::kRing;
  const v1::JobStatus status = RunToSuccess(**cluster, spec);
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(status.attempt(), 1) << "no attempt failed on the way";
  // Every link between the hosts goes to a port of the range.
  int across = 0;
  for (const v1::RingLink& link : status.links()) {
    if (link.transport() != "grpc") continue;
    ++across;
    absl::StatusOr<HostPort> to = ParseHostPort(link.to_address());
    ASSERT_TRUE(to.ok()) << link.ShortDebugString();
    EXPECT_GE(to->port, 21000) << link.ShortDebugString();
    EXPECT_LE(to->port, 21015) << link.ShortDebugString();
  }
  EXPECT_EQ(across, 2) << status.ShortDebugString();
}

// A network of its own for the data plane: each agent's host has a second
// address, on 198.19.K.0/24, and --peer_host names it. The spec and the
// coordinator know only the first; every link between agents goes to the
// second.
TEST_F(MultiHostJobsE2eTest, AgentsGivenAPeerHostKeepTheDataPlaneOnIt) {
  auto data_address = [&](int host) {
    return absl::StrCat("198.19", hosts_->address(host).substr(6));
  };
  for (int host : {2, 3}) {
    ASSERT_TRUE(hosts_->AddAddress(host, data_address(host) + "/24").ok());
  }
  unsetenv("NCCL_SOCKET_IFNAME");  // the agents inherit this environment
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster = HostCluster::Start(
      hosts_.get(), &dir_,
      {.coordinator_host = 1,
       .tasks = {{"chief", 0, 2, 0, {"--peer_host=" + data_address(2)}},
                 {"worker", 0, 3, 0, {"--peer_host=" + data_address(3)}}},
       .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const v1::JobStatus status = RunToSuccess(
      **cluster,
      MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 200, "data"));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED);
  int across = 0;
  for (const v1::RingLink& link : status.links()) {
    if (link.ring() != "agents") continue;
    ++across;
    EXPECT_EQ(link.transport(), "grpc");
    const std::string to =
        link.to_task() == "chief:0" ? data_address(2) : data_address(3);
    EXPECT_THAT(link.to_address(), ::testing::StartsWith(to + ":"))
        << link.ShortDebugString();
  }
  EXPECT_EQ(across, 2) << status.ShortDebugString();
  // NCCL was pointed at the interface. The second network is a second
  // address on eth0 here, which NCCL cannot tell apart: the agent says so.
  const std::string log =
      ReadFile((*cluster)->TaskLog("worker:0")).value_or("");
  EXPECT_THAT(log, HasSubstr(absl::StrCat("NCCL between hosts uses eth0 "
                                          "(--peer_host ",
                                          data_address(3), ")")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("NCCL will use eth0's first "
                                          "address, ",
                                          hosts_->address(3),
                                          ", not "
                                          "--peer_host ",
                                          data_address(3))));
}

TEST_F(MultiHostJobsE2eTest, ParameterServerWithEveryTaskOnItsOwnHost) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster = HostCluster::Start(
      hosts_.get(), &dir_,
      {.coordinator_host = 1,
       .tasks = {{"chief", 0, 2}, {"worker", 0, 3}, {"ps", 0, 4}, {"ps", 1, 5}},
       .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  JobSpec spec = MlpJob(data_, StrategyKind::kParameterServer, 600, "file");
  spec.ps.partitioner = ParameterServerOptions::Partitioner::kFixedShards;
  spec.ps.num_shards = 2;
  absl::StatusOr<std::string> id = (*cluster)->client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus status =
      WaitForJobEnd((*cluster)->client(), *id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 600);
  const double accuracy = FinalMlpAccuracy((*cluster)->client(), *id, spec);
  std::cout << "last closure's accuracy: " << status.metrics().at("accuracy")
            << ", the final model's: " << accuracy << "\n";
  EXPECT_GE(accuracy, kMlpAsyncAccuracyBar);

  // Both shards, on their own hosts, hold the job's variables.
  absl::StatusOr<v1::ClusterState> state = (*cluster)->coordinator().State();
  ASSERT_TRUE(state.ok()) << state.status();
  for (int ps = 0; ps < 2; ++ps) {
    const v1::TaskStatus* task = FindTask(*state, "ps", ps);
    ASSERT_NE(task, nullptr);
    EXPECT_EQ(task->hostname(), hosts_->hostname(4 + ps));
    EXPECT_EQ(task->ps().job_id(), *id);
    EXPECT_GT(task->ps().updates(), 0);
  }
}

TEST_F(MultiHostJobsE2eTest,
       LosingTheChiefsHostAndItsDiskResumesFromAWorkersLocalCopy) {
  // Every agent keeps its own local state; the job's checkpoint_dir is on
  // the chief's host too. No directory is shared.
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster = HostCluster::Start(
      hosts_.get(), &dir_,
      {.coordinator_host = 1,
       .tasks = {{"chief", 0, 2}, {"worker", 0, 3}, {"worker", 1, 4}},
       .coordinator_flags = {"--heartbeat_timeout=3s"},
       .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;
  JobSpec spec =
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 2000, /*sleep=*/5);
  spec.checkpoint_every = 100;
  // An attempt placed before the lost host is declared DEAD fails too.
  spec.max_restarts = 4;
  spec.checkpoint_dir = c.StateDir("chief:0") + "/checkpoints";
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus before = WaitForJob(
      c.client(), *id,
      [](const v1::JobStatus& s) { return s.checkpoint_step() >= 300; },
      absl::Seconds(120));
  ASSERT_EQ(before.state(), v1::JOB_RUNNING)
      << before.ShortDebugString()
      << ReadFile(c.TaskLog("chief:0")).value_or("");

  // Every process on the chief's host dies, and its disk is wiped.
  c.KillTask("chief:0");
  std::filesystem::remove_all(c.StateDir("chief:0"));
  const int64_t lost_at = before.checkpoint_step();
  // The host comes back empty, as a replaced machine would, once the
  // coordinator has given the old one up.
  ASSERT_TRUE(WaitUntil([&] { return c.TaskState("chief", 0) == v1::DEAD; },
                        absl::Seconds(30)));
  ASSERT_TRUE(c.StartTask("chief:0").ok());

  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(240));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_LT(status.metrics().at("max_weight_error"), 1e-3);
  ASSERT_GE(status.restarts_size(), 1) << status.ShortDebugString();
  // The first restart names the lost chief. An attempt placed before the
  // coordinator declared it DEAD may fail too.
  EXPECT_THAT(status.restarts(0).cause(), HasSubstr("chief:0"));
  for (const v1::RestartRecord& r : status.restarts()) {
    std::cout << "restart: " << r.ShortDebugString() << "\n";
  }
  // Only the steps since the last checkpoint ran again.
  const v1::RestartRecord& last = status.restarts(status.restarts_size() - 1);
  EXPECT_GE(last.resumed_from_step(), lost_at);
  EXPECT_EQ(last.resumed_from_step() % 100, 0);
  // The first attempt to resume did from a worker's copy, named with its
  // host; it wrote the checkpoint again on the new chief, from which a later
  // attempt may resume.
  const v1::RestartRecord* resumed = FirstResumed(status);
  ASSERT_NE(resumed, nullptr) << status.ShortDebugString();
  EXPECT_THAT(
      resumed->resumed_from(),
      AnyOf(HasSubstr(absl::StrCat("worker:0 on ", hosts_->hostname(3))),
            HasSubstr(absl::StrCat("worker:1 on ", hosts_->hostname(4)))));
}

}  // namespace
// A byte in the middle of `path` flipped: the file keeps its size and fails
// its CRC.
void Damage(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok() && !bytes->empty()) << path;
  (*bytes)[bytes->size() / 2] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomically(path, *bytes).ok());
}

// The data file of checkpoint `step` (-1: the newest) under `dir`, searched
// to any depth: an agent's copies live in a directory named for the job.
// "" if there is none.
std::string CheckpointData(const std::string& dir, int64_t step) {
  std::error_code error;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(dir, error)) {
    if (!entry.is_directory()) continue;
    const std::vector<int64_t> steps = CheckpointSteps(entry.path());
    if (steps.empty()) continue;
    return absl::StrCat(entry.path().string(), "/ckpt-",
                        step < 0 ? steps[0] : step, ".data");
  }
  const std::vector<int64_t> steps = CheckpointSteps(dir);
  if (steps.empty()) return "";
  return absl::StrCat(dir, "/ckpt-", step < 0 ? steps[0] : step, ".data");
}

// How a job ended after LoseTheWorkerThenRecover, and the agents' logs.
struct Recovery {
  v1::JobStatus status;
  std::string logs;
};

// Runs a checkpointing job on a chief and a worker, each on its own host,
// loses the worker's host, and once the attempt is over calls `damage` on
// the agents' local state; then brings the worker back and returns the
// job's end. The chief's copy is the job's checkpoint_dir.
Recovery LoseTheWorkerThenRecover(
    TestHosts* hosts, const ScratchDir& dir,
    const std::function<void(HostCluster&)>& damage) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster =
      HostCluster::Start(hosts, &dir,
                         {.coordinator_host = 1,
                          .tasks = {{"chief", 0, 2}, {"worker", 0, 3}},
                          .coordinator_flags = {"--heartbeat_timeout=3s"},
                          .agent_flags = {"--cpu_devices=2"}});
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return {};
  HostCluster& c = **cluster;
  JobSpec spec =
      SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 1000, /*sleep=*/5);
  spec.checkpoint_every = 100;
  spec.max_restarts = 4;
  spec.checkpoint_dir = c.StateDir("chief:0") + "/checkpoints";
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return {};
  const v1::JobStatus before = WaitForJob(
      c.client(), *id,
      [](const v1::JobStatus& s) { return s.checkpoint_step() >= 200; },
      absl::Seconds(120));
  EXPECT_EQ(before.state(), v1::JOB_RUNNING) << before.ShortDebugString();
  // The worker's own copies, which it removes once the job has ended.
  const std::string copy = absl::StrCat(c.StateDir("worker:0"), "/checkpoints/",
                                        *id, "-", before.uid());
  EXPECT_TRUE(WaitUntil([&] { return !CheckpointSteps(copy).empty(); },
                        absl::Seconds(30)))
      << copy;

  // The next attempt waits for the worker, which comes back once the
  // coordinator has given the old process up; the damage is done before.
  c.KillTask("worker:0");
  EXPECT_TRUE(WaitUntil([&] { return c.TaskState("worker", 0) == v1::DEAD; },
                        absl::Seconds(30)));
  const v1::JobStatus ended = WaitForJob(
      c.client(), *id,
      [](const v1::JobStatus& s) { return s.state() == v1::JOB_RESTARTING; },
      absl::Seconds(60));
  EXPECT_EQ(ended.state(), v1::JOB_RESTARTING) << ended.ShortDebugString();
  damage(c);
  EXPECT_TRUE(c.StartTask("worker:0").ok());

  Recovery recovery{WaitForJobEnd(c.client(), *id, absl::Seconds(240)), ""};
  for (const v1::RestartRecord& r : recovery.status.restarts()) {
    std::cout << "restart: " << r.ShortDebugString() << "\n";
  }
  recovery.logs = ReadFile(c.TaskLog("chief:0")).value_or("") +
                  ReadFile(c.TaskLog("worker:0")).value_or("");
  EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(copy); },
                        absl::Seconds(30)))
      << copy;
  return recovery;
}

// A copy of the newest checkpoint that cannot be read (a damaged disk)
// does not end the job: the next attempt restores another agent's copy.
TEST_F(MultiHostJobsE2eTest, ADamagedCheckpointCopyIsPassedOverForAnothers) {
  const Recovery recovery =
      LoseTheWorkerThenRecover(hosts_.get(), dir_, [](HostCluster& c) {
        // Every checkpoint on the chief's disk; the worker's are intact.
        const std::string chief = c.StateDir("chief:0") + "/checkpoints";
        for (const int64_t step : CheckpointSteps(chief)) {
          Damage(CheckpointData(chief, step));
        }
        ASSERT_FALSE(CheckpointSteps(chief).empty());
      });
  const v1::JobStatus& status = recovery.status;
  EXPECT_THAT(recovery.logs, HasSubstr("cannot read its copy of checkpoint"));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_LT(status.metrics().at("max_weight_error"), 1e-3);
  // An attempt placed before the coordinator declared the worker DEAD may
  // fail too; the first to resume passed the damaged copy over.
  const v1::RestartRecord* resumed = FirstResumed(status);
  ASSERT_NE(resumed, nullptr) << status.ShortDebugString();
  EXPECT_THAT(resumed->resumed_from(),
              HasSubstr(absl::StrCat("worker:0 on ", hosts_->hostname(3))));
  EXPECT_GE(resumed->resumed_from_step(), 200);
}

// When every copy of the newest checkpoint is damaged, the next newest is
// restored: only the steps since it run again.
TEST_F(MultiHostJobsE2eTest, WhenEveryCopyOfTheNewestIsDamagedTheOneBeforeIt) {
  int64_t newest = -1;
  const Recovery recovery =
      LoseTheWorkerThenRecover(hosts_.get(), dir_, [&](HostCluster& c) {
        // Each agent's own newest copy: the worker's may be a step behind
        // the chief's, if it died while writing.
        for (const std::string task : {"chief:0", "worker:0"}) {
          const std::string data =
              CheckpointData(c.StateDir(task) + "/checkpoints", -1);
          ASSERT_FALSE(data.empty()) << task;
          Damage(data);
          newest = std::max(
              newest,
              CheckpointSteps(std::filesystem::path(data).parent_path())[0]);
        }
      });
  const v1::JobStatus& status = recovery.status;
  EXPECT_THAT(recovery.logs, HasSubstr("cannot read its copy of checkpoint"));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_LT(status.metrics().at("max_weight_error"), 1e-3);
  ASSERT_GE(status.restarts_size(), 1) << status.ShortDebugString();
  const v1::RestartRecord& restart =
      status.restarts(status.restarts_size() - 1);
  EXPECT_EQ(restart.resumed_from_step(), newest - 100);
  EXPECT_THAT(restart.resumed_from(),
              HasSubstr(absl::StrCat("chief:0 on ", hosts_->hostname(2))));
}

// With every copy of the job's checkpoints gone (both disks wiped while the
// worker was down), training again from step 0 would throw the job's
// progress away unasked: the job fails, naming the step it had reached.
TEST_F(MultiHostJobsE2eTest,
       CheckpointsLostOnEveryHostFailTheJobNamingTheStep) {
  const Recovery recovery =
      LoseTheWorkerThenRecover(hosts_.get(), dir_, [](HostCluster& c) {
        for (const std::string task : {"chief:0", "worker:0"}) {
          const std::string copies = c.StateDir(task) + "/checkpoints";
          ASSERT_FALSE(CheckpointData(copies, -1).empty()) << task;
          std::filesystem::remove_all(copies);
        }
      });
  const v1::JobStatus& status = recovery.status;
  ASSERT_EQ(status.state(), v1::JOB_FAILED) << status.ShortDebugString();
  EXPECT_THAT(status.error(),
              ContainsRegex("checkpointed step [1-9][0-9]*00, but no agent "
                            "holds a copy of any of its checkpoints"));
}

// A worker's local copy that cannot be made (a disk full, read-only, or a
// file in the way) may be a host that the next attempt replaces: the job
// is retried, not failed at once as a bad checkpoint_dir of its own is.
TEST_F(MultiHostJobsE2eTest, AWorkersUnwritableCopyIsRetriedNotFatal) {
  absl::StatusOr<std::unique_ptr<HostCluster>> cluster =
      HostCluster::Start(hosts_.get(), &dir_,
                         {.coordinator_host = 1,
                          .tasks = {{"chief", 0, 2}, {"worker", 0, 3}},
                          .agent_flags = {"--cpu_devices=2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  HostCluster& c = **cluster;
  const std::string copies = c.StateDir("worker:0") + "/checkpoints";
  std::filesystem::remove_all(copies);
  ASSERT_TRUE(WriteFileAtomically(copies, "in the way").ok());
  JobSpec spec = SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 50, 0);
  spec.max_restarts = 2;
  spec.checkpoint_dir = c.StateDir("chief:0") + "/job-checkpoints";
  absl::StatusOr<std::string> id = c.client().SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus status =
      WaitForJobEnd(c.client(), *id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_FAILED) << status.ShortDebugString();
  EXPECT_EQ(status.restarts_size(), 2) << status.ShortDebugString();
  EXPECT_THAT(status.error(), HasSubstr("the local checkpoint copy " + copies));
  EXPECT_THAT(status.error(), HasSubstr("no restarts left"));
}

}  // namespace cohort::testing
