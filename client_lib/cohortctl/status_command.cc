#include <cstdio>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/cluster_format.h"
#include "client_lib/cohortctl/commands.h"

namespace cohort::ctl {

namespace {

// Set once by SetConnectionHints, before any command runs; read only after.
struct ConnectionHints {
  std::string source;  // CommonOptions::coordinator_source
  bool tls = false;
};
ConnectionHints& Hints() {
  static ConnectionHints* const hints = new ConnectionHints();
  return *hints;
}

// Why a coordinator could not be reached, as far as gRPC's message tells.
std::string UnreachableHint(absl::string_view message) {
  const ConnectionHints& hints = Hints();
  if (absl::StrContains(absl::AsciiStrToLower(message), "handshake failed")) {
    return "the TLS handshake failed: does --tls_ca_file hold the CA that "
           "signed the coordinator's certificate, and (for mutual TLS) do "
           "--tls_cert_file and --tls_key_file hold a certificate it trusts?";
  }
  if (!hints.tls && absl::StrContains(message, "Socket closed")) {
    return "the coordinator closed the connection at once, as one that "
           "serves TLS does to a plaintext client: pass --tls_ca_file (and "
           "--tls_cert_file, --tls_key_file for mutual TLS)";
  }
  if (absl::EndsWith(hints.source, "/coordinator.port")) {
    return absl::StrCat(
        "no coordinator answers there: the address is the one `cohortctl "
        "up` left in ",
        hints.source,
        "; is that cluster still up? (`cohortctl up` starts one; "
        "--coordinator names another)");
  }
  return "no coordinator answers there: is it running, and do "
         "--coordinator or COHORT_COORDINATOR name it?";
}

}  // namespace

void SetConnectionHints(const CommonOptions& options) {
  Hints() = {.source = options.coordinator_source,
             .tls = !options.client.tls_ca_file.empty()};
}

void PrintError(const absl::Status& status) {
  std::fprintf(stderr, "cohortctl: %s: %s\n",
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  if (absl::IsUnavailable(status) &&
      absl::StrContains(status.message(), "failed to connect")) {
    std::fprintf(stderr, "cohortctl: %s\n",
                 UnreachableHint(status.message()).c_str());
  }
}

std::unique_ptr<Client> ConnectOrReport(const CommonOptions& options) {
  if (options.coordinator.empty()) {
    PrintError(absl::InvalidArgumentError(
        "no coordinator: pass --coordinator=HOST:PORT, set "
        "COHORT_COORDINATOR, or start one with `cohortctl up`"));
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(options.coordinator, options.client);
  if (!client.ok()) {
    // A bad address is the fault of where it came from: say where.
    const bool bad_address = absl::IsInvalidArgument(client.status()) &&
                             absl::StartsWith(client.status().message(),
                                              "the coordinator's address");
    PrintError(bad_address ? absl::InvalidArgumentError(absl::StrCat(
                                 client.status().message(), " (from ",
                                 options.coordinator_source, ")"))
                           : client.status());
    return nullptr;
  }
  return *std::move(client);
}

int StatusCommand(const CommonOptions& options) {
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  absl::StatusOr<v1::ClusterState> state = client->GetClusterState();
  if (!state.ok()) {
    PrintError(state.status());
    return 1;
  }
  if (options.json) {
    std::cout << ClusterStateToJson(*state).dump(2) << std::endl;
  } else {
    std::cout << ClusterStateToTable(*state);
  }
  return 0;
}

}  // namespace cohort::ctl
