#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/cluster_format.h"
#include "client_lib/cohortctl/commands.h"

namespace cohort::ctl {

void PrintError(const absl::Status& status) {
  std::fprintf(stderr, "cohortctl: %s: %s\n",
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
}

absl::StatusOr<std::unique_ptr<Client>> ConnectToCoordinator(
    const CommonOptions& options) {
  if (options.coordinator.empty()) {
    return absl::InvalidArgumentError(
        "no coordinator: pass --coordinator=HOST:PORT, set "
        "COHORT_COORDINATOR, or start one with `cohortctl up`");
  }
  return Client::Connect(options.coordinator, options.client);
}

int StatusCommand(const CommonOptions& options) {
  absl::StatusOr<std::unique_ptr<Client>> client =
      ConnectToCoordinator(options);
  if (!client.ok()) {
    PrintError(client.status());
    return 2;
  }
  absl::StatusOr<v1::ClusterState> state = (*client)->GetClusterState();
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
