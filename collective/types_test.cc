#include "collective/types.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/cord.h"
#include "collective/reduce.h"
#include "gtest/gtest.h"

namespace cohort::collective {
namespace {

TEST(HalfTest, KnownValuesConvertExactly) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);            // overflow: infinity
  EXPECT_EQ(FloatToHalf(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x0001), 5.9604645e-08f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = HalfToFloat(half);
    if (std::isnan(value)) continue;
    EXPECT_EQ(FloatToHalf(value), half) << "bits " << bits;
  }
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next half: ties go to even (1).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 0x3c01 and 0x3c02: ties go to 0x3c02.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(BFloat16Test, KnownValuesAndRounding) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBFloat16(-3.0f), 0xc040);
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(ReduceTest, KernelsComputeEachOp) {
  int32_t a[3] = {1, -5, 7}, b[3] = {4, 2, -9};
  int32_t sum[3] = {1, -5, 7};
  Accumulate(sum, b, 3, DType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(sum[0], 5);
  EXPECT_EQ(sum[1], -3);
  EXPECT_EQ(sum[2], -2);
  int32_t lo[3] = {1, -5, 7};
  Accumulate(lo, b, 3, DType::kInt32, ReduceOp::kMin);
  EXPECT_EQ(lo[0], 1);
  EXPECT_EQ(lo[1], -5);
  EXPECT_EQ(lo[2], -9);
  Accumulate(a, b, 3, DType::kInt32, ReduceOp::kMax);
  EXPECT_EQ(a[0], 4);
  EXPECT_EQ(a[1], 2);
  EXPECT_EQ(a[2], 7);
  DivideForMean(sum, 3, DType::kInt32, 2);
  EXPECT_EQ(sum[0], 2);
  EXPECT_EQ(sum[1], -1);
  EXPECT_EQ(sum[2], -1);

  uint16_t h[2] = {FloatToHalf(1.5f), FloatToHalf(-2.0f)};
  const uint16_t g[2] = {FloatToHalf(2.5f), FloatToHalf(0.5f)};
  Accumulate(h, g, 2, DType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(HalfToFloat(h[0]), 4.0f);
  EXPECT_EQ(HalfToFloat(h[1]), -1.5f);
  DivideForMean(h, 2, DType::kFloat16, 4);
  EXPECT_EQ(HalfToFloat(h[0]), 1.0f);
  EXPECT_EQ(HalfToFloat(h[1]), -0.375f);
}

TEST(ReduceTest, HalfTypesSupportSumAndMeanOnly) {
  EXPECT_TRUE(CheckSupported(DType::kBFloat16, ReduceOp::kMean).ok());
  EXPECT_EQ(CheckSupported(DType::kFloat16, ReduceOp::kMax).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckSupported(DType::kInt64, ReduceOp::kMin).ok());
}

// Regression (UBSan): received bytes sit wherever the transport's buffers
// put them, so elements may be misaligned and split across a Cord's pieces.
TEST(ReduceTest, MisalignedAndSplitElementsReduceExactly) {
  const double want[3] = {1.5, -2.25, 1e300};
  std::string bytes(1 + sizeof(want), '\0');  // the elements start at 1
  std::memcpy(bytes.data() + 1, want, sizeof(want));
  // Pieces of 1, 5, 11 and 8 bytes: every element is misaligned, and two
  // are split between pieces.
  absl::Cord src;
  size_t from = 0;
  for (const size_t cut : {size_t{1}, size_t{6}, size_t{17}, bytes.size()}) {
    src.Append(absl::MakeCordFromExternal(
        absl::string_view(bytes).substr(from, cut - from),
        [](absl::string_view) {}));
    from = cut;
  }
  src.RemovePrefix(1);
  std::string dst(1 + sizeof(want), '\0');  // a misaligned destination too
  Accumulate(dst.data() + 1, src, DType::kFloat64, ReduceOp::kSum);
  Accumulate(dst.data() + 1, bytes.data() + 1, 3, DType::kFloat64,
             ReduceOp::kSum);
  double got[3];
  std::memcpy(got, dst.data() + 1, sizeof(got));
  EXPECT_EQ(got[0], 3.0);
  EXPECT_EQ(got[1], -4.5);
  EXPECT_EQ(got[2], 2e300);
}

}  // namespace
}  // namespace cohort::collective
