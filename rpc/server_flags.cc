#include "rpc/server_flags.h"

#include "absl/flags/flag.h"
#include "common/cluster_spec.h"
#include "common/status_macros.h"
#include "rpc/security_flags.h"

ABSL_FLAG(std::string, listen, "",
          "HOST:PORT to serve on. Port 0 binds a free port (see "
          "--port_file). Default: for the coordinator, the address saved in "
          "--state_dir, else 127.0.0.1:7070; a task's address in TF_CONFIG "
          "for an agent or ps.");
ABSL_FLAG(std::string, port_file, "",
          "Write the bound port here once serving (useful with port 0).");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus metrics on (GET /metrics); port 0 "
          "picks a free one. Empty: no metrics endpoint.");
ABSL_FLAG(std::string, metrics_token_file, "",
          "File holding the bearer token the metrics endpoint wants, instead "
          "of the cluster's (--auth_token_file). Needed with TLS and a "
          "cluster token: the endpoint serves plain HTTP, where the cluster's "
          "token would travel in the clear. Passed on to launched tasks.");
ABSL_FLAG(std::string, log_level, "info",
          "trace, debug, info, warn, error or off.");

namespace cohort::rpc {

bool ListenFlagGiven() { return !absl::GetFlag(FLAGS_listen).empty(); }

absl::StatusOr<DaemonFlags> DaemonFlagsFromFlags(
    const std::string& default_listen) {
  DaemonFlags flags;
  flags.server.listen = absl::GetFlag(FLAGS_listen);
  if (flags.server.listen.empty()) flags.server.listen = default_listen;
  absl::StatusOr<HostPort> listen =
      ParseHostPort(flags.server.listen, /*allow_port_zero=*/true);
  if (!listen.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: ", listen.status().message()));
  }
  flags.server.port_file = absl::GetFlag(FLAGS_port_file);
  flags.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  if (!flags.metrics_listen.empty()) {
    absl::StatusOr<HostPort> metrics =
        ParseHostPort(flags.metrics_listen, /*allow_port_zero=*/true);
    if (!metrics.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics_listen: ", metrics.status().message()));
    }
  }
  flags.security_files = SecurityFilesFromFlags();
  flags.security_files.metrics_token_file =
      absl::GetFlag(FLAGS_metrics_token_file);
  COHORT_ASSIGN_OR_RETURN(flags.server.security,
                          Security::Load(flags.security_files));
  const Security& security = flags.server.security;
  if (!flags.metrics_listen.empty() && security.tls() &&
      security.token.has_value() && !security.metrics_token.has_value()) {
    // Whoever reads the cluster's token off the wire may submit code that
    // every worker runs: TLS would protect the RPCs and nothing else.
    return absl::InvalidArgumentError(
        "--metrics_listen serves plain HTTP, where scrapes would carry the "
        "cluster's token (--auth_token_file) in the clear beside TLS: give "
        "the metrics endpoint a token of its own with --metrics_token_file");
  }
  if (!flags.server.security.ca_pem.empty() &&
      flags.server.security.cert_pem.empty()) {
    // A client may verify servers with a CA alone; a server without a
    // certificate would serve plaintext and ask for no client certificate.
    return absl::InvalidArgumentError(
        "--tls_ca_file needs --tls_cert_file and --tls_key_file on a daemon: "
        "without a certificate of its own it would serve plaintext to "
        "anyone");
  }
  flags.log_level = absl::GetFlag(FLAGS_log_level);
  return flags;
}

}  // namespace cohort::rpc
