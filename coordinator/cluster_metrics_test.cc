#include "coordinator/cluster_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::TaskStatus Task(const std::string& type, int index, v1::TaskState state,
                    int64_t heartbeat_age_ms, const std::string& metrics) {
  v1::TaskStatus t;
  t.mutable_task()->set_type(type);
  t.mutable_task()->set_index(index);
  t.set_state(state);
  t.set_restart_count(2);
  t.set_last_heartbeat_age_ms(heartbeat_age_ms);
  t.set_metrics_address(metrics);
  return t;
}

std::string Render(const std::vector<v1::TaskStatus>& tasks,
                   const std::vector<v1::JobStatus>& jobs) {
  MetricRegistry registry;
  ScopedCollector collector(&registry, [&](MetricWriter& out) {
    WriteClusterMetrics(tasks, jobs, out);
  });
  return registry.Render();
}

TEST(ClusterMetricsTest, TasksHaveOneStateEachAHeartbeatAgeAndRestarts) {
  const std::string text = Render({Task("worker", 0, v1::DEAD, 7500, ""),
                                   Task("ps", 0, v1::STARTING, -1, "")},
                                  {});
  EXPECT_THAT(
      text,
      HasSubstr("cohort_task_state{task=\"worker:0\",state=\"dead\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("cohort_task_state{task=\"worker:0\",state=\"ready\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr("cohort_task_heartbeat_age_seconds{task=\"worker:0\"} 7.5\n"));
  // Never heartbeated: no age at all rather than a made-up one.
  EXPECT_THAT(
      text, Not(HasSubstr("cohort_task_heartbeat_age_seconds{task=\"ps:0\"}")));
  EXPECT_THAT(text, HasSubstr("cohort_task_restarts_total{task=\"ps:0\"} 2\n"));
}

TEST(ClusterMetricsTest, JobsAreCountedByStateWithTheirStepRateAndMetrics) {
  v1::JobStatus job;
  job.set_job_id("job-4");
  job.mutable_spec()->set_name("mlp");
  job.set_state(v1::JOB_RUNNING);
  job.set_step(120);
  job.set_steps_per_second(41.5);
  (*job.mutable_metrics())["loss"] = 0.25;
  const std::string text = Render({}, {job});
  EXPECT_THAT(text, HasSubstr("cohort_jobs{state=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("cohort_jobs{state=\"failed\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("cohort_job_step{job=\"job-4\",name=\"mlp\"} 120\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "cohort_job_steps_per_second{job=\"job-4\",name=\"mlp\"} 41.5\n"));
  EXPECT_THAT(text, HasSubstr("cohort_job_state{job=\"job-4\",name=\"mlp\","
                              "state=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("cohort_job_metric{job=\"job-4\",name=\"mlp\","
                              "metric=\"loss\"} 0.25\n"));
}

TEST(ClusterMetricsTest,
     ServiceDiscoveryListsTheCoordinatorAndTasksWithEndpoints) {
  const nlohmann::json groups = nlohmann::json::parse(ServiceDiscoveryJson(
      "10.0.0.1:9464", {Task("worker", 1, v1::READY, 0, "10.0.0.2:9464"),
                        Task("ps", 0, v1::READY, 0, "")}));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]["targets"][0], "10.0.0.1:9464");
  EXPECT_EQ(groups[0]["labels"]["task"], "coordinator");
  EXPECT_EQ(groups[1]["targets"][0], "10.0.0.2:9464");
  EXPECT_EQ(groups[1]["labels"]["task"], "worker:1");
}

}  // namespace
}  // namespace cohort::coordinator
