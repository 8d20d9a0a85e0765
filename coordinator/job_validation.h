#pragma once

// Checks of a submitted job spec that need nothing but the spec: every
// field's type and range. What depends on the cluster (devices, batch
// divisibility, NCCL) is placement's to check (placement.h).

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"

namespace cohort::coordinator {

// The longest wait a job may set (placement, collectives, ps recovery), so
// that no spec parks the job queue, a collective or a ps recovery for good.
inline constexpr int64_t kMaxJobWaitMs = int64_t{7} * 24 * 3600 * 1000;

// INVALID_ARGUMENT naming the field of a malformed spec.
absl::Status ValidateJobSpec(const v1::JobSpec& spec);
absl::Status ValidatePsOptions(const v1::ParameterServerOptions& ps);
absl::Status ValidateEarlyStopping(const v1::JobSpec& spec);

}  // namespace cohort::coordinator
