#pragma once

// What a ParameterServer replica needs from the ps tasks, whole variables
// in and out of host memory. The real one (PsVariableClient) places and
// splits them over the ps tasks; unit tests use an in-memory one.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cohort/step.h"

namespace cohort::agent {

// A variable as the replica declares it to the ps tasks.
struct ServerVariable {
  VariableOptions options;
  std::vector<char> initial;  // host bytes, count() elements
  // Trained variables only: the optimizer the ps applies on push.
  bool trained = false;
  OptimizerOptions optimizer;
};

// A variable's host buffer, for pull (written) or push (read).
struct HostSlice {
  std::string name;
  void* data = nullptr;
  size_t bytes = 0;
};

// Thread-safe: the executors of one worker share it.
class VariableClient {
 public:
  virtual ~VariableClient() = default;
  // Idempotent: variables that exist keep their values.
  virtual absl::Status Create(const std::vector<ServerVariable>& variables) = 0;
  // Trained variables: their values. Aggregated ones: the aggregate.
  virtual absl::Status Pull(const std::vector<HostSlice>& slices) = 0;
  // Trained variables: gradients, applied by the ps optimizer. Aggregated
  // ones: this worker's value.
  virtual absl::Status Push(const std::vector<HostSlice>& slices) = 0;
};

}  // namespace cohort::agent
