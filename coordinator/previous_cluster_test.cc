#include "coordinator/previous_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::coordinator {
namespace {

using ::testing::ElementsAre;

TEST(PreviousClusterTest, UnfinishedJobsNamesEachJobThatHadNotEnded) {
  const std::string table = R"({
    "next_id": "4",
    "jobs": [
      {"job_id": "1", "state": "JOB_SUCCEEDED", "step": "10",
       "spec": {"steps": "10"}},
      {"job_id": "2", "state": "JOB_RUNNING", "step": "670431",
       "spec": {"steps": "2000000"}},
      {"job_id": "3", "state": "JOB_SUBMITTED", "spec": {"steps": "5"}}
    ]})";
  EXPECT_THAT(UnfinishedJobs(table),
              ElementsAre("job 2 (JOB_RUNNING, step 670431 of 2000000)",
                          "job 3 (JOB_SUBMITTED, step 0 of 5)"));
  EXPECT_TRUE(UnfinishedJobs("").empty());
  EXPECT_TRUE(UnfinishedJobs("{not json").empty());
}

}  // namespace
}  // namespace cohort::coordinator
