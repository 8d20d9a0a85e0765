#pragma once

// One agent's input pipeline over a DataStream: the streaming counterpart
// of InputPipeline, for data sets that cannot be indexed.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/dataset.h"

namespace cohort::agent {

// Cuts each step's batches from a stream, in order. DATA sharding (AUTO
// too) keeps elements p, p + n, ... of the stream for pipeline p of n, so
// that n pipelines over the same stream together take what one would;
// OFF keeps every element. With per_replica_batches each kept element is
// one replica's whole batch.
//
// Owns the stream; batches own their bytes. Not thread-safe: one input
// thread reads it.
class StreamPipeline {
 public:
  // INVALID_ARGUMENT, with the numbers, when the global batch does not
  // divide into num_pipelines * local_replicas, or the options ask for what
  // a stream cannot do (shuffle, FILE sharding).
  static absl::StatusOr<std::unique_ptr<StreamPipeline>> Create(
      std::unique_ptr<DataStream> stream, int pipeline, int num_pipelines,
      int local_replicas, int64_t global_batch_size);

  // Passes over what steps [0, step) took, for a resumed job, in calls of
  // at most kSkipChunk elements, calling `progress(done, total)` after
  // each: a long skip is seen to move. Call before the first NextStep().
  // A stream that ends first leaves NextStep() returning nullopt; its
  // errors are returned, naming it.
  static constexpr int64_t kSkipChunk = int64_t{1} << 20;
  absl::Status SkipTo(
      int64_t step,
      const std::function<void(int64_t done, int64_t total)>& progress = {});
  // The next step's batches, one per local replica; nullopt once the
  // stream has ended before filling them. The stream's own errors are
  // returned, naming it.
  absl::StatusOr<std::optional<std::vector<Batch>>> NextStep();

  // Stream elements read so far, kept or not.
  int64_t elements_read() const { return read_; }
  // The step NextStep() returns next.
  int64_t next_step() const { return next_step_; }
  // For logs: e.g. "a stream, DATA sharding: elements 1, 3, 5, ... ".
  const std::string& description() const { return description_; }

 private:
  StreamPipeline(std::unique_ptr<DataStream> stream, int pipeline,
                 int stride, int local_replicas, int64_t per_replica,
                 std::string description);

  // The next element this pipeline keeps, into `*element`.
  absl::StatusOr<bool> NextKept(std::string* element);

  const std::unique_ptr<DataStream> stream_;
  const int pipeline_;
  const int stride_;  // 1 for OFF, the pipeline count for DATA
  const int local_replicas_;
  const int64_t per_replica_;  // elements per replica a step
  const std::string description_;
  int64_t read_ = 0;
  int64_t next_step_ = 0;
  bool ended_ = false;
};

}  // namespace cohort::agent
