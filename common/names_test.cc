#include "common/names.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using testing::StatusIs;

TEST(NamesTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("dense/kernel"));
  EXPECT_TRUE(IsValidUtf8("gewicht/\xc3\xa4"));   // ä
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac"));       // €
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));   // U+1F600
  EXPECT_FALSE(IsValidUtf8("\xff"));              // not a lead byte
  EXPECT_FALSE(IsValidUtf8("a\xc3"));             // cut short
  EXPECT_FALSE(IsValidUtf8("\xc3\x28"));          // bad continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

TEST(NamesTest, CheckNameNamesTheProblem) {
  EXPECT_OK(CheckName("variable", "dense/kernel:0"));
  EXPECT_THAT(CheckName("variable", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("variable name is empty")));
  EXPECT_THAT(CheckName("variable", "w\xff"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"w\\xff\" is not valid UTF-8")));
  EXPECT_THAT(CheckName("variable", "a\nb"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("control character")));
  EXPECT_THAT(CheckName("variable", std::string(kMaxNameBytes + 1, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the limit is 1024")));
}

}  // namespace
}  // namespace cohort
