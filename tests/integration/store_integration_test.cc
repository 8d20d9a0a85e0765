// The rendezvous store end to end over gRPC: the coordinator's StoreService
// on 127.0.0.1:0 and the GrpcStore client that ranks use.

#include <thread>

#include "collective/grpc_store.h"
#include "coordinator/store_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/server.h"
#include "tests/testing/wait.h"

namespace cohort {
namespace {

using ::cohort::testing::WaitUntil;
using ::testing::HasSubstr;

class StoreIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_.Start();
    server_.AddService(&service_);
    ASSERT_TRUE(server_.Start().ok());
  }
  void TearDown() override {
    manager_.Shutdown();
    server_.Shutdown();
  }
  collective::GrpcStore Client(
      std::optional<std::string> token = std::nullopt) {
    rpc::Security security;
    security.token = token;
    return collective::GrpcStore(server_.address(), security);
  }

  coordinator::StoreManager manager_;
  rpc::Authenticator auth_{std::string("tok")};
  coordinator::StoreService service_{&manager_, &auth_};
  rpc::RpcServer server_{{.listen = "127.0.0.1:0"}};
};

TEST_F(StoreIntegrationTest, ARankThatGaveUpDoesNotCountTowardsABarrier) {
  collective::GrpcStore gone = Client("tok");
  absl::Status gone_result;
  std::thread rank0(
      [&] { gone_result = gone.Barrier("connected", 2, 0, absl::Hours(1)); });
  ASSERT_TRUE(WaitUntil([&] { return manager_.num_barrier_arrivals() == 1; },
                        absl::Seconds(10)));
  // Its call is cancelled, as when its process dies.
  gone.Abort(absl::AbortedError("the attempt was ended"));
  rank0.join();
  ASSERT_TRUE(WaitUntil([&] { return manager_.num_barrier_arrivals() == 0; },
                        absl::Seconds(10)));
  collective::GrpcStore store = Client("tok");
  const absl::Status alone =
      store.Barrier("connected", 2, 1, absl::Milliseconds(300));
  EXPECT_EQ(alone.code(), absl::StatusCode::kDeadlineExceeded) << alone;
  EXPECT_THAT(
      std::string(alone.message()),
      HasSubstr("barrier \"connected\" timed out waiting for rank(s) 0"));
}

TEST_F(StoreIntegrationTest, RanksRendezvousThroughKeysAndBarriers) {
  collective::GrpcStore store = Client("tok");
  // Rank 1 waits for rank 0's address, published a little later.
  absl::StatusOr<std::string> seen;
  std::thread reader([&] { seen = store.Get("rank/0", absl::Seconds(30)); });
  // Set only once the reader is parked on the coordinator.
  EXPECT_TRUE(WaitUntil([&] { return manager_.num_waiting_readers() == 1; },
                        absl::Seconds(10)));
  ASSERT_TRUE(store.Set("rank/0", "127.0.0.1:5000").ok());
  reader.join();
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(*seen, "127.0.0.1:5000");

  std::vector<absl::Status> results(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      results[r] = store.Barrier("start", 3, r, absl::Seconds(5));
    });
  }
  for (auto& rank : ranks) rank.join();
  for (const auto& status : results) EXPECT_TRUE(status.ok()) << status;
}

TEST_F(StoreIntegrationTest, WaitsEndAtTheirDeadlineWithAClearError) {
  collective::GrpcStore store = Client("tok");
  // Connected first: the store's answer has a second (kStoreReplyGrace) to
  // arrive before the call's own deadline, and a connection being set up
  // on a busy machine should not take it.
  ASSERT_TRUE(store.Set("warm", "").ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> missing =
      store.Get("nccl/unique_id", absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  // The store's own answer, not the call's deadline: it names what was
  // missing.
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("store key \"nccl/unique_id\" was not set"));
  const absl::Status barrier =
      store.Barrier("lonely", 3, 0, absl::Milliseconds(200));
  EXPECT_EQ(barrier.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(
      std::string(barrier.message()),
      HasSubstr("barrier \"lonely\" timed out waiting for rank(s) 1, 2"));
}

TEST_F(StoreIntegrationTest, AbortEndsAWaitForAPeerThatWillNotCome) {
  collective::GrpcStore store = Client("tok");
  absl::StatusOr<std::string> waited;
  const absl::Time start = absl::Now();
  std::thread rank(
      [&] { waited = store.Get("ring/address/1", absl::Hours(1)); });
  // Whether the wait began before the abort or not, it ends with its reason.
  store.Abort(absl::AbortedError("the attempt was ended"));
  rank.join();
  EXPECT_LT(absl::Now() - start, absl::Minutes(1));
  EXPECT_EQ(waited.status(), absl::AbortedError("the attempt was ended"));
  // Later calls fail at once.
  EXPECT_EQ(store.Set("k", "v"), absl::AbortedError("the attempt was ended"));
  EXPECT_EQ(store.Barrier("b", 2, 0, absl::Hours(1)),
            absl::AbortedError("the attempt was ended"));
}

TEST_F(StoreIntegrationTest,
       AStoreThatNeverAnswersIsNamedWithWhatTheWaitWasFor) {
  // A port that was just free: nothing listens there.
  rpc::RpcServer gone({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(gone.Start().ok());
  const std::string address = gone.address();
  gone.Shutdown();
  collective::GrpcStore store(address, rpc::Security{});
  const absl::StatusOr<std::string> value =
      store.Get("bench/address/1", absl::Milliseconds(200));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(value.status().message()),
              HasSubstr("no answer from the store within 200ms while waiting "
                        "for key \"bench/address/1\""));
  const absl::Status barrier =
      store.Barrier("bench/connected", 2, 0, absl::Milliseconds(200));
  EXPECT_THAT(std::string(barrier.message()),
              HasSubstr("while waiting for barrier \"bench/connected\""));
}

TEST_F(StoreIntegrationTest, TokenIsRequired) {
  collective::GrpcStore anonymous = Client();
  const absl::Status status = anonymous.Set("k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(status.message()), HasSubstr("Store.Set of \"k\""));
  EXPECT_EQ(anonymous.Get("k", absl::Seconds(1)).status().code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace cohort
