// ParameterServer jobs end to end: a real coordinator launches a chief and a
// worker agent (2 CPU devices each) and two ps tasks; the coordinator hands
// out step closures; workers and ps tasks are SIGKILLed mid-job.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cohort/client.h"
#include "common/file_util.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

std::string Library(const std::string& name) { return ExampleLibrary(name); }

class PsJobsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(
        *dir_, /*workers=*/1, /*ps=*/2,
        {"--cpu_devices=2",
         absl::StrCat("--state_dir=", dir_->path(), "/state")});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    coordinator_ = cluster->coordinator.release();
    client_ = Client::Connect(coordinator_->address())->release();
    data_ = dir_->path() + "/spirals";
    const absl::Status spirals = WriteSpirals(data_);
    ASSERT_TRUE(spirals.ok()) << spirals;
  }
  static void TearDownTestSuite() {
    delete client_;
    delete coordinator_;
    delete dir_;
  }

  static JobSpec MlpJob(int64_t steps) {
    JobSpec spec =
        testing::MlpJob(data_, StrategyKind::kParameterServer, steps, "file");
    spec.name = "mlp-ps";
    spec.ps.partitioner = ParameterServerOptions::Partitioner::kFixedShards;
    spec.ps.num_shards = 2;
    spec.ps.recovery_timeout = absl::Seconds(30);
    return spec;
  }

  static v1::JobStatus WaitFor(
      const std::string& id,
      const std::function<bool(const v1::JobStatus&)>& condition,
      absl::Duration timeout) {
    return WaitForJob(*client_, id, condition, timeout);
  }
  static v1::JobStatus WaitForEnd(const std::string& id,
                                  absl::Duration timeout) {
    return WaitForJobEnd(*client_, id, timeout);
  }

  static pid_t Pid(const std::string& type, int index) {
    absl::StatusOr<v1::ClusterState> state = coordinator_->State();
    if (!state.ok()) return 0;
    const v1::TaskStatus* task = FindTask(*state, type, index);
    return task == nullptr ? 0 : static_cast<pid_t>(task->pid());
  }

  // Submits `spec`, waits for it to run `step` steps and SIGKILLs task
  // `type`:`index`. Returns the job's id, or "" after a test failure.
  static std::string SubmitAndKillAtStep(const JobSpec& spec, int64_t step,
                                         const std::string& type, int index) {
    absl::StatusOr<std::string> id = client_->SubmitJob(spec);
    if (!id.ok()) {
      ADD_FAILURE() << id.status();
      return "";
    }
    const v1::JobStatus running = WaitFor(
        *id, [&](const v1::JobStatus& s) { return s.step() >= step; },
        absl::Seconds(60));
    const pid_t pid = Pid(type, index);
    if (running.state() != v1::JOB_RUNNING || pid <= 0) {
      ADD_FAILURE() << "job " << *id << " is " << running.state() << " at step "
                    << running.step() << "; " << type << ":" << index
                    << " has pid " << pid;
      return "";
    }
    EXPECT_EQ(kill(pid, SIGKILL), 0);
    return *id;
  }

  // Whether an event of `status` says `text`; prints them all.
  static bool HasEvent(const v1::JobStatus& status, absl::string_view text) {
    bool found = false;
    for (const v1::JobEvent& event : status.events()) {
      std::printf("event: %s\n", event.text().c_str());
      found |= absl::StrContains(event.text(), text);
    }
    return found;
  }

  static ScratchDir* dir_;
  static CoordinatorProcess* coordinator_;
  static Client* client_;
  static std::string data_;
};

ScratchDir* PsJobsE2eTest::dir_ = nullptr;
CoordinatorProcess* PsJobsE2eTest::coordinator_ = nullptr;
Client* PsJobsE2eTest::client_ = nullptr;
std::string PsJobsE2eTest::data_;

TEST_F(PsJobsE2eTest, MlpTrainsToTheBarWithVariablesShardedOverBothPsTasks) {
  const JobSpec spec = MlpJob(600);
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus status = WaitForEnd(*id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 600);
  const double accuracy = FinalMlpAccuracy(*client_, *id, spec);
  std::printf("last closure's accuracy %.4f, the final model's %.4f\n",
              status.metrics().at("accuracy"), accuracy);
  EXPECT_GE(accuracy, kMlpAsyncAccuracyBar);
  ASSERT_FALSE(status.recent_results().empty());
  EXPECT_TRUE(status.recent_results().rbegin()->values().contains("loss"));

  // The admin API shows each shard holding its part of every variable.
  absl::StatusOr<v1::ClusterState> state = coordinator_->State();
  ASSERT_TRUE(state.ok()) << state.status();
  int64_t total_updates = 0;
  for (int ps = 0; ps < 2; ++ps) {
    const v1::TaskStatus* task = FindTask(*state, "ps", ps);
    ASSERT_NE(task, nullptr);
    const v1::PsInfo& info = task->ps();
    EXPECT_EQ(info.job_id(), *id) << "ps:" << ps;
    EXPECT_GT(info.num_variables(), 0) << "ps:" << ps;
    EXPECT_GT(info.variable_bytes(), 0) << "ps:" << ps;
    bool has_part = false;
    for (const v1::PsVariableInfo& v : info.variables()) {
      has_part |= absl::StrContains(v.name(), "/part_");
    }
    EXPECT_TRUE(has_part) << "ps:" << ps << " holds no split variable";
    total_updates += info.updates();
  }
  EXPECT_GT(total_updates, 0);
}

TEST_F(PsJobsE2eTest, AColocatedVariableSitsWholeWithTheFirstPartOfItsPeer) {
  JobSpec spec{.name = "colocated",
               .strategy = StrategyKind::kParameterServer,
               .library_path = TestStepsLibrary(),
               .init_fn = "colocated_init",
               .step_fn = "empty_step",
               .steps = 4,
               .global_batch_size = 4};
  spec.ps.partitioner = ParameterServerOptions::Partitioner::kFixedShards;
  spec.ps.num_shards = 2;
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus status = WaitForEnd(*id, absl::Seconds(60));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();

  // table/part_0 and table_norm on ps:0, table/part_1 on ps:1; "other"
  // takes the next two turns, ps:0 and ps:1.
  absl::StatusOr<v1::ClusterState> state = coordinator_->State();
  ASSERT_TRUE(state.ok()) << state.status();
  std::map<std::string, int> where;
  for (int ps = 0; ps < 2; ++ps) {
    const v1::TaskStatus* task = FindTask(*state, "ps", ps);
    ASSERT_NE(task, nullptr);
    ASSERT_EQ(task->ps().job_id(), *id);
    for (const v1::PsVariableInfo& v : task->ps().variables()) {
      where[v.name()] = ps;
    }
  }
  EXPECT_EQ(where, (std::map<std::string, int>{{"other/part_0", 0},
                                               {"other/part_1", 1},
                                               {"table/part_0", 0},
                                               {"table/part_1", 1},
                                               {"table_norm", 0}}));
}

// Closure k takes global batch k of the data set, whichever worker runs it,
// so every epoch covers each element once whatever the schedule.
TEST_F(PsJobsE2eTest, EveryClosureReadsItsOwnGlobalBatchOnEitherWorker) {
  JobSpec spec{.name = "counting",
               .strategy = StrategyKind::kParameterServer,
               .library_path = TestStepsLibrary(),
               .step_fn = "counting_step",
               .dataset_fn = "counting_data",
               .steps = 40,  // five epochs of 64 elements
               .global_batch_size = 8};
  spec.ps.max_inflight = 2;
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus status = WaitForEnd(*id, absl::Seconds(60));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 40);
  ASSERT_TRUE(status.metrics().contains("examples"));
  EXPECT_EQ(status.metrics().at("examples"), 8);
}

TEST_F(PsJobsE2eTest, AKilledWorkersClosuresRunAgainAndTheJobCompletes) {
  // Slow until the gate opens after the kill, however busy the machine.
  const std::string gate = dir_->path() + "/gate-worker-kill";
  JobSpec spec{.name = "linear-ps",
               .strategy = StrategyKind::kParameterServer,
               .library_path = Library("cohort_example_linear"),
               .init_fn = "linear_init",
               .step_fn = "linear_step",
               .dataset_fn = "linear_data",
               .steps = 1200,
               .global_batch_size = 64,
               .seed = 7,
               .config_json = absl::StrCat(
                   R"({"dim": 4, "num_examples": 1024, "step_sleep_ms": 10,
                       "step_sleep_until_file": ")",
                   gate, R"(",
                       "true_w": [0.5, -1.25, 2.0, 0.75], "true_b": 0.3,
                       "learning_rate": 0.1, "shard_policy": "data"})")};
  spec.ps.max_inflight = 2;
  const std::string id = SubmitAndKillAtStep(spec, 60, "worker", 0);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WriteFileAtomically(gate, "").ok());

  const v1::JobStatus status = WaitForEnd(id, absl::Seconds(90));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 1200);
  EXPECT_GE(status.closures_rerun(), 1);
  EXPECT_TRUE(HasEvent(status, "worker:0 lost"))
      << "no event names the lost worker";
  EXPECT_LT(status.metrics().at("max_weight_error"), 0.05);
}

TEST_F(PsJobsE2eTest,
       AKilledPsIsRestoredFromItsSnapshotAndTheJobReachesTheBar) {
  const JobSpec spec = MlpJob(1200);
  const std::string id = SubmitAndKillAtStep(spec, 300, "ps", 1);
  ASSERT_FALSE(id.empty());

  const v1::JobStatus status = WaitForEnd(id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 1200);
  // A restore that lost or reset state for good would keep the final
  // model below the bar; the stale updates around it wash out.
  const double accuracy = FinalMlpAccuracy(*client_, id, spec);
  EXPECT_GE(accuracy, kMlpAsyncAccuracyBar);
  EXPECT_TRUE(HasEvent(status, "ps:1 came back"))
      << "no event reports the restored ps";
  std::printf(
      "last closure's accuracy %.4f, the final model's %.4f, ps updates "
      "lost %lld\n",
      status.metrics().at("accuracy"), accuracy,
      static_cast<long long>(status.ps_updates_lost()));
  // cohort-ps snapshots every 100 updates by default: no more are lost.
  EXPECT_LE(status.ps_updates_lost(), 100);
}

}  // namespace
}  // namespace cohort::testing
