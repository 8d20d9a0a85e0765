#include "rpc/server_flags.h"

#include "absl/flags/flag.h"
#include "common/cluster_spec.h"
#include "common/status_macros.h"
#include "rpc/security_flags.h"

ABSL_FLAG(std::string, listen, "",
          "HOST:PORT to serve on. Port 0 binds a free port (see "
          "--port_file). Default: 127.0.0.1:7070 for the coordinator; a "
          "task's address in TF_CONFIG for an agent or ps.");
ABSL_FLAG(std::string, port_file, "",
          "Write the bound port here once serving (useful with port 0).");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus metrics on (GET /metrics); port 0 "
          "picks a free one. Empty: no metrics endpoint.");
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
  COHORT_ASSIGN_OR_RETURN(flags.server.security,
                          Security::Load(flags.security_files));
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
