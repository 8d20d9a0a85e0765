#include "worker_agent/sync_job_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/wait.h"
#include "worker_agent/closure_only_coordinator.h"

namespace cohort::agent {
namespace {

using ::testing::HasSubstr;

class NoCoordinator final : public ClosureOnlyCoordinator {
 public:
  absl::StatusOr<v1::ClosureResponse> RunClosures(const v1::ClosureRequest&,
                                                  absl::Duration) override {
    return absl::UnimplementedError("not in these tests");
  }
};

class SyncJobRunnerTest : public ::testing::TestWithParam<int> {};

TEST_P(SyncJobRunnerTest, AnAssignmentOfNoReplicasFailsNamingIt) {
  // Regression: the runner was sized by the count before Prepare checked
  // it: a report indexed an empty vector, a negative count threw.
  RunnerOptions options;
  v1::AgentJobAssignment& a = options.assignment;
  a.set_job_id("1");
  a.set_attempt(1);
  a.set_group("1/attempt1");
  a.set_num_nodes(1);
  a.set_local_replicas(GetParam());
  a.set_num_replicas(1);
  a.mutable_spec()->set_strategy(v1::MULTI_WORKER_MIRRORED);
  a.mutable_spec()->set_steps(1);
  options.devices = {Device{}};
  options.job_control = std::make_shared<NoCoordinator>();
  options.task = TaskId{"worker", 0};
  SyncJobRunner runner(std::move(options));
  EXPECT_EQ(runner.Report().step(), 0);
  runner.Start();
  ASSERT_TRUE(cohort::testing::WaitUntil([&] { return runner.done(); },
                                         absl::Seconds(30)));
  const v1::AgentJobReport report = runner.Report();
  EXPECT_EQ(report.state(), v1::AgentJobReport::FAILED);
  EXPECT_THAT(report.error(), HasSubstr(absl::StrCat(GetParam(), " replicas")));
}

INSTANTIATE_TEST_SUITE_P(Counts, SyncJobRunnerTest, ::testing::Values(0, -1));

}  // namespace
}  // namespace cohort::agent
