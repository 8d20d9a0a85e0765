#pragma once

// gMock matchers and assertions for absl::Status and absl::StatusOr, so that
// a failing check prints the status it got:
//
//   EXPECT_OK(store.Set("k", "v"));
//   ASSERT_OK_AND_ASSIGN(std::string value, store.Get("k", timeout));
//   EXPECT_THAT(manager.Submit(spec),
//   StatusIs(absl::StatusCode::kInvalidArgument,
//                                              HasSubstr("steps")));

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::testing {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// Matches a Status or StatusOr whose code is `code` and whose message
// matches `message` (any message when omitted).
MATCHER_P2(StatusIs, code, message,
           absl::StrCat("has status ", absl::StatusCodeToString(code))) {
  const absl::Status& status = ::cohort::testing::GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code &&
         ::testing::ExplainMatchResult(message, std::string(status.message()),
                                       result_listener);
}

// Matches a Status or StatusOr whose code is `code`, whatever its message.
MATCHER_P(StatusIs, code,
          absl::StrCat("has status ", absl::StatusCodeToString(code))) {
  const absl::Status& status = ::cohort::testing::GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code;
}

// Matches a Status or StatusOr that is OK.
MATCHER(IsOk, "is OK") {
  const absl::Status& status = ::cohort::testing::GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.ok();
}

// Matches a StatusOr that is OK and whose value matches `value`.
MATCHER_P(IsOkAndHolds, value, "is OK and holds a matching value") {
  if (!arg.ok()) {
    *result_listener << "whose status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(value, *arg, result_listener);
}

}  // namespace cohort::testing

#define EXPECT_OK(expr) EXPECT_THAT((expr), ::cohort::testing::IsOk())
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::cohort::testing::IsOk())

#define COHORT_MATCHERS_CONCAT_INNER(a, b) a##b
#define COHORT_MATCHERS_CONCAT(a, b) COHORT_MATCHERS_CONCAT_INNER(a, b)
// Asserts that `rexpr` (a StatusOr) is OK and moves its value into `lhs`.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                       \
  auto COHORT_MATCHERS_CONCAT(status_or_, __LINE__) = (rexpr); \
  ASSERT_OK(COHORT_MATCHERS_CONCAT(status_or_, __LINE__));     \
  lhs = std::move(*COHORT_MATCHERS_CONCAT(status_or_, __LINE__))
