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
//
// A data set that cannot be indexed (a generator, a queue, an endless
// source) is a DataStream instead, registered with COHORT_REGISTER_STREAM
// under a name that a job's dataset_fn may give as well.

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
  // Every pipeline sees every element, in the same order (shuffled or not):
  // the dataset function shards by InputContext::input_pipeline_id(), or
  // every pipeline trains on the same examples.
  kOff,
};
// Under ParameterServer a data set is one pipeline of 1 (closure k takes
// global batch k, wherever it runs), so the policy changes nothing there.

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

  // tf.distribute.InputOptions, which travel with the data set here.
  // Steps whose batches the agent's input thread prepares ahead of the
  // replicas (experimental_per_replica_buffer_size); 0 cuts each step's
  // batches on the replicas' own threads, when they ask.
  int prefetch_steps = 1;
  // experimental_fetch_to_device: each replica's batch is also copied,
  // packed, into the replica's device memory while the step before it runs
  // (Batch::device_data). Every element must then have the same size, and
  // prefetch_steps must be at least 1.
  bool prefetch_to_device = false;
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

// An infinite or streaming data set, read in order and never indexed: the
// C++ face of a tf.data pipeline over a generator. A registered stream
// function makes one for each input pipeline in each attempt of a job:
//
//   absl::StatusOr<std::unique_ptr<cohort::DataStream>> MyStream(
//       const cohort::InputContext& input);
//   COHORT_REGISTER_STREAM("my_stream", MyStream);   // see step.h
//
// The runtime shards it by DATA (pipeline p of n keeps stream elements p,
// p + n, ...) or OFF (the function shards it itself; AUTO means DATA), and
// cuts each step's batches from it in order. A finite stream ends training
// after the last step that every pipeline could fill: the job ends
// SUCCEEDED there, as a Keras fit over a dataset that runs out does. A
// resumed job skips the elements that its restored steps consumed.
// Used from one thread at a time.
class DataStream {
 public:
  virtual ~DataStream() = default;

  // The next element into `*element`; false at the end of a finite stream.
  // An error fails the job, naming the stream.
  virtual absl::StatusOr<bool> Next(std::string* element) = 0;
  // Passes over `n` elements; false when the stream ends first. Reads them
  // by default; a seekable source does better.
  virtual absl::StatusOr<bool> Skip(int64_t n) {
    std::string element;
    for (int64_t i = 0; i < n; ++i) {
      absl::StatusOr<bool> more = Next(&element);
      if (!more.ok() || !*more) return more;
    }
    return true;
  }
  // shuffle must be false: a stream has no order to permute (shuffle it at
  // its source), and FILE sharding needs files.
  virtual DatasetOptions options() const = 0;
};

// What a dataset function is told about its place in the job, as
// tf.distribute.InputContext. Provided by the runtime.
class InputContext {
 public:
  virtual ~InputContext() = default;

  // This agent's index among the job's agents; under ParameterServer, 0
  // of 1 for a data set (a stream: the agent's index).
  virtual int input_pipeline_id() const = 0;
  virtual int num_input_pipelines() const = 0;
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

// One replica's share of a step's global batch: views into the data set,
// or into bytes the batch shares ownership of (a stream's elements, the
// device copy). Valid during the step it is given to.
class Batch {
 public:
  Batch() = default;
  explicit Batch(std::vector<std::string_view> elements,
                 std::shared_ptr<const void> owner = nullptr)
      : elements_(std::move(elements)) {
    if (owner != nullptr) owners_.push_back(std::move(owner));
  }

  size_t size() const { return elements_.size(); }
  std::string_view element(size_t i) const { return elements_[i]; }
  // Element i as an array of T (the element's bytes reinterpreted).
  template <typename T>
  std::span<const T> As(size_t i) const {
    const std::string_view e = elements_[i];
    return {reinterpret_cast<const T*>(e.data()), e.size() / sizeof(T)};
  }

  // With DatasetOptions::prefetch_to_device: the batch packed in the
  // replica's device memory, element i's bytes at device_data() +
  // i * element_bytes(); null otherwise.
  const void* device_data() const { return device_data_; }
  size_t element_bytes() const { return element_bytes_; }
  template <typename T>
  const T* device_as() const {
    return static_cast<const T*>(device_data_);
  }
  // For the runtime: attaches the device copy, which `owner` keeps alive.
  void set_device_copy(const void* data, size_t element_bytes,
                       std::shared_ptr<const void> owner) {
    device_data_ = data;
    element_bytes_ = element_bytes;
    owners_.push_back(std::move(owner));
  }

 private:
  std::vector<std::string_view> elements_;
  const void* device_data_ = nullptr;
  size_t element_bytes_ = 0;
  std::vector<std::shared_ptr<const void>> owners_;
};

// Record files: a sequence of byte strings, each with its length and CRC-32,
// so that truncation and corruption are detected. For programs that produce
// training data; implemented in cohort_common (common/record_io.cc), which
// the cohort_client library brings along.
class RecordWriter {
 public:
  // Writes to a temp file beside `path`, of its own, and renames it into
  // place on Close().
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
