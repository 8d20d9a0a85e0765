// cohort-bench end to end: ranks as processes, correctness checked, the
// peers' CSV format.

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(BenchE2eTest, CsvLinesFollowThePeersFormatAndPassTheCheck) {
  CommandResult result =
      RunCommand({Binary("cohort-bench"), "allreduce", "--ranks=3",
                  "--sizes=4K,100K", "--min_time=20ms", "--format=csv"},
                 absl::Seconds(60));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
    if (!absl::StartsWith(line, "RESULT,")) continue;
    ++lines;
    const std::vector<std::string> fields = absl::StrSplit(line, ',');
    ASSERT_EQ(fields.size(), 11) << line;
    EXPECT_EQ(fields[1], "cohort");
    EXPECT_EQ(fields[2], "3");
    EXPECT_EQ(fields[10], "OK") << line;
  }
  EXPECT_EQ(lines, 2) << result.output;
}

// nccl-tests' algbw: an all-gather delivers every rank's buffer to each, so
// its bytes are the per-rank size times the ranks; busbw is (n-1)/n of that.
TEST(BenchE2eTest, TheOtherCollectivesPassTheCheckWithNcclTestsBandwidths) {
  for (const char* collective : {"allgather", "broadcast"}) {
    CommandResult result =
        RunCommand({Binary("cohort-bench"), collective, "--ranks=3",
                    "--sizes=100K", "--min_time=20ms"},
                   absl::Seconds(60));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    int rows = 0;
    for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
      const std::vector<std::string> f =
          absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (f.size() != 9 || f[0] != "100K") continue;
      ++rows;
      EXPECT_EQ(f[8], "OK") << line;
      double time_us = 0, algbw = 0, busbw = 0;
      ASSERT_TRUE(absl::SimpleAtod(f[4], &time_us)) << line;
      ASSERT_TRUE(absl::SimpleAtod(f[5], &algbw)) << line;
      ASSERT_TRUE(absl::SimpleAtod(f[6], &busbw)) << line;
      const bool gather = std::string(collective) == "allgather";
      const double bytes = 100 * 1024 * (gather ? 3 : 1);
      EXPECT_NEAR(algbw, bytes / time_us / 1e3, 0.02 * algbw) << line;
      EXPECT_NEAR(busbw, algbw * (gather ? 2.0 / 3 : 1.0), 0.02 * algbw)
          << line;
    }
    EXPECT_EQ(rows, 1) << collective << "\n" << result.output;
  }
}

TEST(BenchE2eTest, BadArgumentsAreOneLineErrors) {
  CommandResult result =
      RunCommand({Binary("cohort-bench"), "allreduce", "--sizes=4Q"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("--sizes"));
  result = RunCommand({Binary("cohort-bench"), "alltoall"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("unknown collective \"alltoall\""));
  // The peers' tools read every RESULT line as an all-reduce.
  result = RunCommand({Binary("cohort-bench"), "allgather", "--format=csv"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("allgather has only the table"));
}

}  // namespace
}  // namespace cohort::testing
