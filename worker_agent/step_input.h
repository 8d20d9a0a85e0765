#pragma once

// The input of a synchronous attempt on one agent: each step's batches,
// from an InputPipeline or a StreamPipeline, prepared ahead of the
// replicas on an input thread (tf.distribute's per-replica prefetch
// buffer) and, when the data set asks, copied into each replica's device
// memory there (InputOptions' fetch_to_device), so that the copy of step
// s + 1 overlaps the compute of step s.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/step.h"
#include "worker_agent/device_memory.h"
#include "worker_agent/input_pipeline.h"
#include "worker_agent/stream_pipeline.h"

namespace cohort::agent {

// Every local replica takes the steps in order, from the step the attempt
// begins at. The input thread keeps at most `prefetch_steps` steps ready
// beyond the oldest one a replica still holds; with 0 there is no thread,
// and the first replica to ask for a step cuts it.
//
// Owns its pipeline, its thread (between Begin() and Shutdown() or
// destruction) and the device copies, which the batches it hands out share.
// Thread-safe.
class StepInput {
 public:
  struct Options {
    // Each local replica's device (kind and index; its stream is not used).
    std::vector<Device> devices;
    // The job's steps: nothing at or after it is prepared.
    int64_t end_step = 0;
    int prefetch_steps = 1;
    bool to_device = false;
    // How long a replica waits for its batch before the attempt fails; a
    // resumed stream's skip restarts the wait each time it moves on.
    absl::Duration wait_limit = absl::Minutes(10);
  };

  // Exactly one of `indexed` and `stream` is set. INVALID_ARGUMENT for
  // options the data set cannot have (device copies without prefetch, a
  // negative prefetch).
  static absl::StatusOr<std::unique_ptr<StepInput>> Create(
      std::unique_ptr<InputPipeline> indexed,
      std::unique_ptr<StreamPipeline> stream, Options options);
  ~StepInput();

  // Starts preparing at `first_step`, once; every replica calls it with the
  // step it resumes at, and later calls only check that it is the same.
  absl::Status Begin(int64_t first_step);
  // Local replica `local`'s batch of `step`, whose device copy (if any) is
  // released after `replica_device`'s stream has finished the work queued on
  // it. nullopt when the input ended before `step`. The pipeline's errors,
  // the abort status, or DEADLINE_EXCEEDED after wait_limit.
  absl::StatusOr<std::optional<Batch>> Take(int local, int64_t step,
                                            const Device& replica_device);
  // Whether `step` will have batches, waiting for it as Take does. Only a
  // stream can end, so the replicas ask this before ending the step before
  // it, and stop training together.
  absl::StatusOr<bool> HasStep(int64_t step);
  bool can_end() const { return stream_ != nullptr; }

  // Fails every wait, now and later, with `status`.
  void Abort(const absl::Status& status);
  // Stops and joins the input thread. Idempotent.
  void Shutdown();

  const std::string& description() const { return description_; }

 private:
  // A device buffer pool per local replica, shared with the batches that
  // hold its buffers.
  struct Pool;
  struct Prepared {
    std::vector<Batch> batches;
    std::vector<DeviceBuffer> copies;  // one per replica with to_device
    int taken = 0;
  };

  StepInput(std::unique_ptr<InputPipeline> indexed,
            std::unique_ptr<StreamPipeline> stream, Options options);

  void Loop();
  // Cuts step next_ and stores it; called with mu_ held, by the input
  // thread or (without prefetch) a replica, and releases mu_ meanwhile.
  void ProduceOne() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<std::vector<Batch>>> Cut(int64_t step);
  // Called as a resumed stream's skip to `step` moves on: restarts the
  // replicas' wait, and logs how far it got every few seconds.
  void NoteSkipped(int64_t step, int64_t done, int64_t total)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Packs each replica's batch into its device memory.
  absl::StatusOr<std::vector<DeviceBuffer>> CopyToDevices(
      std::vector<Batch>& batches);
  // Waits until `step` is prepared or can no longer be; false when it
  // can no longer be.
  absl::StatusOr<bool> AwaitStep(int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Ready(int64_t step) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool MayProduce() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<InputPipeline> indexed_;
  const std::unique_ptr<StreamPipeline> stream_;
  const Options options_;
  const std::string description_;
  const std::shared_ptr<Pool> pool_;
  // The copy streams of the input thread, one per local replica: copies do
  // not queue behind the replicas' own work. Input thread only.
  std::vector<Device> copy_devices_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool begun_ ABSL_GUARDED_BY(mu_) = false;
  int64_t first_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;  // the step to cut next
  bool producing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set when the input ended before step `ended_at`.
  std::optional<int64_t> ended_at_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the pipeline's, or Abort's
  std::map<int64_t, Prepared> prepared_ ABSL_GUARDED_BY(mu_);
  // The step each local replica holds (first_step_ - 1 before its first).
  std::vector<int64_t> held_ ABSL_GUARDED_BY(mu_);
  // When a resumed stream's skip last moved on, and was last logged.
  absl::Time skip_moved_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time skip_logged_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace cohort::agent
