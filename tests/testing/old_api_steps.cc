// A step library built against another version of the step API.

#include "cohort/step.h"

namespace {
absl::Status Step(cohort::ReplicaContext&, const cohort::Batch&) {
  return absl::OkStatus();
}
}  // namespace

COHORT_REGISTER_STEP("step", Step);
