// `cohortctl up` and `cohortctl status`, as a user runs them.

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CohortctlE2eTest, UpWithNoArgumentsBringsUpTheDefaultCluster) {
  ScratchDir dir;
  // `up` keeps its state under $XDG_STATE_HOME; `status` finds it there.
  const std::map<std::string, std::string> env = {
      {"XDG_STATE_HOME", dir.path()}};
  const std::string port_file = dir.path() + "/cohort/local/coordinator.port";
  absl::StatusOr<Subprocess> up =
      Subprocess::Spawn({.argv = {Binary("cohortctl"), "up"},
                         .env = env,
                         .output_file = dir.path() + "/up.log"});
  ASSERT_TRUE(up.ok()) << up.status();
  const absl::Time started = absl::Now();

  nlohmann::json status;
  const bool ready = WaitUntil(
      [&] {
        if (!ReadFile(port_file).ok()) return false;
        CommandResult result = RunCommand(
            {Binary("cohortctl"), "status", "--json"}, absl::Seconds(5), env);
        if (result.exit_code != 0) return false;
        status = nlohmann::json::parse(result.output, nullptr, false);
        if (status.is_discarded() || status["tasks"].size() != 3) return false;
        for (const auto& task : status["tasks"]) {
          if (task["state"] != "READY") return false;
        }
        return true;
      },
      absl::Seconds(10), absl::Milliseconds(200));
  ASSERT_TRUE(ready) << status.dump(2)
                     << ReadFile(dir.path() + "/up.log").value_or("");
  EXPECT_LE(absl::Now() - started, absl::Seconds(10));

  std::vector<int64_t> pids;
  std::map<std::string, int> types;
  for (const auto& task : status["tasks"]) {
    ++types[task["type"].get<std::string>()];
    EXPECT_GT(task["pid"].get<int64_t>(), 0) << task.dump();
    pids.push_back(task["pid"].get<int64_t>());
    if (task["type"] != "ps") {
      // The default local cluster's agents have 2 CPU devices each.
      ASSERT_EQ(task["devices"].size(), 2) << task.dump();
      EXPECT_EQ(task["devices"][0]["name"], "cpu:0");
      EXPECT_EQ(task["devices"][1]["name"], "cpu:1");
    }
  }
  EXPECT_EQ(types, (std::map<std::string, int>{
                       {"chief", 1}, {"worker", 1}, {"ps", 1}}));

  // The table is readable and agrees.
  CommandResult table =
      RunCommand({Binary("cohortctl"), "status"}, absl::Seconds(5), env);
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("3/3 tasks ready"));
  EXPECT_THAT(table.output, HasSubstr("worker:0"));

  // ^C (here SIGTERM) stops everything.
  up->Signal(SIGTERM);
  std::optional<ExitStatus> exit = up->Wait(absl::Seconds(15));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->exited() && exit->exit_code() == 0) << exit->ToString();
  EXPECT_TRUE(WaitAllGone(pids, absl::Seconds(5)));
  KillIfAlive(pids);
}

TEST(CohortctlE2eTest, StatusAgainstNothingIsAClearError) {
  ScratchDir dir;
  CommandResult result =
      RunCommand({Binary("cohortctl"), "--coordinator=127.0.0.1:1",
                  "--timeout=1s", "status"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(result.output, HasSubstr("127.0.0.1:1"));

  result = RunCommand({Binary("cohortctl"), "frobnicate"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("unknown command \"frobnicate\""));
}

TEST(CohortctlE2eTest, EveryBinaryHasHelp) {
  for (const char* binary :
       {"cohortctl", "cohort-coordinator", "cohort-agent", "cohort-ps"}) {
    CommandResult result = RunCommand({Binary(binary), "--help"});
    EXPECT_EQ(result.exit_code, 0) << binary << result.output;
    EXPECT_THAT(result.output, HasSubstr("--auth_token_file")) << binary;
    EXPECT_THAT(result.output, Not(HasSubstr("--flagfile"))) << binary;
  }
}

}  // namespace
}  // namespace cohort::testing
