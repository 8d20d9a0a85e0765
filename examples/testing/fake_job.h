#pragma once

// Runs a step library's functions as a job would, in this process and
// without a cluster: the library is opened with dlopen as the agent opens
// it, its data set is split into global and per-replica batches, and the
// replicas run as threads over the fake runtime of fake_runtime.h.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/step.h"

namespace cohort::examples::testing {

// A loaded step library. It stays loaded for the life of the process, as in
// the agent. Immutable, so thread-safe.
class StepLibrary {
 public:
  // FAILED_PRECONDITION when `path` is no step library of this API version.
  static absl::StatusOr<std::unique_ptr<StepLibrary>> Open(
      const std::string& path);
  // The library at `path`, opened on first use and kept for the life of the
  // process, as a test binary needs it. A library that does not open is a
  // broken build: prints why and aborts. Thread-safe.
  static const StepLibrary& OpenOnce(const std::string& path);

  const internal::Registry& registry() const { return *registry_; }

 private:
  explicit StepLibrary(const internal::Registry* registry)
      : registry_(registry) {}
  const internal::Registry* registry_;  // not owned; the library's
};

struct FakeJobOptions {
  std::string init_fn;  // empty: none
  std::string step_fn;
  std::string dataset_fn;  // empty: every batch is empty
  int replicas = 1;
  int64_t steps = 1;
  int64_t global_batch_size = 1;  // a multiple of replicas
  uint64_t seed = 0;
  std::string config_json = "{}";
};

struct FakeJobResult {
  // Replica 0's reports: metric → (step, value), in step order.
  std::map<std::string, std::vector<std::pair<int64_t, double>>> metrics;
  // Each replica's variables after the last step: name → values.
  std::vector<std::map<std::string, std::vector<double>>> variables;

  // Replica 0's last value of `metric`, or NaN.
  double Last(const std::string& metric) const;
};

// Runs the job; the first error of any replica (or of the dataset function)
// ends it and is returned.
absl::StatusOr<FakeJobResult> RunFakeJob(const StepLibrary& library,
                                         const FakeJobOptions& options);

}  // namespace cohort::examples::testing
