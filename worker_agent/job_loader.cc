#include "worker_agent/job_loader.h"

#include "absl/strings/str_cat.h"
#include "common/record_dataset.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

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

// The job's stream function's stream, cut for this agent.
absl::Status OpenStream(LoadedJob& inputs, const InputLayout& layout,
                        const JobInfo& job, const FunctionNames& names,
                        const v1::AgentJobAssignment& a) {
  InputContextImpl input(layout, job);
  absl::StatusOr<std::unique_ptr<DataStream>> stream =
      inputs.functions.stream(input);
  if (!stream.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream function \"", names.dataset,
                     "\" failed: ", stream.status().message()));
  }
  if (*stream == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stream function \"", names.dataset, "\" returned no stream"));
  }
  inputs.input_options = (*stream)->options();
  absl::StatusOr<std::unique_ptr<StreamPipeline>> pipeline =
      StreamPipeline::Create(*std::move(stream), layout.pipeline,
                             layout.num_pipelines, layout.local_batches,
                             layout.global_batch_size);
  if (!pipeline.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream function \"", names.dataset,
                     "\": ", pipeline.status().message()));
  }
  inputs.stream = *std::move(pipeline);
  spdlog::info("job {}: input pipeline {} of {}: {}", a.job_id(),
               layout.pipeline, layout.num_pipelines,
               inputs.stream->description());
  return absl::OkStatus();
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
  if (assignment.node() == 0) {
    job.checkpoint_dir = assignment.checkpoint_dir();
  } else if (!checkpoint_copies.empty()) {
    // Keyed by the uid too: another cluster's job may have had this id.
    job.checkpoint_dir = absl::StrCat(
        checkpoint_copies, "/", assignment.job_id(), "-", assignment.job_uid());
  }
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
  absl::StatusOr<StepFunctions> functions = LoadStepLibrary(
      *path, spec.library_name().empty() ? *path : spec.library_name(),
      names.init, names.step, names.dataset);
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
  if (inputs.functions.stream != nullptr) {
    COHORT_RETURN_IF_ERROR(OpenStream(inputs, layout, job, names, a));
    return inputs;
  }
  if (inputs.functions.dataset == nullptr) return inputs;
  InputContextImpl input(layout, job);
  absl::StatusOr<std::unique_ptr<Dataset>> dataset =
      inputs.functions.dataset(input);
  if (!dataset.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset function \"", names.dataset,
                     "\" failed: ", dataset.status().message()));
  }
  if (*dataset == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset function \"", names.dataset, "\" returned no dataset"));
  }
  inputs.input_options = (*dataset)->options();
  absl::StatusOr<std::unique_ptr<InputPipeline>> pipeline =
      InputPipeline::Create(*std::move(dataset), layout.pipeline,
                            layout.num_pipelines, layout.local_batches,
                            layout.global_batch_size, spec.seed());
  if (!pipeline.ok()) return pipeline.status();
  inputs.pipeline = *std::move(pipeline);
  spdlog::info("job {}: input pipeline {} of {}: {}", a.job_id(),
               layout.pipeline, layout.num_pipelines,
               inputs.pipeline->description());
  return inputs;
}

}  // namespace cohort::agent
