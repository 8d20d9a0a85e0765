// The ParameterServer path of the job manager: placement with ps tasks,
// closures handed out and re-queued, ps recovery accounting, and the
// failures that end such a job.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "coordinator/job_manager.h"
#include "coordinator/test_job_spec.h"

namespace cohort::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ClusterSpec PsSpec() {
  return *ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"],
                      "ps": ["127.0.0.1:3", "127.0.0.1:4"]}})");
}

v1::JobSpec PsJob(int64_t steps = 4) {
  v1::JobSpec spec = TestJobSpec(v1::PARAMETER_SERVER, steps);
  spec.mutable_ps()->set_ps_recovery_timeout_ms(5000);
  return spec;
}

std::vector<AgentView> Views(v1::TaskState worker = v1::READY,
                             v1::TaskState ps1 = v1::READY) {
  return {{.task = {"chief", 0}, .state = v1::READY, .num_devices = 2},
          {.task = {"worker", 0}, .state = worker, .num_devices = 2},
          {.task = {"ps", 0}, .state = v1::READY},
          {.task = {"ps", 1}, .state = ps1}};
}

v1::ClosureRequest Request(const std::string& type, int32_t attempt,
                           std::vector<int64_t> completed, int want = 1) {
  v1::ClosureRequest r;
  r.set_job_id("1");
  r.set_attempt(attempt);
  r.mutable_task()->set_type(type);
  r.set_want(want);
  r.set_group(absl::StrCat("job-1/attempt-", attempt, "/", type, ":0/epoch-0"));
  for (int64_t c : completed) {
    v1::ClosureResult* result = r.add_completed();
    result->set_closure(c);
    (*result->mutable_values())["loss"] = 0.1 * static_cast<double>(c);
  }
  return r;
}

class JobManagerPsTest : public ::testing::Test {
 protected:
  JobManager manager_{
      PsSpec(),
      {.placement_timeout = absl::Seconds(30), .cluster_uid = "cluster-7"}};
  absl::Time now_ = absl::FromUnixSeconds(1000);

  std::string Start() {
    absl::StatusOr<std::string> id = manager_.Submit(PsJob(), now_);
    EXPECT_TRUE(id.ok()) << id.status();
    manager_.Tick(Views(), now_);
    return *id;
  }
  v1::JobStatus Job() { return *manager_.Get("1"); }
  // worker:0's runner of attempt 1, on its current assignment, fails.
  void ReportWorkerFailed(const std::string& error) {
    v1::AgentJobReport report;
    report.mutable_task()->set_type("worker");
    report.set_job_id("1");
    report.set_attempt(1);
    const v1::AgentSyncResponse sync = manager_.Sync(report, now_);
    report.set_group(sync.assignment().group());
    report.set_state(v1::AgentJobReport::FAILED);
    report.set_error(error);
    manager_.Sync(report, now_);
  }
  // A coordinator restarted from manager_'s saved table, its tasks as
  // `views` say; null (and a test failure) when there was nothing to save.
  std::unique_ptr<JobManager> RestartCoordinator(
      const std::vector<AgentView>& views = Views()) {
    std::optional<std::string> saved =
        manager_.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).value();
    EXPECT_TRUE(saved.has_value());
    if (!saved.has_value()) return nullptr;
    auto restored = std::make_unique<JobManager>(
        PsSpec(), JobManagerOptions{.placement_timeout = absl::Seconds(30)});
    absl::Status status = restored->Restore(*saved, now_);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return nullptr;
    restored->Tick(views, now_);
    return restored;
  }
};

TEST_F(JobManagerPsTest, PlacesExecutorsOnEveryWorkerWithThePsAddresses) {
  Start();
  v1::AgentJobReport report;
  report.mutable_task()->set_type("worker");
  v1::AgentSyncResponse sync = manager_.Sync(report, now_);
  const v1::AgentJobAssignment& a = sync.assignment();
  EXPECT_EQ(a.job_id(), "1");
  EXPECT_EQ(a.num_nodes(), 2);
  EXPECT_EQ(a.local_replicas(), 1);
  ASSERT_EQ(a.ps_addresses_size(), 2);
  EXPECT_EQ(a.ps_addresses(1), "127.0.0.1:4");
  EXPECT_EQ(a.job_sequence(), 1);
  // Which orders jobs on the ps tasks within this cluster only.
  EXPECT_EQ(a.cluster_uid(), "cluster-7");
}

TEST_F(JobManagerPsTest, AStaleRunnerIsRefusedAndItsClosureRunsAgain) {
  Start();
  ASSERT_EQ(manager_.RunClosures(Request("worker", 1, {}), now_)->closures(0),
            0);
  // The worker looks dead for a tick, then is back: its old runner (old
  // group) may not take work; the current one may, and gets closure 0 again.
  manager_.Tick(Views(v1::DEAD), now_);
  manager_.Tick(Views(), now_);
  EXPECT_FALSE(manager_.RunClosures(Request("worker", 1, {}), now_).ok());
  v1::ClosureRequest current = Request("worker", 1, {});
  current.set_group("job-1/attempt-1/worker:0/epoch-1");
  EXPECT_EQ(manager_.RunClosures(current, now_)->closures(0), 0);
}

TEST_F(JobManagerPsTest, TheNewRunnerOfALostWorkerWaitsUntilItIsReadyAgain) {
  Start();
  ASSERT_EQ(manager_.RunClosures(Request("worker", 1, {}), now_)->closures(0),
            0);
  // The worker's heartbeats stop; its process lives, and its agent starts
  // the runner of the new group before the task is READY again.
  manager_.Tick(Views(v1::DEAD), now_);
  v1::ClosureRequest current = Request("worker", 1, {});
  current.set_group("job-1/attempt-1/worker:0/epoch-1");
  absl::StatusOr<v1::ClosureResponse> early =
      manager_.RunClosures(current, now_);
  ASSERT_TRUE(early.ok()) << early.status();  // not told to end
  EXPECT_TRUE(early->closures().empty());
  EXPECT_GT(early->retry_after_ms(), 0);
  EXPECT_FALSE(early->done());
  // Registered again: the same runner gets the closure it held before.
  manager_.Tick(Views(), now_);
  EXPECT_EQ(manager_.RunClosures(current, now_)->closures(0), 0);
}

TEST_F(JobManagerPsTest, WorkersThatNeverAskForAClosureFailTheAttemptInTime) {
  Start();
  // Both workers alive, their init functions never ending.
  v1::AgentJobReport loading;
  loading.mutable_task()->set_type("worker");
  loading.set_job_id("1");
  loading.set_attempt(1);
  loading.set_group("job-1/attempt-1/worker:0/epoch-0");
  loading.set_state(v1::AgentJobReport::LOADING);
  manager_.Sync(loading, now_);
  manager_.Tick(Views(), now_ + absl::Seconds(20));
  EXPECT_NE(Job().state(), v1::JOB_FAILED);
  manager_.Tick(Views(), now_ + absl::Seconds(31));
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(
      Job().error(),
      AllOf(HasSubstr("the attempt did not start within 30s"),
            HasSubstr("worker:0 (LOADING)"), HasSubstr("chief:0 (no report)")));
}

TEST_F(JobManagerPsTest, WaitsForPsTasksAndNamesThemWhenTheyNeverCome) {
  ASSERT_TRUE(manager_.Submit(PsJob(), now_).ok());
  manager_.Tick(Views(v1::READY, v1::STARTING), now_);
  EXPECT_EQ(Job().state(), v1::JOB_PLACING);
  manager_.Tick(Views(v1::READY, v1::STARTING), now_ + absl::Seconds(31));
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(Job().error(), HasSubstr("ps:1 (STARTING: not registered yet)"));
}

TEST_F(JobManagerPsTest, AWorkerNotReadyInTimeIsLeftOutAndJoinsWhenBack) {
  ASSERT_TRUE(manager_.Submit(PsJob(), now_).ok());
  manager_.Tick(Views(v1::DEAD), now_);
  EXPECT_EQ(Job().state(), v1::JOB_PLACING);
  EXPECT_EQ(Job().waiting_for(),
            "worker:0 (DEAD); the attempt starts without them if they are not "
            "ready within 30s");
  manager_.Tick(Views(v1::DEAD), now_ + absl::Seconds(31));
  ASSERT_NE(Job().state(), v1::JOB_FAILED) << Job().error();
  EXPECT_EQ(Job().waiting_for(), "");
  EXPECT_EQ(Job().num_replicas(), 2);  // the worker's executor joins later
  EXPECT_THAT(Job().events(0).text(),
              HasSubstr("worker:0 lost (not ready when the attempt was "
                        "placed: worker:0 (DEAD))"));
  EXPECT_EQ(manager_.RunClosures(Request("chief", 1, {}), now_)->closures(0),
            0);
  // The worker's runner waits until its task is READY, then takes work.
  v1::ClosureRequest worker = Request("worker", 1, {});
  worker.set_group("job-1/attempt-1/worker:0/epoch-1");
  EXPECT_GT(manager_.RunClosures(worker, now_)->retry_after_ms(), 0);
  manager_.Tick(Views(), now_ + absl::Seconds(32));
  EXPECT_EQ(manager_.RunClosures(worker, now_)->closures(0), 1);
}

TEST_F(JobManagerPsTest, AWorkerPlacedUnseenTakesItsDevicesWhenItJoins) {
  v1::JobSpec spec = PsJob();
  spec.mutable_ps()->set_max_inflight(2);
  ASSERT_TRUE(manager_.Submit(spec, now_).ok());
  std::vector<AgentView> unseen = Views();
  unseen.erase(unseen.begin() + 1);  // worker:0: never registered
  manager_.Tick(unseen, now_);
  manager_.Tick(unseen, now_ + absl::Seconds(31));
  ASSERT_NE(Job().state(), v1::JOB_FAILED) << Job().error();
  v1::AgentJobReport report;
  report.mutable_task()->set_type("worker");
  v1::AgentJobAssignment placed =
      manager_.Sync(report, now_ + absl::Seconds(31)).assignment();
  EXPECT_THAT(placed.device_indices(), ::testing::ElementsAre(0, 0));
  EXPECT_EQ(placed.group(), "job-1/attempt-1/worker:0/epoch-1");
  // It registers with two devices: its executors go on both, under a new
  // group, so that a runner started on the guess ends.
  manager_.Tick(Views(), now_ + absl::Seconds(32));
  const v1::AgentJobAssignment joined =
      manager_.Sync(report, now_ + absl::Seconds(32)).assignment();
  EXPECT_THAT(joined.device_indices(), ::testing::ElementsAre(0, 1));
  EXPECT_EQ(joined.group(), "job-1/attempt-1/worker:0/epoch-2");
  // Lost, and back with the devices it had: only the loss makes a new
  // group.
  manager_.Tick(Views(v1::DEAD), now_ + absl::Seconds(33));
  manager_.Tick(Views(), now_ + absl::Seconds(34));
  EXPECT_EQ(
      manager_.Sync(report, now_ + absl::Seconds(34)).assignment().group(),
      "job-1/attempt-1/worker:0/epoch-3");
}

TEST_F(JobManagerPsTest, ARestartedCoordinatorGoesOnWithoutAWorkerGoneForGood) {
  Start();
  ASSERT_EQ(manager_.RunClosures(Request("chief", 1, {}), now_)->closures(0),
            0);
  ASSERT_EQ(manager_.RunClosures(Request("chief", 1, {0}), now_)->closures(0),
            1);
  // The worker's host is lost while the coordinator restarts.
  std::unique_ptr<JobManager> restored = RestartCoordinator(Views(v1::DEAD));
  ASSERT_NE(restored, nullptr);
  restored->Tick(Views(v1::DEAD), now_ + absl::Seconds(31));
  ASSERT_NE(restored->Get("1")->state(), v1::JOB_FAILED)
      << restored->Get("1")->error();
  // Closure 0 stays completed; the chief alone runs the rest.
  int64_t completed = -1;
  for (int64_t want = 1; want <= 4; ++want) {
    std::vector<int64_t> done;
    if (completed >= 0) done.push_back(completed);
    absl::StatusOr<v1::ClosureResponse> got =
        restored->RunClosures(Request("chief", 2, done), now_);
    ASSERT_TRUE(got.ok()) << got.status();
    if (got->done()) break;
    ASSERT_EQ(got->closures_size(), 1);
    completed = got->closures(0);
    EXPECT_NE(completed, 0);
  }
  restored->Tick(Views(v1::DEAD), now_ + absl::Seconds(32));
  EXPECT_EQ(restored->Get("1")->state(), v1::JOB_SUCCEEDED);
}

TEST_F(JobManagerPsTest, WithNoWorkerReadyInTimeThePlacementFails) {
  ASSERT_TRUE(manager_.Submit(PsJob(), now_).ok());
  std::vector<AgentView> views = Views(v1::DEAD);
  views[0].state = v1::STARTING;
  manager_.Tick(views, now_);
  manager_.Tick(views, now_ + absl::Seconds(31));
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(Job().error(),
              AllOf(HasSubstr("tasks not ready within 30s"),
                    HasSubstr("chief:0 (STARTING: not registered yet)"),
                    HasSubstr("worker:0 (DEAD)")));
}

TEST_F(JobManagerPsTest, ClosuresOfALostWorkerRunAgainAndTheJobCompletes) {
  Start();
  ASSERT_EQ(manager_.RunClosures(Request("chief", 1, {}), now_)->closures(0),
            0);
  ASSERT_EQ(manager_.RunClosures(Request("worker", 1, {}), now_)->closures(0),
            1);
  EXPECT_EQ(Job().state(), v1::JOB_RUNNING);
  // The worker dies holding closure 1.
  manager_.Tick(Views(v1::DEAD), now_);
  EXPECT_EQ(Job().closures_rerun(), 1);
  EXPECT_THAT(Job().events(0).text(), HasSubstr("worker:0 lost"));
  EXPECT_FALSE(manager_.RunClosures(Request("worker", 1, {}), now_).ok());
  EXPECT_EQ(manager_.RunClosures(Request("chief", 1, {0}), now_)->closures(0),
            1);
  EXPECT_EQ(manager_.RunClosures(Request("chief", 1, {1}), now_)->closures(0),
            2);
  EXPECT_EQ(manager_.RunClosures(Request("chief", 1, {2}), now_)->closures(0),
            3);
  EXPECT_TRUE(manager_.RunClosures(Request("chief", 1, {3}), now_)->done());
  manager_.Tick(Views(v1::DEAD), now_);
  EXPECT_EQ(Job().state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(Job().step(), 4);
  EXPECT_NEAR(Job().metrics().at("loss"), 0.3, 1e-12);
}

// A coordinator that stops records a ParameterServer job whose closures
// all completed meanwhile, and fails none whose tasks it stopped.
TEST_F(JobManagerPsTest, SettleFinishedRecordsOnlyAJobWhoseClosuresAllRan) {
  Start();
  ASSERT_EQ(manager_.RunClosures(Request("chief", 1, {}), now_)->closures(0),
            0);
  // Its tasks stopped, past every timeout: nothing is decided but success.
  now_ += absl::Hours(1);
  manager_.SettleFinished(Views(v1::DEAD, v1::DEAD), now_);
  EXPECT_EQ(Job().state(), v1::JOB_RUNNING);
  for (int64_t c : {0, 1, 2}) {
    manager_.RunClosures(Request("chief", 1, {c}), now_).IgnoreError();
  }
  EXPECT_TRUE(manager_.RunClosures(Request("chief", 1, {3}), now_)->done());
  manager_.SettleFinished(Views(v1::DEAD, v1::DEAD), now_);
  EXPECT_EQ(Job().state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(Job().step(), 4);
}

TEST_F(JobManagerPsTest, APsThatComesBackIsReportedWithTheUpdatesItLost) {
  Start();
  manager_.Tick(Views(v1::READY, v1::DEAD), now_);
  EXPECT_THAT(Job().events(0).text(), HasSubstr("ps:1"));
  manager_.Tick(Views(v1::READY, v1::READY), now_ + absl::Seconds(2));
  EXPECT_NE(Job().state(), v1::JOB_FAILED);
  v1::ClosureRequest request = Request("chief", 1, {});
  v1::PsRecovery* recovery = request.add_recoveries();
  recovery->set_ps_index(1);
  recovery->set_incarnation(77);
  recovery->set_restored_updates(100);
  recovery->set_updates_seen(112);
  ASSERT_TRUE(manager_.RunClosures(request, now_).ok());
  // Another worker saw more of the lost updates acknowledged.
  v1::ClosureRequest other = Request("worker", 1, {});
  *other.add_recoveries() = *recovery;
  other.mutable_recoveries(0)->set_updates_seen(115);
  ASSERT_TRUE(manager_.RunClosures(other, now_).ok());
  EXPECT_EQ(Job().ps_updates_lost(), 15);
  EXPECT_THAT(Job().events(1).text(),
              HasSubstr("15 acknowledged update(s) lost"));
}

TEST_F(JobManagerPsTest, UpdatesLostAreCountedOnAcrossACoordinatorRestart) {
  Start();
  ASSERT_TRUE(manager_.RunClosures(Request("worker", 1, {}), now_).ok());
  auto recovery = [](int attempt, int ps, uint64_t incarnation,
                     int64_t restored, int64_t seen) {
    v1::ClosureRequest request = Request("worker", attempt, {});
    v1::PsRecovery* r = request.add_recoveries();
    r->set_ps_index(ps);
    r->set_incarnation(incarnation);
    r->set_restored_updates(restored);
    r->set_updates_seen(seen);
    return request;
  };
  ASSERT_TRUE(manager_.RunClosures(recovery(1, 0, 5, 100, 150), now_).ok());
  EXPECT_EQ(Job().ps_updates_lost(), 50);
  std::unique_ptr<JobManager> restored = RestartCoordinator();
  ASSERT_NE(restored, nullptr);
  // Another ps loses 10.
  ASSERT_TRUE(restored->RunClosures(recovery(2, 1, 9, 20, 30), now_).ok());
  EXPECT_EQ(restored->Get("1")->ps_updates_lost(), 60);
  // A worker reports the first recovery again: counted once, one event.
  const int events = restored->Get("1")->events_size();
  ASSERT_TRUE(restored->RunClosures(recovery(2, 0, 5, 100, 150), now_).ok());
  EXPECT_EQ(restored->Get("1")->ps_updates_lost(), 60);
  EXPECT_EQ(restored->Get("1")->events_size(), events);
}

TEST_F(JobManagerPsTest, APsThatDoesNotComeBackFailsTheJob) {
  Start();
  manager_.Tick(Views(v1::READY, v1::DEAD), now_);
  manager_.Tick(Views(v1::READY, v1::DEAD), now_ + absl::Seconds(6));
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(Job().error(), HasSubstr("ps:1 (DEAD) did not come back"));
}

TEST_F(JobManagerPsTest, AStepErrorFailsTheJobAtOnce) {
  Start();
  v1::AgentJobReport report;
  report.mutable_task()->set_type("worker");
  report.set_job_id("1");
  report.set_attempt(1);
  v1::AgentSyncResponse sync = manager_.Sync(report, now_);
  report.set_group(sync.assignment().group());
  report.set_state(v1::AgentJobReport::FAILED);
  report.set_permanent(true);
  report.set_error("step \"step\" failed at closure 3: bad");
  manager_.Sync(report, now_);
  manager_.Tick(Views(), now_);
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(Job().error(), HasSubstr("failed at closure 3"));
}

TEST_F(JobManagerPsTest, AWorkerThatKeepsFailingWithoutProgressEndsTheJob) {
  Start();
  for (int i = 0; i < 4; ++i) {
    ReportWorkerFailed("ps:0 did not come back within 60s");
    manager_.Tick(Views(), now_);
    if (i < 3) {
      ASSERT_NE(Job().state(), v1::JOB_FAILED) << i;
    }
  }
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(Job().error(),
              HasSubstr("worker:0 failed 4 times in a row without finishing "
                        "a closure: ps:0 did not come back"));
}

// A worker back from being lost that fails is lost again once: its one
// failure counts once towards the limit, however many ticks see it.
TEST_F(JobManagerPsTest, AFailureOfAWorkerBackFromBeingLostCountsOnce) {
  Start();
  manager_.Tick(Views(v1::DEAD), now_);
  for (int i = 0; i < 3; ++i) {
    ReportWorkerFailed("ps:0 did not come back within 60s");
    manager_.Tick(Views(), now_);
    manager_.Tick(Views(), now_);  // nothing new
  }
  EXPECT_NE(Job().state(), v1::JOB_FAILED) << Job().error();
}

TEST_F(JobManagerPsTest, AClusterWithoutPsTasksIsRefusedAtSubmit) {
  JobManager manager(
      *ClusterSpec::FromJson(R"({"cluster": {"worker": ["127.0.0.1:2"]}})"),
      {});
  EXPECT_THAT(manager.Submit(PsJob(), now_).status().message(),
              HasSubstr("needs ps tasks"));
}

// --- Calls scheduled from the client.

v1::JobSpec ScheduledJob(int64_t client_timeout_ms = 0) {
  v1::JobSpec spec = PsJob(0);
  spec.clear_step_fn();
  spec.mutable_ps()->set_schedule_from_client(true);
  spec.mutable_ps()->set_client_timeout_ms(client_timeout_ms);
  return spec;
}

v1::ScheduledCall Call(const std::string& fn, std::vector<double> args = {}) {
  v1::ScheduledCall call;
  call.set_fn(fn);
  call.mutable_args()->Add(args.begin(), args.end());
  return call;
}

TEST_F(JobManagerPsTest, CallsScheduledBeforePlacementRunAndFinishEndsTheJob) {
  ASSERT_TRUE(manager_.Submit(ScheduledJob(), now_).ok());
  absl::StatusOr<std::vector<int64_t>> ids =
      manager_.Schedule("1", {Call("train"), Call("eval", {3})}, now_);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int64_t>{0, 1}));
  manager_.ScheduleSaved("1", true);
  manager_.Tick(Views(), now_);
  ASSERT_EQ(Job().state(), v1::JOB_PLACING);

  absl::StatusOr<v1::ClosureResponse> first =
      manager_.RunClosures(Request("worker", 1, {}), now_);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->calls_size(), 1);
  EXPECT_EQ(first->calls(0).fn(), "train");
  absl::StatusOr<v1::ClosureResponse> second =
      manager_.RunClosures(Request("chief", 1, {}), now_);
  EXPECT_EQ(second->calls(0).args(0), 3);
  ASSERT_TRUE(manager_.RunClosures(Request("worker", 1, {0}, 0), now_).ok());
  ASSERT_TRUE(manager_.RunClosures(Request("chief", 1, {1}, 0), now_).ok());

  v1::GetCallsRequest request;
  request.set_job_id("1");
  request.add_ids(1);
  absl::StatusOr<v1::GetCallsResponse> calls = manager_.GetCalls(request, now_);
  ASSERT_TRUE(calls.ok()) << calls.status();
  EXPECT_EQ(calls->calls(0).state(), v1::CallStatus::DONE);
  EXPECT_DOUBLE_EQ(calls->calls(0).result().values().at("loss"), 0.1);
  EXPECT_EQ(calls->completed(), 2);

  // Every call ran, but the client may schedule more: the job goes on.
  manager_.Tick(Views(), now_);
  EXPECT_EQ(Job().state(), v1::JOB_RUNNING);
  ASSERT_TRUE(manager_.FinishScheduling("1", now_).ok());
  manager_.Tick(Views(), now_);
  EXPECT_EQ(Job().state(), v1::JOB_SUCCEEDED);
  // Results stay readable after the end; new calls are refused.
  EXPECT_EQ(manager_.GetCalls(request, now_)->calls(0).state(),
            v1::CallStatus::DONE);
  EXPECT_EQ(manager_.Schedule("1", {Call("train")}, now_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobManagerPsTest, AnIdleScheduledJobFailsWhenItsClientWentAway) {
  ASSERT_TRUE(manager_.Submit(ScheduledJob(2000), now_).ok());
  manager_.Tick(Views(), now_);
  manager_.Tick(Views(), now_ + absl::Seconds(1));
  ASSERT_NE(Job().state(), v1::JOB_FAILED);
  // A call from the client counts as a sign of life.
  v1::GetCallsRequest poll;
  poll.set_job_id("1");
  ASSERT_TRUE(manager_.GetCalls(poll, now_ + absl::Seconds(1)).ok());
  manager_.Tick(Views(), now_ + absl::Seconds(2.5));
  ASSERT_NE(Job().state(), v1::JOB_FAILED);
  manager_.Tick(Views(), now_ + absl::Seconds(3.5));
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(Job().error(), HasSubstr("went away"));
}

TEST_F(JobManagerPsTest, ScheduleFromClientSpecsAreChecked) {
  v1::JobSpec spec = ScheduledJob();
  spec.set_steps(10);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("steps must be 0 with ps.schedule_from_client"));
  spec = ScheduledJob();
  spec.set_strategy(v1::MULTI_WORKER_MIRRORED);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("ps.schedule_from_client is for strategy"));
  spec = ScheduledJob(-1);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("ps.client_timeout_ms"));
  spec = PsJob();
  spec.set_logical_devices_per_replica(2);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("a ParameterServer replica runs on one device"));
  // Without the option, steps and step_fn are still required.
  spec = ScheduledJob();
  spec.mutable_ps()->set_schedule_from_client(false);
  EXPECT_THAT(manager_.Submit(spec, now_).status().message(),
              HasSubstr("step_fn is required"));
}

TEST_F(JobManagerPsTest, CallsAreRefusedWhereTheyDoNotBelong) {
  Start();  // runs its own steps
  EXPECT_EQ(manager_.Schedule("1", {Call("f")}, now_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_.Schedule("9", {Call("f")}, now_).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(manager_.Submit(ScheduledJob(), now_).ok());
  v1::GetCallsRequest request;
  request.set_job_id("2");
  request.add_ids(0);
  absl::StatusOr<v1::GetCallsResponse> calls = manager_.GetCalls(request, now_);
  EXPECT_EQ(calls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(calls.status().message(), HasSubstr("never scheduled"));
  // Asking for more calls than the scheduler answers for (pending or kept)
  // is refused before any reply is built.
  request.clear_ids();
  const int most =
      ClosureScheduler::kMaxPendingCalls + ClosureScheduler::kKeptResults;
  for (int i = 0; i <= most; ++i) request.add_ids(0);
  calls = manager_.GetCalls(request, now_);
  EXPECT_EQ(calls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      calls.status().message(),
      HasSubstr(absl::StrCat("asked for ", most + 1,
                             " calls at once, over the ", most, " allowed")));
}

TEST_F(JobManagerPsTest, ACompletedClosureIsInTheNextSaveAndNotRunAgain) {
  Start();
  ASSERT_EQ(manager_.RunClosures(Request("chief", 1, {}), now_)->closures(0),
            0);
  ASSERT_TRUE(
      manager_.TakeSnapshotIfChanged(now_, absl::ZeroDuration()).value());
  ASSERT_TRUE(manager_.RunClosures(Request("chief", 1, {0}, 0), now_).ok());
  // Well within the period at which mere progress is saved.
  now_ += absl::Milliseconds(100);
  std::optional<std::string> saved =
      manager_.TakeSnapshotIfChanged(now_, absl::Seconds(2)).value();
  ASSERT_TRUE(saved.has_value());

  JobManager restored(PsSpec(), {.placement_timeout = absl::Seconds(30)});
  ASSERT_TRUE(restored.Restore(*saved, now_).ok());
  EXPECT_EQ(restored.Get("1")->step(), 1);
  restored.Tick(Views(), now_);
  absl::StatusOr<v1::ClosureResponse> next =
      restored.RunClosures(Request("chief", 2, {}), now_);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->closures_size(), 1);
  EXPECT_EQ(next->closures(0), 1);
}

TEST_F(JobManagerPsTest, AnEndedJobDropsTheArgsOfTheCallsItNeverRan) {
  ASSERT_TRUE(manager_.Submit(ScheduledJob(), now_).ok());
  ASSERT_TRUE(manager_.Schedule("1", {Call("a", {1, 2, 3})}, now_).ok());
  manager_.ScheduleSaved("1", true);
  ASSERT_EQ(Job().pending_calls_size(), 1);
  ASSERT_TRUE(manager_.Cancel("1", now_).ok());
  EXPECT_EQ(Job().pending_calls_size(), 0);
  EXPECT_EQ(Job().calls_scheduled(), 1);
}

TEST_F(JobManagerPsTest, ScheduledCallsSurviveACoordinatorRestart) {
  ASSERT_TRUE(manager_.Submit(ScheduledJob(), now_).ok());
  manager_.Tick(Views(), now_);
  ASSERT_TRUE(manager_.Schedule("1", {Call("a"), Call("b", {2})}, now_).ok());
  manager_.ScheduleSaved("1", true);
  ASSERT_TRUE(manager_.RunClosures(Request("worker", 1, {}), now_).ok());
  ASSERT_TRUE(manager_.RunClosures(Request("worker", 1, {0}, 0), now_).ok());
  std::unique_ptr<JobManager> restored = RestartCoordinator();
  ASSERT_NE(restored, nullptr);
  absl::StatusOr<v1::ClosureResponse> next =
      restored->RunClosures(Request("worker", 2, {}), now_);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->calls_size(), 1);
  EXPECT_EQ(next->calls(0).fn(), "b");
  EXPECT_EQ(next->calls(0).id(), 1);
}

}  // namespace
}  // namespace cohort::coordinator
