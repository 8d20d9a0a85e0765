#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

TEST(SubprocessTest, ReportsExitCode) {
  absl::StatusOr<Subprocess> child =
      Subprocess::Spawn({.argv = {"/bin/sh", "-c", "exit 3"}});
  ASSERT_TRUE(child.ok()) << child.status();
  std::optional<ExitStatus> status = child->Wait(absl::Seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->exited());
  EXPECT_EQ(status->exit_code(), 3);
  EXPECT_EQ(status->ToString(), "exited with code 3");
}

TEST(SubprocessTest, StopKillsAChildThatIgnoresSigterm) {
  const std::string armed = absl::StrCat(::testing::TempDir(), "/trap_armed");
  std::remove(armed.c_str());
  absl::StatusOr<Subprocess> child = Subprocess::Spawn(
      {.argv = {"/bin/sh", "-c",
                absl::StrCat("trap '' TERM; touch ", armed,
                             "; while :; do sleep 0.05; done")}});
  ASSERT_TRUE(child.ok()) << child.status();
  // SIGTERM must arrive after the trap is set, or the shell dies of it.
  ASSERT_TRUE(cohort::testing::WaitUntil([&] { return ReadFile(armed).ok(); },
                                         absl::Seconds(10),
                                         absl::Milliseconds(10)));
  EXPECT_TRUE(ProcessAlive(child->pid()));
  const ExitStatus status = child->Stop(absl::Milliseconds(300));
  EXPECT_TRUE(status.signaled());
  EXPECT_EQ(status.term_signal(), SIGKILL);
  EXPECT_THAT(status.ToString(), HasSubstr("killed by signal 9"));
  EXPECT_FALSE(ProcessAlive(child->pid()));
}

TEST(SubprocessTest, EnvironmentAndOutputFile) {
  const std::string out =
      absl::StrCat(::testing::TempDir(), "/subprocess_out.txt");
  std::remove(out.c_str());
  absl::StatusOr<Subprocess> child = Subprocess::Spawn(
      {.argv = {"/bin/sh", "-c", "echo \"value=$COHORT_TEST_VAR\""},
       .env = {{"COHORT_TEST_VAR", "42"}},
       .output_file = out});
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(child->Wait(absl::Seconds(10)).has_value());
  absl::StatusOr<std::string> text = ReadFile(out);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "value=42\n");
}

TEST(SubprocessTest, OnlyTheStandardDescriptorsPassToTheChild) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/subprocess_inherit.txt");
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  absl::StatusOr<Subprocess> child = Subprocess::Spawn(
      {.argv = {"/bin/sh", "-c",
                absl::StrCat("test -e /proc/self/fd/", fd,
                             " && exit 7; "
                             "test -e /proc/self/fd/2 || exit 8")}});
  ASSERT_TRUE(child.ok()) << child.status();
  const std::optional<ExitStatus> status = child->Wait(absl::Seconds(30));
  close(fd);
  std::remove(path.c_str());
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->exit_code(), 0) << status->ToString();
}

TEST(SubprocessTest, MissingProgramIsAClearError) {
  absl::StatusOr<Subprocess> child =
      Subprocess::Spawn({.argv = {"/nonexistent/cohort-agent"}});
  ASSERT_FALSE(child.ok());
  EXPECT_THAT(std::string(child.status().message()),
              HasSubstr("/nonexistent/cohort-agent: not an executable file"));
}

}  // namespace
}  // namespace cohort
