#include "rpc/tcp_bind.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::rpc {
namespace {

using ::testing::HasSubstr;

// Whether a client can connect to 127.0.0.1:`port` (the handshake completes
// in the kernel against a listening socket, with no accept).
bool Connects(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool connected =
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
  close(fd);
  return connected;
}

TEST(BindTcpTest, PortZeroGetsTheKernelsPickAndListensWhenAsked) {
  absl::StatusOr<BoundSocket> bound =
      BindTcp({"127.0.0.1", 0}, SOCK_CLOEXEC | SOCK_NONBLOCK, /*backlog=*/4);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_GT(bound->port, 0);
  EXPECT_NE(fcntl(bound->fd, F_GETFL) & O_NONBLOCK, 0);
  EXPECT_TRUE(Connects(bound->port));
  close(bound->fd);
}

TEST(BindTcpTest, WithoutABacklogItOnlyBinds) {
  absl::StatusOr<BoundSocket> bound = BindTcp({"127.0.0.1", 0}, 0, 0);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(fcntl(bound->fd, F_GETFL) & O_NONBLOCK, 0);
  EXPECT_FALSE(Connects(bound->port));
  close(bound->fd);
}

TEST(BindTcpTest, APortInUseIsUnavailableAndNamed) {
  absl::StatusOr<BoundSocket> first = BindTcp({"127.0.0.1", 0}, 0, 4);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<BoundSocket> second =
      BindTcp({"127.0.0.1", first->port}, 0, 4);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", first->port,
                                     ": port ", first->port,
                                     " is in use by another process")));
  close(first->fd);
}

TEST(BindTcpTest, AHostThatDoesNotResolveIsAConfigurationError) {
  absl::StatusOr<BoundSocket> bound = BindTcp({"nowhere.invalid", 0}, 0, 0);
  EXPECT_EQ(bound.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bound.status().message(),
              HasSubstr("host \"nowhere.invalid\" does not resolve"));
}

}  // namespace
}  // namespace cohort::rpc
