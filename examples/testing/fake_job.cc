#include "examples/testing/fake_job.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/check.h"
#include "common/record_dataset.h"
#include "examples/testing/fake_runtime.h"
#include "worker_agent/step_library.h"

namespace cohort::examples::testing {
namespace {

// The only input pipeline of the job.
class FakeInputContext final : public InputContext {
 public:
  explicit FakeInputContext(const FakeJobOptions* options)
      : options_(options) {}

  int input_pipeline_id() const override { return 0; }
  int num_input_pipelines() const override { return 1; }
  int num_replicas_in_sync() const override { return options_->replicas; }
  int64_t per_replica_batch_size(int64_t global_batch_size) const override {
    return global_batch_size / options_->replicas;
  }
  uint64_t seed() const override { return options_->seed; }
  const std::string& config_json() const override {
    return options_->config_json;
  }
  absl::StatusOr<std::unique_ptr<Dataset>> OpenRecordFiles(
      const std::vector<std::string>& files,
      DatasetOptions options) const override {
    return cohort::OpenRecordFiles(files, options);
  }

 private:
  const FakeJobOptions* const options_;
};

// The global batches of a job: the data set in order, or reshuffled each
// epoch, repeated. Replica r's share of a global batch is its r-th slice.
class Batches {
 public:
  Batches(const Dataset* dataset, const FakeJobOptions* options)
      : dataset_(dataset), options_(options) {}

  // Replica `rank`'s batch of `step`; views into the data set.
  Batch Get(int64_t step, int rank) {
    std::vector<std::string_view> elements;
    if (dataset_ == nullptr || dataset_->size() == 0) return Batch(elements);
    const int64_t per_replica =
        options_->global_batch_size / options_->replicas;
    const int64_t first = step * options_->global_batch_size +
                          static_cast<int64_t>(rank) * per_replica;
    for (int64_t g = first; g < first + per_replica; ++g) {
      elements.push_back(dataset_->Get(Index(g)));
    }
    return Batch(std::move(elements));
  }

 private:
  int64_t Index(int64_t position) {
    const int64_t size = dataset_->size();
    if (!dataset_->options().shuffle) return position % size;
    const int64_t epoch = position / size;
    std::lock_guard<std::mutex> lock(mu_);
    if (epoch != epoch_) {
      order_.resize(static_cast<size_t>(size));
      for (int64_t i = 0; i < size; ++i) order_[i] = i;
      std::mt19937_64 rng(options_->seed * 1000003 +
                          static_cast<uint64_t>(epoch));
      std::shuffle(order_.begin(), order_.end(), rng);
      epoch_ = epoch;
    }
    return order_[static_cast<size_t>(position % size)];
  }

  const Dataset* const dataset_;
  const FakeJobOptions* const options_;
  std::mutex mu_;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepLibrary>> StepLibrary::Open(
    const std::string& path) {
  // The agent's own loader: the same checks, the same messages.
  absl::StatusOr<const internal::Registry*> registry = agent::OpenStepLibrary(
      path, std::filesystem::path(path).filename().string());
  if (!registry.ok()) return registry.status();
  return std::unique_ptr<StepLibrary>(new StepLibrary(*registry));
}

const StepLibrary& StepLibrary::OpenOnce(const std::string& path) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* opened =
      new std::map<std::string, std::unique_ptr<StepLibrary>>();
  absl::MutexLock lock(&mu);
  std::unique_ptr<StepLibrary>& library = (*opened)[path];
  if (library == nullptr) {
    absl::StatusOr<std::unique_ptr<StepLibrary>> loaded = Open(path);
    COHORT_CHECK_OK(loaded.status());
    library = *std::move(loaded);
  }
  return *library;
}

double FakeJobResult::Last(const std::string& metric) const {
  auto it = metrics.find(metric);
  return it == metrics.end() || it->second.empty() ? std::nan("")
                                                   : it->second.back().second;
}

absl::StatusOr<FakeJobResult> RunFakeJob(const StepLibrary& library,
                                         const FakeJobOptions& options) {
  if (options.replicas < 1 ||
      options.global_batch_size % options.replicas != 0) {
    return absl::InvalidArgumentError(
        "the global batch must split evenly over the replicas");
  }
  absl::StatusOr<agent::StepFunctions> functions = agent::FindStepFunctions(
      library.registry(), "the step library", options.init_fn, options.step_fn,
      options.dataset_fn);
  if (!functions.ok()) return functions.status();
  const StepFn step = functions->step;
  const InitFn init = functions->init;
  std::unique_ptr<Dataset> dataset;
  if (functions->dataset != nullptr) {
    FakeInputContext input(&options);
    absl::StatusOr<std::unique_ptr<Dataset>> made = functions->dataset(input);
    if (!made.ok()) return made.status();
    dataset = *std::move(made);
  }
  Batches batches(dataset.get(), &options);

  const FakeReplicaContext::Job job{
      .steps = options.steps,
      .global_batch_size = options.global_batch_size,
      .seed = options.seed,
      .config_json = options.config_json};
  FakeGroup group(options.replicas);
  std::vector<std::unique_ptr<FakeReplicaContext>> replicas;
  for (int r = 0; r < options.replicas; ++r) {
    replicas.push_back(std::make_unique<FakeReplicaContext>(&job, r, &group));
  }
  std::mutex mu;
  absl::Status first_error;
  auto fail = [&](const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = status;
    group.Abort(absl::AbortedError("another replica failed"));
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < options.replicas; ++r) {
    threads.emplace_back([&, r] {
      FakeReplicaContext& ctx = *replicas[r];
      absl::Status s = init != nullptr ? init(ctx) : absl::OkStatus();
      if (s.ok()) s = ctx.SyncVariables();
      for (int64_t i = 0; s.ok() && i < options.steps; ++i) {
        ctx.set_step(i);
        s = step(ctx, batches.Get(i, r));
        absl::StatusOr<bool> stop =
            s.ok() ? ctx.AgreeToStop() : absl::StatusOr<bool>(s);
        if (!stop.ok()) s = stop.status();
        if (s.ok() && *stop) break;
      }
      if (!s.ok()) fail(s);
    });
  }
  for (std::thread& t : threads) t.join();
  if (!first_error.ok()) return first_error;

  FakeJobResult result;
  result.metrics = replicas[0]->metrics();
  for (const auto& replica : replicas) {
    result.variables.emplace_back();
    for (const auto& v : replica->variables()) {
      result.variables.back()[v->options().name] = v->values();
    }
  }
  return result;
}

}  // namespace cohort::examples::testing
