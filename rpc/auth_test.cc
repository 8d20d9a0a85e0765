#include "rpc/auth.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::rpc {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(CheckBearerTokenTest, NoTokenConfiguredAcceptsEverything) {
  EXPECT_TRUE(CheckBearerToken(std::nullopt, std::nullopt).ok());
  EXPECT_TRUE(CheckBearerToken("Bearer anything", std::nullopt).ok());
}

TEST(CheckBearerTokenTest, MatchingTokenIsAccepted) {
  EXPECT_TRUE(CheckBearerToken("Bearer s3cret", std::string("s3cret")).ok());
}

TEST(CheckBearerTokenTest, MissingHeaderIsUnauthenticated) {
  const absl::Status status = CheckBearerToken(std::nullopt, std::string("t"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(status), HasSubstr("missing bearer token"));
  EXPECT_THAT(Message(status), HasSubstr("--auth_token_file"));
}

TEST(CheckBearerTokenTest, WrongTokenIsUnauthenticated) {
  const absl::Status status =
      CheckBearerToken("Bearer s3cres", std::string("s3cret"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(status), HasSubstr("invalid bearer token"));
}

TEST(CheckBearerTokenTest, PrefixOfTheTokenIsRejected) {
  EXPECT_EQ(CheckBearerToken("Bearer s3c", std::string("s3cret")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerToken("Bearer ", std::string("s3cret")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerToken("Bearer s3cret2", std::string("s3cret")).code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(CheckBearerTokenTest, OtherSchemesAreMalformed) {
  const absl::Status status =
      CheckBearerToken("Basic czNjcmV0", std::string("s3cret"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(status), HasSubstr("malformed authorization header"));
  EXPECT_EQ(CheckBearerToken("s3cret", std::string("s3cret")).code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace cohort::rpc
