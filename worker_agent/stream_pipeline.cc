#include "worker_agent/stream_pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort::agent {
namespace {

// What a stream's error becomes: the job's own, named.
absl::Status StreamError(const absl::Status& status, int64_t read) {
  return absl::Status(status.code(),
                      absl::StrCat("the input stream failed after ", read,
                                   " elements: ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamPipeline>> StreamPipeline::Create(
    std::unique_ptr<DataStream> stream, int pipeline, int num_pipelines,
    int local_replicas, int64_t global_batch_size) {
  if (stream == nullptr) {
    return absl::InvalidArgumentError("input pipeline: no stream");
  }
  if (num_pipelines < 1 || pipeline < 0 || pipeline >= num_pipelines ||
      local_replicas < 1 || global_batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stream pipeline ", pipeline, " of ", num_pipelines, " with ",
        local_replicas, " local replicas and global batch ", global_batch_size,
        ": not a valid layout"));
  }
  const int64_t replicas = int64_t{num_pipelines} * local_replicas;
  if (global_batch_size % replicas != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch size ", global_batch_size, " does not divide over ",
        replicas, " replicas (", num_pipelines, " input pipelines x ",
        local_replicas, " local replicas)"));
  }
  const DatasetOptions options = stream->options();
  if (options.shuffle) {
    return absl::InvalidArgumentError(
        "a stream is read in order and cannot be shuffled by the runtime: "
        "set DatasetOptions::shuffle to false and shuffle at the stream's "
        "source, or register an indexable Dataset");
  }
  if (options.shard_policy == ShardPolicy::kFile) {
    return absl::InvalidArgumentError(
        "FILE sharding needs record files, and a stream has none: use "
        "ShardPolicy::kData, or kOff with the stream function sharding by "
        "InputContext::input_pipeline_id()");
  }
  if (options.per_replica_batches &&
      options.shard_policy == ShardPolicy::kData) {
    return absl::InvalidArgumentError(
        "per_replica_batches: the stream function shards and batches its "
        "data itself, so its shard_policy must be kAuto or kOff");
  }
  const bool off = options.shard_policy == ShardPolicy::kOff ||
                   options.per_replica_batches;
  const int stride = off ? 1 : num_pipelines;
  const int64_t per_replica =
      options.per_replica_batches ? 1 : global_batch_size / replicas;
  std::string description = absl::StrCat(
      "a stream, ",
      off ? "OFF sharding: every element"
          : absl::StrCat("DATA sharding: elements ", pipeline, ", ",
                         pipeline + stride, ", ", pipeline + 2 * stride,
                         ", ..."),
      "; ", per_replica * local_replicas, " elements a step in ",
      local_replicas, " batches of ", per_replica,
      options.per_replica_batches ? " (per-replica batches)" : "");
  return std::unique_ptr<StreamPipeline>(
      new StreamPipeline(std::move(stream), pipeline, stride, local_replicas,
                         per_replica, std::move(description)));
}

StreamPipeline::StreamPipeline(std::unique_ptr<DataStream> stream,
                               int pipeline, int stride, int local_replicas,
                               int64_t per_replica, std::string description)
    : stream_(std::move(stream)),
      pipeline_(pipeline),
      stride_(stride),
      local_replicas_(local_replicas),
      per_replica_(per_replica),
      description_(std::move(description)) {}

absl::Status StreamPipeline::SkipTo(
    int64_t step, const std::function<void(int64_t, int64_t)>& progress) {
  // Positions [0, kept * stride) hold exactly `kept` of this pipeline's
  // elements, whichever pipeline it is.
  const int64_t raw = step * per_replica_ * local_replicas_ * stride_;
  next_step_ = step;
  while (read_ < raw && !ended_) {
    const int64_t n = std::min(kSkipChunk, raw - read_);
    absl::StatusOr<bool> more = stream_->Skip(n);
    if (!more.ok()) return StreamError(more.status(), read_);
    read_ += n;
    if (!*more) ended_ = true;
    if (progress) progress(read_, raw);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> StreamPipeline::NextKept(std::string* element) {
  const int64_t skip = (pipeline_ - read_ % stride_ + stride_) % stride_;
  if (skip > 0) {
    absl::StatusOr<bool> more = stream_->Skip(skip);
    if (!more.ok()) return StreamError(more.status(), read_);
    read_ += skip;
    if (!*more) return false;
  }
  absl::StatusOr<bool> more = stream_->Next(element);
  if (!more.ok()) return StreamError(more.status(), read_);
  if (*more) ++read_;
  return *more;
}

absl::StatusOr<std::optional<std::vector<Batch>>> StreamPipeline::NextStep() {
  if (ended_) return std::nullopt;
  // One allocation holds the step's elements; every batch shares it.
  auto elements = std::make_shared<std::vector<std::string>>(
      static_cast<size_t>(per_replica_ * local_replicas_));
  for (std::string& element : *elements) {
    absl::StatusOr<bool> more = NextKept(&element);
    if (!more.ok()) return more.status();
    if (!*more) {
      ended_ = true;
      return std::nullopt;
    }
  }
  std::vector<Batch> batches;
  batches.reserve(static_cast<size_t>(local_replicas_));
  for (int r = 0; r < local_replicas_; ++r) {
    std::vector<std::string_view> views;
    views.reserve(static_cast<size_t>(per_replica_));
    for (int64_t i = 0; i < per_replica_; ++i) {
      views.emplace_back((*elements)[static_cast<size_t>(r * per_replica_ + i)]);
    }
    batches.emplace_back(std::move(views), elements);
  }
  ++next_step_;
  return batches;
}

}  // namespace cohort::agent
