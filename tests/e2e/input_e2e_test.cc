// Input end to end: streams (infinite and finite data sets that cannot be
// indexed) and prefetching to the replicas' devices, through a real
// coordinator, a chief and a worker agent of 2 CPU devices each, and a ps.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cohort/client.h"
#include "common/file_util.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/wait.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

// 4 weights; 1024 examples, so 16 steps of 64 stay in the data set's first
// epoch, where a stream of the same examples cuts the same batches.
std::string LinearConfig(const std::string& extra) {
  return absl::StrCat(
      R"({"dim": 4, "num_examples": 1024, "true_w": [0.5, -1.25, 2.0, 0.75],
          "true_b": 0.3, "learning_rate": 0.2, "shard_policy": "data")",
      extra.empty() ? "" : ", ", extra, "}");
}

JobSpec LinearJob(const std::string& dataset_fn, StrategyKind strategy,
                  int64_t steps, const std::string& extra) {
  return JobSpec{.name = dataset_fn,
                 .strategy = strategy,
                 .library_path = ExampleLibrary("cohort_example_linear"),
                 .init_fn = "linear_init",
                 .step_fn = "linear_step",
                 .dataset_fn = dataset_fn,
                 .steps = steps,
                 .global_batch_size = 64,
                 .seed = 7,
                 .config_json = LinearConfig(extra),
                 .devices_per_agent = 2};
}

class InputE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(
        *dir_, /*workers=*/1, /*ps=*/1,
        {"--cpu_devices=2",
         absl::StrCat("--state_dir=", dir_->path(), "/state")});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    coordinator_ = cluster->coordinator.release();
    client_ = Client::Connect(coordinator_->address())->release();
  }
  static void TearDownTestSuite() {
    delete client_;
    delete coordinator_;
    delete dir_;
  }

  static v1::JobStatus Run(const JobSpec& spec) {
    absl::StatusOr<std::string> id = client_->SubmitJob(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return {};
    return WaitForJobEnd(*client_, *id, absl::Seconds(120));
  }
  static ScratchDir* dir_;
  static CoordinatorProcess* coordinator_;
  static Client* client_;
};

ScratchDir* InputE2eTest::dir_ = nullptr;
CoordinatorProcess* InputE2eTest::coordinator_ = nullptr;
Client* InputE2eTest::client_ = nullptr;

TEST_F(InputE2eTest, StreamsAndDeviceCopiesTrainAsTheIndexedDataSetDoes) {
  // The same examples, read three ways: indexed and cut on the replicas'
  // threads; indexed with each batch packed into the replica's memory; and
  // streamed, 2 steps ahead, packed too. MultiWorkerMirrored over 2 agents
  // keeps every way's reduction order, so the weights agree bitwise.
  const v1::JobStatus plain =
      Run(LinearJob("linear_data", StrategyKind::kMultiWorkerMirrored, 16,
                    R"("prefetch_steps": 0)"));
  const v1::JobStatus packed =
      Run(LinearJob("linear_data", StrategyKind::kMultiWorkerMirrored, 16,
                    R"("prefetch_to_device": true)"));
  const v1::JobStatus streamed =
      Run(LinearJob("linear_stream", StrategyKind::kMultiWorkerMirrored, 16,
                    R"("prefetch_steps": 2, "prefetch_to_device": true)"));
  for (const v1::JobStatus* status : {&plain, &packed, &streamed}) {
    ASSERT_EQ(status->state(), v1::JOB_SUCCEEDED) << status->error();
    EXPECT_EQ(status->num_replicas(), 4);
    EXPECT_EQ(status->step(), 16);
    EXPECT_EQ(status->stopped_at_step(), 0);
  }
  const std::vector<double> want = LinearParameters(plain);
  ASSERT_EQ(want.size(), 5u);
  EXPECT_EQ(LinearParameters(packed), want);
  EXPECT_EQ(LinearParameters(streamed), want);
  // And it learnt: the loss fell from the first step's.
  EXPECT_LT(plain.metrics().at("loss"), 0.5);
}

TEST_F(InputE2eTest, AFiniteStreamEndsTheJobAfterTheLastStepItFills) {
  // 650 examples over 2 agents (DATA sharding): 325 each, 32 a step, so
  // each fills 10 steps and the job of 100 steps ends after step 10.
  const v1::JobStatus status =
      Run(LinearJob("linear_stream", StrategyKind::kMultiWorkerMirrored, 100,
                    R"("stream_examples": 650)"));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 10);
  EXPECT_EQ(status.stopped_at_step(), 10);
  EXPECT_THAT(status.stop_reason(), HasSubstr("the input stream of node "));
  EXPECT_THAT(status.stop_reason(), HasSubstr(" ended after step 9"));
  EXPECT_EQ(status.checkpoint_step(), 10);

  CommandResult shown = RunCommand({Binary("cohortctl"),
                                    "--coordinator=" + coordinator_->address(),
                                    "job", status.job_id()});
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output, HasSubstr("stopped     at step 10: "));
}

// A job that resumes where its stream ended (here: resubmitted over a
// finished job's checkpoint_dir; as well, a job whose end a restarted
// coordinator never heard of) has nothing left to train, and ends there.
TEST_F(InputE2eTest, AJobResumedWhereItsStreamEndedEndsThere) {
  JobSpec spec = LinearJob("linear_stream", StrategyKind::kMultiWorkerMirrored,
                           100, R"("stream_examples": 650)");
  spec.checkpoint_dir = dir_->path() + "/stream-ended";
  const v1::JobStatus first = Run(spec);
  ASSERT_EQ(first.state(), v1::JOB_SUCCEEDED) << first.error();
  ASSERT_EQ(first.checkpoint_step(), 10);

  const v1::JobStatus again = Run(spec);
  ASSERT_EQ(again.state(), v1::JOB_SUCCEEDED) << again.error();
  EXPECT_EQ(again.restarts_size(), 0);
  EXPECT_EQ(again.stopped_at_step(), 10);
  EXPECT_THAT(again.stop_reason(),
              HasSubstr("ended after step 9, where the attempt resumed"));
  EXPECT_EQ(again.step(), 10);
  EXPECT_EQ(again.checkpoint_step(), 10);
}

TEST_F(InputE2eTest, AStreamedJobResumesWhereItsCheckpointLeftTheStream) {
  // Slow until the gate opens after the fault, however busy the machine.
  const std::string gate = dir_->path() + "/gate-stream";
  JobSpec spec = LinearJob(
      "linear_stream", StrategyKind::kMultiWorkerMirrored, 400,
      absl::StrCat(R"("step_sleep_ms": 20, "step_sleep_until_file": ")", gate,
                   R"(")"));
  spec.checkpoint_every = 10;
  spec.max_restarts = 2;

  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus midway = WaitForJob(
      *client_, *id,
      [](const v1::JobStatus& s) {
        return JobEnded(s) || s.checkpoint_step() >= 20;
      },
      absl::Seconds(60));
  ASSERT_FALSE(JobEnded(midway)) << "the job ended before a fault could land";
  absl::StatusOr<v1::ClusterState> state = coordinator_->State();
  ASSERT_TRUE(state.ok());
  const v1::TaskStatus* worker = FindTask(*state, "worker", 0);
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(kill(static_cast<pid_t>(worker->pid()), SIGKILL), 0);
  ASSERT_TRUE(WriteFileAtomically(gate, "").ok());

  const v1::JobStatus status = WaitForJobEnd(*client_, *id, absl::Seconds(120));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  ASSERT_GE(status.restarts_size(), 1);
  EXPECT_GE(status.restarts(0).resumed_from_step(), 20);
  // Each agent's stream skipped what the restored steps had read, so the
  // resumed job saw the same batches as an unbroken one (the gate open).
  const v1::JobStatus unbroken = Run(spec);
  ASSERT_EQ(unbroken.state(), v1::JOB_SUCCEEDED) << unbroken.error();
  EXPECT_EQ(unbroken.restarts_size(), 0);
  EXPECT_EQ(LinearParameters(status), LinearParameters(unbroken));
}

TEST_F(InputE2eTest, AParameterServerJobEndsWhenAWorkersStreamRunsOut) {
  JobSpec spec = LinearJob("linear_stream", StrategyKind::kParameterServer,
                           1000, R"("stream_examples": 640)");
  const v1::JobStatus status = Run(spec);
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_GT(status.stopped_at_step(), 0);
  EXPECT_LT(status.stopped_at_step(), 1000);
  EXPECT_THAT(status.stop_reason(), HasSubstr("the input stream of "));
  EXPECT_THAT(status.stop_reason(), HasSubstr(" ended after "));
}

TEST_F(InputE2eTest, WhatAStreamCannotDoFailsTheJobNamingIt) {
  const v1::JobStatus shuffled = Run(LinearJob(
      "linear_stream", StrategyKind::kMirrored, 5, R"("shuffle": true)"));
  EXPECT_EQ(shuffled.state(), v1::JOB_FAILED);
  EXPECT_THAT(shuffled.error(), HasSubstr("stream function \"linear_stream\""));
  EXPECT_THAT(shuffled.error(), HasSubstr("cannot be shuffled"));

  const v1::JobStatus missing =
      Run(LinearJob("no_such_stream", StrategyKind::kMirrored, 5, ""));
  EXPECT_EQ(missing.state(), v1::JOB_FAILED);
  EXPECT_THAT(missing.error(), HasSubstr("no dataset function named "
                                         "\"no_such_stream\""));
  EXPECT_THAT(missing.error(), HasSubstr("and streams: linear_stream"));
}

}  // namespace
}  // namespace cohort::testing
