#include "worker_agent/input_pipeline.h"

#include <algorithm>
#include <random>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/check.h"

namespace cohort::agent {
namespace {

// Permutations of this many latest epochs stay cached.
constexpr size_t kCachedEpochs = 4;
// Files named in a description before it abbreviates.
constexpr size_t kFilesDescribed = 8;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, bound) by rejection, rather than std::uniform_int_
// distribution, whose output differs between standard libraries: every
// pipeline must draw the same permutation.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;
  uint64_t x = rng();
  while (x < threshold) x = rng();
  return x % bound;
}

std::string Plural(int64_t n, absl::string_view noun) {
  if (n == 1) return absl::StrCat(n, " ", noun);
  return absl::StrCat(n, " ", noun, absl::EndsWith(noun, "ch") ? "es" : "s");
}

std::string FileList(const std::vector<int>& files) {
  if (files.size() <= kFilesDescribed) return absl::StrJoin(files, ", ");
  return absl::StrCat(
      absl::StrJoin(files.begin(), files.begin() + kFilesDescribed, ", "),
      ", ... (", files.size(), " files)");
}

}  // namespace

absl::StatusOr<std::unique_ptr<InputPipeline>> InputPipeline::Create(
    std::unique_ptr<Dataset> dataset, int pipeline, int num_pipelines,
    int local_replicas, int64_t global_batch_size, uint64_t seed) {
  if (dataset == nullptr) {
    return absl::InvalidArgumentError("input pipeline: no data set");
  }
  if (num_pipelines < 1 || pipeline < 0 || pipeline >= num_pipelines) {
    return absl::InvalidArgumentError(
        absl::StrCat("input pipeline ", pipeline, " of ", num_pipelines,
                     ": not a valid pipeline index"));
  }
  if (local_replicas < 1 || global_batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input pipeline: ", local_replicas, " local replicas and global batch ",
        global_batch_size, "; both must be positive"));
  }
  const int64_t replicas = int64_t{num_pipelines} * local_replicas;
  if (global_batch_size % replicas != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch size ", global_batch_size, " does not divide over ",
        replicas, " replicas (", Plural(num_pipelines, "input pipeline"), " x ",
        local_replicas, " local replicas)"));
  }
  const int64_t size = dataset->size();
  if (size <= 0) {
    return absl::InvalidArgumentError(
        "input pipeline: the data set is empty; there is nothing to train on");
  }
  const DatasetOptions options = dataset->options();
  if (options.per_replica_batches) {
    if (options.shard_policy != ShardPolicy::kAuto &&
        options.shard_policy != ShardPolicy::kOff) {
      return absl::InvalidArgumentError(
          "per_replica_batches: the dataset function shards and batches its "
          "data itself, so its shard_policy must be kAuto or kOff");
    }
    return std::unique_ptr<InputPipeline>(new InputPipeline(
        std::move(dataset), Mode::kOff, pipeline, num_pipelines, local_replicas,
        /*per_replica=*/1, seed, {},
        absl::StrCat("per-replica batches from the dataset function: ",
                     Plural(size, "batch"),
                     ", one per replica a step, "
                     "neither sharded nor split",
                     options.shuffle ? "; shuffled each epoch" : "")));
  }
  const int num_files = dataset->num_files();
  ShardPolicy policy = options.shard_policy;
  const bool automatic = policy == ShardPolicy::kAuto;
  if (automatic) {
    policy =
        num_files >= num_pipelines ? ShardPolicy::kFile : ShardPolicy::kData;
  }

  Mode mode = Mode::kOff;
  std::vector<int64_t> file_shard;
  std::string description;
  const std::string how = automatic ? " (chosen by AUTO)" : "";
  switch (policy) {
    case ShardPolicy::kAuto:
    case ShardPolicy::kOff:
      description = absl::StrCat("OFF sharding: all ", size,
                                 " elements on every input pipeline");
      break;
    case ShardPolicy::kData: {
      mode = Mode::kData;
      if (pipeline >= size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DATA sharding: the data set has ", Plural(size, "element"),
            " for ", num_pipelines, " input pipelines (agents); pipeline ",
            pipeline,
            " gets none. Use a larger data set or ShardPolicy::kOff"));
      }
      const int64_t shard =
          (size - pipeline + num_pipelines - 1) / num_pipelines;
      description = absl::StrCat("DATA sharding", how, ": elements ", pipeline,
                                 ", ", pipeline + num_pipelines, ", ",
                                 pipeline + 2 * num_pipelines, ", ... of ",
                                 size, " (", Plural(shard, "element"), ")");
      break;
    }
    case ShardPolicy::kFile: {
      mode = Mode::kFile;
      if (num_files <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FILE sharding needs a record-file dataset "
            "(InputContext::OpenRecordFiles); this data set of ",
            Plural(size, "element"),
            " has no files. Use ShardPolicy::kData or ShardPolicy::kOff"));
      }
      if (num_files < num_pipelines) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FILE sharding: ", Plural(num_files, "record file"), " for ",
            num_pipelines,
            " input pipelines (agents); each needs at least one. Use "
            "ShardPolicy::kData (every agent reads every file and keeps its "
            "share) or write more files"));
      }
      std::vector<int> files;
      for (int f = pipeline; f < num_files; f += num_pipelines) {
        const int64_t begin = dataset->file_begin(f);
        const int64_t end = dataset->file_begin(f + 1);
        if (begin < 0 || end < begin || end > size) {
          return absl::InvalidArgumentError(absl::StrCat(
              "FILE sharding: the data set says file ", f, " holds elements [",
              begin, ", ", end, ") of ", size, ", which is not a valid range"));
        }
        for (int64_t e = begin; e < end; ++e) file_shard.push_back(e);
        files.push_back(f);
      }
      if (file_shard.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FILE sharding: files ", FileList(files), " of ", num_files,
            " hold no records, so input pipeline ", pipeline,
            " gets no elements. Use ShardPolicy::kData or balance the files"));
      }
      description = absl::StrCat(
          "FILE sharding", how, ": files ", FileList(files), " of ", num_files,
          " (", Plural(static_cast<int64_t>(file_shard.size()), "element"),
          ")");
      break;
    }
  }
  const int64_t per_replica = global_batch_size / replicas;
  absl::StrAppend(&description, "; ", per_replica * local_replicas,
                  " elements a step in ", Plural(local_replicas, "batch"),
                  " of ", per_replica,
                  options.shuffle ? "; shuffled each epoch" : "");
  return std::unique_ptr<InputPipeline>(new InputPipeline(
      std::move(dataset), mode, pipeline, num_pipelines, local_replicas,
      per_replica, seed, std::move(file_shard), std::move(description)));
}

InputPipeline::InputPipeline(std::unique_ptr<Dataset> dataset, Mode mode,
                             int pipeline, int num_pipelines,
                             int local_replicas, int64_t per_replica,
                             uint64_t seed, std::vector<int64_t> file_shard,
                             std::string description)
    : dataset_(std::move(dataset)),
      mode_(mode),
      pipeline_(pipeline),
      num_pipelines_(num_pipelines),
      local_replicas_(local_replicas),
      per_replica_(per_replica),
      seed_(seed),
      shuffle_(dataset_->options().shuffle),
      file_shard_(std::move(file_shard)),
      shard_size_(mode == Mode::kFile ? static_cast<int64_t>(file_shard_.size())
                  : mode == Mode::kData
                      ? (dataset_->size() - pipeline + num_pipelines - 1) /
                            num_pipelines
                      : dataset_->size()),
      permuted_size_(mode == Mode::kFile ? shard_size_ : dataset_->size()),
      description_(std::move(description)) {}

std::vector<Batch> InputPipeline::BatchesForStep(int64_t step) const {
  COHORT_CHECK(step >= 0);
  std::vector<std::pair<int64_t, std::shared_ptr<const Permutation>>> epochs;
  std::vector<Batch> batches;
  batches.reserve(static_cast<size_t>(local_replicas_));
  int64_t k = step * per_replica_ * local_replicas_;
  for (int r = 0; r < local_replicas_; ++r) {
    std::vector<std::string_view> elements;
    elements.reserve(static_cast<size_t>(per_replica_));
    for (int64_t i = 0; i < per_replica_; ++i, ++k) {
      elements.push_back(dataset_->Get(ElementAt(k, epochs)));
    }
    batches.emplace_back(std::move(elements));
  }
  return batches;
}

int64_t InputPipeline::ElementAt(
    int64_t k,
    std::vector<std::pair<int64_t, std::shared_ptr<const Permutation>>>& epochs)
    const {
  const int64_t epoch = k / shard_size_;
  const int64_t j = k % shard_size_;
  int64_t index = mode_ == Mode::kData ? pipeline_ + num_pipelines_ * j : j;
  if (shuffle_) {
    auto it = std::find_if(epochs.begin(), epochs.end(),
                           [&](const auto& e) { return e.first == epoch; });
    if (it == epochs.end()) {
      epochs.emplace_back(epoch, PermutationFor(epoch));
      it = epochs.end() - 1;
    }
    index = (*it->second)[static_cast<size_t>(index)];
  }
  return mode_ == Mode::kFile ? file_shard_[static_cast<size_t>(index)] : index;
}

std::shared_ptr<const InputPipeline::Permutation> InputPipeline::PermutationFor(
    int64_t epoch) const {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [cached, permutation] : recent_) {
      if (cached == epoch) return permutation;
    }
  }
  // Computed outside the lock: it is O(size). Fisher-Yates from a generator
  // seeded by the job's seed and the epoch alone.
  auto permutation =
      std::make_shared<Permutation>(static_cast<size_t>(permuted_size_));
  for (int64_t i = 0; i < permuted_size_; ++i) {
    (*permutation)[static_cast<size_t>(i)] = i;
  }
  std::mt19937_64 rng(
      SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = permuted_size_ - 1; i > 0; --i) {
    const uint64_t j = UniformBelow(rng, static_cast<uint64_t>(i) + 1);
    std::swap((*permutation)[static_cast<size_t>(i)], (*permutation)[j]);
  }
  absl::MutexLock lock(&mu_);
  recent_.emplace_back(epoch, permutation);
  if (recent_.size() > kCachedEpochs) recent_.erase(recent_.begin());
  return permutation;
}

}  // namespace cohort::agent
