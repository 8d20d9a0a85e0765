#include "collective/local_store.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait.h"

namespace cohort::collective {
namespace {

using ::testing::HasSubstr;

TEST(LocalStoreTest, GetWaitsForSetAndTimesOutNamingTheKey) {
  LocalStore store;
  absl::StatusOr<std::string> value;
  std::thread reader([&] { value = store.Get("id", absl::Seconds(30)); });
  // Set only once the reader waits.
  EXPECT_TRUE(testing::WaitUntil([&] { return store.waiting_readers() == 1; },
                                 absl::Seconds(10), absl::Milliseconds(1)));
  ASSERT_TRUE(store.Set("id", "abc").ok());
  reader.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "abc");

  const absl::StatusOr<std::string> missing =
      store.Get("nope", absl::Milliseconds(20));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("\"nope\""));
}

TEST(LocalStoreTest, BarrierOpensWhenFull) {
  LocalStore store;
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back(
        [&, r] { results[r] = store.Barrier("b", 3, r, absl::Seconds(5)); });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& status : results) EXPECT_TRUE(status.ok()) << status;
  const absl::Status lonely = store.Barrier("c", 2, 0, absl::Milliseconds(20));
  EXPECT_EQ(lonely.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(lonely.message()), HasSubstr("1 of 2"));
}

}  // namespace
}  // namespace cohort::collective
