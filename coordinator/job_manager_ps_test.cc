// The ParameterServer path of the job manager: placement with ps tasks,
// closures handed out and re-queued, ps recovery accounting, and the
// failures that end such a job.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/job_manager.h"

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr char kDigest[] =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

ClusterSpec PsSpec() {
  return *ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"],
                      "ps": ["127.0.0.1:3", "127.0.0.1:4"]}})");
}

v1::JobSpec PsJob(int64_t steps = 4) {
  v1::JobSpec spec;
  spec.set_strategy(v1::PARAMETER_SERVER);
  spec.set_library_digest(kDigest);
  spec.set_step_fn("step");
  spec.set_steps(steps);
  spec.set_global_batch_size(8);
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
  JobManager manager_{PsSpec(), {.placement_timeout = absl::Seconds(30)}};
  absl::Time now_ = absl::FromUnixSeconds(1000);

  std::string Start() {
    absl::StatusOr<std::string> id = manager_.Submit(PsJob(), now_);
    EXPECT_TRUE(id.ok()) << id.status();
    manager_.Tick(Views(), now_);
    return *id;
  }
  v1::JobStatus Job() { return *manager_.Get("1"); }
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

TEST_F(JobManagerPsTest, WaitsForPsTasksAndNamesThemWhenTheyNeverCome) {
  ASSERT_TRUE(manager_.Submit(PsJob(), now_).ok());
  manager_.Tick(Views(v1::READY, v1::STARTING), now_);
  EXPECT_EQ(Job().state(), v1::JOB_PLACING);
  manager_.Tick(Views(v1::READY, v1::STARTING), now_ + absl::Seconds(31));
  EXPECT_EQ(Job().state(), v1::JOB_FAILED);
  EXPECT_THAT(Job().error(), HasSubstr("ps:1 (STARTING)"));
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
    v1::AgentJobReport report;
    report.mutable_task()->set_type("worker");
    report.set_job_id("1");
    report.set_attempt(1);
    const v1::AgentSyncResponse sync = manager_.Sync(report, now_);
    report.set_group(sync.assignment().group());
    report.set_state(v1::AgentJobReport::FAILED);
    report.set_error("ps:0 did not come back within 60s");
    manager_.Sync(report, now_);
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

TEST_F(JobManagerPsTest, AClusterWithoutPsTasksIsRefusedAtSubmit) {
  JobManager manager(
      *ClusterSpec::FromJson(R"({"cluster": {"worker": ["127.0.0.1:2"]}})"),
      {});
  EXPECT_THAT(manager.Submit(PsJob(), now_).status().message(),
              HasSubstr("needs ps tasks"));
}

}  // namespace
}  // namespace cohort::coordinator
