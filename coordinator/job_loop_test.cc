#include "coordinator/job_loop.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "coordinator/test_job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;

class JobLoopTest : public ::testing::Test {
 protected:
  JobLoopTest() {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/jobloopXXXXXX");
    dir_ = mkdtemp(pattern.data());
    table_ = dir_ + "/jobs.json";
  }
  ~JobLoopTest() override { std::filesystem::remove_all(dir_); }

  JobManager jobs_{
      *ClusterSpec::FromJson(R"({"cluster": {"chief": ["127.0.0.1:1"]}})"), {}};
  std::string dir_;
  std::string table_;
};

TEST_F(JobLoopTest, NoTableIsAnEmptyOne) {
  JobLoop loop(nullptr, &jobs_, nullptr, table_);
  EXPECT_OK(loop.Restore());
  EXPECT_TRUE(jobs_.List().empty());
}

// A table that is there but cannot be read is not taken for none: the
// first save would replace it, and every job it held, with an empty one.
TEST_F(JobLoopTest, ATableThatCannotBeReadIsNotTakenForNone) {
  // A link to a volume not mounted yet.
  ASSERT_EQ(symlink((dir_ + "/unmounted/jobs.json").c_str(), table_.c_str()),
            0);
  JobLoop loop(nullptr, &jobs_, nullptr, table_);
  EXPECT_THAT(loop.Restore(), testing::StatusIs(absl::StatusCode::kDataLoss,
                                                HasSubstr(table_)));
}

TEST_F(JobLoopTest, ASubmissionIsSavedAndRestored) {
  ASSERT_OK_AND_ASSIGN(
      const std::string id,
      jobs_.Submit(TestJobSpec(v1::MULTI_WORKER_MIRRORED, 10), absl::Now()));
  JobLoop loop(nullptr, &jobs_, nullptr, table_);
  ASSERT_OK(loop.SaveNow());

  JobManager restored(
      *ClusterSpec::FromJson(R"({"cluster": {"chief": ["127.0.0.1:1"]}})"), {});
  JobLoop restoring(nullptr, &restored, nullptr, table_);
  ASSERT_OK(restoring.Restore());
  EXPECT_EQ(restored.Get(id)->state(), v1::JOB_SUBMITTED);
}

}  // namespace
}  // namespace cohort::coordinator
