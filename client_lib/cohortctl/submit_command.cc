// `cohortctl submit`: builds a JobSpec from the flags, uploads the step
// library and prints the job's id; with --wait, watches the job to its end.

#include <cstdio>
#include <iostream>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/commands.h"
#include "client_lib/cohortctl/job_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, library, "",
          "submit: the step library (.so) to upload. Required.");
ABSL_FLAG(std::string, step, "",
          "submit: the step function's registered name. Required.");
ABSL_FLAG(std::string, init, "",
          "submit: the init function's registered name (optional).");
ABSL_FLAG(std::string, dataset, "",
          "submit: the dataset function's registered name (optional).");
ABSL_FLAG(int64_t, steps, 0, "submit: how many steps to run. Required.");
ABSL_FLAG(int64_t, global_batch, 0,
          "submit: the global batch size, split evenly over the replicas. "
          "Required.");
ABSL_FLAG(std::string, strategy, "multi_worker_mirrored",
          "submit: multi_worker_mirrored (every device of every agent), "
          "mirrored (the devices of one agent), one_device, "
          "central_storage (the devices of one agent, one copy of the "
          "variables), or parameter_server (variables on the ps tasks, "
          "step closures scheduled on every worker).");
ABSL_FLAG(std::string, ps_partitioner, "none",
          "submit, parameter_server: how variables split over the ps tasks: "
          "none (whole variables, round-robin), fixed (--ps_shards parts), "
          "min_size (parts of at least --ps_min_shard_bytes) or max_size "
          "(parts of at most --ps_max_shard_bytes).");
ABSL_FLAG(int, ps_shards, 0,
          "submit: parts per variable for --ps_partitioner=fixed.");
ABSL_FLAG(int64_t, ps_min_shard_bytes, 256 << 10,
          "submit: smallest part for --ps_partitioner=min_size.");
ABSL_FLAG(int64_t, ps_max_shard_bytes, 0,
          "submit: largest part for --ps_partitioner=max_size.");
ABSL_FLAG(int, max_inflight, 1,
          "submit, parameter_server: step closures each worker runs at once.");
ABSL_FLAG(absl::Duration, ps_recovery_timeout, absl::Seconds(60),
          "submit, parameter_server: how long a ps task that went away may "
          "take to come back before the job fails.");
ABSL_FLAG(std::string, communication, "auto",
          "submit: how replicas all-reduce: auto, ring, nccl, hierarchical (a "
          "ring inside each agent, then across agents) or "
          "reduction_to_one_device (to one replica inside each agent).");
ABSL_FLAG(uint64_t, seed, 0, "submit: the job's random seed.");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "submit: checkpoint every N steps; 0: only at the end.");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::ZeroDuration(),
          "submit: also checkpoint when this long has passed since the last "
          "checkpoint (e.g. 10m); 0: by --checkpoint_every alone.");
ABSL_FLAG(int, max_restarts, 0,
          "submit: how many times to resume after a lost worker.");
ABSL_FLAG(absl::Duration, placement_timeout, absl::ZeroDuration(),
          "submit: how long each attempt waits for its tasks to be ready, "
          "e.g. while a lost host is replaced, before it fails (or, under "
          "ParameterServer, starts without the workers still missing); 0: "
          "the coordinator's --placement_timeout (2m by default).");
ABSL_FLAG(int, logical_devices_per_replica, 1,
          "submit: devices each replica spans (TPUStrategy's logical "
          "devices); the replicas per agent are its devices divided by it.");
ABSL_FLAG(int64_t, trace, 0,
          "submit: record a timeline of each replica's first N steps, for "
          "`cohortctl trace JOB`; 0: off.");
ABSL_FLAG(int, devices_per_agent, 0,
          "submit: devices each agent uses; 0: all of them.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "submit: where checkpoints go, an absolute path as the agents "
          "see it. Default: under the coordinator's state dir.");
ABSL_FLAG(std::string, config, "{}",
          "submit: a JSON object handed to the step library, or @FILE to read "
          "it from FILE.");
ABSL_FLAG(std::string, name, "",
          "submit: a name for people to tell jobs apart.");
ABSL_FLAG(std::string, submission_id, "",
          "submit: names this one intended job (letters, digits, . _ : -): "
          "submitting it again, as a script that lost the answer would, "
          "prints the job it made instead of starting another. Default: a "
          "random one.");
ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(60),
          "submit: how long a collective may wait for a peer before the "
          "attempt fails.");
ABSL_FLAG(std::string, early_stop_metric, "",
          "submit: end training early on this metric, which the step reports "
          "reduced over the replicas (report(name, value, ReduceOp)); with "
          "--early_stop_target and/or --early_stop_patience.");
ABSL_FLAG(bool, early_stop_maximize, false,
          "submit: higher values of --early_stop_metric are better "
          "(accuracy); default: lower (loss).");
ABSL_FLAG(std::optional<double>, early_stop_target, std::nullopt,
          "submit: stop once --early_stop_metric is at least this good.");
ABSL_FLAG(int64_t, early_stop_patience, 0,
          "submit: stop after this many steps in a row without an "
          "improvement of more than --early_stop_min_delta.");
ABSL_FLAG(double, early_stop_min_delta, 0,
          "submit: the least change that counts as an improvement.");
ABSL_FLAG(std::string, eval, "",
          "submit: the registered eval function the cluster's evaluator task "
          "runs on each new checkpoint (with --eval_dataset).");
ABSL_FLAG(std::string, eval_dataset, "",
          "submit: the registered dataset function the evaluator reads.");
ABSL_FLAG(int64_t, eval_steps, 0,
          "submit: eval batches per checkpoint; 0: one pass over the eval "
          "dataset.");
ABSL_FLAG(bool, wait, false,
          "submit: watch the job until it ends; exit 0 only if it SUCCEEDED.");

namespace cohort::ctl {
namespace {

absl::StatusOr<std::string> ConfigFromFlag() {
  std::string config = absl::GetFlag(FLAGS_config);
  if (absl::StartsWith(config, "@")) {
    absl::StatusOr<std::string> text = ReadFile(config.substr(1));
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat("--config: ", text.status().message()));
    }
    config = *std::move(text);
  }
  const nlohmann::json parsed = nlohmann::json::parse(config, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config must be a JSON object (or @FILE holding one), "
                     "got: ",
                     config.substr(0, 80)));
  }
  return config;
}

// The flags as a JobSpec. Names the flag for what only the CLI can check;
// the client checks the rest.
absl::StatusOr<JobSpec> SpecFromFlags() {
  JobSpec spec;
  spec.library_path = absl::GetFlag(FLAGS_library);
  spec.step_fn = absl::GetFlag(FLAGS_step);
  spec.steps = absl::GetFlag(FLAGS_steps);
  spec.global_batch_size = absl::GetFlag(FLAGS_global_batch);
  if (spec.library_path.empty()) {
    return absl::InvalidArgumentError("--library=PATH is required");
  }
  if (spec.step_fn.empty()) {
    return absl::InvalidArgumentError("--step=NAME is required");
  }
  if (spec.steps <= 0) {
    return absl::InvalidArgumentError("--steps=N is required (N > 0)");
  }
  if (spec.global_batch_size <= 0) {
    return absl::InvalidArgumentError("--global_batch=B is required (B > 0)");
  }
  COHORT_ASSIGN_OR_RETURN(spec.strategy,
                          ParseStrategy(absl::GetFlag(FLAGS_strategy)));
  if (spec.strategy != StrategyKind::kParameterServer) {
    // Dropped silently, they would leave a job that is not what was asked.
    for (const absl::CommandLineFlag* flag :
         {&absl::GetFlagReflectionHandle(FLAGS_ps_partitioner),
          &absl::GetFlagReflectionHandle(FLAGS_ps_shards),
          &absl::GetFlagReflectionHandle(FLAGS_ps_min_shard_bytes),
          &absl::GetFlagReflectionHandle(FLAGS_ps_max_shard_bytes),
          &absl::GetFlagReflectionHandle(FLAGS_max_inflight),
          &absl::GetFlagReflectionHandle(FLAGS_ps_recovery_timeout)}) {
      if (flag->CurrentValue() != flag->DefaultValue()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag->Name(),
                         " is for --strategy=parameter_server, not --strategy=",
                         absl::GetFlag(FLAGS_strategy)));
      }
    }
  }
  COHORT_ASSIGN_OR_RETURN(
      spec.communication,
      ParseCommunication(absl::GetFlag(FLAGS_communication)));
  const absl::Duration timeout = absl::GetFlag(FLAGS_collective_timeout);
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "--collective_timeout must be a positive, finite duration (e.g. 60s)");
  }
  spec.collective_timeout = timeout;
  COHORT_ASSIGN_OR_RETURN(spec.config_json, ConfigFromFlag());
  spec.name = absl::GetFlag(FLAGS_name);
  spec.submission_id = absl::GetFlag(FLAGS_submission_id);
  spec.init_fn = absl::GetFlag(FLAGS_init);
  spec.dataset_fn = absl::GetFlag(FLAGS_dataset);
  spec.seed = absl::GetFlag(FLAGS_seed);
  spec.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  spec.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  spec.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  spec.placement_timeout = absl::GetFlag(FLAGS_placement_timeout);
  spec.devices_per_agent = absl::GetFlag(FLAGS_devices_per_agent);
  spec.logical_devices_per_replica =
      absl::GetFlag(FLAGS_logical_devices_per_replica);
  spec.trace_steps = absl::GetFlag(FLAGS_trace);
  spec.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const std::string partitioner = absl::GetFlag(FLAGS_ps_partitioner);
  using Partitioner = ParameterServerOptions::Partitioner;
  if (partitioner == "none") {
    spec.ps.partitioner = Partitioner::kNone;
  } else if (partitioner == "fixed") {
    spec.ps.partitioner = Partitioner::kFixedShards;
  } else if (partitioner == "min_size") {
    spec.ps.partitioner = Partitioner::kMinSize;
  } else if (partitioner == "max_size") {
    spec.ps.partitioner = Partitioner::kMaxSize;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --ps_partitioner \"", partitioner,
                     "\"; valid: none, fixed, min_size, max_size"));
  }
  spec.ps.num_shards = absl::GetFlag(FLAGS_ps_shards);
  spec.ps.min_shard_bytes = absl::GetFlag(FLAGS_ps_min_shard_bytes);
  spec.ps.max_shard_bytes = absl::GetFlag(FLAGS_ps_max_shard_bytes);
  spec.ps.max_inflight = absl::GetFlag(FLAGS_max_inflight);
  spec.ps.recovery_timeout = absl::GetFlag(FLAGS_ps_recovery_timeout);
  spec.eval_fn = absl::GetFlag(FLAGS_eval);
  spec.eval_dataset_fn = absl::GetFlag(FLAGS_eval_dataset);
  spec.eval_steps = absl::GetFlag(FLAGS_eval_steps);
  spec.early_stopping.metric = absl::GetFlag(FLAGS_early_stop_metric);
  spec.early_stopping.maximize = absl::GetFlag(FLAGS_early_stop_maximize);
  spec.early_stopping.target = absl::GetFlag(FLAGS_early_stop_target);
  spec.early_stopping.patience = absl::GetFlag(FLAGS_early_stop_patience);
  spec.early_stopping.min_delta = absl::GetFlag(FLAGS_early_stop_min_delta);
  return spec;
}

}  // namespace

int SubmitCommand(const CommonOptions& options) {
  absl::StatusOr<JobSpec> spec = SpecFromFlags();
  if (!spec.ok()) {
    PrintError(spec.status());
    return kUsageError;
  }
  std::unique_ptr<Client> client = ConnectOrReport(options);
  if (client == nullptr) return kUsageError;
  // Chosen here, so that a submission whose answer was lost can be named.
  if (spec->submission_id.empty()) spec->submission_id = NewSubmissionId();
  absl::StatusOr<std::string> job_id = client->SubmitJob(*spec);
  if (!job_id.ok()) {
    PrintError(job_id.status());
    const absl::StatusCode code = job_id.status().code();
    if (code == absl::StatusCode::kUnavailable ||
        code == absl::StatusCode::kDeadlineExceeded) {
      // The answer was lost, not the job: it may exist and run.
      std::cerr << "cohortctl: to try again without risking a second job, "
                   "run the same command with --submission_id="
                << spec->submission_id << "\n";
      return kOutcomeUnknown;
    }
    // A spec the client or the coordinator rejected, one the cluster cannot
    // run (no ps tasks for ParameterServer), a missing library, or a
    // submission id already given to another spec, is the caller's to fix.
    return code == absl::StatusCode::kInvalidArgument ||
                   code == absl::StatusCode::kFailedPrecondition ||
                   code == absl::StatusCode::kNotFound ||
                   code == absl::StatusCode::kAlreadyExists
               ? kUsageError
               : 1;
  }
  if (!absl::GetFlag(FLAGS_wait)) {
    if (options.json) {
      std::cout << nlohmann::json{{"job_id", *job_id}}.dump() << std::endl;
    } else {
      std::cout << *job_id << std::endl;
    }
    return 0;
  }
  if (!options.json)
    std::cout << "job " << *job_id << " submitted" << std::endl;
  return WatchUntilEnd(*client, *job_id, options.json, /*exists=*/true);
}

}  // namespace cohort::ctl
