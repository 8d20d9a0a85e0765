#include "coordinator/job_validation.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/names.h"
#include "nlohmann/json.hpp"
#include "rpc/limits.h"

namespace cohort::coordinator {

constexpr int kMaxLogicalDevices = 64;
constexpr size_t kMaxSubmissionIdBytes = 128;

namespace {

// A wait of `ms` (0: `zero_means`), between 0 and kMaxJobWaitMs.
absl::Status CheckWait(absl::string_view field, int64_t ms,
                       absl::string_view zero_means) {
  if (ms >= 0 && ms <= kMaxJobWaitMs) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("job spec: ", field, " must be in [0, ", kMaxJobWaitMs,
                   "] (0: ", zero_means, "; at most 7 days), got ", ms));
}

// Ids travel in logs, errors and command lines, so a plain alphabet.
bool IsSubmissionIdChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
}

}  // namespace

absl::Status ValidateEarlyStopping(const v1::JobSpec& spec) {
  const v1::EarlyStopping& rule = spec.early_stopping();
  if (rule.ByteSizeLong() == 0) return absl::OkStatus();
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: early_stopping: ", parts...));
  };
  if (rule.metric().empty())
    return bad("metric is required: the metric to watch");
  if (spec.strategy() == v1::PARAMETER_SERVER) {
    return bad(
        "applies to the synchronous strategies; a ParameterServer "
        "step ends training with stop_training");
  }
  if (rule.patience() < 0) {
    return bad("patience must be >= 0, got ", rule.patience());
  }
  if (!std::isfinite(rule.min_delta()) || rule.min_delta() < 0) {
    return bad("min_delta must be a finite number >= 0, got ",
               rule.min_delta());
  }
  if (rule.has_target() && !std::isfinite(rule.target())) {
    return bad("target must be a finite number, got ", rule.target());
  }
  if (!rule.has_target() && rule.patience() == 0) {
    return bad("watching \"", rule.metric(),
               "\" needs a target, a patience, or both");
  }
  return absl::OkStatus();
}

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ", parts...));
  };
  // First: the checks below quote some of them.
  const std::pair<const char*, const std::string*> texts[] = {
      {"name", &spec.name()},
      {"library_name", &spec.library_name()},
      {"init_fn", &spec.init_fn()},
      {"step_fn", &spec.step_fn()},
      {"dataset_fn", &spec.dataset_fn()},
      {"eval_fn", &spec.eval_fn()},
      {"eval_dataset_fn", &spec.eval_dataset_fn()},
      {"checkpoint_dir", &spec.checkpoint_dir()},
      {"early_stopping.metric", &spec.early_stopping().metric()},
  };
  for (const auto& [field, text] : texts) {
    if (text->size() > rpc::kMaxSpecTextBytes) {
      return bad(field, " is ", text->size(), " bytes, over the limit of ",
                 rpc::kMaxSpecTextBytes);
    }
  }
  switch (spec.strategy()) {
    case v1::MULTI_WORKER_MIRRORED:
    case v1::MIRRORED:
    case v1::ONE_DEVICE:
    case v1::CENTRAL_STORAGE:
      break;
    case v1::PARAMETER_SERVER:
      if (absl::Status ps = ValidatePsOptions(spec.ps()); !ps.ok()) return ps;
      break;
    default:
      return bad("strategy is missing or unknown (", spec.strategy(), ")");
  }
  if (!v1::Communication_IsValid(spec.communication())) {
    return bad("communication ", spec.communication(), " is unknown");
  }
  if (!IsSha256Hex(spec.library_digest())) {
    return bad("library_digest must be 64 lowercase hex digits (SHA-256)");
  }
  const bool client_scheduled = spec.ps().schedule_from_client();
  if (client_scheduled && spec.strategy() != v1::PARAMETER_SERVER) {
    return bad("ps.schedule_from_client is for strategy ParameterServer");
  }
  if (client_scheduled) {
    if (spec.steps() != 0) {
      return bad(
          "steps must be 0 with ps.schedule_from_client (the client "
          "schedules the calls), got ",
          spec.steps());
    }
    if (absl::Status wait = CheckWait("ps.client_timeout_ms",
                                      spec.ps().client_timeout_ms(), "300 s");
        !wait.ok()) {
      return wait;
    }
  } else {
    if (spec.step_fn().empty()) return bad("step_fn is required");
    if (spec.steps() <= 0)
      return bad("steps must be positive, got ", spec.steps());
  }
  if (spec.global_batch_size() <= 0) {
    return bad("global_batch_size must be positive, got ",
               spec.global_batch_size());
  }
  if (spec.checkpoint_every() < 0) {
    return bad("checkpoint_every must be >= 0, got ", spec.checkpoint_every());
  }
  if (spec.checkpoint_interval_ms() < 0) {
    return bad("checkpoint_interval_ms must be >= 0, got ",
               spec.checkpoint_interval_ms());
  }
  if (spec.checkpoint_interval_ms() > 0 &&
      spec.strategy() == v1::PARAMETER_SERVER) {
    return bad(
        "checkpoint_interval_ms applies to the synchronous strategies; a "
        "ParameterServer job's state is its ps tasks' snapshots");
  }
  if (spec.max_restarts() < 0) {
    return bad("max_restarts must be >= 0, got ", spec.max_restarts());
  }
  if (absl::Status wait =
          CheckWait("placement_timeout_ms", spec.placement_timeout_ms(),
                    "the coordinator's --placement_timeout");
      !wait.ok()) {
    return wait;
  }
  if (spec.devices_per_agent() < 0) {
    return bad("devices_per_agent must be >= 0, got ",
               spec.devices_per_agent());
  }
  if (absl::Status wait = CheckWait("collective_timeout_ms",
                                    spec.collective_timeout_ms(), "60 s");
      !wait.ok()) {
    return wait;
  }
  if (!spec.checkpoint_dir().empty()) {
    const std::filesystem::path dir(spec.checkpoint_dir());
    // Each agent would resolve a relative path against its own working
    // directory, and ".." makes two spellings of one directory.
    if (!dir.is_absolute()) {
      return bad("checkpoint_dir must be an absolute path, got \"",
                 spec.checkpoint_dir(), "\"");
    }
    for (const std::filesystem::path& part : dir) {
      if (part == "..") {
        return bad("checkpoint_dir must not contain \"..\", got \"",
                   spec.checkpoint_dir(), "\"");
      }
    }
    if (spec.checkpoint_dir().find('\0') != std::string::npos) {
      return bad("checkpoint_dir holds a NUL byte");
    }
  }
  if (absl::Status rule = ValidateEarlyStopping(spec); !rule.ok()) return rule;
  if (spec.trace_steps() < 0) {
    return bad("trace_steps must not be negative, got ", spec.trace_steps());
  }
  if (spec.logical_devices_per_replica() < 0 ||
      spec.logical_devices_per_replica() > kMaxLogicalDevices) {
    return bad("logical_devices_per_replica must be in [0, ",
               kMaxLogicalDevices, "] (0: one), got ",
               spec.logical_devices_per_replica());
  }
  if (spec.logical_devices_per_replica() > 1 &&
      (spec.strategy() == v1::PARAMETER_SERVER ||
       spec.strategy() == v1::CENTRAL_STORAGE)) {
    return bad("logical_devices_per_replica: a ",
               spec.strategy() == v1::PARAMETER_SERVER ? "ParameterServer"
                                                       : "CentralStorage",
               " replica runs on one device; logical devices are for the "
               "mirrored strategies");
  }
  if (spec.eval_steps() < 0) {
    return bad("eval_steps must be >= 0 (0: one pass), got ",
               spec.eval_steps());
  }
  if (!spec.eval_fn().empty() || !spec.eval_dataset_fn().empty()) {
    if (spec.eval_fn().empty() || spec.eval_dataset_fn().empty()) {
      return bad("the evaluator needs both eval_fn and eval_dataset_fn");
    }
    if (spec.strategy() == v1::PARAMETER_SERVER) {
      return bad(
          "the evaluator evaluates the synchronous strategies' "
          "checkpoints; a ParameterServer job has none");
    }
  }
  if (spec.submission_id().size() > kMaxSubmissionIdBytes) {
    return bad("submission_id is ", spec.submission_id().size(),
               " bytes, over the limit of ", kMaxSubmissionIdBytes);
  }
  for (char c : spec.submission_id()) {
    if (!IsSubmissionIdChar(c)) {
      return bad("submission_id ", Quoted(spec.submission_id()), " holds ",
                 Quoted(std::string(1, c)),
                 "; use letters, digits and . _ : -");
    }
  }
  if (spec.config_json().size() > rpc::kMaxConfigJsonBytes) {
    return bad("config_json is ", spec.config_json().size(),
               " bytes, over the ", rpc::kMaxConfigJsonBytes / 1024,
               " KiB limit; put data in files and name them in it");
  }
  if (!spec.config_json().empty()) {
    const nlohmann::json config =
        nlohmann::json::parse(spec.config_json(), nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return bad("config_json must be a JSON object");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePsOptions(const v1::ParameterServerOptions& ps) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ps.", parts...));
  };
  if (!v1::ParameterServerOptions::Partitioner_IsValid(ps.partitioner())) {
    return bad("partitioner ", ps.partitioner(), " is unknown");
  }
  if (ps.partitioner() == v1::ParameterServerOptions::PARTITIONER_FIXED &&
      ps.num_shards() <= 0) {
    return bad("num_shards must be positive for the fixed partitioner, got ",
               ps.num_shards());
  }
  if (ps.partitioner() == v1::ParameterServerOptions::PARTITIONER_MAX_SIZE &&
      ps.max_shard_bytes() <= 0) {
    return bad(
        "max_shard_bytes must be positive for the max-size "
        "partitioner, got ",
        ps.max_shard_bytes());
  }
  if (ps.min_shard_bytes() < 0) return bad("min_shard_bytes must be >= 0");
  if (ps.max_inflight() < 0 || ps.max_inflight() > 64) {
    return bad("max_inflight must be in [0, 64], got ", ps.max_inflight());
  }
  if (absl::Status wait = CheckWait("ps.ps_recovery_timeout_ms",
                                    ps.ps_recovery_timeout_ms(), "60 s");
      !wait.ok()) {
    return wait;
  }
  return absl::OkStatus();
}

}  // namespace cohort::coordinator
