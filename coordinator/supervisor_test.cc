#include "coordinator/supervisor.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/names.h"
#include "gtest/gtest.h"
#include "tests/testing/wait.h"

namespace cohort::coordinator {
namespace {

const TaskId kWorker{"worker", 0};

std::string FreshDir(const std::string& name) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/supervisor_", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

ClusterManager OneWorkerCluster() {
  absl::StatusOr<ClusterSpec> spec =
      ClusterSpec::FromJson(R"({"cluster": {"worker": ["127.0.0.1:1"]}})");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return ClusterManager(*std::move(spec), ClusterManagerOptions{}, absl::Now());
}

// A child that writes `ready` once its SIGTERM handler is in place, so that
// the test signals it only then. On SIGTERM it runs `on_term`.
LaunchPlan ShellTask(const std::string& dir, const std::string& on_term) {
  LaunchPlan plan{.task = kWorker};
  plan.spawn.argv = {"/bin/sh", "-c",
                     absl::StrCat("trap '", on_term, "' TERM; touch ", dir,
                                  "/ready; while :; do sleep 0.05; done")};
  return plan;
}

int64_t StartAndWaitReady(Supervisor& supervisor, const std::string& dir) {
  supervisor.Start();
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return std::filesystem::exists(dir + "/ready"); },
      absl::Seconds(30)))
      << "the child never installed its SIGTERM handler";
  return supervisor.Tasks().at(0).pid;
}

// An agent stopping with a running job checkpoints before it exits; the
// default grace must leave it the time that takes (several seconds for a
// large model), not SIGKILL it part-way as a 3 s grace once did.
TEST(SupervisorTest, TheDefaultGraceLetsAChildSpendSecondsOnItsWayOut) {
  const std::string dir = FreshDir("grace");
  ClusterManager manager = OneWorkerCluster();
  Supervisor supervisor(&manager, SupervisorOptions{.restart = false});
  supervisor.Add(ShellTask(
      dir, absl::StrCat("sleep 4; echo saved > ", dir, "/checkpoint; exit 0")));
  const int64_t pid = StartAndWaitReady(supervisor, dir);
  ASSERT_GT(pid, 0);

  supervisor.Shutdown();
  absl::StatusOr<std::string> checkpoint = ReadFile(dir + "/checkpoint");
  ASSERT_TRUE(checkpoint.ok())
      << "the child was killed before it finished: " << checkpoint.status();
  EXPECT_EQ(*checkpoint, "saved\n");
  EXPECT_FALSE(ProcessAlive(static_cast<pid_t>(pid)));
}

TEST(SupervisorTest, AChildThatOutlastsTheGraceIsKilled) {
  const std::string dir = FreshDir("kill");
  ClusterManager manager = OneWorkerCluster();
  Supervisor supervisor(
      &manager, SupervisorOptions{.restart = false,
                                  .stop_grace = absl::Milliseconds(300)});
  supervisor.Add(ShellTask(dir, ""));  // ignores SIGTERM
  const int64_t pid = StartAndWaitReady(supervisor, dir);
  ASSERT_GT(pid, 0);

  const absl::Time start = absl::Now();
  supervisor.Shutdown();
  EXPECT_FALSE(ProcessAlive(static_cast<pid_t>(pid)));
  // Well under the default grace: the option, not the default, applied.
  EXPECT_LT(absl::Now() - start, kDefaultStopGrace - absl::Seconds(5));
}

TEST(SupervisorTest, AnExitReasonQuotingBadUtf8IsMadeFitToSend) {
  const std::string dir = FreshDir("utf8");
  ClusterManager manager = OneWorkerCluster();
  Supervisor supervisor(&manager, SupervisorOptions{.restart = false});
  LaunchPlan plan{.task = kWorker};
  // A step's error, logged as it came: bytes that are not UTF-8.
  plan.spawn.argv = {"/bin/sh", "-c",
                     "printf 'E [agent] record header \\377\\376 ends\\n'; "
                     "exit 3"};
  plan.spawn.output_file = dir + "/worker.log";
  supervisor.Add(std::move(plan));
  supervisor.Start();
  std::string last_error;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        last_error = manager.Snapshot(absl::Now()).at(0).last_error();
        return !last_error.empty();
      },
      absl::Seconds(30)))
      << "the exit was never recorded";
  supervisor.Shutdown();
  EXPECT_TRUE(IsValidUtf8(last_error)) << last_error;
  EXPECT_NE(last_error.find("its last log line: E [agent] record header"),
            std::string::npos)
      << last_error;
  EXPECT_NE(last_error.find(" ends"), std::string::npos) << last_error;
}

}  // namespace
}  // namespace cohort::coordinator
