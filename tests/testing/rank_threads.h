#pragma once

// Runs one rank of a collective group per thread, for the tests of the
// algorithms over in-process transports.

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "collective/communicator.h"

namespace cohort::testing {

// Calls `body(rank, *comms[rank])` on one thread per rank, at once, and
// returns each rank's status once all have returned.
inline std::vector<absl::Status> RunOnRankThreads(
    const std::vector<std::unique_ptr<collective::Communicator>>& comms,
    const std::function<absl::Status(int, collective::Communicator&)>& body) {
  std::vector<absl::Status> results(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back(
        [&, r] { results[r] = body(static_cast<int>(r), *comms[r]); });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

}  // namespace cohort::testing
