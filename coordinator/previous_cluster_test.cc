#include "coordinator/previous_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/subprocess.h"
#include "tests/testing/status_matchers.h"

namespace cohort::coordinator {
namespace {

using ::cohort::testing::IsOkAndHolds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

TEST(PreviousClusterTest, ATaskOfACoordinatorOnAWildcardAddressIsStopped) {
  // Regression: the coordinator saves the address it listens on
  // (0.0.0.0:PORT) and its tasks dial 127.0.0.1:PORT, so none was found.
  // A stand-in task: a process whose command line is a task's. Port 1 on
  // loopback serves nothing.
  absl::StatusOr<Subprocess> task = Subprocess::Spawn(
      {.argv = {"/usr/bin/perl", "-e", "sleep 60", "--", "--task=worker:0",
                "--coordinator=127.0.0.1:1"}});
  ASSERT_TRUE(task.ok()) << task.status();
  // Spawn may return before the child has exec'd.
  const absl::Time limit = absl::Now() + absl::Seconds(10);
  while (!absl::StrContains(ProcessCommandLine(task->pid()), "--task=") &&
         absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  PersistedState saved;
  saved.coordinator_address = "0.0.0.0:1";
  saved.tasks.push_back(
      {.task = TaskId{"worker", 0}, .launched = true, .pid = task->pid()});
  const std::string dir = ::testing::TempDir() + "/previous-wildcard";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(SetAsidePreviousCluster(dir, saved, absl::Seconds(10)).ok());
  const std::optional<ExitStatus> ended = task->Wait(absl::Seconds(10));
  ASSERT_TRUE(ended.has_value()) << "the task was left running";
  task->Stop(absl::ZeroDuration());
  EXPECT_TRUE(ended->signaled());
  EXPECT_EQ(ended->term_signal(), SIGTERM);
}

TEST(PreviousClusterTest, TheLastThreeClustersAreKept) {
  // Regression: each new cluster deleted the one before the last,
  // checkpoints and all, without a word.
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "previous-kept";
  std::filesystem::remove_all(dir);
  for (int cluster = 1; cluster <= 4; ++cluster) {
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(
        WriteFileAtomically((dir / "jobs.json").string(),
                            absl::StrCat(R"({"next_id": ")", cluster, R"("})"))
            .ok());
    ASSERT_TRUE(
        SetAsidePreviousCluster(dir.string(), {}, absl::Seconds(1)).ok());
  }
  EXPECT_THAT(ReadFile((dir / "previous/jobs.json").string()),
              IsOkAndHolds(HasSubstr(R"("4")")));
  EXPECT_THAT(ReadFile((dir / "previous.1/jobs.json").string()),
              IsOkAndHolds(HasSubstr(R"("3")")));
  EXPECT_THAT(ReadFile((dir / "previous.2/jobs.json").string()),
              IsOkAndHolds(HasSubstr(R"("2")")));
  EXPECT_FALSE(std::filesystem::exists(dir / "previous.3"));
}

}  // namespace
}  // namespace cohort::coordinator
