#include "common/trace.h"

#include <gtest/gtest.h>

#include <thread>

namespace cohort {
namespace {

TEST(TraceTest, WithoutARecorderSpansRecordNothing) {
  ASSERT_EQ(TraceRecorder::Current(), nullptr);
  ScopedSpan span("step");
  span.Arg("step", "1");
  EXPECT_FALSE(span.active());
}

TEST(TraceTest, NestedSpansEndInnerFirstAndLieWithinTheirParent) {
  TraceRecorder recorder(100);
  {
    TraceRecorder::Scope scope(&recorder);
    ScopedSpan step("step");
    step.Arg("step", "7");
    { ScopedSpan input("input"); }
    {
      ScopedSpan reduce("allreduce");
      reduce.Arg("bytes", "64");
    }
  }
  EXPECT_EQ(TraceRecorder::Current(), nullptr);
  int64_t dropped = -1;
  std::vector<TraceEvent> events = recorder.Events(&dropped);
  EXPECT_EQ(dropped, 0);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_STREQ(events[0].name, "input");
  EXPECT_STREQ(events[1].name, "allreduce");
  EXPECT_STREQ(events[2].name, "step");
  ASSERT_EQ(events[1].args.size(), 1u);
  EXPECT_STREQ(events[1].args[0].first, "bytes");
  EXPECT_EQ(events[1].args[0].second, "64");
  const TraceEvent& parent = events[2];
  for (int i = 0; i < 2; ++i) {
    EXPECT_GE(events[i].start_unix_ns, parent.start_unix_ns);
    EXPECT_LE(events[i].start_unix_ns + events[i].duration_ns,
              parent.start_unix_ns + parent.duration_ns);
  }
  EXPECT_LE(events[0].start_unix_ns + events[0].duration_ns,
            events[1].start_unix_ns);
}

TEST(TraceTest, ARecorderKeepsItsCapacityAndCountsTheRest) {
  TraceRecorder recorder(2);
  TraceRecorder::Scope scope(&recorder);
  for (int i = 0; i < 5; ++i) ScopedSpan span("step");
  int64_t dropped = 0;
  EXPECT_EQ(recorder.Events(&dropped).size(), 2u);
  EXPECT_EQ(dropped, 3);
}

TEST(TraceTest, ARecorderIsPerThread) {
  TraceRecorder recorder(10);
  TraceRecorder::Scope scope(&recorder);
  std::thread other([] {
    EXPECT_EQ(TraceRecorder::Current(), nullptr);
    ScopedSpan span("elsewhere");
  });
  other.join();
  int64_t dropped = 0;
  EXPECT_TRUE(recorder.Events(&dropped).empty());
}

}  // namespace
}  // namespace cohort
