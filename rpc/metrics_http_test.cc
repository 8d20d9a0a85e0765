#include "rpc/metrics_http.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

namespace cohort::rpc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr((*first)->address()));
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> bad =
      MetricsHttpServer::Start({.listen = "nowhere"}, &registry);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--metrics_listen"));
}

}  // namespace
}  // namespace cohort::rpc
