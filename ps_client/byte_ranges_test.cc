#include "ps_client/byte_ranges.h"

#include "gtest/gtest.h"

namespace cohort::ps {
namespace {

TEST(ByteRangesTest, TouchingRangesMergeAndOverlapsAreSeen) {
  ByteRanges ranges;
  EXPECT_FALSE(ranges.Overlaps(0, 4));
  ranges.Add(4, 8);
  ranges.Add(12, 16);
  EXPECT_EQ(ranges.pieces(), 2u);
  EXPECT_TRUE(ranges.Overlaps(7, 9));
  EXPECT_TRUE(ranges.Overlaps(0, 5));
  EXPECT_TRUE(ranges.Overlaps(5, 6));
  EXPECT_TRUE(ranges.Overlaps(0, 20));
  EXPECT_FALSE(ranges.Overlaps(8, 12));
  EXPECT_FALSE(ranges.Overlaps(9, 9));  // empty
  EXPECT_TRUE(ranges.Touches(8, 12));
  EXPECT_TRUE(ranges.Touches(0, 4));
  EXPECT_FALSE(ranges.Touches(9, 11));
  ranges.Add(8, 12);  // joins both neighbours
  EXPECT_EQ(ranges.pieces(), 1u);
  EXPECT_TRUE(ranges.Overlaps(15, 16));
  EXPECT_FALSE(ranges.Overlaps(16, 17));
  ranges.Add(0, 4);
  EXPECT_EQ(ranges.pieces(), 1u);
  EXPECT_TRUE(ranges.Overlaps(0, 1));
}

}  // namespace
}  // namespace cohort::ps
