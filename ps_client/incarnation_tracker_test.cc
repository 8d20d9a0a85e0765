#include "ps_client/incarnation_tracker.h"

#include "gtest/gtest.h"

namespace cohort::ps {
namespace {

using Verdict = IncarnationTracker::Verdict;

TEST(IncarnationTrackerTest, TheFirstAnswerIsNoRestart) {
  IncarnationTracker tracker;
  const uint64_t call = tracker.StartCall();
  EXPECT_EQ(tracker.Answer(7, call), Verdict::kCurrent);
  EXPECT_EQ(tracker.current(), 7u);
  EXPECT_EQ(tracker.Answer(7, tracker.StartCall()), Verdict::kCurrent);
}

TEST(IncarnationTrackerTest,
     AnAnswerFromAnotherIncarnationToALaterCallIsARestart) {
  IncarnationTracker tracker;
  ASSERT_EQ(tracker.Answer(1, tracker.StartCall()), Verdict::kCurrent);
  EXPECT_EQ(tracker.Answer(2, tracker.StartCall()), Verdict::kNew);
  EXPECT_EQ(tracker.current(), 2u);
}

TEST(IncarnationTrackerTest, AnOldIncarnationsLateAnswerChangesNothing) {
  IncarnationTracker tracker;
  ASSERT_EQ(tracker.Answer(1, tracker.StartCall()), Verdict::kCurrent);
  const uint64_t slow = tracker.StartCall();  // in flight across the restart
  ASSERT_EQ(tracker.Answer(2, tracker.StartCall()), Verdict::kNew);
  EXPECT_EQ(tracker.Answer(1, slow), Verdict::kLate);
  EXPECT_EQ(tracker.current(), 2u);
}

// Two restarts, 1 -> 2 -> 3, with the client seeing 3 first: the late answer
// from 2 must not pin the client on a dead incarnation.
TEST(IncarnationTrackerTest, ALateAnswerFromAnIncarnationNeverSeenIsLateToo) {
  IncarnationTracker tracker;
  ASSERT_EQ(tracker.Answer(1, tracker.StartCall()), Verdict::kCurrent);
  const uint64_t answered_by_2 = tracker.StartCall();
  ASSERT_EQ(tracker.Answer(3, tracker.StartCall()), Verdict::kNew);
  EXPECT_EQ(tracker.Answer(2, answered_by_2), Verdict::kLate);
  EXPECT_EQ(tracker.current(), 3u);
  EXPECT_EQ(tracker.Answer(3, tracker.StartCall()), Verdict::kCurrent);
}

// A call started before the restart may be answered by the new incarnation:
// it is the current one once it answers a call started after.
TEST(IncarnationTrackerTest, TheLiveIncarnationIsAdoptedByTheNextCall) {
  IncarnationTracker tracker;
  ASSERT_EQ(tracker.Answer(1, tracker.StartCall()), Verdict::kCurrent);
  const uint64_t early = tracker.StartCall();
  ASSERT_EQ(tracker.Answer(2, tracker.StartCall()), Verdict::kNew);
  // 2 died, 3 answered the call started before 2 was seen.
  EXPECT_EQ(tracker.Answer(3, early), Verdict::kLate);
  EXPECT_EQ(tracker.Answer(3, tracker.StartCall()), Verdict::kNew);
  EXPECT_EQ(tracker.current(), 3u);
}

TEST(IncarnationTrackerTest, AnIncarnationOnceReplacedCanBeAdoptedAgain) {
  IncarnationTracker tracker;
  ASSERT_EQ(tracker.Answer(1, tracker.StartCall()), Verdict::kCurrent);
  ASSERT_EQ(tracker.Answer(2, tracker.StartCall()), Verdict::kNew);
  // Only a live incarnation answers a call started after 2 was seen.
  EXPECT_EQ(tracker.Answer(1, tracker.StartCall()), Verdict::kNew);
  EXPECT_EQ(tracker.current(), 1u);
}

}  // namespace
}  // namespace cohort::ps
