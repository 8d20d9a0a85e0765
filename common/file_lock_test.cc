#include "common/file_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

TEST(FileLockTest, OneHolderAtATimeAndTheOthersAreToldWho) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/file_lock_test_", getpid());
  {
    absl::StatusOr<FileLock> held = FileLock::Acquire(path);
    ASSERT_TRUE(held.ok()) << held.status();
    // flock is per open file: a second open, even in this process, is
    // refused as another process's would be.
    absl::StatusOr<FileLock> second = FileLock::Acquire(path);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.status().message(),
                HasSubstr(absl::StrCat("(pid ", getpid(), ")")));
    // A child does not inherit it: once the holder is gone, it is free even
    // while the child runs.
    absl::StatusOr<Subprocess> child =
        Subprocess::Spawn({.argv = {"/bin/sleep", "30"}});
    ASSERT_TRUE(child.ok()) << child.status();
    held = absl::FailedPreconditionError("released");
    EXPECT_TRUE(FileLock::Acquire(path).ok());
    child->Stop(absl::Seconds(5));
  }
  EXPECT_EQ(FileLock::Acquire("/nonexistent-dir/lock").status().code(),
            absl::StatusCode::kNotFound);
  unlink(path.c_str());
}

}  // namespace
}  // namespace cohort
