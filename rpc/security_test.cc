// Security::Load: what it refuses before gRPC ever sees the files.

#include "rpc/security.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/test_pki.h"

namespace cohort::rpc {
namespace {

using ::testing::HasSubstr;

TEST(SecurityTest, FilesThatHoldNoPemBlockOfTheirKindAreNamed) {
  testing::ScratchDir dir;
  absl::StatusOr<testing::TestPki> pki = testing::MakeTestPki(dir, "ours");
  ASSERT_TRUE(pki.ok()) << pki.status();
  ASSERT_TRUE(Security::Load({.tls_cert_file = pki->cert,
                              .tls_key_file = pki->key,
                              .tls_ca_file = pki->ca})
                  .ok());

  const std::string junk = dir.Write("junk.pem", "not a certificate\n");
  absl::Status status =
      Security::Load({.tls_cert_file = junk, .tls_key_file = pki->key})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("--tls_cert_file: ", junk,
                                     " holds no PEM certificate")));

  // A key where the certificate belongs, and the other way round.
  status = Security::Load({.tls_cert_file = pki->key, .tls_key_file = pki->key})
               .status();
  EXPECT_THAT(status.message(), HasSubstr("--tls_cert_file: "));
  status =
      Security::Load({.tls_cert_file = pki->cert, .tls_key_file = pki->cert})
          .status();
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("--tls_key_file: ", pki->cert,
                                     " holds no PEM private key")));
  status = Security::Load({.tls_ca_file = junk}).status();
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("--tls_ca_file: ", junk,
                                     " holds no PEM certificate")));
}

// gRPC would accept both and fail at bind, as if the port were in use.
TEST(SecurityTest, ARequestOrAKeyOfAnotherCertificateIsRefusedByName) {
  testing::ScratchDir dir;
  absl::StatusOr<testing::TestPki> ours = testing::MakeTestPki(dir, "ours");
  ASSERT_TRUE(ours.ok()) << ours.status();
  absl::StatusOr<testing::TestPki> theirs = testing::MakeTestPki(dir, "theirs");
  ASSERT_TRUE(theirs.ok()) << theirs.status();

  const std::string request = dir.path() + "/ours-node.csr";
  absl::Status status =
      Security::Load({.tls_cert_file = request, .tls_key_file = ours->key})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("--tls_cert_file: ", request,
                                     " holds no PEM certificate")));

  status =
      Security::Load({.tls_cert_file = ours->cert, .tls_key_file = theirs->key})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("--tls_key_file: ", theirs->key,
                                     " is not the key of the certificate in ",
                                     ours->cert)));

  // gRPC cannot ask for a passphrase.
  const std::string encrypted = dir.path() + "/encrypted.key";
  const testing::CommandResult made = testing::RunCommand(
      {"/usr/bin/openssl", "pkey", "-in", ours->key, "-aes256", "-passout",
       "pass:secret", "-out", encrypted},
      absl::Seconds(30));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  status =
      Security::Load({.tls_cert_file = ours->cert, .tls_key_file = encrypted})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("--tls_key_file: ", encrypted,
                                     ": its private key cannot be read "
                                     "(damaged, or encrypted: give it "
                                     "without a passphrase)")));
}

// gRPC aborts a client whose header value holds any other byte, writing
// the value, the token, into its log: refused when loaded, without
// repeating it.
TEST(SecurityTest, ATokenOfAnythingButPrintableAsciiIsRefusedUnquoted) {
  testing::ScratchDir dir;
  for (const std::string& token :
       {std::string("SECRET\xc3\xb6k3nlongenough"),
        std::string("SECRET\x01"
                    "cd"),
        std::string("SECRET\0cd", 9), std::string("SECRET\vcd")}) {
    const std::string file = dir.Write("token", token + "\n");
    const absl::Status status =
        Security::Load({.auth_token_file = file}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(
        status.message(),
        HasSubstr(absl::StrCat("--auth_token_file: ", file, " holds byte 0x")));
    EXPECT_THAT(status.message(), HasSubstr("at offset "));
    EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("SECRET")));
  }
  const std::string good =
      dir.Write("good", "q1ZzX0c2n4b9H7k3Lm8pR5t2Vw6yA0dF3gJ9sE1uB4o=\n");
  absl::StatusOr<Security> loaded = Security::Load({.auth_token_file = good});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->token, "q1ZzX0c2n4b9H7k3Lm8pR5t2Vw6yA0dF3gJ9sE1uB4o=");
}

TEST(SecurityTest, TheMetricsTokenIsCheckedLikeTheClustersAndPassedOn) {
  testing::ScratchDir dir;
  const std::string cluster = dir.Write("cluster", "cluster-token\n");
  const std::string empty = dir.Write("empty", "\n");
  const absl::Status refused =
      Security::Load({.auth_token_file = cluster, .metrics_token_file = empty})
          .status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(
      refused.message(),
      HasSubstr(absl::StrCat("--metrics_token_file: ", empty, " is empty")));

  absl::StatusOr<Security> cluster_only =
      Security::Load({.auth_token_file = cluster});
  ASSERT_TRUE(cluster_only.ok()) << cluster_only.status();
  EXPECT_EQ(cluster_only->MetricsToken(), "cluster-token");

  const std::string scrape = dir.Write("scrape", "scrape-token\n");
  const SecurityFiles files = {.auth_token_file = cluster,
                               .metrics_token_file = scrape};
  absl::StatusOr<Security> both = Security::Load(files);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->token, "cluster-token");
  EXPECT_EQ(both->MetricsToken(), "scrape-token");
  EXPECT_THAT(Security::ToFlags(files), ::testing::Contains(absl::StrCat(
                                            "--metrics_token_file=", scrape)));
}

}  // namespace
}  // namespace cohort::rpc
