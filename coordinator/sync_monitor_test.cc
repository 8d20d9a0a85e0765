#include "coordinator/sync_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;
using Kind = SyncVerdict::Kind;

class SyncMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.status.set_state(v1::JOB_PLACING);
    job_.status.set_step(40);
    job_.placing_since = now_;
    job_.assignments["chief:0"] = {};
    job_.assignments["worker:0"] = {};
    agents_ = {{.task = {"chief", 0}, .state = v1::READY, .num_devices = 1},
               {.task = {"worker", 0}, .state = v1::READY, .num_devices = 1}};
  }

  void Report(const std::string& type, v1::AgentJobReport::State state,
              const std::string& error = "", bool permanent = false) {
    v1::AgentJobReport& r = job_.reports[type + ":0"];
    r.mutable_task()->set_type(type);
    r.set_state(state);
    r.set_error(error);
    r.set_permanent(permanent);
  }

  SyncVerdict Judge() {
    return JudgeSyncAttempt(job_, agents_, now_, options_);
  }

  // worker:0 was stopped (SIGTERM) once every replica had checkpointed, as
  // the chief's report says; past the failure grace.
  void WorkerLeftAfterACheckpoint() {
    Report("chief", v1::AgentJobReport::FAILED,
           "the agent of replica 1 is shutting down; every replica "
           "checkpointed step 40 first");
    job_.reports["chief:0"].set_agent_left(true);
    agents_[1].state = v1::DEAD;
    agents_[1].last_error = "deregistered: signal 15";
    job_.failing_since = now_ - absl::Seconds(1);
  }

  Job job_;
  std::vector<AgentView> agents_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  JobManagerOptions options_{.failure_grace = absl::Seconds(1),
                             .placement_timeout = absl::Seconds(30)};
};

TEST_F(SyncMonitorTest, StartsRunsAndSucceeds) {
  Report("chief", v1::AgentJobReport::RUNNING);
  EXPECT_EQ(Judge().kind, Kind::kStarting);
  Report("worker", v1::AgentJobReport::LOADING);
  EXPECT_EQ(Judge().kind, Kind::kStarting);
  Report("worker", v1::AgentJobReport::RUNNING);
  EXPECT_EQ(Judge().kind, Kind::kRunning);
  Report("chief", v1::AgentJobReport::FINISHED);
  EXPECT_EQ(Judge().kind, Kind::kRunning);
  Report("worker", v1::AgentJobReport::FINISHED);
  EXPECT_EQ(Judge().kind, Kind::kSucceeded);
}

TEST_F(SyncMonitorTest, AnAttemptThatNeverStartsEndsNamingTheSlowAgents) {
  Report("chief", v1::AgentJobReport::RUNNING);
  Report("worker", v1::AgentJobReport::LOADING);
  now_ += absl::Seconds(31);
  const SyncVerdict v = Judge();
  EXPECT_EQ(v.kind, Kind::kEnd);
  EXPECT_FALSE(v.permanent);
  EXPECT_THAT(v.cause, HasSubstr("no replicas running on worker:0"));
}

TEST_F(SyncMonitorTest, ADeadTaskIsNamedAfterTheGraceNotItsPeersBrokenRing) {
  Report("chief", v1::AgentJobReport::FAILED, "all-reduce: peer gone");
  agents_[1].state = v1::DEAD;
  agents_[1].last_error = "killed by signal 9";
  SyncVerdict v = Judge();
  EXPECT_EQ(v.kind, Kind::kFailing);
  EXPECT_THAT(v.abort,
              HasSubstr("worker:0 is gone (DEAD: killed by signal 9)"));

  job_.failing_since = now_;
  now_ += absl::Seconds(1);
  v = Judge();
  EXPECT_EQ(v.kind, Kind::kEnd);
  EXPECT_FALSE(v.permanent);
  EXPECT_EQ(v.cause, "worker:0 died: killed by signal 9 (at step 40)");

  agents_[1].last_error = "deregistered: signal 15";
  v = Judge();
  EXPECT_EQ(v.cause, "worker:0 stopped: deregistered: signal 15 (at step 40)");
  EXPECT_FALSE(v.agent_left) << "no report said the replicas checkpointed";
}

TEST_F(SyncMonitorTest,
       AnAgentThatLeftAfterACheckpointEndsTheAttemptUncounted) {
  WorkerLeftAfterACheckpoint();
  const SyncVerdict v = Judge();
  EXPECT_EQ(v.kind, Kind::kEnd);
  EXPECT_FALSE(v.permanent);
  EXPECT_TRUE(v.agent_left);
  EXPECT_EQ(v.cause, "worker:0 stopped: deregistered: signal 15 (at step 40)");
}

TEST_F(SyncMonitorTest, ACrashBesideAnAgentThatLeftSpendsTheRestart) {
  job_.assignments["worker:1"] = {};
  agents_.push_back({.task = {"worker", 1}, .state = v1::READY});
  WorkerLeftAfterACheckpoint();
  ASSERT_TRUE(Judge().agent_left);

  agents_[2].state = v1::DEAD;
  agents_[2].last_error = "killed by signal 9";
  EXPECT_FALSE(Judge().agent_left) << "worker:1 crashed";

  agents_[2].state = v1::READY;
  v1::AgentJobReport& crashed = job_.reports["worker:1"];
  crashed.set_state(v1::AgentJobReport::FAILED);
  crashed.set_error("step returned: out of memory");
  EXPECT_FALSE(Judge().agent_left) << "worker:1's step failed";
}

TEST_F(SyncMonitorTest, APermanentFailureEndsAtOnce) {
  Report("chief", v1::AgentJobReport::RUNNING);
  Report("worker", v1::AgentJobReport::FAILED, "step returned: bad shape",
         /*permanent=*/true);
  const SyncVerdict v = Judge();
  EXPECT_EQ(v.kind, Kind::kEnd);
  EXPECT_TRUE(v.permanent);
  EXPECT_EQ(v.cause, "worker:0: step returned: bad shape");
}

}  // namespace
}  // namespace cohort::coordinator
