#pragma once

// Cohort's client library: connect to a coordinator, submit and watch jobs,
// and query the cluster. Used by cohortctl and by user programs.
//
//   absl::StatusOr<std::unique_ptr<cohort::Client>> client =
//       cohort::Client::Connect("10.0.0.1:7070",
//                               {.auth_token_file = "/etc/cohort/token"});
//   absl::StatusOr<cohort::v1::ClusterState> state =
//       (*client)->GetClusterState();
//
//   cohort::JobSpec job{.library_path = "libmy_steps.so",
//                       .step_fn = "my_step", .steps = 1000,
//                       .global_batch_size = 64};
//   absl::StatusOr<std::string> id = (*client)->SubmitJob(job);
//   (*client)->WatchJob(*id, [](const cohort::v1::JobStatus& s) {
//     std::printf("step %ld\n", s.step());
//     return true;
//   });

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/strategy.h"
#include "cohort/v1/coordinator.pb.h"
#include "cohort/v1/job.pb.h"
#include "cohort/v1/logs.pb.h"
#include "cohort/v1/trace.pb.h"

namespace cohort {

struct ClientOptions {
  std::string auth_token_file;  // bearer token sent with every call
  std::string tls_ca_file;      // verify the coordinator (enables TLS)
  std::string tls_cert_file;    // client certificate, for mutual TLS
  std::string tls_key_file;
  absl::Duration rpc_timeout = absl::Seconds(5);  // positive
};

// How replicas all-reduce. kAuto picks NCCL for CUDA replicas, else
// hierarchical (threads inside an agent, a gRPC ring between agents); the
// job's status says what it picked and why.
enum class Communication {
  kAuto,
  kRing,
  kNccl,
  kHierarchical,          // HierarchicalCopyAllReduce: a ring inside each agent
  kReductionToOneDevice,  // to one replica inside each agent
};

// How a kParameterServer job places its variables over the ps tasks and
// schedules its step closures (TF's ParameterServerStrategy and
// ClusterCoordinator). Each step is a closure that runs on some worker, at
// least once: a closure whose worker died runs again on another. Each
// closure's reported metrics are its remote value: the newest closures'
// are in the job's status (recent_results), and the highest-numbered
// closure's value of each metric in its metrics, computed on the
// variables that closure pulled; FetchVariables reads the final model.
struct ParameterServerOptions {
  // As tf.distribute.experimental.partitioners, along axis 0; kNone places
  // whole variables round-robin.
  enum class Partitioner { kNone, kFixedShards, kMinSize, kMaxSize };
  Partitioner partitioner = Partitioner::kNone;
  int num_shards = 0;           // kFixedShards
  int64_t min_shard_bytes = 0;  // kMinSize; 0: 256 KiB
  int64_t max_shard_bytes = 0;  // kMaxSize; must be positive there
  // Closures each worker runs at once (one executor thread each), 1 to 64.
  int max_inflight = 1;
  // How long a ps task that went away may take to come back (restarted and
  // restored from its snapshot) before the job fails.
  absl::Duration recovery_timeout = absl::Seconds(60);
  // TF's ClusterCoordinator: the job runs no steps of its own (steps must
  // be 0, step_fn may be empty); a ClusterCoordinator
  // (cohort/cluster_coordinator.h) schedules calls onto it and finishes it.
  bool schedule_from_client = false;
  // Such a job, idle, fails when the client has not called for this long.
  absl::Duration client_timeout = absl::Seconds(300);
};

// Ends a synchronous job before `steps` on a metric that its step reports
// reduced over the replicas (ReplicaContext::report with a ReduceOp), as
// Keras' EarlyStopping; the job then ends SUCCEEDED at that step. A step can
// also end training itself with ReplicaContext::stop_training. The
// coordinator checks the fields.
struct EarlyStopping {
  std::string metric;            // empty: no rule
  bool maximize = false;         // higher is better (accuracy)
  std::optional<double> target;  // stop once the metric is this good
  int64_t patience = 0;  // steps without an improvement; 0: no such rule
  double min_delta = 0;  // what counts as an improvement
};

// What to run. Only library_path, step_fn, steps and global_batch_size are
// required (step_fn and steps: not with ps.schedule_from_client).
struct JobSpec {
  std::string name;  // shown by `cohortctl jobs`
  StrategyKind strategy = StrategyKind::kMultiWorkerMirrored;
  Communication communication = Communication::kAuto;
  std::string library_path;  // the step library; uploaded on submit
  std::string init_fn;       // registered names; init and dataset optional
  std::string step_fn;
  std::string dataset_fn;
  int64_t steps = 0;
  int64_t global_batch_size = 0;  // split evenly over the replicas
  uint64_t seed = 0;
  int64_t checkpoint_every = 0;  // steps; 0: only the final checkpoint
  // Also checkpoint when this long has passed since the last one; 0: by
  // steps only. The synchronous strategies only.
  absl::Duration checkpoint_interval = absl::ZeroDuration();
  int max_restarts = 0;  // after a lost worker
  // How long each attempt waits for its tasks to be READY (at the start, and
  // after a restart while a lost host or its replacement comes back) before
  // it fails naming them; a ParameterServer attempt with its ps tasks and a
  // worker READY starts without the other workers instead, and each joins
  // once READY. 0: the coordinator's --placement_timeout (2 min).
  absl::Duration placement_timeout = absl::ZeroDuration();
  std::string config_json = "{}";  // handed to the library as is
  int devices_per_agent = 0;       // 0: every device of each agent
  // TPUStrategy's logical devices: each replica spans this many devices of
  // its agent (ReplicaContext::logical_device, run_on); the replicas per
  // agent are its devices divided by it. The mirrored strategies only.
  int logical_devices_per_replica = 1;
  // Timeline tracing (GetTrace, cohortctl trace): each replica records its
  // first trace_steps steps of every attempt. 0: off.
  int64_t trace_steps = 0;
  std::string checkpoint_dir;  // default: under the coordinator's state
  absl::Duration collective_timeout = absl::Seconds(60);
  ParameterServerOptions ps;     // kParameterServer only
  EarlyStopping early_stopping;  // the synchronous strategies only
  // The sidecar evaluator (the cluster's "evaluator" task), synchronous
  // strategies: on each new checkpoint it runs eval_fn over eval_steps
  // batches of eval_dataset_fn (0: one pass) and reports each metric's mean,
  // tagged with the checkpoint's step, in the job's status.
  std::string eval_fn;
  std::string eval_dataset_fn;
  int64_t eval_steps = 0;
  // Names this one intended job (up to 128 of [A-Za-z0-9._:-]): a
  // submission repeating it gets the job it made instead of a second one.
  // Empty: SubmitJob chooses one for its own retries.
  std::string submission_id;
};

// A new submission id: 128 random bits, unique to one intended job for any
// practical purpose.
std::string NewSubmissionId();

// A tensor in host memory: one saved in a checkpoint, or a ParameterServer
// variable's value read from the ps tasks.
struct HostTensor {
  std::string dtype;  // DTypeName (cohort/step.h): "float32", "int64", ...
  std::vector<int64_t> shape;
  std::string bytes;  // little-endian elements

  template <typename T>
  std::span<const T> As() const {
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
};

// A job's variables (and optimizer slots, named "<variable>/<slot>") at one
// step.
struct Checkpoint {
  int64_t step = 0;
  std::map<std::string, HostTensor> tensors;
};

// The latest complete checkpoint in `dir` (a job's checkpoint_dir);
// NOT_FOUND when there is none, DATA_LOSS naming the file when it is
// corrupt.
absl::StatusOr<Checkpoint> LoadLatestCheckpoint(const std::string& dir);

// A connection to one coordinator. Thread-safe.
class Client {
 public:
  // Loads the credentials and creates the channel; connects lazily, so a
  // wrong address shows up as UNAVAILABLE on the first call. Errors name the
  // bad option.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& address, const ClientOptions& options = {});
  ~Client();

  const std::string& address() const;

  // The whole cluster as the coordinator sees it.
  absl::StatusOr<v1::ClusterState> GetClusterState() const;

  // Polls until every task of the spec is READY; DEADLINE_EXCEEDED naming
  // the tasks that are not when `timeout` passes. `keep_waiting`, when
  // given, is asked between polls; its first error ends the wait with it.
  absl::StatusOr<v1::ClusterState> WaitForReady(
      absl::Duration timeout,
      const std::function<absl::Status()>& keep_waiting = nullptr) const;

  // Uploads the library and submits the job; returns its id. Each try may
  // take rpc_timeout or 60 s, whichever is longer, plus a second per MiB of
  // library.
  // INVALID_ARGUMENT naming the field for a bad spec (checked here and by
  // the coordinator), NOT_FOUND for a missing library file. A call that
  // ends UNAVAILABLE or DEADLINE_EXCEEDED, which may have reached the
  // coordinator, is tried again (twice at most) with the same
  // submission_id, so it never makes two jobs; when the last try ends so
  // too, the error names the submission id to submit again with.
  absl::StatusOr<std::string> SubmitJob(const JobSpec& spec) const;
  absl::StatusOr<v1::JobStatus> GetJob(const std::string& job_id) const;
  absl::StatusOr<std::vector<v1::JobStatus>> ListJobs() const;
  // The job's status after the request; cancelling an ended job is a no-op.
  absl::StatusOr<v1::JobStatus> CancelJob(const std::string& job_id) const;
  // Calls `on_update` with the job's status each time its state, step,
  // metrics or restarts change, until the job ends (its final status is
  // returned) or `on_update` returns false (the last status is returned).
  // The coordinator pushes each change over one stream (Jobs.WatchJob); a
  // broken stream is opened again, and a coordinator silent for longer than
  // `rpc_timeout` (at least a few of its keepalives) ends the watch with
  // UNAVAILABLE.
  absl::StatusOr<v1::JobStatus> WatchJob(
      const std::string& job_id,
      const std::function<bool(const v1::JobStatus&)>& on_update) const;

  // A traced job's timeline (JobSpec::trace_steps), every replica's spans
  // on the coordinator's clock. NOT_FOUND for an unknown or untraced job.
  absl::StatusOr<v1::TraceData> GetTrace(const std::string& job_id) const;

  // Log lines of `target`: "coordinator", a task ("worker:0"), or a job id
  // (the lines its tasks logged while it ran), read through the
  // coordinator. Calls `on_chunk` with each chunk until the stream ends
  // (OK) or `on_chunk` returns false (OK; the stream is cancelled on both
  // sides). With `follow`, new lines keep coming: for a task until the
  // caller stops, for a job until it has ended. NOT_FOUND for an unknown
  // target; UNAVAILABLE naming a task out of reach, or when the
  // coordinator goes silent.
  struct LogOptions {
    int tail_lines = 0;  // > 0: only the last this many lines of each task
    bool follow = false;
  };
  absl::Status StreamLogs(
      const std::string& target, const LogOptions& options,
      const std::function<bool(const v1::LogChunk&)>& on_chunk) const;

  // --- A schedule_from_client ParameterServer job, one call each (see
  // cohort/cluster_coordinator.h for the API over them). Errors as the
  // coordinator gives them, annotated with the call.
  absl::StatusOr<std::vector<int64_t>> Schedule(
      const std::string& job_id,
      const std::vector<v1::ScheduledCall>& calls) const;
  absl::StatusOr<v1::GetCallsResponse> GetCalls(
      const std::string& job_id, const std::vector<int64_t>& ids) const;
  absl::Status FinishJob(const std::string& job_id) const;
  // A ParameterServer job's variables (empty `names`: all), read from its
  // ps tasks while it runs and after it ended, until a later
  // ParameterServer job replaces them.
  absl::StatusOr<std::map<std::string, HostTensor>> FetchVariables(
      const std::string& job_id,
      const std::vector<std::string>& names = {}) const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
