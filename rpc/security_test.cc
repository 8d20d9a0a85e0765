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

}  // namespace
}  // namespace cohort::rpc
