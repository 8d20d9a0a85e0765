#pragma once

// What every runner loads first: the step library (fetched, opened,
// version- and symbol-checked) and, when the job names a dataset function,
// this agent's input pipeline over it.

#include <memory>

#include "absl/status/statusor.h"
#include "worker_agent/input_pipeline.h"
#include "worker_agent/replica_context.h"
#include "worker_agent/step_library.h"
#include "worker_agent/stream_pipeline.h"
#include "worker_agent/sync_job_runner.h"

namespace cohort::agent {

// How the dataset is cut for this agent.
struct InputLayout {
  int pipeline = 0;  // InputContext::input_pipeline_id
  int num_pipelines = 1;
  int replicas_in_sync = 1;  // InputContext::num_replicas_in_sync
  int local_batches = 1;     // batches per step from this pipeline
  // What the pipeline takes per step over all pipelines.
  int64_t global_batch_size = 0;
  // ParameterServer: a data set (indexable, unlike a stream) is cut as
  // pipeline 0 of 1, taking global_batch_size / num_pipelines a step, so
  // that closure k reads global batch k of one order on whichever worker
  // runs it: each epoch is covered exactly, whatever the schedule, and a
  // re-run closure reads the same batch. A stream keeps the layout above.
  bool data_set_as_one_pipeline = false;
};

// Which registered functions to load: the job's init, step and dataset
// functions, or, for the evaluator, its init, eval and eval dataset ones.
struct FunctionNames {
  std::string init, step, dataset;
};
FunctionNames TrainingFunctions(const v1::JobSpec& spec);
FunctionNames EvalFunctions(const v1::JobSpec& spec);

struct LoadedJob {
  StepFunctions functions;
  // This agent's input when the job names a dataset function: `pipeline`
  // for a data set's, `stream` for a stream's; both null without one.
  std::unique_ptr<InputPipeline> pipeline;
  std::unique_ptr<StreamPipeline> stream;
  DatasetOptions input_options;  // the data set's or the stream's
};

// What every replica of the assignment's job knows about it. The chief's
// checkpoints go to the job's checkpoint_dir, every other agent's copy to
// <checkpoint_copies>/<job id>-<job uid> (none when that is empty).
JobInfo JobInfoFor(const v1::AgentJobAssignment& assignment, const TaskId& task,
                   const std::string& checkpoint_copies);

// The step API's name for a job's strategy.
StrategyKind StrategyKindOf(v1::Strategy strategy);

// Errors name the library, the function or the numbers at fault; all are
// the job's own (permanent) except a library fetch that failed to reach the
// coordinator.
absl::StatusOr<LoadedJob> LoadJob(const RunnerOptions& options,
                                  const JobInfo& job,
                                  const InputLayout& layout);
absl::StatusOr<LoadedJob> LoadJob(const RunnerOptions& options,
                                  const JobInfo& job, const InputLayout& layout,
                                  const FunctionNames& names);

}  // namespace cohort::agent
