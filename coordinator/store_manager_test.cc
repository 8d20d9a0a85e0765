#include "coordinator/store_manager.h"

#include <atomic>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace cohort::coordinator {
namespace {

using ::testing::HasSubstr;

// Captures one callback's result, thread-safely. Declare it before the
// store: the store's destructor completes the waits still pending.
template <typename T>
class Result {
 public:
  auto Callback() {
    return [this](T value) {
      absl::MutexLock lock(&mu_);
      value_ = std::move(value);
    };
  }
  // Waits (bounded) for the callback.
  std::optional<T> Wait(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return value_.has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
    return value_;
  }
  bool done() {
    absl::MutexLock lock(&mu_);
    return value_.has_value();
  }

 private:
  absl::Mutex mu_;
  std::optional<T> value_ ABSL_GUARDED_BY(mu_);
};

TEST(StoreManagerTest, GetWaitsForSet) {
  Result<absl::StatusOr<std::string>> got;
  StoreManager store;
  store.Start();
  store.Get("nccl_id", absl::Now() + absl::Seconds(10), got.Callback());
  EXPECT_FALSE(got.done());
  ASSERT_TRUE(store.Set("nccl_id", "abc").ok());
  auto value = got.Wait();
  ASSERT_TRUE(value.has_value() && value->ok());
  EXPECT_EQ(**value, "abc");

  // A key already set answers at once.
  Result<absl::StatusOr<std::string>> again;
  store.Get("nccl_id", absl::Now() + absl::Seconds(10), again.Callback());
  EXPECT_TRUE(again.done());
}

TEST(StoreManagerTest, GetTimesOutNamingTheKey) {
  Result<absl::StatusOr<std::string>> got;
  StoreManager store;
  store.Start();
  store.Get("rank/3/address", absl::Now() + absl::Milliseconds(50),
            got.Callback());
  auto value = got.Wait();
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(value->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(value->status().message()),
              HasSubstr("rank/3/address"));
}

TEST(StoreManagerTest, BarrierReleasesWhenAllArriveAndNamesMissingOnTimeout) {
  Result<absl::Status> a, b;
  StoreManager store;
  store.Start();
  store.Barrier("epoch0", 2, 0, absl::Now() + absl::Seconds(10), a.Callback());
  EXPECT_FALSE(a.done());
  store.Barrier("epoch0", 2, 1, absl::Now() + absl::Seconds(10), b.Callback());
  EXPECT_TRUE(a.Wait()->ok());
  EXPECT_TRUE(b.Wait()->ok());

  Result<absl::Status> lonely;
  store.Barrier("epoch1", 3, 1, absl::Now() + absl::Milliseconds(50),
                lonely.Callback());
  auto status = lonely.Wait();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(status->message()), HasSubstr("rank(s) 0, 2"));
}

TEST(StoreManagerTest, DisagreeingParticipantCountsAreRefused) {
  Result<absl::Status> first, second;
  StoreManager store;
  store.Start();
  // Deadlines far off: the first barrier must still wait when the second
  // comes. Shutdown ends the first.
  store.Barrier("b", 2, 0, absl::Now() + absl::Seconds(30), first.Callback());
  store.Barrier("b", 3, 1, absl::Now() + absl::Seconds(30), second.Callback());
  auto status = second.Wait();
  EXPECT_EQ(status->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status->message()),
              HasSubstr("expects 3 participants"));

  // The rank still waiting learns, at its timeout, that rank 1 came and
  // disagreed. (Its retry, already due, brings that timeout without a race
  // against the clock.)
  Result<absl::Status> waiting, refused, lonely;
  store.Barrier("c", 2, 0, absl::Now() + absl::Seconds(30), waiting.Callback());
  store.Barrier("c", 3, 1, absl::Now() + absl::Seconds(30), refused.Callback());
  EXPECT_EQ(refused.Wait()->code(), absl::StatusCode::kFailedPrecondition);
  store.Barrier("c", 2, 0, absl::Now(), lonely.Callback());
  EXPECT_EQ(waiting.Wait()->code(), absl::StatusCode::kAborted);
  EXPECT_EQ(*lonely.Wait(),
            absl::DeadlineExceededError(
                "barrier \"c\" timed out waiting for rank(s) 1; refused for "
                "expecting another participant count: rank 1 (3)"));
}

TEST(StoreManagerTest, LimitsAreEnforced) {
  StoreManager store({.max_keys = 2, .max_value_bytes = 4, .max_key_bytes = 8});
  EXPECT_EQ(store.Set("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set("k", "12345").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.Set("a", "1").ok());
  EXPECT_TRUE(store.Set("b", "2").ok());
  EXPECT_EQ(store.Set("c", "3"),
            absl::ResourceExhaustedError(
                "cannot set store key \"c\": the store holds 2 keys, its "
                "limit"));
  EXPECT_TRUE(store.Set("a", "9").ok());  // replacing is not growing
  EXPECT_EQ(store.num_keys(), 2);
}

TEST(StoreManagerTest, TheTotalOfKeysAndValuesIsBounded) {
  StoreManager store({.max_total_bytes = 10});
  EXPECT_TRUE(store.Set("a", "1234").ok());  // 5 bytes
  EXPECT_EQ(store.Set("b", "12345"),
            absl::ResourceExhaustedError(
                "cannot set store key \"b\" (5 bytes): the store would hold "
                "11 bytes, over its limit of 10"));
  EXPECT_TRUE(store.Set("a", "123").ok());    // replacing frees the old value
  EXPECT_TRUE(store.Set("b", "12345").ok());  // 4 + 6
  EXPECT_EQ(store.ErasePrefix("a"), 1);
  EXPECT_TRUE(store.Set("c", "123").ok());  // erased bytes count no more
  EXPECT_EQ(store.num_keys(), 2);
}

TEST(StoreManagerTest, ShutdownFailsPendingWaits) {
  Result<absl::StatusOr<std::string>> got;
  Result<absl::Status> barrier;
  StoreManager store;
  store.Start();
  store.Get("never", absl::Now() + absl::Seconds(60), got.Callback());
  store.Barrier("never", 2, 0, absl::Now() + absl::Seconds(60),
                barrier.Callback());
  store.Shutdown();
  EXPECT_EQ(got.Wait()->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(barrier.Wait()->code(), absl::StatusCode::kUnavailable);
}

TEST(StoreManagerTest, WaitsThatArriveAfterShutdownAreRefusedAtOnce) {
  Result<absl::StatusOr<std::string>> got;
  Result<absl::Status> barrier;
  StoreManager store;
  store.Start();
  store.Shutdown();
  // Nothing would end them: shutdown has already failed the pending ones.
  store.Get("late", absl::Now() + absl::Seconds(60), got.Callback());
  store.Barrier("late", 2, 0, absl::Now() + absl::Seconds(60),
                barrier.Callback());
  ASSERT_TRUE(got.done() && barrier.done());
  EXPECT_EQ(got.Wait()->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(*barrier.Wait(),
            absl::UnavailableError("the store is shutting down"));
}

TEST(StoreManagerTest, ABarrierOfMoreRanksThanAnyClusterIsRefusedAtOnce) {
  Result<absl::Status> barrier;
  StoreManager store;
  store.Start();
  store.Barrier("huge", 50'000'000, 0, absl::Now() + absl::Seconds(60),
                barrier.Callback());
  ASSERT_TRUE(barrier.done());
  EXPECT_EQ(barrier.Wait()->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(barrier.Wait()->message()),
              HasSubstr("at most 65536 participants"));
}

TEST(StoreManagerTest, ATimeoutNamesTheFirstMissingRanksAndCountsTheRest) {
  Result<absl::Status> barrier;
  StoreManager store;
  store.Start();
  store.Barrier("wide", 1000, 0, absl::Now(), barrier.Callback());
  const std::optional<absl::Status> result = barrier.Wait();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(result->message()),
              HasSubstr("waiting for rank(s) 1, 2, 3, "));
  EXPECT_THAT(std::string(result->message()), HasSubstr(", 32 and 967 more"));
}

TEST(StoreManagerTest, AWaitWhoseCallerGaveUpEndsAndDoesNotCount) {
  Result<absl::StatusOr<std::string>> got;
  Result<absl::Status> gone_rank, late_rank, expired_rank;
  std::atomic<bool> gone{false};
  const auto abandoned = [&gone] { return gone.load(); };
  StoreManager store;
  store.Start();
  store.Get("key", absl::Now() + absl::Seconds(60), got.Callback(), abandoned);
  store.Barrier("b", 2, 0, absl::Now() + absl::Seconds(60),
                gone_rank.Callback(), abandoned);
  gone = true;
  // Rank 1 arrives before the expiry loop has looked: rank 0 left, so the
  // barrier is not complete.
  store.Barrier("b", 2, 1, absl::Now() + absl::Seconds(60),
                late_rank.Callback());
  // Withdrawn by that arrival, or just before it by the expiry loop.
  EXPECT_EQ(gone_rank.Wait()->code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(late_rank.done());
  // The expiry loop ends the reader, and a rank that leaves while alone.
  std::atomic<bool> left{false};
  store.Barrier("c", 2, 0, absl::Now() + absl::Seconds(60),
                expired_rank.Callback(), [&left] { return left.load(); });
  left = true;
  EXPECT_EQ(got.Wait()->status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(expired_rank.Wait()->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(store.num_waiting_readers(), 0u);
  EXPECT_EQ(store.num_barrier_arrivals(), 1u);  // rank 1 of "b"
}

TEST(StoreManagerTest, ErasePrefixDropsOneJobsKeysOnly) {
  StoreManager store;
  ASSERT_OK(store.Set("job-1/attempt-1/address/0", "a"));
  ASSERT_OK(store.Set("job-1/attempt-2/address/0", "b"));
  ASSERT_OK(store.Set("job-10/attempt-1/address/0", "c"));
  ASSERT_OK(store.Set("job-2/attempt-1/address/0", "d"));
  EXPECT_EQ(store.ErasePrefix("job-1/attempt-1/"), 1u);
  EXPECT_EQ(store.ErasePrefix("job-1/"), 1u);  // not job-10's
  EXPECT_EQ(store.num_keys(), 2u);
  EXPECT_EQ(store.ErasePrefix("job-3/"), 0u);
}

}  // namespace
}  // namespace cohort::coordinator
