#include "rpc/metrics_http.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "tests/testing/wait.h"

namespace cohort::rpc {
namespace {

using ::cohort::testing::WaitUntil;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A plain TCP connection to "127.0.0.1:port", for requests no HTTP client
// would send; -1 on failure.
int Connect(const std::string& address) {
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) {
    return -1;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// What the server sends on `fd` until it closes, or until `timeout`.
std::string ReadUntilClosed(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string out;
  char buffer[4096];
  while (absl::Now() < deadline) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int left = static_cast<int>(std::max<int64_t>(
        1, absl::ToInt64Milliseconds(deadline - absl::Now())));
    if (poll(&p, 1, left) <= 0) break;
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    out.append(buffer, static_cast<size_t>(got));
  }
  return out;
}

bool Send(int fd, const std::string& data) {
  return send(fd, data.data(), data.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(data.size());
}

class MetricsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.DeclareCounter("cohort_pages_total", "Pages.");
    registry_.Increment("cohort_pages_total", {});
  }
  httplib::Result Get(const std::string& path,
                      const httplib::Headers& headers = {}) {
    httplib::Client client("http://" + server_->address());
    client.set_connection_timeout(5);
    client.set_read_timeout(10);
    return client.Get(path.c_str(), headers);
  }

  MetricRegistry registry_;
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpTest, ServesTheRegistryAndJsonPages) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
      MetricsHttpServer::Start({.listen = "127.0.0.1:0",
                                .json_pages = {{"/sd",
                                                [](const std::string& address) {
                                                  return absl::StrCat(
                                                      "[\"", address, "\"]");
                                                }}}},
                               &registry_);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = *std::move(started);
  httplib::Result metrics = Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->get_header_value("Content-Type"),
              HasSubstr("version=0.0.4"));
  EXPECT_THAT(metrics->body, HasSubstr("cohort_pages_total 1\n"));
  httplib::Result sd = Get("/sd");
  ASSERT_TRUE(sd);
  // The page is given the address as bound, its port picked.
  EXPECT_EQ(sd->body, absl::StrCat("[\"", server_->address(), "\"]"));
  EXPECT_THAT(server_->address(), Not(HasSubstr(":0")));
}

TEST_F(MetricsHttpTest, WithATokenEveryPageWantsIt) {
  // As long as a real one (deploy/README.md's 32 random bytes in base64):
  // a header past the short-string buffer must be read whole.
  const std::string token = "q1ZzX0c2n4b9H7k3Lm8pR5t2Vw6yA0dF3gJ9sE1uB4o=";
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
      MetricsHttpServer::Start({.listen = "127.0.0.1:0", .token = token},
                               &registry_);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = *std::move(started);
  httplib::Result none = Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_THAT(none->body, HasSubstr("missing bearer token"));
  httplib::Result wrong = Get("/metrics", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  // Nor does it learn which pages there are.
  httplib::Result unknown = Get("/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401);
  httplib::Result right =
      Get("/metrics", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
}

TEST(MetricsHttpStartTest, AnAddressInUseIsNamed) {
  MetricRegistry registry;
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> first =
      MetricsHttpServer::Start({.listen = "127.0.0.1:0"}, &registry);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> second =
      MetricsHttpServer::Start({.listen = (*first)->address()}, &registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("--metrics_listen: cannot listen on ",
                                     (*first)->address(), ": port ")));
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> bad =
      MetricsHttpServer::Start({.listen = "nowhere"}, &registry);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--metrics_listen"));
}

TEST_F(MetricsHttpTest, RequestsItDoesNotServeGetTheirStatus) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
      MetricsHttpServer::Start({.listen = "127.0.0.1:0"}, &registry_);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = *std::move(started);
  struct Case {
    std::string request;
    std::string answer;  // its start
    std::string body;
  };
  const std::vector<Case> cases = {
      {"GET /nope HTTP/1.1\r\n\r\n", "HTTP/1.1 404 ",
       "no page /nope here; the pages are /metrics"},
      // The body is never read: its size does not matter.
      {"POST /metrics HTTP/1.1\r\nContent-Length: 300000000\r\n\r\nxyz",
       "HTTP/1.1 405 ", "method POST is not served here"},
      {"\x16\x03\x01\x02\x05\r\n\r\n", "HTTP/1.1 400 ",
       "a malformed request line"},
      {"GET /metrics HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') +
           "\r\n\r\n",
       "HTTP/1.1 431 ", "the request's head is over 16384 bytes"},
      {"HEAD /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 200 ", ""},
  };
  for (const Case& c : cases) {
    const int fd = Connect(server_->address());
    ASSERT_GE(fd, 0);
    const absl::Cleanup closer = [fd] { close(fd); };
    ASSERT_TRUE(Send(fd, c.request));
    const std::string answer = ReadUntilClosed(fd, absl::Seconds(30));
    EXPECT_THAT(answer, StartsWith(c.answer)) << c.request.substr(0, 40);
    EXPECT_THAT(answer, HasSubstr(c.body)) << c.request.substr(0, 40);
  }
  // HEAD has the length of the page and not the page.
  const int fd = Connect(server_->address());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(Send(fd, "HEAD /metrics HTTP/1.1\r\n\r\n"));
  const std::string head = ReadUntilClosed(fd, absl::Seconds(30));
  close(fd);
  EXPECT_THAT(head, Not(HasSubstr("cohort_pages_total")));
  EXPECT_THAT(head, HasSubstr("Content-Length: " +
                              std::to_string(registry_.Render().size())));
}

TEST_F(MetricsHttpTest, AClientThatDripsItsRequestIsCutOffAtTheDeadline) {
  // The deadline is for the whole head, not for each read: a byte every
  // 100 ms would hold a worker forever against a per-read timeout.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
      MetricsHttpServer::Start(
          {.listen = "127.0.0.1:0", .request_timeout = absl::Seconds(1)},
          &registry_);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = *std::move(started);
  const int fd = Connect(server_->address());
  ASSERT_GE(fd, 0);
  const absl::Cleanup closer = [fd] { close(fd); };
  const std::string endless = "GET /metrics HTTP/1.1\r\nX-Drip: ";
  std::string answer;
  // Bounded: 600 bytes at most, a minute at most.
  const absl::Time give_up = absl::Now() + absl::Minutes(1);
  for (int i = 0; i < 600 && absl::Now() < give_up; ++i) {
    if (!Send(fd,
              std::string(1, i < static_cast<int>(endless.size()) ? endless[i]
                                                                  : 'a'))) {
      break;  // the server closed
    }
    answer += ReadUntilClosed(fd, absl::Milliseconds(100));
    if (!answer.empty()) break;
  }
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 408 ")) << answer;
  EXPECT_THAT(answer, HasSubstr("the request was not complete within 1s"));
}

TEST_F(MetricsHttpTest,
       ClientsThatSendNothingNeitherBlockScrapesForeverNorPileUp) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
      MetricsHttpServer::Start(
          {.listen = "127.0.0.1:0", .request_timeout = absl::Seconds(2)},
          &registry_);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = *std::move(started);
  // More idle connections than the server serves and queues together.
  const int capacity =
      MetricsHttpServer::kWorkers + MetricsHttpServer::kMaxWaiting;
  std::vector<int> idle;
  const absl::Cleanup closer = [&idle] {
    for (int fd : idle) close(fd);
  };
  for (int i = 0; i < capacity + 4; ++i) {
    const int fd = Connect(server_->address());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // Those past the capacity are told at once; the rest time out (408).
  int refused = 0, timed_out = 0;
  for (int fd : idle) {
    const std::string answer = ReadUntilClosed(fd, absl::Seconds(60));
    if (absl::StartsWith(answer, "HTTP/1.1 503 ")) ++refused;
    if (absl::StartsWith(answer, "HTTP/1.1 408 ")) ++timed_out;
  }
  EXPECT_GE(refused, 4);
  EXPECT_EQ(refused + timed_out, capacity + 4);
  // And a scrape is served again.
  httplib::Result metrics = Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
}

TEST_F(MetricsHttpTest, StoppingDoesNotWaitForAClient) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
      MetricsHttpServer::Start(
          {.listen = "127.0.0.1:0", .request_timeout = absl::Hours(1)},
          &registry_);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = *std::move(started);
  const int fd = Connect(server_->address());
  ASSERT_GE(fd, 0);
  const absl::Cleanup closer = [fd] { close(fd); };
  ASSERT_TRUE(Send(fd, "GET /metrics HTTP/1.1\r\n"));  // and no more
  // Once a worker holds it, the stop must shut it down to end.
  ASSERT_TRUE(
      WaitUntil([&] { return server_->serving() == 1; }, absl::Seconds(30)));
  std::atomic<bool> stopped = false;
  std::thread stopper([&] {
    server_.reset();
    stopped = true;
  });
  const bool in_time =
      WaitUntil([&] { return stopped.load(); }, absl::Seconds(30));
  if (!in_time) close(fd);  // lets the stop finish, so the test can end
  stopper.join();
  EXPECT_TRUE(in_time) << "the server's stop waited for its client";
}

}  // namespace
}  // namespace cohort::rpc
