// Authentication and TLS, end to end: a coordinator (and the tasks it
// launches) with a bearer token or mutual TLS, queried with cohortctl.

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/http_get.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/test_pki.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(SecurityE2eTest, TokenIsRequiredByTheCoordinatorAndItsTasks) {
  ScratchDir dir;
  const std::string token = dir.Write("token", "s3cret-token\n");
  const std::string wrong = dir.Write("wrong", "not-the-token\n");
  // The tasks got the token too, or they could not have registered.
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 1, {absl::StrCat("--auth_token_file=", token)},
                        {.auth_token_file = token});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& c = *cluster->coordinator;

  const std::string coordinator_flag =
      absl::StrCat("--coordinator=", c.address());
  CommandResult anonymous =
      RunCommand({Binary("cohortctl"), coordinator_flag, "status"});
  EXPECT_EQ(anonymous.exit_code, 1) << anonymous.output;
  EXPECT_THAT(anonymous.output, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(anonymous.output, HasSubstr("missing bearer token"));

  auto status_with = [&](const std::string& token_file) {
    return RunCommand({Binary("cohortctl"), coordinator_flag,
                       absl::StrCat("--auth_token_file=", token_file),
                       "status"});
  };
  CommandResult impostor = status_with(wrong);
  EXPECT_EQ(impostor.exit_code, 1) << impostor.output;
  EXPECT_THAT(impostor.output, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(impostor.output, HasSubstr("invalid bearer token"));

  CommandResult member = status_with(token);
  EXPECT_EQ(member.exit_code, 0) << member.output;
  EXPECT_THAT(member.output, HasSubstr("3/3 tasks ready"));
  EXPECT_THAT(member.output, Not(HasSubstr("every user")));
  // A group may share the token (deploy/README.md's root:cohort 0640).
  ASSERT_EQ(chmod(token.c_str(), 0640), 0);
  CommandResult group = status_with(token);
  EXPECT_EQ(group.exit_code, 0) << group.output;
  EXPECT_THAT(group.output, Not(HasSubstr("every user")));
  // One that anyone may read still works, with a warning on stderr, out of
  // the way of what scripts read.
  ASSERT_EQ(chmod(token.c_str(), 0644), 0);
  CommandResult shared = status_with(token);
  EXPECT_EQ(shared.exit_code, 0) << shared.output;
  EXPECT_THAT(
      shared.output,
      HasSubstr(absl::StrCat("cohortctl: warning: --auth_token_file: ", token,
                             " can be read by every user of this "
                             "machine (mode 0644); chmod o-r it")));
  CommandResult json =
      RunCommand({"/bin/sh", "-c",
                  absl::StrCat(Binary("cohortctl"), " ", coordinator_flag,
                               " --auth_token_file=", token,
                               " status --json 2>/dev/null")});
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(json.output.rfind("{", 0), 0u) << json.output;

  // Health checks stay open for load balancers and probes.
  absl::StatusOr<std::string> health = HealthCheck(c.address());
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
}

TEST(SecurityE2eTest, MutualTlsRefusesPlaintextAndUnknownClients) {
  ScratchDir dir;
  absl::StatusOr<TestPki> pki = MakeTestPki(dir);
  ASSERT_TRUE(pki.ok()) << pki.status();
  const std::vector<std::string> tls_flags = {
      absl::StrCat("--tls_cert_file=", pki->cert),
      absl::StrCat("--tls_key_file=", pki->key),
      absl::StrCat("--tls_ca_file=", pki->ca)};
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 0, tls_flags,
                        {.tls_ca_file = pki->ca,
                         .tls_cert_file = pki->cert,
                         .tls_key_file = pki->key});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  CoordinatorProcess& c = *cluster->coordinator;

  const std::string coordinator_flag =
      absl::StrCat("--coordinator=", c.address());
  CommandResult plaintext = RunCommand(
      {Binary("cohortctl"), coordinator_flag, "--timeout=2s", "status"});
  EXPECT_EQ(plaintext.exit_code, 1) << plaintext.output;
  EXPECT_THAT(plaintext.output, HasSubstr("UNAVAILABLE"));
  // Not "no coordinator answers": one does, in TLS.
  EXPECT_THAT(plaintext.output,
              HasSubstr("as one that serves TLS does to a plaintext client: "
                        "pass --tls_ca_file"));

  // TLS, but no client certificate: mutual TLS refuses the handshake.
  CommandResult anonymous_tls =
      RunCommand({Binary("cohortctl"), coordinator_flag, "--timeout=2s",
                  absl::StrCat("--tls_ca_file=", pki->ca), "status"});
  EXPECT_EQ(anonymous_tls.exit_code, 1) << anonymous_tls.output;

  std::vector<std::string> good = {Binary("cohortctl"), coordinator_flag,
                                   "status", "--json"};
  good.insert(good.end(), tls_flags.begin(), tls_flags.end());
  CommandResult member = RunCommand(good);
  EXPECT_EQ(member.exit_code, 0) << member.output;
  EXPECT_THAT(member.output, HasSubstr("\"state\": \"READY\""));
}

// Scrapes are plain HTTP: beside TLS, the cluster's token must not travel
// in them.
TEST(SecurityE2eTest, WithTlsTheMetricsEndpointWantsATokenOfItsOwn) {
  ScratchDir dir;
  absl::StatusOr<TestPki> pki = MakeTestPki(dir);
  ASSERT_TRUE(pki.ok()) << pki.status();
  const std::string token = dir.Write("token", "cluster-token\n");
  const std::string scrape = dir.Write("scrape", "scrape-token\n");
  std::vector<std::string> flags = {absl::StrCat("--tls_cert_file=", pki->cert),
                                    absl::StrCat("--tls_key_file=", pki->key),
                                    absl::StrCat("--tls_ca_file=", pki->ca),
                                    absl::StrCat("--auth_token_file=", token),
                                    "--metrics_listen=127.0.0.1:0"};

  const std::string spec =
      dir.Write("spec.json", R"({"cluster": {"chief": ["127.0.0.1:1"]}})");
  std::vector<std::string> refused = {Binary("cohort-coordinator"),
                                      absl::StrCat("--cluster_spec=", spec),
                                      "--listen=127.0.0.1:0"};
  refused.insert(refused.end(), flags.begin(), flags.end());
  const CommandResult result = RunCommand(refused, absl::Seconds(10));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("--metrics_listen serves plain HTTP, where scrapes "
                        "would carry the cluster's token"));
  EXPECT_THAT(result.output, HasSubstr("--metrics_token_file"));

  flags.push_back(absl::StrCat("--metrics_token_file=", scrape));
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 0, flags,
                        {.auth_token_file = token,
                         .tls_ca_file = pki->ca,
                         .tls_cert_file = pki->cert,
                         .tls_key_file = pki->key});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::string> endpoints = {
      cluster->state.coordinator_metrics_address()};
  // The launched tasks were given the scrape token too.
  for (const v1::TaskStatus& task : cluster->state.tasks()) {
    endpoints.push_back(task.metrics_address());
  }
  ASSERT_EQ(endpoints.size(), 3u);
  for (const std::string& endpoint : endpoints) {
    ASSERT_FALSE(endpoint.empty());
    int status = 0;
    HttpGet(endpoint, "/metrics", &status, "scrape-token");
    EXPECT_EQ(status, 200) << endpoint;
    HttpGet(endpoint, "/metrics", &status, "cluster-token");
    EXPECT_EQ(status, 401) << endpoint;
  }
}

}  // namespace
}  // namespace cohort::testing
