#pragma once

// One agent's input pipeline, as tf.distribute's
// experimental_distribute_dataset with tf.data's AutoShardPolicy.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cohort/dataset.h"

namespace cohort::agent {

// Shards a data set for one of a job's input pipelines and cuts each step's
// batches from the shard's stream, which repeats the shard forever: stream
// position k is element k % shard_size of epoch k / shard_size. With
// options().shuffle each epoch's order is a permutation drawn from the seed
// and the epoch alone, the same on every run and on every pipeline.
//
//   OFF:  every pipeline's shard is the whole data set.
//   DATA: pipeline p of n keeps positions p, p + n, ... of the (permuted)
//         global order, so when n divides the size, the n pipelines together
//         take at each step what a single one would.
//   FILE: pipeline p owns files p, p + n, ...; its shard is their elements
//         in file order (permuted per epoch when shuffled).
//   AUTO: FILE when there are at least n files, else DATA.
//
// Owns the data set; batches are views into it. Thread-safe.
class InputPipeline {
 public:
  // Each step this pipeline takes global_batch_size / num_pipelines
  // elements of its stream and splits them, contiguously, into
  // `local_replicas` batches. INVALID_ARGUMENT, with the numbers, when the
  // global batch does not divide into num_pipelines * local_replicas, the
  // data set or this pipeline's shard is empty, or FILE sharding lacks files.
  static absl::StatusOr<std::unique_ptr<InputPipeline>> Create(
      std::unique_ptr<Dataset> dataset, int pipeline, int num_pipelines,
      int local_replicas, int64_t global_batch_size, uint64_t seed);

  // The batches of step `step` (>= 0), one per local replica; a pure
  // function of the step, so a resumed job needs no replay.
  std::vector<Batch> BatchesForStep(int64_t step) const;

  // Elements in this pipeline's shard: one epoch of its stream.
  int64_t shard_size() const { return shard_size_; }
  // Elements of the stream each step takes: its batches' elements, or
  // with per_replica_batches one (a whole batch) per local replica.
  int64_t elements_per_step() const { return per_replica_ * local_replicas_; }
  // For logs: e.g. "FILE sharding: files 0, 2 of 4 (1200 elements)".
  const std::string& description() const { return description_; }

 private:
  enum class Mode { kOff, kData, kFile };
  using Permutation = std::vector<int64_t>;

  InputPipeline(std::unique_ptr<Dataset> dataset, Mode mode, int pipeline,
                int num_pipelines, int local_replicas, int64_t per_replica,
                uint64_t seed, std::vector<int64_t> file_shard,
                std::string description);

  // The data-set index of stream position `k`; `epochs` caches the
  // permutations looked up for this call.
  int64_t ElementAt(
      int64_t k,
      std::vector<std::pair<int64_t, std::shared_ptr<const Permutation>>>&
          epochs) const;
  std::shared_ptr<const Permutation> PermutationFor(int64_t epoch) const;

  const std::unique_ptr<Dataset> dataset_;
  const Mode mode_;
  const int pipeline_;
  const int num_pipelines_;
  const int local_replicas_;
  const int64_t per_replica_;
  const uint64_t seed_;
  const bool shuffle_;
  // FILE: the shard's data-set indices in file order.
  const std::vector<int64_t> file_shard_;
  const int64_t shard_size_;
  // What permutations reorder: the data set (OFF, DATA) or the shard (FILE).
  const int64_t permuted_size_;
  const std::string description_;

  // The permutations of the latest epochs asked for; a step spans at most a
  // few, and replicas ask for the same step.
  mutable absl::Mutex mu_;
  mutable std::vector<std::pair<int64_t, std::shared_ptr<const Permutation>>>
      recent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::agent
