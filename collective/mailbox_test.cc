// The mailbox's abort: the first status wins, and its caller learns so.

#include "collective/mailbox.h"

#include <gtest/gtest.h>

namespace cohort::collective {
namespace {

TEST(MailboxTest, OnlyTheFirstAbortWinsAndItsCallerIsTold) {
  Mailbox mailbox(2);
  EXPECT_TRUE(mailbox.abort_status().ok());
  EXPECT_TRUE(mailbox.Abort(absl::AbortedError("first")));
  EXPECT_FALSE(mailbox.Abort(absl::CancelledError("second")));
  EXPECT_EQ(mailbox.abort_status(), absl::AbortedError("first"));
  EXPECT_EQ(mailbox.SourceStatus(1), absl::AbortedError("first"));
}

}  // namespace
}  // namespace cohort::collective
