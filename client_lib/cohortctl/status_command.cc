#include <cstdio>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/cluster_format.h"
#include "client_lib/cohortctl/commands.h"

namespace cohort::ctl {

void PrintError(const absl::Status& status) {
  std::fprintf(stderr, "cohortctl: %s: %s\n",
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  if (absl::IsUnavailable(status) &&
      absl::StrContains(status.message(), "failed to connect")) {
    std::fprintf(stderr,
                 "cohortctl: no coordinator answers there: is it running, "
                 "and do --coordinator or COHORT_COORDINATOR name it?\n");
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
    PrintError(client.status());
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
