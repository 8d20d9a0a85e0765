// Slow work never delays liveness: while a 200 MiB step library uploads to
// the coordinator and a 1 GiB ps shard snapshots to disk, both daemons still
// answer health checks, heartbeats and status reads within 100 ms of a
// control server of this test process (which alone answers within
// milliseconds on an idle machine, and shows it when the whole machine
// stalls), and no task is declared DEAD. A handler blocked by the upload's
// hashing or the snapshot's copy would be late by most of a second.

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cohort/client.h"
#include "cohort/v1/coordinator.grpc.pb.h"
#include "cohort/v1/ps.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rpc/server.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Duration kBound = absl::Milliseconds(100);
constexpr int64_t kVariableBytes = int64_t{256} << 20;
constexpr int kVariables = 4;  // 1 GiB in all

// The worst latency of repeated probes of one kind, from one thread.
class Prober {
 public:
  Prober(std::string name, std::function<bool()> probe)
      : name_(std::move(name)), probe_(std::move(probe)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        const absl::Time start = absl::Now();
        const bool ok = probe_();
        const absl::Duration took = absl::Now() - start;
        worst_ = std::max(worst_, took);
        failures_ += ok ? 0 : 1;
        ++probes_;
        absl::SleepFor(absl::Milliseconds(10));
      }
    });
  }
  ~Prober() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::string Describe() const {
    return absl::StrCat(name_, ": ", probes_, " probes, worst ",
                        absl::FormatDuration(worst_), ", ", failures_,
                        " failed");
  }
  absl::Duration worst() const { return worst_; }
  int failures() const { return failures_; }
  int probes() const { return probes_; }

 private:
  const std::string name_;
  const std::function<bool()> probe_;
  std::atomic<bool> stop_{false};
  absl::Duration worst_;
  int failures_ = 0;
  int probes_ = 0;
  std::thread thread_;
};

std::function<bool()> HealthProbe(const std::string& address) {
  auto stub = std::shared_ptr<grpc::health::v1::Health::Stub>(
      grpc::health::v1::Health::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials())));
  return [stub] {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    grpc::health::v1::HealthCheckResponse response;
    return stub->Check(&context, {}, &response).ok();
  };
}

TEST(LivenessE2eTest, UploadsAndSnapshotsNeverDelayHeartbeatsOrHealthChecks) {
  ScratchDir dir;
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, /*workers=*/0, /*ps=*/1,
                        {absl::StrCat("--state_dir=", dir.path(), "/state")});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& coordinator = *cluster->coordinator;
  const v1::TaskStatus* ps_task = FindTask(cluster->state, "ps", 0);
  ASSERT_NE(ps_task, nullptr);
  const std::string ps_address = ps_task->address();
  auto ps = v1::ParameterServer::NewStub(
      grpc::CreateChannel(ps_address, grpc::InsecureChannelCredentials()));

  // A 1 GiB shard.
  {
    v1::CreateVariablesRequest create;
    create.set_job_id("liveness");
    create.set_job_sequence(1);
    for (int i = 0; i < kVariables; ++i) {
      v1::PsVariableSpec* spec = create.add_variables();
      spec->set_name(absl::StrCat("big", i));
      spec->add_shape(kVariableBytes / 4);
      spec->set_dtype(v1::PS_FLOAT32);
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    v1::CreateVariablesResponse created;
    const grpc::Status status = ps->CreateVariables(&context, create, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  // A 200 MiB library (not a loadable one: only its upload matters).
  const std::string library = dir.path() + "/libbig.so";
  {
    std::ofstream out(library, std::ios::binary);
    std::mt19937_64 random(7);
    std::vector<uint64_t> block(1 << 17);  // 1 MiB
    for (int mib = 0; mib < 200; ++mib) {
      for (uint64_t& word : block) word = random();
      out.write(reinterpret_cast<const char*>(block.data()),
                block.size() * sizeof(uint64_t));
    }
  }

  // A control: a server of this test process, doing nothing slow. A stall
  // of the whole machine (page reclaim, writeback) delays it as much as the
  // daemons; only delay beyond it is the daemons' own.
  rpc::RpcServer control_server({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(control_server.Start().ok());
  Prober control("control (this process)",
                 HealthProbe(control_server.address()));
  auto heartbeats = v1::Coordinator::NewStub(grpc::CreateChannel(
      coordinator.address(), grpc::InsecureChannelCredentials()));
  Prober coordinator_health("coordinator health",
                            HealthProbe(coordinator.address()));
  Prober coordinator_heartbeat("coordinator heartbeat", [&] {
    // An unknown session is answered NOT_FOUND by the same handler that
    // answers every task's heartbeat.
    v1::HeartbeatRequest request;
    request.mutable_task()->set_type("ps");
    request.mutable_task()->set_index(0);
    request.set_session_id("probe");
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::HeartbeatResponse response;
    return heartbeats->Heartbeat(&context, request, &response).error_code() ==
           grpc::StatusCode::NOT_FOUND;
  });
  Prober ps_health("ps health", HealthProbe(ps_address));
  Prober ps_status("ps status (its heartbeat's report)", [&] {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::PsStatus response;
    return ps->GetPsStatus(&context, {}, &response).ok() &&
           response.report().ps().num_variables() == kVariables;
  });

  // The load, both at once.
  std::thread snapshot([&] {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    v1::SnapshotResponse response;
    const grpc::Status status = ps->Snapshot(&context, {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  });
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(
      coordinator.address(), {.rpc_timeout = absl::Seconds(120)});
  ASSERT_TRUE(client.ok());
  JobSpec spec = SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 10, 0);
  spec.library_path = library;
  absl::StatusOr<std::string> id = (*client)->SubmitJob(spec);
  EXPECT_TRUE(id.ok()) << id.status();
  snapshot.join();

  control.Stop();
  std::cout << control.Describe() << "\n";
  // The daemons add at most 100 ms to what the machine itself costs.
  const absl::Duration bound = kBound + control.worst();
  for (Prober* prober :
       {&coordinator_health, &coordinator_heartbeat, &ps_health, &ps_status}) {
    prober->Stop();
    std::cout << prober->Describe() << "\n";
    EXPECT_GT(prober->probes(), 5) << prober->Describe();
    EXPECT_EQ(prober->failures(), 0) << prober->Describe();
    EXPECT_LE(prober->worst(), bound) << prober->Describe();
  }
  absl::StatusOr<v1::ClusterState> state = coordinator.State();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(AllReady(*state));
  EXPECT_THAT(coordinator.Log(), Not(HasSubstr("is DEAD")));
}

}  // namespace
}  // namespace cohort::testing
