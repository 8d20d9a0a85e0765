#include "worker_agent/ps_job_runner.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "ps_server/in_process_ps.h"
#include "tests/testing/silent_listener.h"
#include "tests/testing/wait.h"
#include "worker_agent/closure_only_coordinator.h"

namespace cohort::agent {
namespace {

// Hands out the closures it was given, one answer per call, then "done".
class ClosureScript final : public ClosureOnlyCoordinator {
 public:
  explicit ClosureScript(std::deque<v1::ClosureResponse> answers)
      : answers_(std::move(answers)) {}

  absl::StatusOr<v1::ClosureResponse> RunClosures(
      const v1::ClosureRequest& request, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    completed_ += request.completed_size();
    if (answers_.empty()) {
      v1::ClosureResponse done;
      done.set_done(true);
      return done;
    }
    v1::ClosureResponse answer = answers_.front();
    answers_.pop_front();
    return answer;
  }

  int completed() const {
    absl::MutexLock lock(&mu_);
    return completed_;
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<v1::ClosureResponse> answers_ ABSL_GUARDED_BY(mu_);
  int completed_ ABSL_GUARDED_BY(mu_) = 0;
};

// Has nothing to hand out yet, and never says the job is done.
class NothingYet final : public ClosureOnlyCoordinator {
 public:
  absl::StatusOr<v1::ClosureResponse> RunClosures(const v1::ClosureRequest&,
                                                  absl::Duration) override {
    v1::ClosureResponse wait;
    wait.set_retry_after_ms(10);
    return wait;
  }
};

v1::ClosureResponse Closures(std::initializer_list<int64_t> ids) {
  v1::ClosureResponse response;
  for (int64_t id : ids) response.add_closures(id);
  return response;
}

class PsJobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ps::InProcessPs>> started =
        ps::InProcessPs::Start({});
    ASSERT_TRUE(started.ok()) << started.status();
    ps_ = *std::move(started);
  }

  // A ParameterServer job of `steps` closures of the test library's
  // empty_step, one executor on one CPU device.
  RunnerOptions Options(std::shared_ptr<JobControlClient> coordinator,
                        int64_t steps) {
    RunnerOptions options;
    v1::AgentJobAssignment& a = options.assignment;
    a.set_job_id("1");
    a.set_attempt(1);
    a.set_group("1/attempt1");
    a.set_node(0);
    a.set_num_nodes(1);
    a.set_local_replicas(1);
    a.set_num_replicas(1);
    a.add_device_indices(0);
    a.add_ps_addresses(ps_->address());
    a.set_job_sequence(1);
    a.mutable_spec()->set_strategy(v1::PARAMETER_SERVER);
    a.mutable_spec()->set_step_fn("empty_step");
    a.mutable_spec()->set_steps(steps);
    a.mutable_spec()->set_global_batch_size(1);
    options.devices = {Device{}};
    options.fetch_library = [](const std::string&) {
      return absl::StatusOr<std::string>(COHORT_TEST_STEPS_LIBRARY);
    };
    options.job_control = std::move(coordinator);
    options.task = TaskId{"worker", 0};
    return options;
  }

  // The runner's report once it is done, within a deadline.
  static v1::AgentJobReport Finish(PsJobRunner& runner) {
    runner.Start();
    EXPECT_TRUE(cohort::testing::WaitUntil([&] { return runner.done(); },
                                           absl::Seconds(30)));
    return runner.Report();
  }

  std::unique_ptr<ps::InProcessPs> ps_;
};

TEST_F(PsJobRunnerTest, RunsTheClosuresItIsHandedAndFinishes) {
  auto coordinator = std::make_shared<ClosureScript>(
      std::deque<v1::ClosureResponse>{Closures({0}), Closures({1, 2})});
  PsJobRunner runner(Options(coordinator, 10));
  const v1::AgentJobReport report = Finish(runner);
  EXPECT_EQ(report.state(), v1::AgentJobReport::FINISHED) << report.error();
  EXPECT_EQ(report.step(), 3);
  EXPECT_EQ(coordinator->completed(), 3);
}

TEST_F(PsJobRunnerTest, AClosureOutsideTheJobsStepsFailsNamingIt) {
  // Regression: a closure id from the coordinator reached the input
  // pipeline's invariant check and aborted the agent.
  for (const int64_t bad : {int64_t{-1}, int64_t{10}, int64_t{1} << 62}) {
    auto coordinator = std::make_shared<ClosureScript>(
        std::deque<v1::ClosureResponse>{Closures({bad})});
    PsJobRunner runner(Options(coordinator, 10));
    const v1::AgentJobReport report = Finish(runner);
    EXPECT_EQ(report.state(), v1::AgentJobReport::FAILED);
    EXPECT_TRUE(report.permanent());
    EXPECT_NE(report.error().find(absl::StrCat("closure ", bad)),
              std::string::npos)
        << report.error();
    EXPECT_NE(report.error().find("[0, 10)"), std::string::npos)
        << report.error();
  }
}

TEST_F(PsJobRunnerTest, AnAttemptAbortedFromOutsideFailsWithTheReason) {
  // Regression: the executors left their loop as if the job were done, and
  // the attempt was reported FINISHED.
  PsJobRunner runner(Options(std::make_shared<NothingYet>(), 10));
  runner.Start();
  ASSERT_TRUE(cohort::testing::WaitUntil(
      [&] { return runner.Report().state() == v1::AgentJobReport::RUNNING; },
      absl::Seconds(30)));
  runner.Abort(absl::UnavailableError("the coordinator ended attempt 1"));
  ASSERT_TRUE(cohort::testing::WaitUntil([&] { return runner.done(); },
                                         absl::Seconds(30)));
  const v1::AgentJobReport report = runner.Report();
  EXPECT_EQ(report.state(), v1::AgentJobReport::FAILED);
  EXPECT_EQ(report.error(), "the coordinator ended attempt 1");
  EXPECT_FALSE(report.permanent());
}

TEST_F(PsJobRunnerTest, AnAbortWhileAPsCallWaitsFailsWithTheAbortsReason) {
  // Regression: the executor's ps call ended as "ps client shut down", and
  // that, not the abort's reason, became the attempt's error.
  // A ps task that accepts connections and never answers.
  const cohort::testing::SilentListener silent;
  ASSERT_TRUE(silent.ok());
  RunnerOptions options = Options(std::make_shared<NothingYet>(), 10);
  options.assignment.set_ps_addresses(0, silent.address());
  options.assignment.mutable_spec()->set_init_fn("colocated_init");
  PsJobRunner runner(std::move(options));
  runner.Start();
  // The executor declares its variables: a call now waits on the ps.
  pollfd connected{.fd = silent.fd(), .events = POLLIN};
  ASSERT_EQ(poll(&connected, 1, /*timeout_ms=*/30000), 1);
  runner.Abort(absl::UnavailableError("the coordinator ended attempt 1"));
  ASSERT_TRUE(cohort::testing::WaitUntil([&] { return runner.done(); },
                                         absl::Seconds(30)));
  const v1::AgentJobReport report = runner.Report();
  EXPECT_EQ(report.state(), v1::AgentJobReport::FAILED);
  EXPECT_EQ(report.error(), "the coordinator ended attempt 1");
}

TEST_F(PsJobRunnerTest, ADatasetThatThrowsFailsTheAttemptNotTheAgent) {
  // Regression: the exception reached the top of the executor's thread,
  // and std::terminate ended the agent with no word of why.
  auto coordinator = std::make_shared<ClosureScript>(
      std::deque<v1::ClosureResponse>{Closures({0})});
  RunnerOptions options = Options(coordinator, 10);
  options.assignment.mutable_spec()->set_dataset_fn("torn_data");
  PsJobRunner runner(std::move(options));
  const v1::AgentJobReport report = Finish(runner);
  EXPECT_EQ(report.state(), v1::AgentJobReport::FAILED);
  EXPECT_NE(report.error().find("threw an exception: record "),
            std::string::npos)
      << report.error();
  EXPECT_NE(report.error().find("is torn"), std::string::npos)
      << report.error();
}

TEST_F(PsJobRunnerTest, AnAssignmentWithoutDevicesFailsNamingIt) {
  // Regression: each executor took its device modulo a count of zero.
  RunnerOptions options = Options(std::make_shared<NothingYet>(), 10);
  options.assignment.clear_device_indices();
  PsJobRunner runner(std::move(options));
  const v1::AgentJobReport report = Finish(runner);
  EXPECT_EQ(report.state(), v1::AgentJobReport::FAILED);
  EXPECT_TRUE(report.permanent());
  EXPECT_EQ(report.error(), "the assignment has no devices for the executors");
}

}  // namespace
}  // namespace cohort::agent
