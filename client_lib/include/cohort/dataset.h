#pragma once

// Input pipelines of a step library, as tf.distribute's
// distribute_datasets_from_function: a registered dataset function receives
// an InputContext and returns the whole data set; the runtime shards it over
// the input pipelines (one per agent) by the data set's ShardPolicy,
// repeats it, and splits each global batch into per-replica batches.
//
//   absl::StatusOr<std::unique_ptr<cohort::Dataset>> MyData(
//       const cohort::InputContext& input) {
//     return input.OpenRecordFiles({"/data/part-0", "/data/part-1"},
//                                  {.shard_policy =
//                                  cohort::ShardPolicy::kFile});
//   }
//   COHORT_REGISTER_DATASET("my_data", MyData);   // see step.h
//
// Elements are byte strings; Batch::As<T> views one as an array of T.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort {

// As tf.data's AutoShardPolicy.
enum class ShardPolicy {
  // FILE when the data set is made of at least as many record files as
  // there are input pipelines, else DATA.
  kAuto,
  // Pipeline p reads files p, p + n, p + 2n, ...; fewer files than
  // pipelines is an error.
  kFile,
  // Every pipeline reads everything and keeps elements p, p + n, ... of the
  // global order.
  kData,
  // Every pipeline sees every element.
  kOff,
};

struct DatasetOptions {
  ShardPolicy shard_policy = ShardPolicy::kAuto;
  // Reorder elements each epoch, from the job's seed and the epoch number:
  // the same order on every run.
  bool shuffle = false;
  // distribute_datasets_from_function with the user's own batching: each
  // element is one replica's whole batch, already cut to
  // InputContext::per_replica_batch_size and sharded by the function. The
  // runtime hands each local replica one element a step, in order (a
  // Batch of one element), and neither shards nor splits: shard_policy
  // must be kAuto or kOff.
  bool per_replica_batches = false;
};

// A finite, indexable data set; the runtime repeats it. Immutable once made,
// so thread-safe.
class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Element `index`, 0 <= index < size(); valid while the data set lives.
  virtual std::string_view Get(int64_t index) const = 0;
  virtual DatasetOptions options() const = 0;
  // Data sets read from record files say which elements each file holds, so
  // that FILE sharding can split by file: file f holds the elements
  // [file_begin(f), file_begin(f + 1)). Zero files: not file based.
  virtual int num_files() const { return 0; }
  virtual int64_t file_begin(int file) const { return file == 0 ? 0 : size(); }
};

// A data set held in memory; for generated data.
class InMemoryDataset final : public Dataset {
 public:
  InMemoryDataset(std::vector<std::string> elements, DatasetOptions options)
      : elements_(std::move(elements)), options_(options) {}

  int64_t size() const override {
    return static_cast<int64_t>(elements_.size());
  }
  std::string_view Get(int64_t index) const override {
    return elements_[static_cast<size_t>(index)];
  }
  DatasetOptions options() const override { return options_; }

 private:
  const std::vector<std::string> elements_;
  const DatasetOptions options_;
};

// What a dataset function is told about its place in the job, as
// tf.distribute.InputContext. Provided by the runtime.
class InputContext {
 public:
  virtual ~InputContext() = default;

  virtual int input_pipeline_id() const = 0;    // this agent's index
  virtual int num_input_pipelines() const = 0;  // agents in the job
  virtual int num_replicas_in_sync() const = 0;
  // global_batch_size / num_replicas_in_sync (the runtime has checked that
  // it divides).
  virtual int64_t per_replica_batch_size(int64_t global_batch_size) const = 0;
  virtual uint64_t seed() const = 0;
  virtual const std::string& config_json() const = 0;  // the job's config

  // A data set over the records of `files`, in file order; NOT_FOUND or
  // DATA_LOSS naming the file when one is missing or corrupt.
  virtual absl::StatusOr<std::unique_ptr<Dataset>> OpenRecordFiles(
      const std::vector<std::string>& files, DatasetOptions options) const = 0;
};

// One replica's share of a step's global batch. Views into the data set.
class Batch {
 public:
  Batch() = default;
  explicit Batch(std::vector<std::string_view> elements)
      : elements_(std::move(elements)) {}

  size_t size() const { return elements_.size(); }
  std::string_view element(size_t i) const { return elements_[i]; }
  // Element i as an array of T (the element's bytes reinterpreted).
  template <typename T>
  std::span<const T> As(size_t i) const {
    const std::string_view e = elements_[i];
    return {reinterpret_cast<const T*>(e.data()), e.size() / sizeof(T)};
  }

 private:
  std::vector<std::string_view> elements_;
};

// Record files: a sequence of byte strings, each with its length and CRC-32,
// so that truncation and corruption are detected. For programs that produce
// training data; implemented in cohort_common (common/record_io.cc), which
// the cohort_client library brings along.
class RecordWriter {
 public:
  // Writes to `path` + ".tmp" and renames it into place on Close().
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Create(
      const std::string& path);
  virtual ~RecordWriter() = default;

  virtual absl::Status Write(std::string_view record) = 0;
  // Flushes, fsyncs and renames; the file is complete only after this.
  virtual absl::Status Close() = 0;
};

// Every record of `path`; DATA_LOSS naming the file and offset when it is
// truncated or corrupt, NOT_FOUND when it is missing.
absl::StatusOr<std::vector<std::string>> ReadRecordFile(
    const std::string& path);

}  // namespace cohort
