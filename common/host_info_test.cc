#include "common/host_info.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(HostInfoTest, PickedPortsAreFreeAndOutsideTheEphemeralRange) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  ASSERT_TRUE(range >> low >> high);
  for (int i = 0; i < 20; ++i) {
    const absl::StatusOr<int> port = PickUnusedPort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    // A socket bound to port 0 can never be handed this one.
    EXPECT_TRUE(*port < low || *port > high)
        << *port << " is in " << low << "-" << high;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in at = {};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    at.sin_port = htons(static_cast<uint16_t>(*port));
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0)
        << "port " << *port;
    close(fd);
  }
  EXPECT_EQ(PickUnusedPort("localhost").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostInfoTest, InterfaceWithAddressNamesTheInterfaceThatHoldsIt) {
  EXPECT_EQ(InterfaceWithAddress("127.0.0.1"), "lo");
  // 192.0.2.1 (TEST-NET-1) is no address of this machine; a name is no
  // address at all.
  EXPECT_EQ(InterfaceWithAddress("192.0.2.1"), "");
  EXPECT_EQ(InterfaceWithAddress("localhost"), "");
  EXPECT_EQ(InterfaceWithAddress(""), "");
}

TEST(HostInfoTest, AddressesOfInterfaceListsLoopbacks) {
  EXPECT_THAT(AddressesOfInterface("lo"), ::testing::Contains("127.0.0.1"));
  EXPECT_TRUE(AddressesOfInterface("no-such-interface").empty());
}

TEST(HostInfoTest, IsLocalHostKnowsLoopbackAndNotOtherAddresses) {
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_TRUE(IsLocalHost(Hostname()));
  EXPECT_FALSE(IsLocalHost("192.0.2.1"));
}

TEST(HostInfoTest, ResolveHostNamesWhatDoesNotResolve) {
  EXPECT_TRUE(ResolveHost("localhost").ok());
  EXPECT_TRUE(ResolveHost("192.0.2.1").ok());  // a literal needs no lookup
  const absl::Status missing = ResolveHost("worker-1.invalid");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()),
              ::testing::StartsWith("worker-1.invalid does not resolve: "));
}

// A resolver that answers one host only when released: what a spec of many
// hosts behind a nameserver that does not answer looks like.
TEST(HostInfoTest, PrefetchedLookupsWaitOneTimeoutAndAreKept) {
  auto release = std::make_shared<absl::Notification>();
  auto lookups = std::make_shared<std::atomic<int>>(0);
  SetHostResolverForTesting([release, lookups](const std::string& host)
                                -> absl::StatusOr<std::vector<std::string>> {
    ++*lookups;
    if (host == "slow.example") {
      release->WaitForNotificationWithTimeout(absl::Seconds(30));
    }
    return std::vector<std::string>{"198.18.0.7"};
  });
  const absl::Time start = absl::Now();
  EXPECT_THAT(PrefetchHostLookups({"a.example", "slow.example", "a.example"},
                                  absl::Seconds(2)),
              ::testing::ElementsAre("slow.example"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  // Answered from what was kept, without another lookup.
  const int looked_up = lookups->load();
  EXPECT_TRUE(ResolveHost("a.example").ok());
  const absl::Status slow = ResolveHost("slow.example");
  EXPECT_EQ(slow.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(slow.message(), "slow.example did not resolve within 2s");
  EXPECT_EQ(lookups->load(), looked_up);

  // Its answer, once it comes, is kept too.
  release->Notify();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!ResolveHost("slow.example").ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(ResolveHost("slow.example").ok());
  SetHostResolverForTesting(nullptr);
}

}  // namespace
}  // namespace cohort
