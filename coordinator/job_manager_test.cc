#include "coordinator/job_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/test_job_spec.h"
#include "tests/testing/status_matchers.h"

namespace cohort::coordinator {
namespace {

using ::cohort::testing::IsOkAndHolds;
using ::cohort::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

ClusterSpec TwoAgentSpec() {
  return *ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"],
                      "ps": ["127.0.0.1:3"], "evaluator": ["127.0.0.1:4"]}})");
}

v1::JobSpec GoodSpec() {
  v1::JobSpec spec = TestJobSpec(v1::MULTI_WORKER_MIRRORED, 10);
  spec.set_max_restarts(1);
  return spec;
}

std::vector<AgentView> Ready(int devices = 2) {
  return {{.task = {"chief", 0}, .state = v1::READY, .num_devices = devices},
          {.task = {"worker", 0}, .state = v1::READY, .num_devices = devices}};
}

v1::AgentJobReport Report(const std::string& type, const std::string& job,
                          int attempt, v1::AgentJobReport::State state,
                          int64_t step = 0) {
  v1::AgentJobReport report;
  report.mutable_task()->set_type(type);
  report.set_job_id(job);
  report.set_attempt(attempt);
  report.set_state(state);
  report.set_step(step);
  return report;
}

// A report of replicas that agreed to stop at `stopped_at`, with the
// agent's newest checkpoint at `checkpoint`.
v1::AgentJobReport StopReport(const std::string& type, const std::string& job,
                              int attempt, v1::AgentJobReport::State state,
                              int64_t stopped_at, int64_t checkpoint) {
  v1::AgentJobReport report = Report(type, job, attempt, state, stopped_at);
  report.set_stopped_at_step(stopped_at);
  report.set_checkpoint_step(checkpoint);
  return report;
}

class JobManagerTest : public ::testing::Test {
 protected:
  JobManager manager_{TwoAgentSpec(),
                      {.checkpoint_root = "/ckpt", .cluster_uid = "cluster-7"}};
  absl::Time now_ = absl::FromUnixSeconds(1000);

  std::string SubmitAndPlace(v1::JobSpec spec = GoodSpec()) {
    absl::StatusOr<std::string> id = manager_.Submit(spec, now_);
    EXPECT_TRUE(id.ok()) << id.status();
    manager_.Tick(Ready(), now_);
    return *id;
  }
  v1::JobState State(const std::string& id) {
    return manager_.Get(id)->state();
  }
};

TEST_F(JobManagerTest, MalformedSpecsAreRefusedNamingTheField) {
  v1::JobSpec spec = GoodSpec();
  spec.set_steps(0);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("steps must be positive"));
  spec = GoodSpec();
  spec.set_library_digest("abc");
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("library_digest"));
  spec = GoodSpec();
  spec.set_config_json("[1]");
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("config_json"));
  spec.set_config_json(
      absl::StrCat(R"({"x": ")", std::string(1024 * 1024, 'a'), R"("})"));
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("config_json is 1048585 bytes, over the 1024 KiB "
                        "limit"));
  spec = GoodSpec();
  spec.set_strategy(v1::STRATEGY_UNSPECIFIED);
  EXPECT_EQ(manager_.Submit(spec, now_).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Texts that travel with every assignment and save are bounded.
  spec = GoodSpec();
  spec.set_name(std::string(4097, 'n'));
  EXPECT_THAT(manager_.Submit(spec, now_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("job spec: name is 4097 bytes, over the "
                                 "limit of 4096")));
  spec = GoodSpec();
  spec.set_checkpoint_dir("/" + std::string(4096, 'd'));
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("checkpoint_dir is 4097 bytes"));
  spec = GoodSpec();
  spec.set_name(std::string(4096, 'n'));
  EXPECT_OK(manager_.Submit(spec, now_).status());
}

TEST_F(JobManagerTest, CheckpointDirMustBeAbsoluteWithoutDotDot) {
  for (const char* dir :
       {"checkpoints", "../elsewhere/ckpt", "/data/../etc/ckpt"}) {
    v1::JobSpec spec = GoodSpec();
    spec.set_checkpoint_dir(dir);
    EXPECT_THAT(manager_.Submit(spec, now_),
                testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("checkpoint_dir")))
        << dir;
  }
  v1::JobSpec spec = GoodSpec();
  spec.set_checkpoint_dir("/data/jobs/./ckpt");
  EXPECT_OK(manager_.Submit(spec, now_));
}

TEST_F(JobManagerTest, AssignsRanksAndSucceedsWhenEveryAgentFinishes) {
  const std::string id = SubmitAndPlace();
  v1::AgentSyncResponse chief =
      manager_.Sync(Report("chief", "", 0, v1::AgentJobReport::IDLE), now_);
  v1::AgentSyncResponse worker =
      manager_.Sync(Report("worker", "", 0, v1::AgentJobReport::IDLE), now_);
  EXPECT_EQ(chief.assignment().first_rank(), 0);
  EXPECT_EQ(worker.assignment().first_rank(), 2);
  EXPECT_EQ(worker.assignment().num_replicas(), 4);
  EXPECT_EQ(worker.assignment().communication(),
            v1::COMMUNICATION_HIERARCHICAL);
  EXPECT_EQ(State(id), v1::JOB_PLACING);

  manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::RUNNING, 3), now_);
  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::RUNNING, 3), now_);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_RUNNING);
  EXPECT_EQ(manager_.Get(id)->step(), 3);

  manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::FINISHED, 10), now_);
  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::FINISHED, 10),
                now_);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_SUCCEEDED);
}

// A coordinator that stops records a job its replicas finished in the
// stop's grace, and nothing else: the next coordinator must not rerun it.
TEST_F(JobManagerTest, SettleFinishedRecordsOnlyAJobEveryAgentFinished) {
  const std::string id = SubmitAndPlace();
  const std::string queued = *manager_.Submit(GoodSpec(), now_);
  manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::RUNNING, 3), now_);
  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::RUNNING, 3), now_);
  manager_.Tick(Ready(), now_);
  ASSERT_EQ(State(id), v1::JOB_RUNNING);

  // One agent finished, the other failed long ago: no verdict, no restart.
  manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::FINISHED, 10), now_);
  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::FAILED, 9), now_);
  now_ += absl::Hours(1);
  manager_.SettleFinished(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_RUNNING);
  EXPECT_EQ(manager_.Get(id)->restarts_size(), 0);

  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::FINISHED, 10),
                now_);
  manager_.SettleFinished(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_SUCCEEDED);
  // The next job is not placed.
  EXPECT_EQ(State(queued), v1::JOB_SUBMITTED);
  std::optional<std::string> table =
      manager_.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).value();
  ASSERT_TRUE(table.has_value());
  EXPECT_THAT(*table, HasSubstr("JOB_SUCCEEDED"));
}

// An agent that outlived an earlier cluster may still run that cluster's
// job 1, attempt 1: its reports say so by the uid, and count for nothing.
TEST_F(JobManagerTest, AReportOfAnotherClustersJobOfTheSameIdIsNotTaken) {
  const std::string id = SubmitAndPlace();
  const std::string uid = manager_.Get(id)->uid();
  for (const char* task : {"chief", "worker"}) {
    v1::AgentJobReport stale =
        Report(task, id, 1, v1::AgentJobReport::FINISHED, 10);
    stale.set_job_uid("another-cluster");
    manager_.Sync(stale, now_);
  }
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_PLACING);

  for (const char* task : {"chief", "worker"}) {
    v1::AgentJobReport own =
        Report(task, id, 1, v1::AgentJobReport::FINISHED, 10);
    own.set_job_uid(uid);
    manager_.Sync(own, now_);
  }
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_SUCCEEDED);
}

TEST_F(JobManagerTest, BatchNotDivisibleByReplicasFailsTheJob) {
  v1::JobSpec spec = GoodSpec();
  spec.set_global_batch_size(10);
  const std::string id = SubmitAndPlace(spec);
  EXPECT_EQ(State(id), v1::JOB_FAILED);
  EXPECT_THAT(manager_.Get(id)->error(),
              HasSubstr("global batch size 10 is not divisible by the 4"));
}

TEST_F(JobManagerTest, AShapeNoAgentsCouldTakeIsRefusedAtSubmission) {
  auto refusal = [&](const v1::JobSpec& spec) {
    absl::StatusOr<std::string> id = manager_.Submit(spec, now_);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(id.status().message());
  };
  v1::JobSpec spec = GoodSpec();
  spec.set_global_batch_size(9);
  EXPECT_THAT(refusal(spec), HasSubstr("global_batch_size 9 is not divisible "
                                       "by the job's 2 replicas (2 agent(s))"));
  spec.set_global_batch_size(10);
  spec.set_devices_per_agent(2);
  EXPECT_THAT(refusal(spec),
              HasSubstr("global_batch_size 10 is not divisible by the job's 4 "
                        "replicas (2 agent(s) x 2 per agent)"));
  spec = GoodSpec();
  spec.set_strategy(v1::ONE_DEVICE);
  spec.set_devices_per_agent(2);
  EXPECT_THAT(refusal(spec), HasSubstr("devices_per_agent=2: OneDevice runs "
                                       "one replica"));
  spec = GoodSpec();
  spec.set_logical_devices_per_replica(2);
  spec.set_communication(v1::COMMUNICATION_NCCL);
  EXPECT_THAT(refusal(spec), HasSubstr("communication NCCL reduces on one "
                                       "device per replica"));
  EXPECT_TRUE(manager_.List().empty());
}

TEST_F(JobManagerTest, DeadAgentRestartsTheJobThenFailsWhenRestartsAreSpent) {
  const std::string id = SubmitAndPlace();
  manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::RUNNING, 5), now_);
  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::RUNNING, 5), now_);
  std::vector<AgentView> agents = Ready();
  agents[1].state = v1::DEAD;
  agents[1].last_error = "process killed by signal 9 (Killed)";
  manager_.Tick(agents, now_);
  now_ += absl::Seconds(1);
  manager_.Tick(agents, now_);
  v1::JobStatus status = *manager_.Get(id);
  EXPECT_EQ(status.state(), v1::JOB_RESTARTING);
  ASSERT_EQ(status.restarts_size(), 1);
  EXPECT_THAT(status.restarts(0).cause(),
              HasSubstr("worker:0 died: process killed by signal 9"));

  // Waits for the agent, then places attempt 2.
  manager_.Tick(agents, now_);
  EXPECT_EQ(
      manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::FAILED), now_)
          .assignment()
          .job_id(),
      "");
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(
      manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::FAILED), now_)
          .assignment()
          .attempt(),
      2);
  manager_.Sync(Report("worker", id, 2, v1::AgentJobReport::FAILED), now_);
  now_ += absl::Seconds(1);
  manager_.Tick(Ready(), now_);
  status = *manager_.Get(id);
  EXPECT_EQ(status.state(), v1::JOB_FAILED);
  EXPECT_THAT(status.error(), HasSubstr("no restarts left (max_restarts=1)"));
  // Each ended attempt's store keys, then the whole job's, can go.
  EXPECT_THAT(manager_.TakeRetiredGroups(),
              ::testing::ElementsAre(absl::StrCat("job-", id, "/attempt-1/"),
                                     absl::StrCat("job-", id, "/attempt-2/"),
                                     absl::StrCat("job-", id, "/")));
  EXPECT_TRUE(manager_.TakeRetiredGroups().empty());
}

TEST_F(JobManagerTest, AStopCheckpointedBeforeTheAttemptFailedEndsTheJob) {
  // The replicas agreed to stop at step 7 (their input ended) and the chief
  // checkpointed it; then the worker failed to write its own copy. Another
  // attempt would resume at step 7 with no input left.
  const std::string id = SubmitAndPlace();
  v1::AgentJobReport chief =
      StopReport("chief", id, 1, v1::AgentJobReport::FINISHED, 7, 7);
  manager_.Sync(chief, now_);
  v1::AgentJobReport worker =
      Report("worker", id, 1, v1::AgentJobReport::FAILED, 7);
  worker.set_stopped_at_step(7);
  worker.set_error("could not write its copy of the checkpoint");
  manager_.Sync(worker, now_);
  manager_.Tick(Ready(), now_);
  now_ += absl::Seconds(10);
  manager_.Tick(Ready(), now_);
  const v1::JobStatus status = *manager_.Get(id);
  EXPECT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.restarts_size(), 0);
  EXPECT_EQ(status.stopped_at_step(), 7);
  EXPECT_EQ(status.checkpoint_step(), 7);
}

TEST_F(JobManagerTest, AStopNotYetCheckpointedIsReachedAgain) {
  const std::string id = SubmitAndPlace();
  v1::AgentJobReport chief =
      StopReport("chief", id, 1, v1::AgentJobReport::FAILED, 7, 5);
  manager_.Sync(chief, now_);
  manager_.Tick(Ready(), now_);
  now_ += absl::Seconds(10);
  manager_.Tick(Ready(), now_);
  const v1::JobStatus status = *manager_.Get(id);
  EXPECT_EQ(status.state(), v1::JOB_RESTARTING);
  EXPECT_EQ(status.stopped_at_step(), 0);
  ASSERT_EQ(status.restarts_size(), 1);
  EXPECT_EQ(status.restarts(0).resumed_from_step(), 5);
}

TEST_F(JobManagerTest, OnlyTheChiefsCheckpointOfTheStopStepEndsTheJob) {
  // The worker wrote its own copy of step 7 and the chief did not: the
  // job's checkpoint_dir lacks the final step, so the job runs again.
  const std::string id = SubmitAndPlace();
  v1::AgentJobReport chief =
      StopReport("chief", id, 1, v1::AgentJobReport::FAILED, 7, 5);
  chief.set_error("no space left on device");
  manager_.Sync(chief, now_);
  v1::AgentJobReport worker =
      StopReport("worker", id, 1, v1::AgentJobReport::FINISHED, 7, 7);
  manager_.Sync(worker, now_);
  manager_.Tick(Ready(), now_);
  now_ += absl::Seconds(10);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_RESTARTING);

  // Attempt 2 resumes from 5 and stops at 6 this time; the chief's report
  // of step 7 from attempt 1 does not count for it.
  manager_.Tick(Ready(), now_);
  chief = StopReport("chief", id, 2, v1::AgentJobReport::FAILED, 6, 5);
  manager_.Sync(chief, now_);
  now_ += absl::Seconds(10);
  manager_.Tick(Ready(), now_);
  const v1::JobStatus status = *manager_.Get(id);
  EXPECT_EQ(status.checkpoint_step(), 7);  // the newest any agent reported
  EXPECT_NE(status.state(), v1::JOB_SUCCEEDED) << status.ShortDebugString();
}

TEST_F(JobManagerTest, AnAgentThatDiesAfterItsReplicasFinishedLosesNothing) {
  const std::string id = SubmitAndPlace();
  manager_.Sync(Report("chief", id, 1, v1::AgentJobReport::FINISHED, 10), now_);
  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::RUNNING, 10), now_);
  std::vector<AgentView> agents = Ready();
  agents[0].state = v1::DEAD;
  agents[0].last_error = "process killed by signal 9 (Killed)";
  manager_.Tick(agents, now_);
  now_ += absl::Seconds(10);
  manager_.Tick(agents, now_);
  EXPECT_EQ(State(id), v1::JOB_RUNNING);

  // It comes back with nothing running: its replicas' result stands.
  manager_.Sync(Report("chief", "", 0, v1::AgentJobReport::IDLE), now_);
  manager_.Sync(Report("worker", id, 1, v1::AgentJobReport::FINISHED, 10),
                now_);
  manager_.Tick(Ready(), now_);
  const v1::JobStatus status = *manager_.Get(id);
  EXPECT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.restarts_size(), 0);
}

TEST_F(JobManagerTest, AnAgentThatLeftRestartsTheJobWithoutSpendingARestart) {
  v1::JobSpec spec = GoodSpec();
  spec.set_max_restarts(0);
  const std::string id = SubmitAndPlace(spec);
  for (int round = 1; round <= 2; ++round) {
    for (const char* task : {"chief", "worker"}) {
      v1::AgentJobReport left =
          Report(task, id, round, v1::AgentJobReport::FAILED, 5);
      left.set_error("the agent of replica 2 is shutting down");
      left.set_agent_left(true);
      manager_.Sync(left, now_);
    }
    manager_.Tick(Ready(), now_);
    now_ += absl::Seconds(1);
    manager_.Tick(Ready(), now_);  // ends the attempt
    manager_.Tick(Ready(), now_);  // places the next
    const v1::JobStatus status = *manager_.Get(id);
    ASSERT_EQ(status.restarts_size(), round);
    EXPECT_FALSE(status.restarts(round - 1).spent());
    EXPECT_EQ(status.attempt(), round + 1);
    EXPECT_NE(status.state(), v1::JOB_FAILED) << status.error();
  }

  // A failure still counts: none is left.
  manager_.Sync(Report("worker", id, 3, v1::AgentJobReport::FAILED), now_);
  manager_.Tick(Ready(), now_);
  now_ += absl::Seconds(1);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_FAILED);
  EXPECT_THAT(manager_.Get(id)->error(),
              HasSubstr("no restarts left (max_restarts=0)"));
}

TEST_F(JobManagerTest, AJobsOwnPlacementTimeoutBoundsTheWaitForAReplacement) {
  // Two jobs lose their worker's agent for good (a host being replaced):
  // the one with the default waits 2 minutes, the other its own 15.
  for (const int64_t own_ms : {int64_t{0}, int64_t{15 * 60 * 1000}}) {
    v1::JobSpec spec = GoodSpec();
    spec.set_max_restarts(0);
    spec.set_placement_timeout_ms(own_ms);
    const std::string id = SubmitAndPlace(spec);
    for (const char* task : {"chief", "worker"}) {
      v1::AgentJobReport left =
          Report(task, id, 1, v1::AgentJobReport::FAILED, 5);
      left.set_agent_left(true);
      manager_.Sync(left, now_);
    }
    std::vector<AgentView> agents = Ready();
    agents[1].state = v1::DEAD;
    agents[1].last_error = absl::StrCat(kDeregisteredError, "shutting down");
    manager_.Tick(agents, now_);
    now_ += absl::Seconds(1);
    manager_.Tick(agents, now_);  // ends attempt 1
    manager_.Tick(agents, now_);  // waits for worker:0
    ASSERT_EQ(State(id), v1::JOB_RESTARTING) << manager_.Get(id)->error();
    const std::string bound = own_ms > 0 ? "15m" : "2m";
    EXPECT_THAT(manager_.Get(id)->waiting_for(),
                HasSubstr(absl::StrCat("not ready within ", bound)));

    now_ += absl::Minutes(2) + absl::Seconds(1);
    manager_.Tick(agents, now_);
    if (own_ms == 0) {
      EXPECT_EQ(State(id), v1::JOB_FAILED);
      EXPECT_THAT(manager_.Get(id)->error(),
                  HasSubstr("agents not ready within 2m: worker:0"));
      continue;
    }
    EXPECT_EQ(State(id), v1::JOB_RESTARTING);
    now_ += absl::Minutes(13);
    manager_.Tick(agents, now_);
    EXPECT_EQ(State(id), v1::JOB_FAILED);
    EXPECT_THAT(manager_.Get(id)->error(),
                HasSubstr("agents not ready within 15m: worker:0"));
  }
}

TEST(JobManagerSubmitTest, AnEvalFnWithoutAnEvaluatorTaskIsRefused) {
  JobManager manager(
      *ClusterSpec::FromJson(
          R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}})"),
      {});
  v1::JobSpec spec = GoodSpec();
  spec.set_eval_fn("eval");
  spec.set_eval_dataset_fn("eval_data");
  EXPECT_THAT(manager.Submit(spec, absl::Now()).status().message(),
              HasSubstr("eval_fn needs the cluster's evaluator task, and the "
                        "cluster spec has none"));
}

TEST_F(JobManagerTest, ACheckpointAnAttemptResumedFromIsTheJobsLatest) {
  const std::string id = SubmitAndPlace();
  // Taken while the coordinator was down: it learns of it from the resume.
  v1::AgentJobReport resumed =
      Report("chief", id, 1, v1::AgentJobReport::RUNNING, 9100);
  resumed.set_resumed_from_step(9000);
  manager_.Sync(resumed, now_);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(manager_.Get(id)->checkpoint_step(), 9000);
}

// No spec may park the queue, a collective or a ps recovery for good.
TEST_F(JobManagerTest, AWaitOutOfRangeIsRefusedNamingIt) {
  v1::JobSpec spec = GoodSpec();
  spec.set_placement_timeout_ms(-1);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("placement_timeout_ms must be in [0, 604800000] (0: "
                        "the coordinator's --placement_timeout; at most 7 "
                        "days), got -1"));
  spec.set_placement_timeout_ms(int64_t{9'000'000'000'000'000'000});
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("placement_timeout_ms must be in [0, 604800000]"));
  spec = GoodSpec();
  spec.set_collective_timeout_ms(604'800'001);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("collective_timeout_ms must be in [0, 604800000] (0: "
                        "60 s; at most 7 days), got 604800001"));
  spec.set_collective_timeout_ms(604'800'000);
  EXPECT_OK(manager_.Submit(spec, now_).status());

  v1::JobSpec ps = GoodSpec();
  ps.set_strategy(v1::PARAMETER_SERVER);
  ps.mutable_ps()->set_ps_recovery_timeout_ms(int64_t{1} << 62);
  EXPECT_THAT(manager_.Submit(ps, now_).status().message(),
              HasSubstr("ps.ps_recovery_timeout_ms must be in [0, 604800000]"));
  ps = GoodSpec();
  ps.set_strategy(v1::PARAMETER_SERVER);
  ps.set_steps(0);
  ps.clear_step_fn();
  ps.mutable_ps()->set_schedule_from_client(true);
  ps.mutable_ps()->set_client_timeout_ms(int64_t{1} << 62);
  EXPECT_THAT(manager_.Submit(ps, now_).status().message(),
              HasSubstr("ps.client_timeout_ms must be in [0, 604800000] (0: "
                        "300 s"));
}

TEST_F(JobManagerTest, AJobWaitingToBePlacedSaysForWhomUntilItIsPlaced) {
  absl::StatusOr<std::string> id = manager_.Submit(GoodSpec(), now_);
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<AgentView> agents = Ready();
  agents[1].state = v1::DEAD;
  agents[1].last_error = "process exited with code 1";
  manager_.Tick(agents, now_);
  v1::JobStatus status = *manager_.Get(*id);
  EXPECT_EQ(status.state(), v1::JOB_PLACING);
  EXPECT_EQ(status.waiting_for(),
            "worker:0 (DEAD: process exited with code 1); the attempt fails "
            "if they are not ready within 2m");
  // Unchanged, it is not a change to save.
  manager_.TakeSnapshotIfChanged(now_, absl::Hours(1)).value();
  manager_.Tick(agents, now_ + absl::Seconds(1));
  EXPECT_FALSE(manager_.TakeSnapshotIfChanged(now_, absl::Hours(1)).value());

  manager_.Tick(Ready(), now_ + absl::Seconds(2));
  status = *manager_.Get(*id);
  EXPECT_EQ(status.attempt(), 1);
  EXPECT_EQ(status.waiting_for(), "");
}

TEST_F(JobManagerTest, PermanentErrorFailsAtOnce) {
  const std::string id = SubmitAndPlace();
  v1::AgentJobReport report =
      Report("worker", id, 1, v1::AgentJobReport::FAILED);
  report.set_permanent(true);
  report.set_error("no step function named \"x\"");
  manager_.Sync(report, now_);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(id), v1::JOB_FAILED);
  EXPECT_THAT(manager_.Get(id)->error(),
              HasSubstr("worker:0: no step function named \"x\""));
}

TEST_F(JobManagerTest, JobsRunOneAtATimeAndCancelEndsOne) {
  const std::string first = SubmitAndPlace();
  const std::string second = *manager_.Submit(GoodSpec(), now_);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(second), v1::JOB_SUBMITTED);
  EXPECT_EQ(manager_.Cancel(first, now_)->state(), v1::JOB_CANCELLED);
  manager_.Tick(Ready(), now_);
  EXPECT_EQ(State(second), v1::JOB_PLACING);
  EXPECT_EQ(manager_.Cancel("99", now_).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, SyncsListTheJobsThatHaveNotEnded) {
  const std::string first = SubmitAndPlace();
  const std::string second = *manager_.Submit(GoodSpec(), now_);
  auto key = [&](const std::string& id) {
    return absl::StrCat(id, "-", manager_.Get(id)->uid());
  };
  const v1::AgentSyncResponse before =
      manager_.Sync(Report("worker", "", 0, v1::AgentJobReport::IDLE), now_);
  EXPECT_TRUE(before.lists_unended_jobs());
  EXPECT_EQ(before.cluster_uid(), "cluster-7");
  EXPECT_THAT(before.unended_jobs(),
              UnorderedElementsAre(key(first), key(second)));
  ASSERT_OK(manager_.Cancel(first, now_).status());
  const v1::AgentSyncResponse after =
      manager_.Sync(Report("evaluator", "", 0, v1::AgentJobReport::IDLE), now_);
  EXPECT_TRUE(after.lists_unended_jobs());
  EXPECT_THAT(after.unended_jobs(), ElementsAre(key(second)));
}

TEST_F(JobManagerTest, TheLibrariesInUseAreThoseOfEveryJobInTheTable) {
  v1::JobSpec other = GoodSpec();
  other.set_library_digest(std::string(64, 'e'));
  const std::string first = SubmitAndPlace();
  ASSERT_OK(manager_.Submit(other, now_).status());
  ASSERT_OK(manager_.Cancel(first, now_).status());  // ended, still listed
  EXPECT_THAT(manager_.LibraryDigests(),
              UnorderedElementsAre(GoodSpec().library_digest(),
                                   std::string(64, 'e')));
}

TEST_F(JobManagerTest, RestoredTableKeepsJobsAndResumesTheActiveOne) {
  const std::string done = SubmitAndPlace();
  ASSERT_TRUE(manager_.Cancel(done, now_).ok());
  const std::string active = SubmitAndPlace();
  std::optional<std::string> table =
      manager_.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).value();
  ASSERT_TRUE(table.has_value());

  JobManager restored(TwoAgentSpec(), {.checkpoint_root = "/ckpt"});
  ASSERT_TRUE(restored.Restore(*table, now_).ok());
  EXPECT_EQ(restored.Get(done)->state(), v1::JOB_CANCELLED);
  v1::JobStatus resumed = *restored.Get(active);
  EXPECT_EQ(resumed.state(), v1::JOB_RESTARTING);
  EXPECT_THAT(resumed.restarts(0).cause(), HasSubstr("coordinator restarted"));
  EXPECT_FALSE(resumed.restarts(0).spent());
  EXPECT_EQ(*restored.Submit(GoodSpec(), now_), "3");
  EXPECT_EQ(restored.Restore("{", now_).code(), absl::StatusCode::kDataLoss);
}

TEST_F(JobManagerTest, ARestoredJobReachesAStopAgreedBeforeTheRestartAgain) {
  // The replicas agreed to stop at step 7 and the coordinator restarted
  // before they ended: the next attempt has a stop of its own to reach.
  const std::string id = SubmitAndPlace();
  manager_.Sync(StopReport("chief", id, 1, v1::AgentJobReport::RUNNING, 7, 5),
                now_);
  ASSERT_EQ(manager_.Get(id)->stopped_at_step(), 7);
  std::optional<std::string> table =
      manager_.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).value();
  ASSERT_TRUE(table.has_value());

  JobManager restored(TwoAgentSpec(), {.checkpoint_root = "/ckpt"});
  ASSERT_OK(restored.Restore(*table, now_));
  const v1::JobStatus status = *restored.Get(id);
  EXPECT_EQ(status.state(), v1::JOB_RESTARTING);
  EXPECT_EQ(status.stopped_at_step(), 0);
  EXPECT_EQ(status.stop_reason(), "");
}

TEST_F(JobManagerTest, RestoresATableWithNumericIdsAndRefusesABadJob) {
  // Integers as JSON numbers, as earlier coordinators wrote them.
  JobManager restored(TwoAgentSpec(), {.checkpoint_root = "/ckpt"});
  ASSERT_OK(restored.Restore(
      R"({"next_id": 8, "jobs": [{"job_id": "7", "state": "JOB_SUCCEEDED",
                                  "step": 10}]})",
      now_));
  EXPECT_EQ(restored.Get("7")->step(), 10);
  EXPECT_EQ(*restored.Submit(GoodSpec(), now_), "8");

  // A table of a newer build, with fields this one does not know: a
  // rollback keeps its jobs.
  JobManager older(TwoAgentSpec(), {.checkpoint_root = "/ckpt"});
  ASSERT_OK(older.Restore(
      R"({"next_id": 4, "a_later_field": 1,
          "jobs": [{"job_id": "3", "state": "JOB_SUCCEEDED", "step": 5,
                    "spec": {"steps": 5, "a_later_spec_field": "x"}}]})",
      now_));
  EXPECT_EQ(older.Get("3")->step(), 5);

  JobManager refused(TwoAgentSpec(), {.checkpoint_root = "/ckpt"});
  EXPECT_THAT(refused.Restore(R"({"jobs": [{"job_id": "x"}]})", now_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("bad id")));
  EXPECT_THAT(
      refused.Restore(R"({"jobs": [{"state": 3.5}]})", now_),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not parse")));
}

TEST_F(JobManagerTest, OnlyTheNewestEndedJobsAreKeptAndADroppedOneIsNamed) {
  JobManager manager(TwoAgentSpec(),
                     {.checkpoint_root = "/ckpt", .finished_jobs_kept = 2});
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(*manager.Submit(GoodSpec(), now_));
    manager.Tick(Ready(), now_);
    ASSERT_OK(manager.Cancel(ids.back(), now_).status());
  }
  const std::string queued = *manager.Submit(GoodSpec(), now_);
  ASSERT_OK(manager.Cancel(queued, now_).status());
  const std::string running = *manager.Submit(GoodSpec(), now_);
  manager.Tick(Ready(), now_);

  // Five ended: the three oldest went; the job placing stays.
  std::vector<std::string> listed;
  for (const v1::JobStatus& job : manager.List())
    listed.push_back(job.job_id());
  EXPECT_THAT(listed, ElementsAre(ids[3], queued, running));
  EXPECT_THAT(manager.Get(ids[0]),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("job 1 ended and was dropped from the table, "
                                 "which keeps the newest 2 ended jobs")));
  EXPECT_THAT(manager.Get("99"), StatusIs(absl::StatusCode::kNotFound,
                                          HasSubstr("no job \"99\"")));

  // The saved table is bounded too, and a restored one is trimmed.
  std::optional<std::string> table =
      manager.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).value();
  ASSERT_TRUE(table.has_value());
  JobManager smaller(TwoAgentSpec(),
                     {.checkpoint_root = "/ckpt", .finished_jobs_kept = 1});
  ASSERT_OK(smaller.Restore(*table, now_));
  listed.clear();
  for (const v1::JobStatus& job : smaller.List())
    listed.push_back(job.job_id());
  EXPECT_THAT(listed, ElementsAre(queued, running));
  EXPECT_EQ(*smaller.Submit(GoodSpec(), now_), "7");
}

TEST_F(JobManagerTest, SubmissionsBeyondTheUnendedJobsAllowedAreRefused) {
  JobManager manager(TwoAgentSpec(),
                     {.checkpoint_root = "/ckpt", .unended_jobs_max = 2});
  const std::string running = *manager.Submit(GoodSpec(), now_);
  manager.Tick(Ready(), now_);
  const std::string queued = *manager.Submit(GoodSpec(), now_);
  // Asked before a submission's library is stored, too.
  EXPECT_THAT(manager.CheckRoomForAJob(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(manager.Submit(GoodSpec(), now_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("2 jobs are queued or running, the most "
                                 "this coordinator takes")));
  // An ended job makes room.
  ASSERT_OK(manager.Cancel(queued, now_).status());
  EXPECT_OK(manager.Submit(GoodSpec(), now_).status());
}

TEST_F(JobManagerTest, ASubmissionIdMakesOneJobHoweverOftenItIsSubmitted) {
  JobManager manager(TwoAgentSpec(),
                     {.checkpoint_root = "/ckpt", .unended_jobs_max = 1});
  v1::JobSpec spec = GoodSpec();
  spec.set_submission_id("sweep-7:lr_0.1");
  bool repeated = true;
  ASSERT_OK_AND_ASSIGN(const std::string id,
                       manager.Submit(spec, now_, &repeated));
  EXPECT_FALSE(repeated);
  // A retry gets the same job, even with the table full and the job run.
  EXPECT_THAT(manager.Submit(spec, now_, &repeated), IsOkAndHolds(id));
  EXPECT_TRUE(repeated);
  manager.Tick(Ready(), now_);
  EXPECT_THAT(manager.FindSubmission(spec),
              IsOkAndHolds(std::optional<std::string>(id)));
  EXPECT_EQ(manager.List().size(), 1u);

  // The same id with another spec is a mistake, not a retry.
  v1::JobSpec other = spec;
  other.set_steps(spec.steps() + 1);
  EXPECT_THAT(manager.Submit(other, now_),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("submission_id \"sweep-7:lr_0.1\" was given "
                                 "to job 1")));
  // A job without an id is never taken for another.
  EXPECT_THAT(manager.FindSubmission(GoodSpec()),
              IsOkAndHolds(std::optional<std::string>()));

  // A restored coordinator still knows it.
  std::optional<std::string> table =
      manager.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).value();
  ASSERT_TRUE(table.has_value());
  JobManager restored(TwoAgentSpec(), {.checkpoint_root = "/ckpt"});
  ASSERT_OK(restored.Restore(*table, now_));
  EXPECT_THAT(restored.Submit(spec, now_, &repeated), IsOkAndHolds(id));
  EXPECT_TRUE(repeated);
}

TEST_F(JobManagerTest, AWithdrawnSubmissionIsMadeAgainByItsRetry) {
  v1::JobSpec spec = GoodSpec();
  spec.set_submission_id("retry-me");
  ASSERT_OK_AND_ASSIGN(const std::string first, manager_.Submit(spec, now_));
  manager_.Withdraw(first, now_, "not accepted: the table was not saved");
  EXPECT_EQ(State(first), v1::JOB_CANCELLED);
  bool repeated = true;
  ASSERT_OK_AND_ASSIGN(const std::string second,
                       manager_.Submit(spec, now_, &repeated));
  EXPECT_FALSE(repeated);
  EXPECT_NE(second, first);
}

// A table too large to print is not saved as anything less: the save
// fails, and the submission that grew it is withdrawn without its bulk.
TEST_F(JobManagerTest, ATableOverItsBudgetIsNotSavedAndSaysWhy) {
  JobManager manager(TwoAgentSpec(), {.max_table_bytes = 4096});
  v1::JobSpec spec = GoodSpec();
  spec.set_config_json(
      absl::StrCat(R"({"x": ")", std::string(3000, 'a'), R"("})"));
  ASSERT_OK_AND_ASSIGN(const std::string first, manager.Submit(spec, now_));
  ASSERT_OK_AND_ASSIGN(
      std::optional<std::string> table,
      manager.TakeSnapshotIfChanged(now_, absl::ZeroDuration()));
  EXPECT_TRUE(table.has_value());
  ASSERT_OK_AND_ASSIGN(const std::string second, manager.Submit(spec, now_));
  EXPECT_THAT(
      manager.TakeSnapshotIfChanged(now_, absl::ZeroDuration()),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("bytes, over the 4096 one save can hold; the last "
                         "table saved stands until a coordinator keeps fewer "
                         "ended jobs (--finished_jobs_kept)")));
  // Still unsaved: the next call tries again.
  EXPECT_FALSE(manager.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).ok());
  manager.Withdraw(second, now_, "not accepted: the table was not saved");
  ASSERT_OK_AND_ASSIGN(
      table, manager.TakeSnapshotIfChanged(now_, absl::ZeroDuration()));
  ASSERT_TRUE(table.has_value());
  JobManager restored(TwoAgentSpec(), {});
  ASSERT_OK(restored.Restore(*table, now_));
  EXPECT_EQ(restored.Get(first)->state(), v1::JOB_SUBMITTED);
  EXPECT_EQ(restored.Get(second)->state(), v1::JOB_CANCELLED);
}

TEST_F(JobManagerTest, AMalformedSubmissionIdIsRefusedNamingIt) {
  v1::JobSpec spec = GoodSpec();
  spec.set_submission_id("a b");
  EXPECT_THAT(manager_.Submit(spec, now_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("submission_id \"a b\" holds \" \"")));
  spec.set_submission_id(std::string(129, 'x'));
  EXPECT_THAT(manager_.Submit(spec, now_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("submission_id is 129 bytes, over the limit "
                                 "of 128")));
  spec.set_submission_id(std::string(128, 'x'));
  EXPECT_OK(manager_.Submit(spec, now_).status());
}

TEST_F(JobManagerTest, AJobThatEndedLastIsKeptWhateverItsId) {
  JobManager manager(TwoAgentSpec(),
                     {.checkpoint_root = "/ckpt", .finished_jobs_kept = 2});
  const std::string long_job = *manager.Submit(GoodSpec(), now_);
  manager.Tick(Ready(), now_);
  // A sweep queued behind it, then cancelled while it runs.
  std::vector<std::string> sweep;
  for (int i = 0; i < 3; ++i) {
    sweep.push_back(*manager.Submit(GoodSpec(), now_));
    ASSERT_OK(manager.Cancel(sweep.back(), now_).status());
  }
  ASSERT_OK(manager.Cancel(long_job, now_ + absl::Hours(5)).status());
  manager.Tick(Ready(), now_ + absl::Hours(5));
  std::vector<std::string> listed;
  for (const v1::JobStatus& job : manager.List())
    listed.push_back(job.job_id());
  EXPECT_THAT(listed, ElementsAre(long_job, sweep[2]));
}

TEST_F(JobManagerTest, CentralStorageRunsOnOneAgent) {
  v1::JobSpec spec = GoodSpec();
  spec.set_strategy(v1::CENTRAL_STORAGE);
  // Like Mirrored, it takes the first agent of a larger cluster.
  const std::string first = SubmitAndPlace(spec);
  EXPECT_EQ(manager_.Get(first)->placement_size(), 1);
  EXPECT_EQ(manager_.Get(first)->num_replicas(), 2);
  ASSERT_TRUE(manager_.Cancel(first, now_).ok());

  const ClusterSpec one_agent = *ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:3"]}})");
  JobManager cpu(one_agent, {.checkpoint_root = "/ckpt"});
  absl::StatusOr<std::string> id = cpu.Submit(spec, now_);
  ASSERT_TRUE(id.ok()) << id.status();
  cpu.Tick({{.task = {"chief", 0}, .state = v1::READY, .num_devices = 2}},
           now_);
  const v1::AgentJobAssignment assignment =
      cpu.Sync(Report("chief", "", 0, v1::AgentJobReport::IDLE), now_)
          .assignment();
  EXPECT_EQ(assignment.job_id(), *id);
  EXPECT_EQ(assignment.num_nodes(), 1);
  EXPECT_EQ(assignment.num_replicas(), 2);
  EXPECT_EQ(assignment.spec().strategy(), v1::CENTRAL_STORAGE);

  // Two GPUs read one copy in mapped host memory: placed like the CPUs.
  JobManager gpus(one_agent, {.checkpoint_root = "/ckpt"});
  id = gpus.Submit(spec, now_);
  ASSERT_TRUE(id.ok()) << id.status();
  gpus.Tick({{.task = {"chief", 0},
              .state = v1::READY,
              .num_devices = 2,
              .cuda = true,
              .nccl = true}},
            now_);
  const v1::AgentJobAssignment on_gpus =
      gpus.Sync(Report("chief", "", 0, v1::AgentJobReport::IDLE), now_)
          .assignment();
  EXPECT_EQ(on_gpus.job_id(), *id);
  EXPECT_EQ(on_gpus.num_replicas(), 2);
  EXPECT_EQ(on_gpus.communication(), v1::COMMUNICATION_NCCL);
}

TEST_F(JobManagerTest, TheEvaluatorWatchesTheJobUntilItsLastCheckpoint) {
  v1::AgentJobReport idle;
  idle.mutable_task()->set_type("evaluator");
  // A job without an eval function gives the evaluator nothing to do.
  const std::string plain = SubmitAndPlace();
  EXPECT_FALSE(manager_.Sync(idle, now_).has_assignment());
  ASSERT_TRUE(manager_.Cancel(plain, now_).ok());

  v1::JobSpec spec = GoodSpec();
  spec.set_eval_fn("eval");
  spec.set_eval_dataset_fn("eval_data");
  const std::string id = SubmitAndPlace(spec);
  const v1::AgentJobAssignment a = manager_.Sync(idle, now_).assignment();
  EXPECT_EQ(a.job_id(), id);
  EXPECT_TRUE(a.evaluate());
  EXPECT_EQ(a.checkpoint_dir(), manager_.Get(id)->checkpoint_dir());
  EXPECT_EQ(a.spec().eval_fn(), "eval");

  // Its evaluations are filed with the job, once per checkpoint, in order.
  v1::AgentJobReport evaluating = idle;
  evaluating.set_job_id(id);
  for (int64_t step : {10, 5, 5}) {
    v1::Evaluation* e = evaluating.add_evaluations();
    e->set_step(step);
    (*e->mutable_metrics())["accuracy"] = step / 10.0;
  }
  manager_.Sync(evaluating, now_);
  ASSERT_EQ(manager_.Get(id)->evaluations_size(), 2);
  EXPECT_EQ(manager_.Get(id)->evaluations(0).step(), 5);
  EXPECT_EQ(manager_.Get(id)->evaluations(1).step(), 10);

  // The job ends with a checkpoint at 20: the evaluator is still wanted
  // until it has reported that one, and no longer after.
  for (const char* task : {"chief", "worker"}) {
    v1::AgentJobReport done =
        Report(task, id, 1, v1::AgentJobReport::FINISHED, 10);
    done.set_checkpoint_step(20);
    manager_.Sync(done, now_);
  }
  manager_.Tick(Ready(), now_);
  ASSERT_EQ(State(id), v1::JOB_SUCCEEDED);
  EXPECT_EQ(manager_.Sync(idle, now_).assignment().job_id(), id);
  evaluating.clear_evaluations();
  evaluating.add_evaluations()->set_step(20);
  EXPECT_FALSE(manager_.Sync(evaluating, now_).has_assignment());
  EXPECT_EQ(manager_.Get(id)->evaluations_size(), 3);
}

}  // namespace
}  // namespace cohort::coordinator
