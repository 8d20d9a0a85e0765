#include "worker_agent/trace_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <set>

namespace cohort::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::set<int> Attempts(const v1::TraceData& data) {
  std::set<int> attempts;
  for (const v1::ReplicaTrace& r : data.replicas())
    attempts.insert(r.attempt());
  return attempts;
}

// trace_steps is the job spec's: any value gives a capacity within the cap.
TEST(TraceStoreTest, TheCapacityStaysWithinItsCapForAnyStepCount) {
  constexpr size_t kCap = size_t{256} << 10;
  EXPECT_EQ(TraceCapacity(0), 256u);
  EXPECT_EQ(TraceCapacity(10), 256u + 640u);
  for (const int64_t steps : {int64_t{1} << 57, int64_t{1} << 58,
                              std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(TraceCapacity(steps), kCap) << steps;
  }
}

// Ids start again at 1 in a new cluster: another cluster's job 1 is not
// this one's, though an agent may have traced both.
TEST(TraceStoreTest, AJobOfAnotherClusterWithTheSameIdIsKeptApart) {
  TraceStore store;
  store.NewRecorder("1", "uid-old", 1, 0, 16)->Add({.name = "old"});
  store.NewRecorder("1", "uid-new", 1, 0, 16)->Add({.name = "new"});

  for (const auto& [uid, span] :
       {std::pair{"uid-old", "old"}, {"uid-new", "new"}, {"", "new"}}) {
    absl::StatusOr<v1::TraceData> trace = store.Get("1", uid, "worker:0");
    ASSERT_TRUE(trace.ok()) << trace.status();
    ASSERT_EQ(trace->replicas_size(), 1) << uid;
    ASSERT_EQ(trace->replicas(0).spans_size(), 1) << uid;
    EXPECT_EQ(trace->replicas(0).spans(0).name(), span) << uid;
  }
  absl::StatusOr<v1::TraceData> none = store.Get("1", "uid-other", "worker:0");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("worker:0 holds no trace"));
}

// A job that restarts again and again keeps the spans of its newest
// attempts only, however many it runs.
TEST(TraceStoreTest, OnlyTheNewestAttemptsOfAJobAreKept) {
  TraceStore store;
  for (int attempt = 1; attempt <= 6; ++attempt) {
    for (int replica = 0; replica < 2; ++replica) {
      store.NewRecorder("7", "u", attempt, replica, 16);
    }
  }
  absl::StatusOr<v1::TraceData> trace = store.Get("7", "u", "chief:0");
  ASSERT_TRUE(trace.ok()) << trace.status();
  static_assert(TraceStore::kAttemptsKept == 3);
  EXPECT_THAT(Attempts(*trace), ElementsAre(4, 5, 6));
  EXPECT_EQ(trace->replicas_size(), 6);
}

}  // namespace
}  // namespace cohort::agent
