#include "rpc/http_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::rpc {
namespace {

using ::testing::HasSubstr;

TEST(RequestHeadEndTest, EndsJustPastTheBlankLine) {
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\r\nHost: x\r\n"), std::nullopt);
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.1\r\n\r\nbody"), 18u);
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.0\n\nbody"), 16u);
  EXPECT_EQ(RequestHeadEnd("GET / HTTP/1.0\nA: b\n"), std::nullopt);
}

TEST(ParseRequestHeadTest, ReadsTheMethodPathAndAuthorization) {
  absl::StatusOr<HttpRequestHead> head = ParseRequestHead(
      "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n"
      "AUTHORIZATION:  Bearer tok \r\n\r\n");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->method, "GET");
  EXPECT_EQ(head->path, "/metrics");
  EXPECT_EQ(head->authorization, "Bearer tok");

  // As `printf 'GET /metrics HTTP/1.0\n\n' | nc` sends it.
  head = ParseRequestHead("GET /metrics HTTP/1.0\nAuthorization: x\n\n");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->path, "/metrics");
  EXPECT_EQ(head->authorization, "x");

  head = ParseRequestHead("HEAD /sd HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->method, "HEAD");
  EXPECT_EQ(head->authorization, std::nullopt);
}

TEST(ParseRequestHeadTest, MalformedHeadsAreNamed) {
  struct Case {
    const char* head;
    const char* error;
  };
  for (const Case& c : {
           Case{"\r\n\r\n", "an empty HTTP request"},
           Case{"GET /metrics\r\n\r\n", "a malformed request line"},
           Case{"GET metrics HTTP/1.1\r\n\r\n", "a malformed request line"},
           // A TLS handshake sent to the plain HTTP port.
           Case{"\x16\x03\x01\x02\x05\r\n\r\n", "a malformed request line"},
           Case{"GET / HTTP/2.0\r\n\r\n", "HTTP version \"HTTP/2.0\""},
           Case{"GET / HTTP/1.1\r\nno colon\r\n\r\n",
                "header line 1 has no colon"},
       }) {
    absl::StatusOr<HttpRequestHead> head = ParseRequestHead(c.head);
    ASSERT_FALSE(head.ok()) << c.head;
    EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(head.status().message(), HasSubstr(c.error)) << c.head;
  }
}

}  // namespace
}  // namespace cohort::rpc
