#include "coordinator/job_tasks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::coordinator {
namespace {

using ::testing::ElementsAre;

ClusterSpec Spec() {
  return *ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:4"]}})");
}

TEST(JobTasksTest, ThePlacementsTasksInRankOrder) {
  v1::JobStatus job;
  job.mutable_spec()->set_strategy(v1::PARAMETER_SERVER);
  job.add_placement("worker:0 (1 executor)");
  job.add_placement("chief:0 (2 executors)");
  job.add_placement("ps:0 (variables)");
  EXPECT_THAT(
      JobTasks(job, Spec(), /*with_ps=*/true),
      ElementsAre(TaskId{"worker", 0}, TaskId{"chief", 0}, TaskId{"ps", 0}));
  // Without the ps tasks: a trace is asked of agents only.
  EXPECT_THAT(JobTasks(job, Spec(), /*with_ps=*/false),
              ElementsAre(TaskId{"worker", 0}, TaskId{"chief", 0}));
}

TEST(JobTasksTest, BeforePlacementEveryAgentOfTheSpec) {
  v1::JobStatus job;
  EXPECT_THAT(JobTasks(job, Spec(), /*with_ps=*/true),
              ElementsAre(TaskId{"chief", 0}, TaskId{"worker", 0}));
}

TEST(JobTasksTest, TasksTheSpecNoLongerHasAreLeftOut) {
  // Placed before the coordinator restarted with a spec without worker:1.
  v1::JobStatus job;
  job.add_placement("chief:0 (2 replicas)");
  job.add_placement("worker:1 (2 replicas)");
  EXPECT_THAT(JobTasks(job, Spec(), /*with_ps=*/false),
              ElementsAre(TaskId{"chief", 0}));
}

}  // namespace
}  // namespace cohort::coordinator
