// A training loop the step controls, end to end: a real coordinator launches
// a chief and a worker agent (2 CPU devices each), a ps task and an
// evaluator. Steps reduce their metrics over every replica, hand merge_call
// results back, see their task and strategy, and end training early, by
// stop_training or by the job's early-stopping rule; the evaluator
// evaluates each checkpoint beside the training.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <span>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cohort/client.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

class TrainingLoopE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(
        *dir_, /*workers=*/1, /*ps=*/1,
        {"--cpu_devices=2",
         absl::StrCat("--state_dir=", dir_->path(), "/state")},
        {}, /*evaluators=*/1);
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

  static v1::JobStatus Run(const JobSpec& spec) {
    absl::StatusOr<std::string> id = client_->SubmitJob(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return {};
    return WaitForJobEnd(*client_, *id, absl::Seconds(120));
  }

  static JobSpec TestStepsJob(const std::string& step, StrategyKind strategy,
                              int64_t steps) {
    return JobSpec{.name = step,
                   .strategy = strategy,
                   .library_path = TestStepsLibrary(),
                   .step_fn = step,
                   .steps = steps,
                   .global_batch_size = 4};
  }

  static ScratchDir* dir_;
  static CoordinatorProcess* coordinator_;
  static Client* client_;
  static std::string data_;
};

ScratchDir* TrainingLoopE2eTest::dir_ = nullptr;
CoordinatorProcess* TrainingLoopE2eTest::coordinator_ = nullptr;
Client* TrainingLoopE2eTest::client_ = nullptr;
std::string TrainingLoopE2eTest::data_;

TEST_F(TrainingLoopE2eTest, AReplicaOnTheWorkerStopsTrainingForEveryReplica) {
  // control_step fails its step unless merge_call handed every replica
  // replica 0's result and the strategy is the one submitted.
  const v1::JobStatus status = Run(
      TestStepsJob("control_step", StrategyKind::kMultiWorkerMirrored, 1000));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.step(), 5);
  EXPECT_EQ(status.stopped_at_step(), 5);
  EXPECT_EQ(status.stop_reason(),
            "replica 3 called stop_training: it has seen enough");
  EXPECT_EQ(status.checkpoint_step(), 5);
  // Reduced over the 4 replicas: 2 on the chief, and worker:0 the highest
  // task id.
  EXPECT_EQ(status.metrics().at("replicas"), 4);
  EXPECT_EQ(status.metrics().at("on_chief"), 2);
  EXPECT_EQ(status.metrics().at("task_id_max"), 0);

  // cohortctl shows where and why it stopped.
  CommandResult shown = RunCommand({Binary("cohortctl"),
                                    "--coordinator=" + coordinator_->address(),
                                    "job", status.job_id()});
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output, HasSubstr("stopped     at step 5: replica 3 called "
                                      "stop_training: it has seen enough"));
}

TEST_F(TrainingLoopE2eTest, TheEarlyStoppingRuleEndsTheMlpAtItsTarget) {
  JobSpec spec =
      MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 3000, "file");
  spec.checkpoint_every = 100;
  spec.early_stopping = {
      .metric = "accuracy", .maximize = true, .target = kMlpAccuracyBar};
  const v1::JobStatus status = Run(spec);
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_GT(status.stopped_at_step(), 0);
  EXPECT_LT(status.stopped_at_step(), 3000);
  EXPECT_EQ(status.step(), status.stopped_at_step());
  EXPECT_EQ(status.checkpoint_step(), status.stopped_at_step());
  EXPECT_GE(status.metrics().at("accuracy"), kMlpAccuracyBar);
  EXPECT_THAT(status.stop_reason(), HasSubstr("early_stopping: accuracy "));
  EXPECT_THAT(status.stop_reason(),
              HasSubstr(" reached the target 0.95 at step "));
  // The loss shown is the mean over the replicas, not replica 0's own.
  EXPECT_LT(status.metrics().at("loss"), 0.5);
}

TEST_F(TrainingLoopE2eTest, AMisspeltEarlyStoppingMetricIsAJobEvent) {
  JobSpec spec = MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 50, "file");
  spec.early_stopping = {.metric = "losss", .target = 100};
  const v1::JobStatus status = Run(spec);
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.stopped_at_step(), 0) << "no step reported \"losss\"";
  int shown = 0;
  for (const v1::JobEvent& event : status.events()) {
    if (absl::StrContains(event.text(),
                          "chief:0: early_stopping watches \"losss\", but "
                          "step 0 reported only ")) {
      ++shown;
    }
  }
  EXPECT_EQ(shown, 1) << status.ShortDebugString();
}

TEST_F(TrainingLoopE2eTest,
       AMalformedEarlyStoppingRuleIsRefusedNamingTheField) {
  JobSpec spec = TestStepsJob("empty_step", StrategyKind::kMirrored, 10);
  spec.early_stopping = {.metric = "loss", .patience = -2};
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(),
              HasSubstr("early_stopping: patience must be >= 0, got -2"));

  spec.early_stopping = {.metric = "loss"};
  id = client_->SubmitJob(spec);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(),
              HasSubstr("needs a target, a patience, or both"));

  // A rule without a metric is not dropped without a word.
  spec.early_stopping = {.target = 0.5};
  id = client_->SubmitJob(spec);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(),
              HasSubstr("early_stopping: a target, patience, min_delta or "
                        "maximize without a metric to watch"));
}

TEST_F(TrainingLoopE2eTest,
       AParameterServerClosureStopsTrainingAfterInFlightOnes) {
  JobSpec spec =
      TestStepsJob("stop_ps_step", StrategyKind::kParameterServer, 100000);
  spec.ps.max_inflight = 2;
  const v1::JobStatus status = Run(spec);
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  // Closures 0..20 at least; those in flight when 20 stopped also finish.
  EXPECT_GE(status.stopped_at_step(), 21);
  EXPECT_LT(status.stopped_at_step(), 100);
  EXPECT_EQ(status.step(), status.stopped_at_step());
  EXPECT_THAT(status.stop_reason(),
              HasSubstr("called stop_training: closure 20 was reached"));
}

TEST_F(TrainingLoopE2eTest, UserBatchedDatasetsReachEachReplicaWhole) {
  JobSpec spec =
      TestStepsJob("batched_step", StrategyKind::kMultiWorkerMirrored, 12);
  spec.dataset_fn = "batched_data";
  spec.global_batch_size = 8;
  const v1::JobStatus status = Run(spec);
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  // 4 replicas of 2 examples; the worker's two replicas read pipeline 1.
  EXPECT_EQ(status.metrics().at("examples"), 8);
  EXPECT_EQ(status.metrics().at("pipelines"), 2);
}

TEST_F(TrainingLoopE2eTest, TheEvaluatorPassesOverEveryUserBatch) {
  // Regression: a pass was the data set's size over the global batch, so of
  // 6 user batches and a global batch of 8, one was evaluated.
  JobSpec spec =
      TestStepsJob("batched_step", StrategyKind::kMultiWorkerMirrored, 12);
  spec.dataset_fn = "batched_data";
  spec.global_batch_size = 8;
  spec.eval_fn = "batched_eval";
  spec.eval_dataset_fn = "batched_data";
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus ended = WaitForJobEnd(*client_, *id, absl::Seconds(120));
  ASSERT_EQ(ended.state(), v1::JOB_SUCCEEDED) << ended.error();
  const v1::JobStatus status =
      WaitForEvaluation(*client_, *id, 12, absl::Seconds(60));
  ASSERT_GT(status.evaluations_size(), 0);
  const v1::Evaluation& last =
      status.evaluations(status.evaluations_size() - 1);
  EXPECT_EQ(last.error(), "");
  // Batches 0 to 5, each once.
  EXPECT_EQ(last.metrics().at("batch"), 2.5);
}

TEST_F(TrainingLoopE2eTest, TheEvaluatorScoresEveryCheckpointBesideTraining) {
  JobSpec spec = MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 600, "file");
  spec.checkpoint_every = 200;
  spec.eval_fn = "mlp_eval";
  spec.eval_dataset_fn = "mlp_eval_data";
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::JobStatus ended = WaitForJobEnd(*client_, *id, absl::Seconds(120));
  ASSERT_EQ(ended.state(), v1::JOB_SUCCEEDED) << ended.error();
  // Training never waits for the evaluator; the final checkpoint is
  // evaluated after the job ends.
  const v1::JobStatus status =
      WaitForEvaluation(*client_, *id, 600, absl::Seconds(60));
  ASSERT_GT(status.evaluations_size(), 0);
  const v1::Evaluation& last =
      status.evaluations(status.evaluations_size() - 1);
  EXPECT_EQ(last.step(), 600);
  EXPECT_EQ(last.error(), "");
  // The held-out accuracy the job itself measured at its end.
  EXPECT_GE(last.metrics().at("accuracy"), kMlpAccuracyBar);
  EXPECT_NEAR(last.metrics().at("accuracy"), ended.metrics().at("accuracy"),
              1e-9);
  for (const v1::Evaluation& e : status.evaluations()) {
    EXPECT_EQ(e.step() % 200, 0) << e.step();
  }

  CommandResult shown =
      RunCommand({Binary("cohortctl"),
                  "--coordinator=" + coordinator_->address(), "job", *id});
  EXPECT_THAT(shown.output,
              HasSubstr("evaluator   mlp_eval on mlp_eval_data, one pass per "
                        "checkpoint"));
  EXPECT_THAT(shown.output, HasSubstr("step 600: accuracy="));
}

TEST_F(TrainingLoopE2eTest, LosingTheEvaluatorFailsNothing) {
  absl::StatusOr<v1::ClusterState> state = coordinator_->State();
  ASSERT_TRUE(state.ok()) << state.status();
  const v1::TaskStatus* evaluator = FindTask(*state, "evaluator", 0);
  ASSERT_NE(evaluator, nullptr);
  JobSpec spec = MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 400, "file");
  spec.checkpoint_every = 100;
  spec.eval_fn = "mlp_eval";
  spec.eval_dataset_fn = "mlp_eval_data";
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(kill(static_cast<pid_t>(evaluator->pid()), SIGKILL), 0);
  const v1::JobStatus ended = WaitForJobEnd(*client_, *id, absl::Seconds(120));
  ASSERT_EQ(ended.state(), v1::JOB_SUCCEEDED) << ended.error();
  EXPECT_EQ(ended.attempt(), 1);
  EXPECT_EQ(ended.restarts_size(), 0);
  // Restarted by the coordinator, it evaluates the final checkpoint.
  const v1::JobStatus evaluated =
      WaitForEvaluation(*client_, *id, 400, absl::Seconds(60));
  EXPECT_GT(evaluated.evaluations_size(), 0);
}

TEST_F(TrainingLoopE2eTest,
       AModelSplitOverLogicalDevicesLearnsAsTheUnsplitOne) {
  // Two replicas either way (one per agent): each on one device, or each
  // over two, with the MLP's layers split between them.
  JobSpec whole = MlpJob(data_, StrategyKind::kMultiWorkerMirrored, 60, "file");
  whole.devices_per_agent = 1;
  JobSpec split = whole;
  split.devices_per_agent = 2;
  split.logical_devices_per_replica = 2;
  const v1::JobStatus a = Run(whole);
  const v1::JobStatus b = Run(split);
  ASSERT_EQ(a.state(), v1::JOB_SUCCEEDED) << a.error();
  ASSERT_EQ(b.state(), v1::JOB_SUCCEEDED) << b.error();
  EXPECT_EQ(b.num_replicas(), 2);
  ASSERT_EQ(b.placement_size(), 2);
  EXPECT_THAT(b.placement(0),
              HasSubstr("chief:0 (1 replica: replica 0 on cpu:0+cpu:1)"));

  absl::StatusOr<Checkpoint> unsplit = LoadLatestCheckpoint(a.checkpoint_dir());
  absl::StatusOr<Checkpoint> model_parallel =
      LoadLatestCheckpoint(b.checkpoint_dir());
  ASSERT_TRUE(unsplit.ok()) << unsplit.status();
  ASSERT_TRUE(model_parallel.ok()) << model_parallel.status();
  ASSERT_EQ(unsplit->tensors.size(), model_parallel->tensors.size());
  for (const auto& [name, tensor] : unsplit->tensors) {
    ASSERT_TRUE(model_parallel->tensors.contains(name)) << name;
    if (tensor.dtype != "float32") continue;
    std::span<const float> x = tensor.As<float>();
    std::span<const float> y = model_parallel->tensors.at(name).As<float>();
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) {
      const double scale = std::max(1e-6, std::abs(static_cast<double>(x[i])));
      EXPECT_LE(std::abs(static_cast<double>(x[i]) - y[i]) / scale, 1e-6)
          << name << "[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace cohort::testing
