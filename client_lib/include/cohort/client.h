#pragma once

// Cohort's client library: connect to a coordinator and query it. Used by
// cohortctl and by user programs.
//
//   absl::StatusOr<std::unique_ptr<cohort::Client>> client =
//       cohort::Client::Connect("10.0.0.1:7070",
//                               {.auth_token_file = "/etc/cohort/token"});
//   absl::StatusOr<cohort::v1::ClusterState> state =
//       (*client)->GetClusterState();

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/v1/coordinator.pb.h"

namespace cohort {

struct ClientOptions {
  std::string auth_token_file;  // bearer token sent with every call
  std::string tls_ca_file;      // verify the coordinator (enables TLS)
  std::string tls_cert_file;    // client certificate, for mutual TLS
  std::string tls_key_file;
  absl::Duration rpc_timeout = absl::Seconds(5);
};

// A connection to one coordinator. Thread-safe.
class Client {
 public:
  // Loads the credentials and creates the channel; connects lazily, so a
  // wrong address shows up as UNAVAILABLE on the first call. Errors name the
  // bad option.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& address, const ClientOptions& options = {});
  ~Client();

  const std::string& address() const;

  // The whole cluster as the coordinator sees it.
  absl::StatusOr<v1::ClusterState> GetClusterState() const;

  // Polls until every task of the spec is READY; DEADLINE_EXCEEDED naming
  // the tasks that are not when `timeout` passes.
  absl::StatusOr<v1::ClusterState> WaitForReady(absl::Duration timeout) const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
