#include "tests/testing/jobs.h"

#include "absl/strings/str_cat.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {

std::string ExampleLibrary(const std::string& name) {
  return absl::StrCat(BinDir(), "/../lib/lib", name, ".so");
}

JobSpec MlpJob(const std::string& data_dir, StrategyKind strategy,
               int64_t steps, const std::string& shard_policy) {
  return JobSpec{.name = "mlp",
                 .strategy = strategy,
                 .library_path = ExampleLibrary("cohort_example_mlp"),
                 .init_fn = "mlp_init",
                 .step_fn = "mlp_step",
                 .dataset_fn = "mlp_data",
                 .steps = steps,
                 .global_batch_size = 128,
                 .seed = 3,
                 .config_json = absl::StrCat(R"({"data_dir": ")", data_dir,
                                             R"(", "shard_policy": ")",
                                             shard_policy, R"("})"),
                 .devices_per_agent = 2};
}

bool JobEnded(const v1::JobStatus& status) {
  return status.state() == v1::JOB_SUCCEEDED ||
         status.state() == v1::JOB_FAILED ||
         status.state() == v1::JOB_CANCELLED;
}

v1::JobStatus WaitForJob(
    Client& client, const std::string& id,
    const std::function<bool(const v1::JobStatus&)>& condition,
    absl::Duration timeout) {
  v1::JobStatus last;
  WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> status = client.GetJob(id);
        if (status.ok()) last = *status;
        return status.ok() && condition(last);
      },
      timeout, absl::Milliseconds(100));
  return last;
}

v1::JobStatus WaitForJobEnd(Client& client, const std::string& id,
                            absl::Duration timeout) {
  return WaitForJob(client, id, JobEnded, timeout);
}

}  // namespace cohort::testing
