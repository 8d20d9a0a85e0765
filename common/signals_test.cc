#include "common/signals.h"

#include <signal.h>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(SignalsTest, APendingTerminationSignalIsSeenAndLeftForTheWaiter) {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  EXPECT_FALSE(TerminationPending());
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_TRUE(TerminationPending());
  EXPECT_TRUE(TerminationPending());  // looking does not take it
  TerminationWaiter waiter;
  EXPECT_EQ(waiter.WaitFor(absl::Seconds(5)), SIGTERM);
  EXPECT_FALSE(TerminationPending());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace
}  // namespace cohort
