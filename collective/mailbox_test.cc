// The mailbox's abort (the first status wins, and its caller learns so),
// and a peer that sends one tag twice.

#include "collective/mailbox.h"

#include <gtest/gtest.h>

#include "collective/transports/local_transport.h"

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

TEST(MailboxTest, ASecondMessageForOneTagFailsItsSourceAndKeepsTheFirst) {
  Mailbox mailbox(3);
  const Tag tag{.sequence = 4, .step = 1, .chunk = 2};
  mailbox.Deliver(1, tag, "allreduce", absl::Cord("first"));
  mailbox.Deliver(1, tag, "allreduce", absl::Cord("other"));
  const absl::Status gone = mailbox.SourceStatus(1);
  EXPECT_EQ(gone.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(gone.message(),
            "rank 1 sent a second message for sequence 4, step 1, chunk 2; "
            "nothing more from it is trusted");
  EXPECT_TRUE(mailbox.SourceStatus(2).ok());

  LocalHub hub(3);
  std::unique_ptr<Transport> self = hub.Connect(0);
  absl::StatusOr<absl::Cord> taken =
      mailbox.TakeCord(*self, 1, Envelope{.tag = tag, .signature = "allreduce"},
                       5, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(*taken, "first");
}

}  // namespace
}  // namespace cohort::collective
