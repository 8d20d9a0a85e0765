// Peer servers within a port range, the ports a firewall between hosts lets
// through.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collective/local_store.h"
#include "collective/transports/grpc_transport_testing.h"
#include "common/host_port.h"
#include "tests/testing/status_matchers.h"

namespace cohort::collective {
namespace {

using ::cohort::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A socket listening on 127.0.0.1:`port`, closed on destruction; invalid
// where the port is taken.
class HeldPort {
 public:
  explicit HeldPort(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (fd_ >= 0 && (bind(fd_, reinterpret_cast<sockaddr*>(&address),
                          sizeof(address)) != 0 ||
                     listen(fd_, 1) != 0)) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~HeldPort() {
    if (fd_ >= 0) close(fd_);
  }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Three free ports in a row, below the kernel's ephemeral range, where the
// other tests' servers (bound to port 0) never land. They are free when
// found; only another process choosing ports there could take one before
// the test binds it.
absl::StatusOr<int> FindThreeFreePorts() {
  absl::BitGen random;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int first = absl::Uniform(random, 20000, 30000);
    if (HeldPort(first).valid() && HeldPort(first + 1).valid() &&
        HeldPort(first + 2).valid()) {
      return first;
    }
  }
  return absl::UnavailableError("no three free ports in a row in 20000-30000");
}

int PortOf(const std::string& address) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  return parsed.ok() ? parsed->port : -1;
}

TEST(GrpcTransportPortsTest, RanksBindFreePortsOfTheRangeAndOneTooManyIsNamed) {
  absl::StatusOr<int> first = FindThreeFreePorts();
  ASSERT_TRUE(first.ok()) << first.status();
  // Another process's port, inside the range: skipped, not shared.
  HeldPort taken(*first);
  ASSERT_TRUE(taken.valid());
  const PortRange range{*first, *first + 2};

  LocalStore store;
  auto transports = CreateGroupInThreads(store, 2, [&](int rank) {
    return GrpcTransportOptions{.group = "ports",
                                .rank = rank,
                                .size = 2,
                                .ports = range,
                                .connect_timeout = absl::Seconds(30)};
  });
  ASSERT_TRUE(transports[0].ok()) << transports[0].status();
  ASSERT_TRUE(transports[1].ok()) << transports[1].status();
  const std::set<int> bound = {PortOf((*transports[0])->address()),
                               PortOf((*transports[1])->address())};
  EXPECT_EQ(bound, (std::set<int>{*first + 1, *first + 2}));

  // The range is full: a third rank fails at once, naming it.
  EXPECT_THAT(
      GrpcTransport::Create(
          {.group = "ports-full", .rank = 0, .size = 1, .ports = range}, store)
          .status(),
      StatusIs(absl::StatusCode::kUnavailable,
               AllOf(HasSubstr(absl::StrCat("no free port for this rank's peer "
                                            "server in ",
                                            range.ToString(), " on 127.0.0.1")),
                     HasSubstr("--peer_ports"))));
}

TEST(GrpcTransportConnectTest, TheStoresAbortEndsTheWaitForAPeersConnection) {
  // Rank 1 published an address and died: its port takes connections that
  // no server answers.
  std::unique_ptr<HeldPort> dead;
  int port = 0;
  absl::BitGen random;
  for (int attempt = 0; attempt < 100 && dead == nullptr; ++attempt) {
    port = absl::Uniform(random, 30000, 40000);
    auto held = std::make_unique<HeldPort>(port);
    if (held->valid()) dead = std::move(held);
  }
  ASSERT_NE(dead, nullptr);
  AbortableStore store;
  store.Abort(absl::AbortedError("the attempt ended: worker:0 is DEAD"));
  ASSERT_TRUE(
      store.Set("dead/address/1", absl::StrCat("127.0.0.1:", port)).ok());
  ASSERT_TRUE(store.Set("dead/host/1", "another-host").ok());
  ASSERT_TRUE(store.Set("dead/label/1", "worker:0").ok());
  // Not the 60 s connect timeout's DEADLINE_EXCEEDED: the abort, at once.
  EXPECT_THAT(
      GrpcTransport::Create({.group = "dead",
                             .rank = 0,
                             .size = 2,
                             .connect_timeout = absl::Seconds(60),
                             .shared_memory = false},
                            store)
          .status(),
      StatusIs(absl::StatusCode::kAborted, HasSubstr("worker:0 is DEAD")));
}

// Rank 0's view of the store: every wait's timeout is recorded, and the
// read of rank 1's address takes `slow_read` first, as a late peer would.
class TimedStore final : public Store {
 public:
  TimedStore(Store* inner, absl::Duration slow_read)
      : inner_(inner), slow_read_(slow_read) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    return inner_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override {
    Record(timeout);
    if (absl::StrContains(key, "address/1")) absl::SleepFor(slow_read_);
    return inner_->Get(key, timeout);
  }
  absl::Status Barrier(const std::string& name, int participants, int rank,
                       absl::Duration timeout) override {
    Record(timeout);
    return inner_->Barrier(name, participants, rank, timeout);
  }
  std::vector<absl::Duration> timeouts() const {
    absl::MutexLock lock(&mu_);
    return timeouts_;
  }

 private:
  void Record(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    timeouts_.push_back(timeout);
  }

  Store* const inner_;
  const absl::Duration slow_read_;
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> timeouts_ ABSL_GUARDED_BY(mu_);
};

TEST(GrpcTransportConnectTest, TheConnectTimeoutBoundsTheWholeRendezvous) {
  constexpr absl::Duration kConnectTimeout = absl::Seconds(30);
  constexpr absl::Duration kSlowRead = absl::Milliseconds(500);
  LocalStore shared;
  TimedStore timed(&shared, kSlowRead);
  std::vector<absl::StatusOr<std::unique_ptr<GrpcTransport>>> created;
  for (int rank = 0; rank < 3; ++rank) {
    created.emplace_back(absl::UnknownError("not created"));
  }
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.emplace_back([&, rank] {
      created[rank] = GrpcTransport::Create(
          {.group = "bound",
           .rank = rank,
           .size = 3,
           .connect_timeout = kConnectTimeout},
          rank == 0 ? static_cast<Store&>(timed) : shared);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(created[rank].ok()) << created[rank].status();
  }
  // Every wait after the slow read has only what is left of the one
  // bound, not a fresh connect timeout of its own.
  const std::vector<absl::Duration> timeouts = timed.timeouts();
  ASSERT_GE(timeouts.size(), 4u);
  for (size_t i = 1; i < timeouts.size(); ++i) {
    EXPECT_LE(timeouts[i], kConnectTimeout - kSlowRead)
        << "wait " << i << " of " << timeouts.size();
  }
}

}  // namespace
}  // namespace cohort::collective
