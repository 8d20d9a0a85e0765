#include "cohort/client.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <system_error>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client_lib/src/client_impl.h"
#include "client_lib/src/stream_reader.h"
#include "cohort/v1/coordinator.grpc.pb.h"
#include "cohort/v1/job.grpc.pb.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "proto/job_state.h"
#include "rpc/channel.h"
#include "rpc/limits.h"

namespace cohort {
namespace {

// Uploading a big step library takes longer than a control call: at least
// this long, and more for each byte at the slowest rate a link between a
// user and a cluster is expected to give.
constexpr absl::Duration kMinSubmitTimeout = absl::Seconds(60);
constexpr double kSlowestUploadBytesPerSecond = 1 << 20;

absl::Duration SubmitTimeout(absl::Duration rpc_timeout, size_t upload_bytes) {
  return std::max(rpc_timeout, kMinSubmitTimeout) +
         absl::Seconds(std::ceil(upload_bytes / kSlowestUploadBytesPerSecond));
}

// A submission whose answer was lost is sent again this many times.
constexpr int kSubmitRetries = 2;
constexpr absl::Duration kSubmitRetryPause = absl::Seconds(1);

// Room left in a SubmitJob message for the spec beside the library: its
// config and the rest.
constexpr int64_t kSpecAllowanceBytes = rpc::kMaxConfigJsonBytes + (1 << 20);

v1::Strategy ToProto(StrategyKind strategy) {
  switch (strategy) {
    case StrategyKind::kMultiWorkerMirrored:
      return v1::MULTI_WORKER_MIRRORED;
    case StrategyKind::kMirrored:
      return v1::MIRRORED;
    case StrategyKind::kOneDevice:
      return v1::ONE_DEVICE;
    case StrategyKind::kCentralStorage:
      return v1::CENTRAL_STORAGE;
    case StrategyKind::kParameterServer:
      return v1::PARAMETER_SERVER;
  }
  return v1::STRATEGY_UNSPECIFIED;
}

v1::Communication ToProto(Communication communication) {
  switch (communication) {
    case Communication::kAuto:
      return v1::COMMUNICATION_AUTO;
    case Communication::kRing:
      return v1::COMMUNICATION_RING;
    case Communication::kNccl:
      return v1::COMMUNICATION_NCCL;
    case Communication::kHierarchical:
      return v1::COMMUNICATION_HIERARCHICAL;
    case Communication::kReductionToOneDevice:
      return v1::COMMUNICATION_REDUCTION_TO_ONE_DEVICE;
  }
  return v1::COMMUNICATION_AUTO;
}

// A duration the job spec carries in whole milliseconds: finite, not
// negative (positive unless `zero_means` says what 0 is), and, when not 0,
// at least 1 ms, as one under it would arrive as 0 and mean the default.
absl::Status CheckMillis(absl::string_view field, absl::Duration d,
                         absl::string_view zero_means = "") {
  const bool zero_allowed = !zero_means.empty();
  if (d < absl::ZeroDuration() || d == absl::InfiniteDuration() ||
      (d == absl::ZeroDuration() && !zero_allowed) ||
      (d > absl::ZeroDuration() && d < absl::Milliseconds(1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be a finite duration, ",
        zero_allowed ? absl::StrCat("0 (", zero_means, ") or ") : "",
        "1ms or more, got ", absl::FormatDuration(d)));
  }
  return absl::OkStatus();
}

// The checks that need no coordinator; the coordinator repeats them and adds
// its own (registered names, placement).
absl::Status ValidateSpec(const JobSpec& spec) {
  if (spec.library_path.empty()) {
    return absl::InvalidArgumentError("library_path: no step library given");
  }
  if (spec.ps.schedule_from_client) {
    if (spec.strategy != StrategyKind::kParameterServer) {
      return absl::InvalidArgumentError(
          "ps.schedule_from_client: only for strategy ParameterServer");
    }
    if (spec.steps != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "steps: must be 0 with ps.schedule_from_client (the client "
          "schedules the calls), got ",
          spec.steps));
    }
    COHORT_RETURN_IF_ERROR(
        CheckMillis("ps.client_timeout", spec.ps.client_timeout));
  } else if (spec.step_fn.empty()) {
    return absl::InvalidArgumentError("step_fn: no step function given");
  } else if (spec.steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps: must be positive, got ", spec.steps));
  }
  if (spec.global_batch_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch_size: must be positive, got ", spec.global_batch_size));
  }
  if (spec.strategy == StrategyKind::kParameterServer) {
    if (spec.ps.max_inflight < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ps.max_inflight: must be at least 1, got ", spec.ps.max_inflight));
    }
    COHORT_RETURN_IF_ERROR(
        CheckMillis("ps.recovery_timeout", spec.ps.recovery_timeout));
  }
  if (spec.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_restarts: must not be negative, got ", spec.max_restarts));
  }
  COHORT_RETURN_IF_ERROR(CheckMillis(
      "placement_timeout", spec.placement_timeout, "the coordinator's"));
  if (spec.checkpoint_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint_every: must not be negative, got ", spec.checkpoint_every));
  }
  COHORT_RETURN_IF_ERROR(CheckMillis(
      "checkpoint_interval", spec.checkpoint_interval, "no time-based ones"));
  const EarlyStopping& stop = spec.early_stopping;
  if (stop.metric.empty() && (stop.target.has_value() || stop.patience != 0 ||
                              stop.min_delta != 0 || stop.maximize)) {
    return absl::InvalidArgumentError(
        "early_stopping: a target, patience, min_delta or maximize without "
        "a metric to watch; name it (cohortctl: --early_stop_metric)");
  }
  if (spec.trace_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace_steps: must not be negative, got ", spec.trace_steps));
  }
  if (spec.logical_devices_per_replica < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("logical_devices_per_replica: must be at least 1, got ",
                     spec.logical_devices_per_replica));
  }
  if (spec.devices_per_agent < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("devices_per_agent: must not be negative, got ",
                     spec.devices_per_agent));
  }
  COHORT_RETURN_IF_ERROR(CheckMillis(
      "collective_timeout", spec.collective_timeout, "the agent's default"));
  // Checked here too, before the library is read and sent.
  if (spec.config_json.size() > rpc::kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("config_json is ", spec.config_json.size(),
                     " bytes, over the ", rpc::kMaxConfigJsonBytes / 1024,
                     " KiB limit; put data in files and name them in it"));
  }
  if (!spec.config_json.empty()) {
    const nlohmann::json config =
        nlohmann::json::parse(spec.config_json, nullptr, false);
    if (config.is_discarded()) {
      return absl::InvalidArgumentError(
          "config_json: not valid JSON (expected an object such as "
          "{\"learning_rate\": 0.1})");
    }
    if (!config.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config_json: must be a JSON object, got a ", config.type_name()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadLibrary(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status file =
      std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(file)) {
    return absl::NotFoundError(
        absl::StrCat("library_path: ", path, ": no such file"));
  }
  if (!std::filesystem::is_regular_file(file)) {
    return absl::InvalidArgumentError(
        absl::StrCat("library_path: ", path, ": not a regular file"));
  }
  // The size first, so that a multi-gigabyte file is not read to be
  // refused; checked again on the bytes read, as the file may change.
  auto refuse_size = [&](int64_t size) -> absl::Status {
    if (size == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("library_path: ", path, ": the file is empty"));
    }
    if (size > rpc::kMaxMessageBytes - kSpecAllowanceBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "library_path: ", path, " is ", size, " bytes, over the ",
          rpc::kMaxMessageBytes - kSpecAllowanceBytes,
          " a submission can carry"));
    }
    return absl::OkStatus();
  };
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (!error) {
    COHORT_RETURN_IF_ERROR(refuse_size(static_cast<int64_t>(
        std::min<std::uintmax_t>(size, std::numeric_limits<int64_t>::max()))));
  }
  COHORT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  COHORT_RETURN_IF_ERROR(refuse_size(static_cast<int64_t>(bytes.size())));
  return bytes;
}

}  // namespace

std::string NewSubmissionId() {
  absl::BitGen bits;
  return absl::StrCat(
      absl::Hex(absl::Uniform<uint64_t>(bits), absl::kZeroPad16),
      absl::Hex(absl::Uniform<uint64_t>(bits), absl::kZeroPad16));
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const std::string& address, const ClientOptions& options) {
  if (address.empty()) {
    return absl::InvalidArgumentError("no coordinator address given");
  }
  if (options.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rpc_timeout must be positive, got ",
                     absl::FormatDuration(options.rpc_timeout)));
  }
  // Else gRPC would dial "localhost" at port 443, and wait there.
  if (absl::StatusOr<HostPort> parsed = ParseHostPort(address); !parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the coordinator's address: ", parsed.status().message()));
  }
  COHORT_ASSIGN_OR_RETURN(rpc::Security security,
                          rpc::Security::Load(rpc::SecurityFiles{
                              .auth_token_file = options.auth_token_file,
                              .tls_cert_file = options.tls_cert_file,
                              .tls_key_file = options.tls_key_file,
                              .tls_ca_file = options.tls_ca_file,
                          }));
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(
      address, std::move(security), options.rpc_timeout)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const std::string& Client::address() const {
  return impl_->connection.address();
}

absl::StatusOr<v1::ClusterState> Client::GetClusterState() const {
  v1::ClusterState state;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status =
      impl_->admin->GetClusterState(context.get(), {}, &state);
  COHORT_RETURN_IF_ERROR(
      impl_->connection.Annotate("Admin.GetClusterState", status));
  return state;
}

absl::StatusOr<v1::ClusterState> Client::WaitForReady(
    absl::Duration timeout,
    const std::function<absl::Status()>& keep_waiting) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("never polled");
  while (true) {
    absl::StatusOr<v1::ClusterState> state = GetClusterState();
    std::vector<std::string> waiting;
    if (state.ok()) {
      for (const v1::TaskStatus& task : state->tasks()) {
        if (task.state() != v1::READY) {
          waiting.push_back(
              absl::StrCat(task.task().type(), ":", task.task().index(), " (",
                           v1::TaskState_Name(task.state()), ")"));
        }
      }
      if (waiting.empty()) return state;
      last = absl::DeadlineExceededError(
          absl::StrCat("not ready after ", absl::FormatDuration(timeout), ": ",
                       absl::StrJoin(waiting, ", ")));
    } else {
      last = state.status();
    }
    if (absl::Now() >= deadline) return last;
    if (keep_waiting != nullptr) COHORT_RETURN_IF_ERROR(keep_waiting());
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::StatusOr<std::string> Client::SubmitJob(const JobSpec& spec) const {
  COHORT_RETURN_IF_ERROR(ValidateSpec(spec));
  v1::SubmitJobRequest request;
  COHORT_ASSIGN_OR_RETURN(*request.mutable_library(),
                          ReadLibrary(spec.library_path));
  v1::JobSpec& proto = *request.mutable_spec();
  proto.set_name(spec.name);
  proto.set_strategy(ToProto(spec.strategy));
  proto.set_communication(ToProto(spec.communication));
  proto.set_library_digest(Sha256Hex(request.library()));
  proto.set_library_name(
      std::filesystem::path(spec.library_path).filename().string());
  proto.set_init_fn(spec.init_fn);
  proto.set_step_fn(spec.step_fn);
  proto.set_dataset_fn(spec.dataset_fn);
  proto.set_eval_fn(spec.eval_fn);
  proto.set_eval_dataset_fn(spec.eval_dataset_fn);
  proto.set_eval_steps(spec.eval_steps);
  proto.set_steps(spec.steps);
  proto.set_global_batch_size(spec.global_batch_size);
  proto.set_seed(spec.seed);
  proto.set_checkpoint_every(spec.checkpoint_every);
  proto.set_checkpoint_interval_ms(
      absl::ToInt64Milliseconds(spec.checkpoint_interval));
  proto.set_max_restarts(spec.max_restarts);
  proto.set_placement_timeout_ms(
      absl::ToInt64Milliseconds(spec.placement_timeout));
  proto.set_config_json(spec.config_json.empty() ? "{}" : spec.config_json);
  proto.set_devices_per_agent(spec.devices_per_agent);
  proto.set_logical_devices_per_replica(spec.logical_devices_per_replica);
  proto.set_trace_steps(spec.trace_steps);
  proto.set_checkpoint_dir(spec.checkpoint_dir);
  proto.set_collective_timeout_ms(
      absl::ToInt64Milliseconds(spec.collective_timeout));
  proto.set_submission_id(spec.submission_id.empty() ? NewSubmissionId()
                                                     : spec.submission_id);
  if (!spec.early_stopping.metric.empty()) {
    v1::EarlyStopping& rule = *proto.mutable_early_stopping();
    rule.set_metric(spec.early_stopping.metric);
    rule.set_maximize(spec.early_stopping.maximize);
    if (spec.early_stopping.target.has_value()) {
      rule.set_target(*spec.early_stopping.target);
    }
    rule.set_patience(spec.early_stopping.patience);
    rule.set_min_delta(spec.early_stopping.min_delta);
  }
  if (spec.strategy == StrategyKind::kParameterServer) {
    v1::ParameterServerOptions& ps = *proto.mutable_ps();
    ps.set_partitioner(static_cast<v1::ParameterServerOptions::Partitioner>(
        static_cast<int>(spec.ps.partitioner)));
    ps.set_num_shards(spec.ps.num_shards);
    ps.set_min_shard_bytes(spec.ps.min_shard_bytes);
    ps.set_max_shard_bytes(spec.ps.max_shard_bytes);
    ps.set_max_inflight(spec.ps.max_inflight);
    ps.set_ps_recovery_timeout_ms(
        absl::ToInt64Milliseconds(spec.ps.recovery_timeout));
    ps.set_schedule_from_client(spec.ps.schedule_from_client);
    if (spec.ps.schedule_from_client) {
      ps.set_client_timeout_ms(
          absl::ToInt64Milliseconds(spec.ps.client_timeout));
    }
  }

  v1::SubmitJobResponse response;
  for (int attempt = 0;; ++attempt) {
    auto context = impl_->connection.NewContext(
        SubmitTimeout(impl_->rpc_timeout, request.library().size()));
    const grpc::Status status =
        impl_->jobs->SubmitJob(context.get(), request, &response);
    const bool answer_lost =
        status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!answer_lost || attempt == kSubmitRetries) {
      absl::Status failed =
          impl_->connection.Annotate("Jobs.SubmitJob", status);
      if (failed.ok()) break;
      if (!answer_lost) return failed;
      const bool slow = failed.code() == absl::StatusCode::kDeadlineExceeded;
      return absl::Status(
          failed.code(),
          absl::StrCat(
              failed.message(), " (", attempt + 1, " tries",
              slow ? absl::StrCat(
                         " of ",
                         absl::FormatDuration(SubmitTimeout(
                             impl_->rpc_timeout, request.library().size())),
                         " each, for a library of ", request.library().size(),
                         " bytes; on a slower link, raise the RPC timeout "
                         "(cohortctl --timeout) past 60 s to add to it")
                   : "",
              "); if one reached the coordinator, the job exists: submitting "
              "again with submission id ",
              proto.submission_id(),
              " returns it instead of making a second one"));
    }
    absl::SleepFor(kSubmitRetryPause);
  }
  if (response.job_id().empty()) {
    return absl::InternalError(
        absl::StrCat("Jobs.SubmitJob to ", address(),
                     ": the coordinator returned no job id"));
  }
  return response.job_id();
}

absl::StatusOr<v1::JobStatus> Client::GetJob(const std::string& job_id) const {
  if (job_id.empty()) return absl::InvalidArgumentError("no job id given");
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::JobStatus job;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status = impl_->jobs->GetJob(context.get(), request, &job);
  COHORT_RETURN_IF_ERROR(impl_->connection.Annotate("Jobs.GetJob", status));
  return job;
}

absl::StatusOr<std::vector<v1::JobStatus>> Client::ListJobs() const {
  v1::ListJobsResponse response;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status =
      impl_->jobs->ListJobs(context.get(), {}, &response);
  COHORT_RETURN_IF_ERROR(impl_->connection.Annotate("Jobs.ListJobs", status));
  return std::vector<v1::JobStatus>(response.jobs().begin(),
                                    response.jobs().end());
}

absl::StatusOr<v1::JobStatus> Client::CancelJob(
    const std::string& job_id) const {
  if (job_id.empty()) return absl::InvalidArgumentError("no job id given");
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::CancelJobResponse response;
  auto context = impl_->connection.NewContext(impl_->rpc_timeout);
  const grpc::Status status =
      impl_->jobs->CancelJob(context.get(), request, &response);
  COHORT_RETURN_IF_ERROR(impl_->connection.Annotate("Jobs.CancelJob", status));
  return response.job();
}

namespace {

// How long a stream may stay silent before its reader gives up on it: the
// caller's RPC timeout, but never less than a few of the server's
// keepalives.
absl::Duration SilenceLimit(absl::Duration rpc_timeout) {
  return std::max(rpc_timeout, 3 * rpc::kStreamKeepalive);
}

bool Retryable(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable ||
         code == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace

absl::StatusOr<v1::JobStatus> Client::WatchJob(
    const std::string& job_id,
    const std::function<bool(const v1::JobStatus&)>& on_update) const {
  const absl::Duration silence_limit = SilenceLimit(impl_->rpc_timeout);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  std::optional<v1::JobStatus> last;
  absl::Time last_heard = absl::Now();
  // What broke a stream last, for the error if the watch gives up: a
  // silent stream says less than the failure before it.
  absl::Status last_failure =
      absl::UnavailableError("its stream stayed silent");
  // Each turn opens the stream once: a coordinator restarting or a network
  // blip breaks it, and the watch goes on over a new one.
  for (int attempt = 0;; ++attempt) {
    StreamReader<v1::JobStatus> reader(
        impl_->connection.NewContext(absl::InfiniteDuration()));
    reader.Start([&](grpc::ClientContext* context, auto* reactor) {
      impl_->jobs->async()->WatchJob(context, &request, reactor);
    });
    absl::Status broken;
    while (broken.ok()) {
      v1::JobStatus status;
      switch (reader.Next(last_heard + silence_limit, &status)) {
        case StreamRead::kMessage: {
          last_heard = absl::Now();
          const bool changed =
              !last.has_value() || JobStatusChanged(*last, status);
          last = std::move(status);
          if (changed && !on_update(*last)) return *last;
          if (IsTerminal(last->state())) return *last;
          break;
        }
        case StreamRead::kEnded:
          broken = impl_->connection.Annotate("Jobs.WatchJob", reader.status());
          if (broken.ok()) {
            broken = absl::UnavailableError("the stream ended early");
          }
          if (!Retryable(broken.code())) return broken;
          last_failure = broken;
          break;
        case StreamRead::kTimedOut:
          broken = absl::UnavailableError("silent");
          break;
      }
    }
    const absl::Duration silent = absl::Now() - last_heard;
    if (silent >= silence_limit) {
      return absl::UnavailableError(absl::StrCat(
          "watching job ", job_id, ": no answer from the coordinator for ",
          absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(100))),
          " over ", attempt + 1, attempt == 0 ? " try" : " tries",
          "; last error: ", last_failure.message()));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::StatusOr<v1::TraceData> Client::GetTrace(
    const std::string& job_id) const {
  if (job_id.empty()) return absl::InvalidArgumentError("no job id given");
  v1::GetTraceRequest request;
  request.set_job_id(job_id);
  v1::TraceData response;
  // The coordinator asks each agent in turn.
  auto context = impl_->connection.NewContext(4 * impl_->rpc_timeout);
  const grpc::Status status =
      impl_->jobs->GetTrace(context.get(), request, &response);
  COHORT_RETURN_IF_ERROR(impl_->connection.Annotate("Jobs.GetTrace", status));
  return response;
}

absl::Status Client::StreamLogs(
    const std::string& target, const LogOptions& options,
    const std::function<bool(const v1::LogChunk&)>& on_chunk) const {
  if (target.empty()) {
    return absl::InvalidArgumentError(
        "no log target given (a task such as worker:0, a job id, or "
        "coordinator)");
  }
  v1::StreamLogsRequest request;
  request.set_target(target);
  request.set_tail_lines(options.tail_lines);
  request.set_follow(options.follow);
  // The coordinator's keepalives show that it is still there, with follow
  // and while a read without it waits for a task that does not answer.
  const absl::Duration silence_limit = SilenceLimit(impl_->rpc_timeout);
  StreamReader<v1::LogChunk> reader(
      impl_->connection.NewContext(absl::InfiniteDuration()));
  reader.Start([&](grpc::ClientContext* context, auto* reactor) {
    impl_->admin->async()->StreamLogs(context, &request, reactor);
  });
  while (true) {
    v1::LogChunk chunk;
    switch (reader.Next(absl::Now() + silence_limit, &chunk)) {
      case StreamRead::kMessage:
        if (!on_chunk(chunk)) return absl::OkStatus();
        break;
      case StreamRead::kEnded:
        return impl_->connection.Annotate("Admin.StreamLogs", reader.status());
      case StreamRead::kTimedOut:
        return absl::UnavailableError(
            absl::StrCat("logs of ", target, ": the coordinator at ",
                         impl_->connection.address(), " sent nothing for ",
                         absl::FormatDuration(silence_limit)));
    }
  }
}

}  // namespace cohort
