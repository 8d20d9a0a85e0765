#include "common/file_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir =
      std::filesystem::path(absl::StrCat(::testing::TempDir(), "/file_util_",
                                         name, "_", getpid()))
          .lexically_normal()
          .string();
  std::filesystem::remove_all(dir);
  return dir;
}

mode_t ModeOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

// The deployments' umask decides (0027 under systemd: a group may read the
// task logs).
TEST(FileUtilTest, NewDirectoriesTakeTheUmasksMode) {
  const std::string root = FreshDir("umask");
  const mode_t old_umask = umask(027);
  const absl::Status made = MakeDirectories(root + "/a/b/");
  umask(old_umask);
  ASSERT_TRUE(made.ok()) << made;
  EXPECT_EQ(ModeOf(root), 0750u);
  EXPECT_EQ(ModeOf(root + "/a"), 0750u);
  EXPECT_EQ(ModeOf(root + "/a/b"), 0750u);

  // One that exists is left as it is.
  ASSERT_EQ(chmod((root + "/a").c_str(), 0700), 0);
  ASSERT_TRUE(MakeDirectories(root + "/a/c").ok());
  EXPECT_EQ(ModeOf(root + "/a"), 0700u);
}

TEST(FileUtilTest, AFileInTheWayIsNamed) {
  const std::string root = FreshDir("in_the_way");
  ASSERT_TRUE(MakeDirectories(root).ok());
  ASSERT_TRUE(WriteFileAtomically(root + "/file", "x").ok());
  const absl::Status made = MakeDirectories(root + "/file/sub");
  EXPECT_EQ(made.code(), absl::StatusCode::kFailedPrecondition) << made;
  EXPECT_THAT(made.message(),
              HasSubstr(root + "/file exists and is not a directory"));
}

// A caller tells a failure that every retry meets from one that may pass
// by its code, so a write's code is its errno's, not INTERNAL.
TEST(FileUtilTest, AWriteFailureCarriesItsErrnosCode) {
  const std::string root = FreshDir("errno");
  const absl::Status missing =
      WriteFileAtomically(root + "/no_such_dir/file", "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), HasSubstr(root + "/no_such_dir/file"));

  ASSERT_TRUE(MakeDirectories(root).ok());
  ASSERT_TRUE(WriteFileAtomically(root + "/file", "x").ok());
  const absl::Status not_dir = WriteFileAtomically(root + "/file/x", "x");
  EXPECT_EQ(not_dir.code(), absl::StatusCode::kFailedPrecondition) << not_dir;
}

// procfs answers a directory's fsync with EINVAL, as some FUSE and network
// filesystems do: not the caller's bad argument, which a checkpoint writer
// would take for the model's own error.
TEST(FileUtilTest, AFilesystemThatCannotSyncDirectoriesIsNoError) {
  EXPECT_TRUE(SyncDirectory("/proc/self").ok()) << SyncDirectory("/proc/self");
  const std::string root = FreshDir("sync");
  const absl::Status missing = SyncDirectory(root);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), HasSubstr(root));
  ASSERT_TRUE(MakeDirectories(root).ok());
  EXPECT_TRUE(SyncDirectory(root).ok());
}

}  // namespace
}  // namespace cohort
