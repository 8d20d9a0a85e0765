#include "rpc/security_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the cluster's bearer token. Servers reject RPCs "
          "without it (UNAUTHENTICATED); clients send it with every call.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate. Servers serve TLS with it; clients present it "
          "when the server verifies client certificates.");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA bundle. Servers require client certificates signed by it; "
          "clients verify the server against it (and so use TLS).");

namespace cohort::rpc {

SecurityFiles SecurityFilesFromFlags() {
  return SecurityFiles{
      .auth_token_file = absl::GetFlag(FLAGS_auth_token_file),
      .tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file),
      .tls_key_file = absl::GetFlag(FLAGS_tls_key_file),
      .tls_ca_file = absl::GetFlag(FLAGS_tls_ca_file),
  };
}

}  // namespace cohort::rpc
