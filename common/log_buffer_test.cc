#include "common/log_buffer.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace cohort {
namespace {

std::vector<int64_t> Seqs(const std::vector<LogEntry>& entries) {
  std::vector<int64_t> seqs;
  for (const LogEntry& e : entries) seqs.push_back(e.seq);
  return seqs;
}

TEST(LogBufferTest, ReadsLinesAfterASeqInOrder) {
  LogBuffer buffer(1 << 20);
  for (int i = 0; i < 5; ++i) {
    buffer.Append(absl::UnixEpoch(), "line " + std::to_string(i));
  }
  int64_t dropped = -1;
  std::vector<LogEntry> read = buffer.Read(2, 100, &dropped);
  EXPECT_EQ(Seqs(read), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(read[0].text, "line 2");
  EXPECT_EQ(dropped, 0);
  EXPECT_EQ(Seqs(buffer.Read(0, 2, &dropped)), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(buffer.Read(5, 100, &dropped).empty());
  EXPECT_EQ(buffer.last_seq(), 5);
  // A seq from a request, past any held, reads nothing and misses nothing.
  EXPECT_TRUE(
      buffer.Read(std::numeric_limits<int64_t>::max(), 100, &dropped).empty());
  EXPECT_EQ(dropped, 0);
}

TEST(LogBufferTest, OldLinesLeaveFirstAndAReaderLearnsHowManyItMissed) {
  const std::string text(100, 'x');
  // Room for about three entries.
  LogBuffer buffer(3 * (text.size() + sizeof(LogEntry)));
  for (int i = 0; i < 10; ++i) buffer.Append(absl::UnixEpoch(), text);
  int64_t dropped = 0;
  std::vector<LogEntry> read = buffer.Read(0, 100, &dropped);
  EXPECT_EQ(Seqs(read), (std::vector<int64_t>{8, 9, 10}));
  EXPECT_EQ(dropped, 7);
  // A reader that had seen up to 8 missed nothing.
  EXPECT_EQ(Seqs(buffer.Read(8, 100, &dropped)),
            (std::vector<int64_t>{9, 10}));
  EXPECT_EQ(dropped, 0);
}

TEST(LogBufferTest, TailStartGivesTheLastLines) {
  LogBuffer buffer(1 << 20);
  EXPECT_EQ(buffer.TailStart(3), 0);
  for (int i = 0; i < 5; ++i) buffer.Append(absl::UnixEpoch(), "l");
  int64_t dropped = 0;
  EXPECT_EQ(Seqs(buffer.Read(buffer.TailStart(2), 100, &dropped)),
            (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(Seqs(buffer.Read(buffer.TailStart(9), 100, &dropped)),
            (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(dropped, 0);
}

TEST(LogBufferTest, ALineLongerThanTheBudgetIsStillKept) {
  LogBuffer buffer(10);
  buffer.Append(absl::UnixEpoch(), std::string(100, 'y'));
  int64_t dropped = 0;
  EXPECT_EQ(buffer.Read(0, 10, &dropped).size(), 1u);
}

}  // namespace
}  // namespace cohort
