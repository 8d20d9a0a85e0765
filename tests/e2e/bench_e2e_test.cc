// cohort-bench end to end: ranks as processes, correctness checked, the
// peers' CSV format.

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(BenchE2eTest, CsvLinesFollowThePeersFormatAndPassTheCheck) {
  for (const char* collective : {"allreduce", "allgather", "broadcast"}) {
    CommandResult result =
        RunCommand({Binary("cohort-bench"), collective, "--ranks=3",
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
    EXPECT_EQ(lines, 2) << collective << "\n" << result.output;
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
}

}  // namespace
}  // namespace cohort::testing
