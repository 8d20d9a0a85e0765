#include "coordinator/library_store.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "tests/testing/status_matchers.h"

namespace cohort::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class LibraryStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/library_store_test_", getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Makes the library's last use `age` ago.
  void Age(const std::string& digest, absl::Duration age) {
    AgeFile(absl::StrCat(dir_, "/", digest, ".so"), age);
  }
  static void AgeFile(const std::string& path, absl::Duration age) {
    const timespec when = absl::ToTimespec(absl::Now() - age);
    const timespec times[2] = {when, when};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
  }
  std::string dir_;
};

TEST_F(LibraryStoreTest, AnUploadRepairsAStoredFileDamagedOnDisk) {
  LibraryStore store(dir_);
  const std::string bytes = "the step library";
  const std::string digest = Sha256Hex(bytes);
  ASSERT_OK(store.Put(digest, bytes));
  const std::string path = absl::StrCat(dir_, "/", digest, ".so");
  ASSERT_OK(WriteFileAtomically(path, "the step librarX"));
  ASSERT_OK(store.Put(digest, bytes));
  EXPECT_EQ(ReadFile(path).value_or(""), bytes);
  // Truncated, too.
  ASSERT_OK(WriteFileAtomically(path, ""));
  ASSERT_OK(store.Put(digest, bytes));
  EXPECT_EQ(*store.Get(digest), bytes);
}

TEST_F(LibraryStoreTest, ALibraryNoJobUsesGoesOnceItsGraceHasPassed) {
  LibraryStore store(dir_);
  const std::string used = Sha256Hex("used");
  const std::string unused = Sha256Hex("unused");
  const std::string recent = Sha256Hex("recent");
  ASSERT_OK(store.Put(used, "used"));
  ASSERT_OK(store.Put(unused, "unused"));
  ASSERT_OK(store.Put(recent, "recent"));
  Age(used, absl::Hours(2));
  Age(unused, absl::Hours(2));
  Age(recent, absl::Minutes(10));

  const std::vector<std::string> removed =
      store.RemoveUnused({used}, absl::Now(), absl::Hours(1));
  EXPECT_THAT(removed, ElementsAre(HasSubstr(unused)));
  EXPECT_TRUE(store.Get(used).ok());
  EXPECT_FALSE(store.Get(unused).ok());
  EXPECT_TRUE(store.Get(recent).ok());  // within its grace
}

TEST_F(LibraryStoreTest, AnUploadOrASubmissionNamingALibraryIsAUse) {
  LibraryStore store(dir_);
  const std::string uploaded = Sha256Hex("uploaded");
  const std::string named = Sha256Hex("named");
  ASSERT_OK(store.Put(uploaded, "uploaded"));
  ASSERT_OK(store.Put(named, "named"));
  Age(uploaded, absl::Hours(2));
  Age(named, absl::Hours(2));
  ASSERT_OK(store.Put(uploaded, "uploaded"));  // stored already
  EXPECT_TRUE(store.Use(named));
  EXPECT_FALSE(store.Use(Sha256Hex("never stored")));
  EXPECT_THAT(store.RemoveUnused({}, absl::Now(), absl::Hours(1)), IsEmpty());
  EXPECT_TRUE(store.Get(uploaded).ok());
  EXPECT_TRUE(store.Get(named).ok());
}

// A write a crash cut short leaves its temp file, which nothing finishes:
// it goes once past the grace, even of a library in use; a recent one may
// be a write in progress.
TEST_F(LibraryStoreTest, ThePartialWritesOfACrashGoOnceOld) {
  LibraryStore store(dir_);
  const std::string used = Sha256Hex("used");
  ASSERT_OK(store.Put(used, "used"));
  const std::string stale = absl::StrCat(dir_, "/", used, ".so.tmp.123.0");
  const std::string fresh = absl::StrCat(dir_, "/", used, ".so.tmp.123.1");
  ASSERT_OK(WriteFileAtomically(stale, "us"));
  ASSERT_OK(WriteFileAtomically(fresh, "u"));
  AgeFile(stale, absl::Hours(2));
  EXPECT_THAT(store.RemoveUnused({used}, absl::Now(), absl::Hours(1)),
              ElementsAre(HasSubstr("a partial write")));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(fresh));
  EXPECT_TRUE(store.Get(used).ok());
}

TEST_F(LibraryStoreTest, OtherFilesInTheDirectoryAreLeftAlone) {
  LibraryStore store(dir_);
  const std::string old = Sha256Hex("old");
  ASSERT_OK(store.Put(old, "old"));
  Age(old, absl::Hours(2));
  const std::string other = dir_ + "/notes.txt";
  ASSERT_OK(WriteFileAtomically(other, "mine"));
  EXPECT_THAT(store.RemoveUnused({}, absl::Now(), absl::Hours(1)),
              ElementsAre(HasSubstr(old)));
  EXPECT_TRUE(std::filesystem::exists(other));
}

}  // namespace
}  // namespace cohort::coordinator
