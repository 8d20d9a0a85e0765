// Step functions for the job tests: ones that fail or crash on purpose, and
// the near-empty steps that measure the runtime's own per-step cost.

#include <csignal>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "cohort/step.h"

namespace {

// Fails at step 3, on every replica.
absl::Status FailStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  if (ctx.step() == 3) {
    return absl::InternalError(
        absl::StrCat("the loss became NaN at step ", ctx.step()));
  }
  return absl::OkStatus();
}

// Replica 1 crashes its agent's process at step 3; the others wait for it in
// a collective.
absl::Status CrashStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  if (ctx.step() == 3 &&
      ctx.replica_id_in_sync_group() == ctx.num_replicas_in_sync() - 1) {
    std::raise(SIGSEGV);
  }
  double x = 1;
  return ctx.all_reduce(cohort::ReduceOp::kSum,
                        cohort::Tensor{&x, 1, cohort::DType::kFloat64});
}

// Nothing at all: the cost of the step loop itself.
absl::Status EmptyStep(cohort::ReplicaContext&, const cohort::Batch&) {
  return absl::OkStatus();
}

// One 1-element all-reduce: the cost of a synchronous step.
absl::Status SyncStep(cohort::ReplicaContext& ctx, const cohort::Batch&) {
  float x = 1;
  return ctx.all_reduce(cohort::ReduceOp::kSum,
                        cohort::Tensor{&x, 1, cohort::DType::kFloat32});
}

}  // namespace

COHORT_REGISTER_STEP("fail_step", FailStep);
COHORT_REGISTER_STEP("crash_step", CrashStep);
COHORT_REGISTER_STEP("empty_step", EmptyStep);
COHORT_REGISTER_STEP("sync_step", SyncStep);
