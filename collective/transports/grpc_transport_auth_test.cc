// Ranks whose credentials do not match: the rendezvous fails, and the error
// says which peer refused whom and why, instead of a peer "gone" later or a
// connection that times out without a reason.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "collective/transports/grpc_transport_testing.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_pki.h"

namespace cohort::collective {
namespace {

using ::cohort::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

GrpcTransportOptions Rank(int rank, absl::Duration connect_timeout) {
  return {.group = "auth",
          .rank = rank,
          .size = 2,
          .label = rank == 0 ? "chief:0" : "worker:0",
          .connect_timeout = connect_timeout,
          .shared_memory = false};
}

TEST(GrpcTransportAuthTest, ARankWithoutThePeersTokenIsRefusedByName) {
  AbortableStore store;
  // Rank 0 requires a token that rank 1 does not send. Rank 0's own stream
  // is accepted, so it waits at the barrier until the test gives up on it.
  absl::StatusOr<std::unique_ptr<GrpcTransport>> rank0 =
      absl::UnknownError("not created");
  std::thread chief([&] {
    GrpcTransportOptions options = Rank(0, absl::Seconds(120));
    options.security.token = "the-token";
    rank0 = GrpcTransport::Create(options, store);
  });
  const absl::Time start = absl::Now();
  const absl::Status rank1 =
      GrpcTransport::Create(Rank(1, absl::Seconds(120)), store).status();
  store.Abort(absl::AbortedError("the test is over"));
  chief.join();

  EXPECT_THAT(rank1,
              StatusIs(absl::StatusCode::kUnauthenticated,
                       AllOf(HasSubstr("rank 0 (chief:0 at 127.0.0.1:"),
                             HasSubstr("refused this rank: missing bearer "
                                       "token"))));
  // At once, not at the connect timeout.
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  EXPECT_FALSE(rank0.ok());
}

TEST(GrpcTransportAuthTest, ATlsHandshakeThatFailsIsNamedAtTheConnectTimeout) {
  testing::ScratchDir dir;
  // Two unrelated CAs: neither rank trusts the other's certificate.
  absl::StatusOr<testing::TestPki> ours = testing::MakeTestPki(dir, "ours");
  absl::StatusOr<testing::TestPki> theirs = testing::MakeTestPki(dir, "theirs");
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  auto security = [](const testing::TestPki& pki) {
    return rpc::Security::Load({.tls_cert_file = pki.cert,
                                .tls_key_file = pki.key,
                                .tls_ca_file = pki.ca});
  };
  absl::StatusOr<rpc::Security> our_security = security(*ours);
  absl::StatusOr<rpc::Security> their_security = security(*theirs);
  ASSERT_TRUE(our_security.ok()) << our_security.status();
  ASSERT_TRUE(their_security.ok()) << their_security.status();

  AbortableStore store;
  auto transports = CreateGroupInThreads(store, 2, [&](int rank) {
    GrpcTransportOptions options = Rank(rank, absl::Seconds(3));
    options.listen = "127.0.0.1:0";
    options.security = rank == 0 ? *our_security : *their_security;
    return options;
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(transports[rank].status(),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         AllOf(HasSubstr("could not connect to rank"),
                               HasSubstr("a call to it now fails with:"),
                               HasSubstr("andshake"))))
        << "rank " << rank;
  }
}

}  // namespace
}  // namespace cohort::collective
