// Job-spec validation and submission: any JobSpec the wire can carry is
// accepted or refused with INVALID_ARGUMENT / FAILED_PRECONDITION, and an
// accepted one survives the job table's save and restore.

#include <cstdint>

#include "coordinator/job_manager.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::v1::JobSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return 0;
  (void)cohort::coordinator::ValidateJobSpec(spec);
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  cohort::coordinator::JobManager jobs(
      *cohort::ClusterSpec::FromJson(cohort::fuzz::kCluster), {});
  if (!jobs.Submit(spec, now).ok()) return 0;
  const std::optional<std::string> table =
      jobs.TakeSnapshotIfChanged(now, absl::Seconds(1)).value();
  if (!table.has_value()) std::abort();  // a submit must be saved
  cohort::coordinator::JobManager restored(
      *cohort::ClusterSpec::FromJson(cohort::fuzz::kCluster), {});
  if (!restored.Restore(*table, now).ok()) std::abort();  // lost on restart
  return 0;
}
