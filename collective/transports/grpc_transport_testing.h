#pragma once

// Test helper: a group of GrpcTransports in one process, one thread per
// rank, since Create returns only once every rank has joined.

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "collective/store.h"
#include "collective/transports/grpc_transport.h"

namespace cohort::collective {

// Each rank's Create result; `options(rank)` gives the rank's options.
inline std::vector<absl::StatusOr<std::unique_ptr<GrpcTransport>>>
CreateGroupInThreads(Store& store, int size,
                     const std::function<GrpcTransportOptions(int)>& options) {
  std::vector<absl::StatusOr<std::unique_ptr<GrpcTransport>>> created;
  for (int rank = 0; rank < size; ++rank) {
    created.emplace_back(absl::UnknownError("not created"));
  }
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      created[rank] = GrpcTransport::Create(options(rank), store);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  return created;
}

}  // namespace cohort::collective
