#include "common/host_info.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

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

}  // namespace
}  // namespace cohort
