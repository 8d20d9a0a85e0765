// A real cohort-ps killed with SIGKILL and started again on its --state_dir:
// the worker's PsClient waits for it, sees the new incarnation, reports the
// updates its snapshot did not hold, and goes on working.
//
// The ps tasks register with a real coordinator (--launch=none), which this
// test does not ask to restart them: it starts and kills them itself, by pid.

#include <csignal>

#include "absl/strings/str_cat.h"
#include "cohort/v1/ps.grpc.pb.h"
#include "common/cluster_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_client/partitioner.h"
#include "ps_client/ps_client.h"
#include "rpc/channel.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::SizeIs;

constexpr char kJob[] = "job-ps-recovery";
const absl::Duration kTimeout = absl::Seconds(30);

// The ps tasks this test started; stopped (by pid) when it ends, however
// it ends.
class PsTasks {
 public:
  PsTasks(const ScratchDir& dir, std::string coordinator,
          std::vector<std::string> addresses)
      : dir_(dir),
        coordinator_(std::move(coordinator)),
        addresses_(std::move(addresses)),
        tasks_(addresses_.size()) {}
  ~PsTasks() {
    for (std::optional<Subprocess>& task : tasks_) {
      if (task.has_value()) task->Stop(absl::Seconds(2));
    }
  }

  absl::Status Start(int i) {
    absl::StatusOr<Subprocess> child = Subprocess::Spawn(
        {.argv = {Binary("cohort-ps"), absl::StrCat("--task=ps:", i),
                  absl::StrCat("--listen=", addresses_[i]),
                  absl::StrCat("--coordinator=", coordinator_),
                  absl::StrCat("--state_dir=", dir_.path(), "/ps", i),
                  // Snapshots only when the test asks for one.
                  "--snapshot_interval=1h", "--snapshot_every_updates=0",
                  "--heartbeat_interval=200ms"},
         .output_file = absl::StrCat(dir_.path(), "/ps", i, ".log")});
    if (!child.ok()) return child.status();
    tasks_[i] = *std::move(child);
    return absl::OkStatus();
  }

  // SIGKILL, as a crash: no last snapshot.
  void Kill(int i) {
    tasks_[i]->Signal(SIGKILL);
    tasks_[i]->Wait(kTimeout);
    tasks_[i].reset();
  }

 private:
  const ScratchDir& dir_;
  const std::string coordinator_;
  const std::vector<std::string> addresses_;
  std::vector<std::optional<Subprocess>> tasks_;
};

absl::Span<const char> In(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

TEST(PsRecoveryE2eTest, AKilledPsComesBackFromItsSnapshot) {
  ScratchDir dir;
  const std::string spec_json = LocalSpec(0, 2);
  const std::string spec = dir.Write("cluster.json", spec_json);
  auto coordinator = CoordinatorProcess::Start(
      dir, {absl::StrCat("--cluster_spec=", spec), "--launch=none",
            "--heartbeat_timeout=1s"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const nlohmann::json parsed = nlohmann::json::parse(spec_json);
  std::vector<std::string> addresses;
  for (const auto& a : parsed["cluster"]["ps"]) {
    addresses.push_back(a.get<std::string>());
  }
  ASSERT_EQ(addresses.size(), 2u);
  PsTasks tasks(dir, (*coordinator)->address(), addresses);
  ASSERT_TRUE(tasks.Start(0).ok());
  ASSERT_TRUE(tasks.Start(1).ok());

  absl::StatusOr<std::unique_ptr<ps::PsClient>> client =
      ps::PsClient::Create({.ps_addresses = addresses,
                            .job_id = kJob,
                            .job_sequence = 1,
                            .worker = "worker:0",
                            .recovery_timeout = kTimeout});
  ASSERT_TRUE(client.ok()) << client.status();
  ps::PsClient& c = **client;
  // 8 rows of 4 floats in two parts: rows 0-3 on ps 0, rows 4-7 on ps 1.
  absl::StatusOr<ps::Placement> placement = ps::PlaceVariables(
      {{"w", {8, 4}, 4}}, 2,
      {.policy = ps::PartitionPolicy::kFixedShards, .num_shards = 2});
  ASSERT_TRUE(placement.ok());
  v1::PsOptimizer sgd;
  sgd.set_kind(v1::PsOptimizer::SGD);
  sgd.set_learning_rate(1.0);
  // The tasks are still starting: CreateVariables waits for them.
  ASSERT_TRUE(c.CreateVariables(*placement, {{.optimizer = sgd}}).ok());

  const std::vector<float> ones(32, 1.0f);
  const ps::PushBuffer push[] = {{"w", In(ones)}};
  auto pull = [&c](std::vector<float>* value) {
    value->assign(32, 0);
    const ps::PullBuffer buffer[] = {
        {"w", {reinterpret_cast<char*>(value->data()), 32 * sizeof(float)}}};
    return c.Pull(buffer);
  };

  // 2 updates, a snapshot of ps:1, 3 more updates, then ps:1 crashes.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(c.Push(push).ok());
  {
    rpc::Connection connection(addresses[1], {});
    auto stub = v1::ParameterServer::NewStub(connection.channel());
    auto context = connection.NewContext(kTimeout);
    v1::SnapshotResponse snapshot;
    ASSERT_TRUE(stub->Snapshot(context.get(), {}, &snapshot).ok());
    EXPECT_EQ(snapshot.updates(), 2);
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.Push(push).ok());
  tasks.Kill(1);
  // The coordinator must see it gone before it admits the new process.
  absl::StatusOr<v1::ClusterState> gone =
      (*coordinator)
          ->WaitForState(
              [](const v1::ClusterState& state) {
                const v1::TaskStatus* ps1 = FindTask(state, "ps", 1);
                return ps1 != nullptr && ps1->state() != v1::READY;
              },
              kTimeout);
  ASSERT_TRUE(gone.ok()) << gone.status();
  ASSERT_TRUE(tasks.Start(1).ok());

  std::vector<float> value;
  const absl::Status pulled = pull(&value);
  ASSERT_TRUE(pulled.ok()) << pulled;
  for (int i = 0; i < 16; ++i) EXPECT_EQ(value[i], -5.0f) << i;   // ps:0
  for (int i = 16; i < 32; ++i) EXPECT_EQ(value[i], -2.0f) << i;  // ps:1
  std::vector<ps::PsRecoveryEvent> events = c.TakeRecoveryEvents();
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].shard, 1);
  EXPECT_EQ(events[0].updates_seen, 5);
  EXPECT_EQ(events[0].restored_updates, 2);
  EXPECT_EQ(events[0].lost, 3);

  // And it goes on.
  ASSERT_TRUE(c.Push(push).ok());
  ASSERT_TRUE(pull(&value).ok());
  EXPECT_EQ(value[0], -6.0f);
  EXPECT_EQ(value[31], -3.0f);
  EXPECT_TRUE(c.TakeRecoveryEvents().empty());
}

}  // namespace
}  // namespace cohort::testing
