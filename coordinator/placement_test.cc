#include "coordinator/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/testing/status_matchers.h"

namespace cohort::coordinator {
namespace {

using ::cohort::testing::IsOkAndHolds;
using ::cohort::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

AgentView Agent(const std::string& type, int index, int devices,
                bool cuda = false, bool nccl = false) {
  return {.task = {type, index},
          .state = v1::READY,
          .num_devices = devices,
          .cuda = cuda,
          .nccl = nccl};
}

std::vector<const AgentView*> Pointers(const std::vector<AgentView>& views) {
  std::vector<const AgentView*> out;
  for (const AgentView& v : views) out.push_back(&v);
  return out;
}

v1::JobSpec Spec(v1::Strategy strategy, int batch = 8) {
  v1::JobSpec spec;
  spec.set_strategy(strategy);
  spec.set_global_batch_size(batch);
  return spec;
}

TEST(PlacementTest, JobTasksAreEveryAgentOnlyForTheMultiAgentStrategies) {
  const ClusterSpec cluster = *ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"],
                      "ps": ["h:4"]}})");
  EXPECT_EQ(JobTasks(cluster, Spec(v1::MULTI_WORKER_MIRRORED)).size(), 3u);
  EXPECT_EQ(JobTasks(cluster, Spec(v1::PARAMETER_SERVER)).size(), 3u);
  EXPECT_THAT(JobTasks(cluster, Spec(v1::MIRRORED)),
              ElementsAre(TaskId{"chief", 0}));
  EXPECT_THAT(PsTasks(cluster), ElementsAre(TaskId{"ps", 0}));
}

TEST(PlacementTest, CheckReadyNamesEachTaskThatIsNotReadyAndWhy) {
  std::vector<AgentView> agents = {Agent("chief", 0, 2), Agent("worker", 0, 2)};
  agents[1].state = v1::DEAD;
  agents[1].last_error = "exited with code 3";
  const Readiness r =
      CheckReady({{"chief", 0}, {"worker", 0}, {"worker", 1}}, agents);
  ASSERT_EQ(r.ready.size(), 1u);
  EXPECT_EQ(r.ready[0]->task, (TaskId{"chief", 0}));
  EXPECT_THAT(r.not_ready, ElementsAre("worker:0 (DEAD: exited with code 3)",
                                       "worker:1 (unknown)"));
}

TEST(PlacementTest, AutoPicksHierarchicalOnCpusAndNcclOnGpus) {
  const std::vector<AgentView> cpus = {Agent("chief", 0, 2),
                                       Agent("worker", 0, 2)};
  absl::StatusOr<SyncPlacement> cpu =
      PlaceSync(Spec(v1::MULTI_WORKER_MIRRORED), Pointers(cpus));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->communication, v1::COMMUNICATION_HIERARCHICAL);
  EXPECT_EQ(cpu->local_replicas, 2);
  EXPECT_EQ(cpu->num_replicas, 4);
  EXPECT_THAT(cpu->note, HasSubstr("ring of the 2 agents"));

  const std::vector<AgentView> gpus = {Agent("chief", 0, 4, true, true)};
  absl::StatusOr<SyncPlacement> gpu =
      PlaceSync(Spec(v1::MIRRORED), Pointers(gpus));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->communication, v1::COMMUNICATION_NCCL);
  EXPECT_EQ(gpu->num_replicas, 4);

  // Without NCCL, GPUs reduce through host memory.
  const std::vector<AgentView> no_nccl = {Agent("chief", 0, 2, true, false)};
  absl::StatusOr<SyncPlacement> staged =
      PlaceSync(Spec(v1::MIRRORED), Pointers(no_nccl));
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->communication, v1::COMMUNICATION_HIERARCHICAL);
  EXPECT_THAT(staged->note, HasSubstr("through host memory"));
  EXPECT_THAT(staged->note, HasSubstr("agents have no NCCL"));
}

TEST(PlacementTest, AgentsSharingAGpuAreKeptFromNccl) {
  // Two agents on one host that both see its one GPU, as the default local
  // cluster has them: NCCL takes one rank per GPU.
  std::vector<AgentView> shared = {Agent("chief", 0, 1, true, true),
                                   Agent("worker", 0, 1, true, true)};
  shared[0].gpu_uuids = shared[1].gpu_uuids = {"GPU-0a1b"};
  v1::JobSpec spec = Spec(v1::MULTI_WORKER_MIRRORED);
  spec.set_devices_per_agent(1);
  absl::StatusOr<SyncPlacement> placed = PlaceSync(spec, Pointers(shared));
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->communication, v1::COMMUNICATION_HIERARCHICAL);
  EXPECT_THAT(placed->note,
              HasSubstr("chief:0 and worker:0 share GPU-0a1b, and NCCL takes "
                        "one rank per GPU"));

  spec.set_communication(v1::COMMUNICATION_NCCL);
  EXPECT_THAT(PlaceSync(spec, Pointers(shared)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("communication NCCL: chief:0 and worker:0 "
                                 "share GPU-0a1b")));

  // Their own GPUs each: NCCL.
  shared[1].gpu_uuids = {"GPU-ffff"};
  spec.set_communication(v1::COMMUNICATION_AUTO);
  placed = PlaceSync(spec, Pointers(shared));
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->communication, v1::COMMUNICATION_NCCL);
}

TEST(PlacementTest, EveryIntraNodeChoiceIsValidOnCpusAndGpus) {
  for (bool cuda : {false, true}) {
    const std::vector<AgentView> agents = {Agent("chief", 0, 2, cuda, cuda),
                                           Agent("worker", 0, 2, cuda, cuda)};
    for (v1::Communication c :
         {v1::COMMUNICATION_RING, v1::COMMUNICATION_HIERARCHICAL,
          v1::COMMUNICATION_REDUCTION_TO_ONE_DEVICE}) {
      v1::JobSpec spec = Spec(v1::MULTI_WORKER_MIRRORED);
      spec.set_communication(c);
      absl::StatusOr<SyncPlacement> placed = PlaceSync(spec, Pointers(agents));
      ASSERT_TRUE(placed.ok()) << v1::Communication_Name(c) << placed.status();
      EXPECT_EQ(placed->communication, c);
      EXPECT_THAT(placed->note, HasSubstr("as requested"));
      EXPECT_EQ(absl::StrContains(placed->note, "staged through host memory"),
                cuda)
          << placed->note;
    }
  }
  v1::JobSpec one = Spec(v1::MULTI_WORKER_MIRRORED);
  one.set_communication(v1::COMMUNICATION_REDUCTION_TO_ONE_DEVICE);
  const std::vector<AgentView> cpus = {Agent("chief", 0, 2),
                                       Agent("worker", 0, 2)};
  EXPECT_THAT(PlaceSync(one, Pointers(cpus))->note,
              HasSubstr("reduce to its first one, then over a ring of the 2 "
                        "agents, which hands the result back"));
}

TEST(PlacementTest, SaysWhatDoesNotFit) {
  const std::vector<AgentView> uneven = {Agent("chief", 0, 2),
                                         Agent("worker", 0, 3)};
  EXPECT_THAT(
      PlaceSync(Spec(v1::MULTI_WORKER_MIRRORED, 12), Pointers(uneven)).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("different device counts (chief:0: 2, worker:0: 3)")));

  const std::vector<AgentView> three = {Agent("chief", 0, 3)};
  EXPECT_THAT(PlaceSync(Spec(v1::MIRRORED, 8), Pointers(three)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not divisible by the 3 replicas")));

  v1::JobSpec too_many = Spec(v1::MIRRORED, 8);
  too_many.set_devices_per_agent(4);
  EXPECT_THAT(PlaceSync(too_many, Pointers(three)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("devices_per_agent=4 but chief:0 has 3")));

  const std::vector<AgentView> mixed = {Agent("chief", 0, 1, true, true),
                                        Agent("worker", 0, 1)};
  EXPECT_THAT(
      PlaceSync(Spec(v1::MULTI_WORKER_MIRRORED), Pointers(mixed)).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("some CPU devices")));

  v1::JobSpec nccl_on_cpu = Spec(v1::MIRRORED, 3);
  nccl_on_cpu.set_communication(v1::COMMUNICATION_NCCL);
  EXPECT_THAT(PlaceSync(nccl_on_cpu, Pointers(three)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("NCCL needs CUDA devices")));
}

TEST(PlacementTest, OneDeviceRunsOneReplica) {
  const std::vector<AgentView> agents = {Agent("chief", 0, 4)};
  absl::StatusOr<SyncPlacement> one =
      PlaceSync(Spec(v1::ONE_DEVICE, 5), Pointers(agents));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->num_replicas, 1);
}

TEST(PlacementTest, PsExecutorsFollowMaxInflightAndNeedDevices) {
  v1::JobSpec spec = Spec(v1::PARAMETER_SERVER);
  spec.mutable_ps()->set_max_inflight(3);
  std::vector<AgentView> workers = {Agent("chief", 0, 1)};
  EXPECT_THAT(PlacePsExecutors(spec, Pointers(workers)), IsOkAndHolds(3));
  workers[0].num_devices = 0;
  EXPECT_THAT(PlacePsExecutors(spec, Pointers(workers)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("chief:0 reports no devices")));
}

TEST(PlacementTest, LogicalDevicesMakeReplicasOfSeveralDevices) {
  const std::vector<AgentView> views = {Agent("chief", 0, 4),
                                        Agent("worker", 0, 4)};
  v1::JobSpec spec = Spec(v1::MULTI_WORKER_MIRRORED);
  spec.set_logical_devices_per_replica(2);
  absl::StatusOr<SyncPlacement> placed = PlaceSync(spec, Pointers(views));
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->local_replicas, 2);
  EXPECT_EQ(placed->logical_devices, 2);
  EXPECT_EQ(placed->num_replicas, 4);
  EXPECT_EQ(DescribeLogicalDevices(views[0], 2, 2),
            ": replica 0 on cpu:0+cpu:1, replica 1 on cpu:2+cpu:3");
  EXPECT_EQ(DescribeLogicalDevices(views[0], 4, 1), "");

  // OneDevice's one replica takes as many devices as it has logical ones.
  spec.set_strategy(v1::ONE_DEVICE);
  spec.set_logical_devices_per_replica(3);
  placed = PlaceSync(spec, Pointers({Agent("chief", 0, 4)}));
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->local_replicas, 1);
}

TEST(PlacementTest, LogicalDevicesThatDoNotFitAreRefusedSayingWhy) {
  const std::vector<AgentView> views = {Agent("chief", 0, 3)};
  v1::JobSpec spec = Spec(v1::MIRRORED, 6);
  spec.set_logical_devices_per_replica(2);
  EXPECT_THAT(PlaceSync(spec, Pointers(views)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("3 devices per agent do not divide")));
  spec.set_logical_devices_per_replica(4);
  EXPECT_THAT(PlaceSync(spec, Pointers(views)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("a replica needs 4 devices")));
  // NCCL reduces on one device per replica; AUTO stages through the host.
  const std::vector<AgentView> gpus = {Agent("chief", 0, 2, true, true)};
  spec.set_logical_devices_per_replica(2);
  spec.set_global_batch_size(4);
  spec.set_communication(v1::COMMUNICATION_NCCL);
  EXPECT_THAT(PlaceSync(spec, Pointers(gpus)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("several logical devices")));
  spec.set_communication(v1::COMMUNICATION_AUTO);
  absl::StatusOr<SyncPlacement> placed = PlaceSync(spec, Pointers(gpus));
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->communication, v1::COMMUNICATION_HIERARCHICAL);
}

}  // namespace
}  // namespace cohort::coordinator
