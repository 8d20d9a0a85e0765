#include "worker_agent/job_loader.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/record_dataset.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker_agent/checkpoint_copies.h"
#include "worker_agent/user_code.h"

namespace cohort::agent {
namespace {

class InputContextImpl final : public InputContext {
 public:
  InputContextImpl(const InputLayout& layout, const JobInfo& job)
      : layout_(layout), job_(job) {}

  int input_pipeline_id() const override { return layout_.pipeline; }
  int num_input_pipelines() const override { return layout_.num_pipelines; }
  int num_replicas_in_sync() const override { return layout_.replicas_in_sync; }
  int64_t per_replica_batch_size(int64_t global) const override {
    return global / layout_.replicas_in_sync;
  }
  uint64_t seed() const override { return job_.seed; }
  const std::string& config_json() const override { return job_.config_json; }
  absl::StatusOr<std::unique_ptr<Dataset>> OpenRecordFiles(
      const std::vector<std::string>& files,
      DatasetOptions options) const override {
    return cohort::OpenRecordFiles(files, options);
  }

 private:
  const InputLayout& layout_;
  const JobInfo& job_;
};

// Calls the job's dataset or stream function; `kind` names it in errors.
template <typename T, typename Fn>
absl::StatusOr<std::unique_ptr<T>> CallInputFunction(
    Fn fn, const InputLayout& layout, const JobInfo& job,
    const std::string& kind, const std::string& name) {
  InputContextImpl input(layout, job);
  absl::StatusOr<std::unique_ptr<T>> made =
      CallUserCode([&] { return fn(input); });
  if (!made.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        kind, " function \"", name, "\" failed: ", made.status().message()));
  }
  if (*made == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(kind, " function \"", name, "\" returned no ", kind));
  }
  return made;
}

}  // namespace

StrategyKind StrategyKindOf(v1::Strategy strategy) {
  switch (strategy) {
    case v1::MIRRORED:
      return StrategyKind::kMirrored;
    case v1::ONE_DEVICE:
      return StrategyKind::kOneDevice;
    case v1::CENTRAL_STORAGE:
      return StrategyKind::kCentralStorage;
    case v1::PARAMETER_SERVER:
      return StrategyKind::kParameterServer;
    default:
      return StrategyKind::kMultiWorkerMirrored;
  }
}

JobInfo JobInfoFor(const v1::AgentJobAssignment& assignment, const TaskId& task,
                   const std::string& checkpoint_copies) {
  const v1::JobSpec& spec = assignment.spec();
  JobInfo job;
  job.steps = spec.steps();
  job.global_batch_size = spec.global_batch_size();
  job.seed = spec.seed();
  job.config_json = spec.config_json();
  job.num_replicas = assignment.num_replicas();
  job.checkpoint_dir =
      assignment.node() == 0
          ? assignment.checkpoint_dir()
          : CheckpointCopyDirFor(checkpoint_copies, assignment);
  job.checkpoint_step = assignment.checkpoint_step();
  if (spec.collective_timeout_ms() > 0) {
    job.collective_timeout = absl::Milliseconds(spec.collective_timeout_ms());
  }
  job.task_type = task.type;
  job.task_id = task.index;
  job.strategy = StrategyKindOf(spec.strategy());
  job.early_stopping = spec.early_stopping();
  return job;
}

FunctionNames TrainingFunctions(const v1::JobSpec& spec) {
  return {spec.init_fn(), spec.step_fn(), spec.dataset_fn()};
}

FunctionNames EvalFunctions(const v1::JobSpec& spec) {
  return {spec.init_fn(), spec.eval_fn(), spec.eval_dataset_fn()};
}

absl::StatusOr<LoadedJob> LoadJob(const RunnerOptions& options,
                                  const JobInfo& job,
                                  const InputLayout& layout) {
  return LoadJob(options, job, layout,
                 TrainingFunctions(options.assignment.spec()));
}

absl::StatusOr<LoadedJob> LoadJob(const RunnerOptions& options,
                                  const JobInfo& job, const InputLayout& layout,
                                  const FunctionNames& names) {
  const v1::AgentJobAssignment& a = options.assignment;
  const v1::JobSpec& spec = a.spec();
  absl::StatusOr<std::string> path =
      options.fetch_library(spec.library_digest());
  if (!path.ok()) {
    // A coordinator that is briefly away is worth another attempt.
    return absl::Status(path.status().code(),
                        absl::StrCat("cannot fetch the step library: ",
                                     path.status().message()));
  }
  auto load = [&] {
    return LoadStepLibrary(
        *path, spec.library_name().empty() ? *path : spec.library_name(),
        names.init, names.step, names.dataset);
  };
  absl::StatusOr<StepFunctions> functions = load();
  if (!functions.ok() && access(path->c_str(), F_OK) != 0) {
    // Removed from a cache another agent shares just before it was loaded:
    // fetched again, once.
    path = options.fetch_library(spec.library_digest());
    if (!path.ok()) {
      return absl::Status(path.status().code(),
                          absl::StrCat("cannot fetch the step library again: ",
                                       path.status().message()));
    }
    functions = load();
  }
  if (!functions.ok()) return functions.status();
  LoadedJob inputs;
  inputs.functions = *functions;
  for (int index : a.device_indices()) {
    if (index < 0 || index >= static_cast<int>(options.devices.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("the job was assigned device ", index,
                       ", and this agent has ", options.devices.size()));
    }
  }
  InputLayout cut = layout;  // the data set's, when it differs
  if (inputs.functions.stream != nullptr) {
    COHORT_ASSIGN_OR_RETURN(
        std::unique_ptr<DataStream> stream,
        CallInputFunction<DataStream>(inputs.functions.stream, layout, job,
                                      "stream", names.dataset));
    // The stream's own methods are the library's code too.
    absl::StatusOr<std::unique_ptr<StreamPipeline>> pipeline =
        CallUserCode([&]() -> absl::StatusOr<std::unique_ptr<StreamPipeline>> {
          inputs.input_options = stream->options();
          return StreamPipeline::Create(
              std::move(stream), layout.pipeline, layout.num_pipelines,
              layout.local_batches, layout.global_batch_size);
        });
    if (!pipeline.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stream function \"", names.dataset,
                       "\": ", pipeline.status().message()));
    }
    inputs.stream = *std::move(pipeline);
  } else if (inputs.functions.dataset != nullptr) {
    if (layout.data_set_as_one_pipeline) {
      cut = InputLayout{
          .replicas_in_sync = layout.replicas_in_sync,
          .local_batches = layout.local_batches,
          .global_batch_size = layout.global_batch_size / layout.num_pipelines};
    }
    COHORT_ASSIGN_OR_RETURN(
        std::unique_ptr<Dataset> dataset,
        CallInputFunction<Dataset>(inputs.functions.dataset, cut, job,
                                   "dataset", names.dataset));
    absl::StatusOr<std::unique_ptr<InputPipeline>> pipeline = CallUserCode(
        [&]() -> absl::StatusOr<std::unique_ptr<InputPipeline>> {
          inputs.input_options = dataset->options();
          return InputPipeline::Create(std::move(dataset), cut.pipeline,
                                       cut.num_pipelines, cut.local_batches,
                                       cut.global_batch_size, spec.seed());
        },
        absl::StrCat("dataset function \"", names.dataset, "\": its data set"));
    if (!pipeline.ok()) return pipeline.status();
    inputs.pipeline = *std::move(pipeline);
  } else {
    return inputs;
  }
  spdlog::info("job {}: input pipeline {} of {}: {}", a.job_id(), cut.pipeline,
               cut.num_pipelines,
               inputs.stream != nullptr ? inputs.stream->description()
                                        : inputs.pipeline->description());
  return inputs;
}

}  // namespace cohort::agent
