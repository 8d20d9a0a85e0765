#include "worker_agent/agent_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/testing/status_matchers.h"

namespace cohort::agent {
namespace {

using ::cohort::testing::StatusIs;
using ::testing::HasSubstr;

task::TaskConfig Worker(const std::string& listen) {
  task::TaskConfig config;
  config.task = {"worker", 2};
  config.coordinator = "127.0.0.1:1";
  config.daemon.server.listen = listen;
  return config;
}

TEST(AgentServerTest, TooFewCpuDevicesIsNamed) {
  EXPECT_THAT(
      AgentServer::Create(Worker("127.0.0.1:0"), {.cpu_devices = 0}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--cpu_devices must be at least 1, got 0")));
}

TEST(AgentServerTest, ANegativeShutdownCheckpointTimeoutIsNamed) {
  EXPECT_THAT(AgentServer::Create(Worker("127.0.0.1:0"),
                                  {.leave_timeout = absl::Seconds(-1)})
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--shutdown_checkpoint_timeout must not be "
                                 "negative, got -1s")));
}

TEST(AgentServerTest, AMalformedPeerPortRangeIsNamed) {
  EXPECT_THAT(
      AgentServer::Create(Worker("127.0.0.1:0"), {.peer_ports = "20100-20000"})
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--peer_ports: port range \"20100-20000\": 20100 is "
                         "above 20000")));
}

TEST(AgentServerTest, APeerHostMustBeAnAddressOfThisHostThatPeersCanDial) {
  // 192.0.2.1 (TEST-NET-1) is no address of this machine.
  EXPECT_THAT(
      AgentServer::Create(Worker("127.0.0.1:0"), {.peer_host = "192.0.2.1"})
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--peer_host: cannot listen on 192.0.2.1:0: "
                         "192.0.2.1 is not an address of this host")));
  EXPECT_THAT(
      AgentServer::Create(Worker("127.0.0.1:0"), {.peer_host = "0.0.0.0"})
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--peer_host: 0.0.0.0 serves every interface")));
  EXPECT_THAT(
      AgentServer::Create(Worker("127.0.0.1:0"), {.peer_host = "a b"}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--peer_host: ")));
}

TEST(AgentServerTest, APeerHostIsWherePeerServersBind) {
  absl::StatusOr<std::unique_ptr<AgentServer>> server =
      AgentServer::Create(Worker("10.1.2.3:2222"), {.peer_host = "127.0.0.1"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->job_options().peer_listen_host, "127.0.0.1");
  unsetenv("NCCL_SOCKET_IFNAME");  // which the peer host set
}

TEST(AgentServerTest, APeerHostPointsNcclAtItsInterfaceUnlessTheOperatorDid) {
  unsetenv("NCCL_SOCKET_IFNAME");
  ASSERT_TRUE(
      AgentServer::Create(Worker("127.0.0.1:0"), {.peer_host = "127.0.0.1"})
          .ok());
  ASSERT_NE(std::getenv("NCCL_SOCKET_IFNAME"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_SOCKET_IFNAME"), "=lo");

  setenv("NCCL_SOCKET_IFNAME", "eth9", 1);
  ASSERT_TRUE(
      AgentServer::Create(Worker("127.0.0.1:0"), {.peer_host = "127.0.0.1"})
          .ok());
  EXPECT_STREQ(std::getenv("NCCL_SOCKET_IFNAME"), "eth9");
  unsetenv("NCCL_SOCKET_IFNAME");
}

TEST(AgentServerTest, WiresTheJobAgentFromTheTaskAndItsStateDir) {
  absl::StatusOr<std::unique_ptr<AgentServer>> server =
      AgentServer::Create(Worker("[::1]:0"), {.cpu_devices = 3,
                                              .state_dir = "/var/lib/a",
                                              .leave_timeout = absl::Seconds(4),
                                              .peer_ports = "20000-20015"});
  ASSERT_TRUE(server.ok()) << server.status();
  const JobAgentOptions& jobs = (*server)->job_options();
  EXPECT_EQ(jobs.task, (TaskId{"worker", 2}));
  EXPECT_EQ(jobs.coordinator, "127.0.0.1:1");
  // Peer servers bind where the agent serves, an IPv6 host bracketed.
  EXPECT_EQ(jobs.peer_listen_host, "[::1]");
  EXPECT_EQ(jobs.peer_ports.first, 20000);
  EXPECT_EQ(jobs.peer_ports.last, 20015);
  EXPECT_EQ(jobs.cache_dir, "/var/lib/a/libraries");
  EXPECT_EQ(jobs.checkpoint_copies, "/var/lib/a/checkpoints");
  EXPECT_EQ(jobs.leave_timeout, absl::Seconds(4));
  EXPECT_THAT(jobs.origin, HasSubstr("worker:2 on "));
  // Without a GPU here, the CPU devices asked for; with one, its GPUs.
  ASSERT_FALSE(jobs.devices.empty());
  if (!jobs.devices[0].is_cuda()) {
    EXPECT_EQ(jobs.devices.size(), 3u);
  }
  EXPECT_EQ((*server)->devices().size(), jobs.devices.size());
}

TEST(AgentServerTest, ACacheDirOfItsOwnIsKept) {
  absl::StatusOr<std::unique_ptr<AgentServer>> server = AgentServer::Create(
      Worker("10.1.2.3:2222"), {.state_dir = "/s", .cache_dir = "/c"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->job_options().cache_dir, "/c");
  EXPECT_EQ((*server)->job_options().peer_listen_host, "10.1.2.3");
  EXPECT_TRUE((*server)->job_options().peer_ports.empty());
}

}  // namespace
}  // namespace cohort::agent
