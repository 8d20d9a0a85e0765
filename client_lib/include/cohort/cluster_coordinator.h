#pragma once

// tf.distribute.coordinator.ClusterCoordinator for a ParameterServer job
// submitted with ps.schedule_from_client: the user's program owns the
// training loop and schedules the library's registered step functions onto
// the workers, which pull the variables from the ps tasks, run the function
// and push its gradients.
//
//   cohort::JobSpec spec{.strategy = cohort::StrategyKind::kParameterServer,
//                        .library_path = "libmy_steps.so",
//                        .init_fn = "my_init", .dataset_fn = "my_data",
//                        .global_batch_size = 64};
//   spec.ps.schedule_from_client = true;
//   std::string id = *client->SubmitJob(spec);
//   cohort::ClusterCoordinator coordinator(client.get(), id);
//   for (int step = 1; step <= 1000; ++step) {
//     (void)coordinator.Schedule("my_step", {}, {.takes_batch = true});
//     if (step % 100 == 0) {
//       cohort::RemoteValue eval = *coordinator.Schedule("my_eval");
//       auto metrics = eval.Fetch(absl::Minutes(1));  // {"accuracy": ...}
//     }
//   }
//   absl::Status joined = coordinator.Join(absl::Minutes(10));
//   auto weights = coordinator.FetchVariables({"dense/kernel"});
//   (void)coordinator.Finish();  // the job ends SUCCEEDED
//
// Each call runs at least once: one whose worker died runs again on another,
// as in TF. A call's result is what its function reported
// (ReplicaContext::report); its arguments are ReplicaContext::args(). A call
// whose function returned an error is FAILED, not re-run: its Fetch returns
// that error, a Join raises it once (see Join), and the job goes on.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/client.h"

namespace cohort {

struct CallOptions {
  // The call gets the next batch of the job's dataset_fn (TF's per-worker
  // dataset iterator): from a data set, the n-th such call gets global
  // batch n wherever it runs, and a re-run gets the same; from a stream,
  // its worker's next.
  bool takes_batch = false;
  // How long Schedule waits for room while the job holds its limit of calls
  // not yet completed, as TF's schedule blocks on a full queue.
  absl::Duration timeout = absl::Minutes(5);
};

// One scheduled call: TF's RemoteValue. Cheap to copy; thread-safe. The
// client must outlive it.
class RemoteValue {
 public:
  int64_t id() const { return id_; }

  // Waits up to `timeout` for the call to complete and returns what it
  // reported. Its function's error when it FAILED; DEADLINE_EXCEEDED when
  // it is still queued or running; FAILED_PRECONDITION when the job ended
  // without running it. While the coordinator is unreachable (restarting)
  // it keeps asking until `timeout`.
  absl::StatusOr<std::map<std::string, double>> Fetch(
      absl::Duration timeout) const;
  // Where the call is now, without waiting.
  absl::StatusOr<v1::CallStatus> Poll() const;

 private:
  friend class ClusterCoordinator;
  RemoteValue(const Client* client, std::string job_id, int64_t id)
      : client_(client), job_id_(std::move(job_id)), id_(id) {}

  const Client* client_;
  std::string job_id_;
  int64_t id_;
};

// Thread-compatible. The client must outlive it.
class ClusterCoordinator {
 public:
  ClusterCoordinator(const Client* client, std::string job_id)
      : client_(client), job_id_(std::move(job_id)) {}

  const std::string& job_id() const { return job_id_; }

  // schedule(fn, args): queues a call of the step function `fn`.
  // INVALID_ARGUMENT for no function or too many args (4096);
  // FAILED_PRECONDITION when the job takes no more calls (it ended, was
  // finished, or stopped training); DEADLINE_EXCEEDED when no room came
  // within options.timeout. A function the library does not register is
  // the call's FAILED result.
  absl::StatusOr<RemoteValue> Schedule(const std::string& fn,
                                       std::vector<double> args = {},
                                       const CallOptions& options = {});
  // join(): waits up to `timeout` until every call scheduled so far has
  // completed. ABORTED with a FAILED call's error, as TF's join raises it,
  // once for each failure: the first Join to see failures names the first,
  // a later one the newest since the Join before it. DEADLINE_EXCEEDED with
  // the counts; FAILED_PRECONDITION when the job ended first. While the
  // coordinator is unreachable (restarting) it keeps asking until
  // `timeout`, as Fetch does.
  absl::Status Join(absl::Duration timeout);
  // done(): whether every call scheduled so far has completed.
  absl::StatusOr<bool> Done() const;
  // No more calls: the job ends SUCCEEDED once every call has completed.
  absl::Status Finish();
  // The ps variables' current values (empty `names`: all of them).
  absl::StatusOr<std::map<std::string, HostTensor>> FetchVariables(
      const std::vector<std::string>& names = {}) const {
    return client_->FetchVariables(job_id_, names);
  }

 private:
  const Client* const client_;
  const std::string job_id_;
  int64_t failures_raised_ = 0;  // failed calls a Join has reported
};

}  // namespace cohort
