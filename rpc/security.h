#pragma once

// Transport security shared by servers and clients: optional TLS and an
// optional bearer token.
//
// TLS: a server with a certificate and key serves TLS; given a CA as well it
// requires and verifies client certificates. A client with a CA verifies the
// server against it, and presents its own certificate when it has one.
//
// Token: every RPC a client makes carries "authorization: Bearer <token>";
// every server started with a token rejects calls without it.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::rpc {

// File paths, as the --auth_token_file / --tls_* flags give them.
struct SecurityFiles {
  std::string auth_token_file;
  // Daemons only: the token their metrics endpoints want instead of the
  // cluster's (--metrics_token_file).
  std::string metrics_token_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
};

// Loaded credentials material. Immutable value type; thread-compatible.
struct Security {
  std::optional<std::string> token;
  std::optional<std::string> metrics_token;
  std::string cert_pem, key_pem, ca_pem;  // empty when not given

  bool tls() const { return !cert_pem.empty() || !ca_pem.empty(); }
  // What a metrics endpoint wants: its own token, else the cluster's.
  const std::optional<std::string>& MetricsToken() const {
    return metrics_token.has_value() ? metrics_token : token;
  }

  // Reads and checks the files; errors name the flag and the file.
  static absl::StatusOr<Security> Load(const SecurityFiles& files);

  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;

  // The arguments a daemon passes to the tasks it launches, so that they
  // speak the same way: "--auth_token_file=...", "--tls_cert_file=...",
  // "--metrics_token_file=...".
  static std::vector<std::string> ToFlags(const SecurityFiles& files);
};

// One line for each secret (token, TLS key) that every user of the machine
// may read. Programs print them where they print warnings; the library
// itself prints nothing. A group-readable file is the deployment's choice
// (deploy/README.md) and passes.
std::vector<std::string> SecretFileWarnings(const SecurityFiles& files);

}  // namespace cohort::rpc
