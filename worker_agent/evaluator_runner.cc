#include "worker_agent/evaluator_runner.h"

#include "absl/strings/str_cat.h"
#include "collective/algorithmic_communicator.h"
#include "collective/transports/local_transport.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker_agent/job_loader.h"
#include "worker_agent/user_code.h"

namespace cohort::agent {

EvaluatorRunner::EvaluatorRunner(RunnerOptions options)
    : options_(std::move(options)) {
  job_ = JobInfoFor(options_.assignment, options_.task, "");
  // A group of one, reading the job's own checkpoints; the training's
  // early-stopping rule is not the evaluator's.
  job_.checkpoint_dir = options_.assignment.checkpoint_dir();
  job_.num_replicas = 1;
  job_.early_stopping.Clear();
}

EvaluatorRunner::~EvaluatorRunner() {
  Abort(absl::CancelledError("the agent stopped the evaluator"));
  lifecycle_.Join();
}

void EvaluatorRunner::Start() {
  lifecycle_.Start([this] { return Run(); });
}

void EvaluatorRunner::Abort(const absl::Status&) {
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

v1::AgentJobReport EvaluatorRunner::Report() const {
  v1::AgentJobReport report = lifecycle_.Report();
  absl::MutexLock lock(&mu_);
  *report.mutable_evaluations() = {evaluations_.begin(), evaluations_.end()};
  return report;
}

bool EvaluatorRunner::Run() {
  const v1::JobSpec& spec = options_.assignment.spec();
  absl::StatusOr<LoadedJob> loaded =
      LoadJob(options_, job_,
              {.pipeline = 0,
               .num_pipelines = 1,
               .replicas_in_sync = 1,
               .local_batches = 1,
               .global_batch_size = spec.global_batch_size()},
              EvalFunctions(spec));
  if (!loaded.ok()) {
    lifecycle_.RecordError(
        absl::Status(loaded.status().code(),
                     absl::StrCat("evaluator: ", loaded.status().message())),
        !IsPeerFailure(loaded.status()));
    return false;
  }
  functions_ = loaded->functions;
  pipeline_ = std::move(loaded->pipeline);
  if (loaded->stream != nullptr) {
    lifecycle_.RecordError(
        absl::FailedPreconditionError(absl::StrCat(
            "evaluator: eval_dataset_fn \"", spec.eval_dataset_fn(),
            "\" is a stream, and each evaluation is a pass over a finite, "
            "indexable Dataset: register it with COHORT_REGISTER_DATASET")),
        true);
    return false;
  }
  if (pipeline_ == nullptr) {
    lifecycle_.RecordError(
        absl::FailedPreconditionError(
            "evaluator: the job names no eval_dataset_fn to evaluate on"),
        true);
    return false;
  }
  // One pass: the shard's elements, a step's worth at a time. Under
  // per_replica_batches an element is a whole batch, so a pass is as many
  // steps as the data set has batches, whatever the global batch size.
  const int64_t per_step = pipeline_->elements_per_step();
  eval_steps_ = spec.eval_steps() > 0
                    ? spec.eval_steps()
                    : (pipeline_->shard_size() + per_step - 1) / per_step;
  lifecycle_.SetRunning();
  spdlog::info(
      "job {}: evaluating each new checkpoint in {} with \"{}\" over "
      "{} batches ({})",
      options_.assignment.job_id(), job_.checkpoint_dir, spec.eval_fn(),
      eval_steps_, pipeline_->description());
  int64_t evaluated = 0;
  std::string damage_logged;  // each damage is logged once, not each poll
  while (!stop_.HasBeenNotified()) {
    // The step a restore would start with: past a damaged `latest` too.
    absl::Status damage;
    absl::StatusOr<int64_t> latest =
        NewestCheckpointStep(job_.checkpoint_dir, &damage);
    if (!latest.ok() && !absl::IsNotFound(latest.status())) {
      damage = latest.status();
    }
    if (!damage.ok() && damage.message() != damage_logged) {
      damage_logged = std::string(damage.message());
      spdlog::warn("job {}: {}{}", options_.assignment.job_id(), damage_logged,
                   latest.ok() ? absl::StrCat("; evaluating the newest "
                                              "checkpoint there, step ",
                                              *latest)
                               : "; nothing to evaluate until it is rewritten");
    }
    if (latest.ok() && *latest > evaluated) {
      v1::Evaluation evaluation = Evaluate(*latest);
      if (stop_.HasBeenNotified()) break;
      evaluated = std::max(*latest, evaluation.step());
      if (evaluation.error().empty()) {
        spdlog::info("job {}: evaluated the checkpoint at step {}",
                     options_.assignment.job_id(), evaluation.step());
      } else {
        spdlog::warn("job {}: could not evaluate the checkpoint at step {}: {}",
                     options_.assignment.job_id(), evaluation.step(),
                     evaluation.error());
      }
      absl::MutexLock lock(&mu_);
      evaluations_.push_back(std::move(evaluation));
      if (evaluations_.size() > kReportedEvaluations) {
        evaluations_.erase(evaluations_.begin());
      }
    }
    stop_.WaitForNotificationWithTimeout(kPollInterval);
  }
  return true;
}

v1::Evaluation EvaluatorRunner::Evaluate(int64_t step) {
  v1::Evaluation evaluation;
  evaluation.set_step(step);
  Device device = options_.devices.empty() ? Device{} : options_.devices[0];
  if (device.is_cuda()) {
    absl::StatusOr<void*> stream = CreateStream(device.index);
    if (!stream.ok()) {
      evaluation.set_error(std::string(stream.status().message()));
      return evaluation;
    }
    device.stream = *stream;
  }
  int64_t restored = step;
  absl::StatusOr<std::map<std::string, double>> metrics =
      EvaluateOnce(device, &restored);
  if (device.is_cuda()) DestroyStream(device.index, device.stream);
  evaluation.set_step(restored);
  evaluation.set_time_unix_ms(absl::ToUnixMillis(absl::Now()));
  if (!metrics.ok()) {
    evaluation.set_error(std::string(metrics.status().message()));
  } else {
    evaluation.mutable_metrics()->insert(metrics->begin(), metrics->end());
  }
  return evaluation;
}

absl::StatusOr<std::map<std::string, double>> EvaluatorRunner::EvaluateOnce(
    const Device& device, int64_t* restored) {
  const v1::JobSpec& spec = options_.assignment.spec();
  collective::LocalHub hub(1);
  collective::AlgorithmicCommunicator comm(
      hub.Connect(0), {.timeout = job_.collective_timeout});
  // A model split over logical devices is evaluated on this one device:
  // each logical device is it.
  const int logical =
      std::max(1, options_.assignment.spec().logical_devices_per_replica());
  ReplicaContextImpl ctx(&job_, 0, 0, device, &comm, nullptr,
                         std::vector<Device>(logical, device));
  if (functions_.init != nullptr) {
    if (absl::Status init = CallUserCode([&] { return functions_.init(ctx); });
        !init.ok()) {
      return absl::Status(init.code(),
                          absl::StrCat("init function \"", spec.init_fn(),
                                       "\" failed: ", init.message()));
    }
  }
  // The newest checkpoint, which may be newer than the one seen.
  COHORT_ASSIGN_OR_RETURN(*restored, ctx.RestoreOrSync());
  // Each batch's values weigh as many examples as it holds, so that the
  // means are over examples, and one pass ends with a partial batch. A
  // user's batch (per_replica_batches) is one element whose examples only
  // the library knows: those weigh one each.
  std::map<std::string, double> sums;
  std::map<std::string, double> weights;
  const int64_t pass = pipeline_->shard_size();
  const bool one_pass = spec.eval_steps() == 0;
  for (int64_t k = 0; k < eval_steps_; ++k) {
    if (stop_.HasBeenNotified()) {
      return absl::CancelledError("the evaluator was stopped");
    }
    ctx.set_step(k);
    ctx.ClearMetrics();
    absl::StatusOr<Batch> read = CallUserCode(
        [&]() -> absl::StatusOr<Batch> {
          return pipeline_->BatchesForStep(k)[0];
        },
        absl::StrCat("eval dataset \"", spec.eval_dataset_fn(), "\", at batch ",
                     k, ","));
    if (!read.ok()) return read.status();
    Batch batch = *std::move(read);
    const int64_t left = pass - k * static_cast<int64_t>(batch.size());
    if (one_pass && left < static_cast<int64_t>(batch.size())) {
      std::vector<std::string_view> rest;
      for (int64_t i = 0; i < left; ++i) rest.push_back(batch.element(i));
      batch = Batch(std::move(rest));
    }
    if (absl::Status eval =
            CallUserCode([&] { return functions_.step(ctx, batch); });
        !eval.ok()) {
      return absl::Status(
          eval.code(),
          absl::StrCat("eval function \"", spec.eval_fn(),
                       "\" failed on batch ", k, ": ", eval.message()));
    }
    COHORT_RETURN_IF_ERROR(ctx.EndStep().status());
    const double weight = static_cast<double>(batch.size());
    for (const auto& [name, value] : ctx.last_metrics()) {
      sums[name] += value * weight;
      weights[name] += weight;
    }
  }
  for (auto& [name, sum] : sums) sum /= weights[name];
  return sums;
}

}  // namespace cohort::agent
