#include "worker_agent/sync_job_runner.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "collective/algorithmic_communicator.h"
#include "collective/grpc_store.h"
#include "collective/hierarchical_communicator.h"
#include "collective/metered_communicator.h"
#include "collective/transports/grpc_transport.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/trace.h"
#include "spdlog/spdlog.h"
#include "worker_agent/job_loader.h"
#include "worker_agent/staged_communicator.h"
#include "worker_agent/trace_store.h"
#include "worker_agent/user_code.h"
#ifdef COHORT_HAVE_NCCL
#include "collective/nccl/nccl_communicator.h"
#endif

namespace cohort::agent {

namespace {

// An assignment of no (or a negative number of) replicas is refused by
// Prepare; until then the runner is sized as for none.
int ReplicaSlots(const v1::AgentJobAssignment& a) {
  return std::max(0, a.local_replicas());
}

}  // namespace

SyncJobRunner::SyncJobRunner(RunnerOptions options)
    : options_(std::move(options)),
      central_(ReplicaSlots(options_.assignment)) {
  job_ = JobInfoFor(options_.assignment, options_.task,
                    options_.checkpoint_copies);
  const int slots = ReplicaSlots(options_.assignment);
  steps_done_.assign(slots, 0);
  // Sized once, before Report() can look: entries are filled under mu_.
  replicas_.resize(slots);
  comm_owners_.resize(slots);
  rate_time_ = absl::Now();
}

SyncJobRunner::~SyncJobRunner() {
  Abort(absl::CancelledError("the agent stopped the job"));
  lifecycle_.Join();
}

void SyncJobRunner::Start() {
  lifecycle_.Start([this] { return Run(); });
}

bool SyncJobRunner::done() const { return lifecycle_.done(); }

void SyncJobRunner::Abort(const absl::Status& status) {
  lifecycle_.Abort(status);
  aborted_ = true;
  std::vector<collective::Communicator*> comms;
  {
    absl::MutexLock lock(&mu_);
    comms = comms_;
  }
  for (collective::Communicator* comm : comms) comm->Abort(status);
  central_.Abort(status);
  absl::MutexLock lock(&mu_);
  if (input_ != nullptr) input_->Abort(status);
  // Replicas still joining their group wait in the store for their peers.
  if (store_ != nullptr) store_->Abort(status);
}

void SyncJobRunner::Fail(const absl::Status& status, bool permanent,
                         bool agent_left) {
  if (!lifecycle_.RecordError(status, permanent, agent_left)) return;
  spdlog::error("job {} attempt {}: {}", options_.assignment.job_id(),
                options_.assignment.attempt(), status.ToString());
  Abort(absl::AbortedError(absl::StrCat("replicas of ",
                                        options_.assignment.group(),
                                        " were stopped: ", status.message())));
}

void SyncJobRunner::Progress(int local, int64_t steps_done) {
  lifecycle_.SetRunning();
  absl::MutexLock lock(&mu_);
  steps_done_[local] = steps_done;
  const int64_t done = SlowestReplicaStep();
  const absl::Time now = absl::Now();
  if (rate_steps_ < 0) {
    // The first report: the rate is timed from here, not from loading.
    rate_steps_ = done;
    rate_time_ = now;
  } else if (now - rate_time_ >= absl::Milliseconds(500) ||
             steps_per_second_ == 0) {
    const double seconds = absl::ToDoubleSeconds(now - rate_time_);
    if (seconds > 0 && done > rate_steps_) {
      steps_per_second_ = static_cast<double>(done - rate_steps_) / seconds;
    }
    if (now - rate_time_ >= absl::Milliseconds(500)) {
      rate_steps_ = done;
      rate_time_ = now;
    }
  }
}

int64_t SyncJobRunner::SlowestReplicaStep() const {
  if (steps_done_.empty()) return 0;
  return *std::min_element(steps_done_.begin(), steps_done_.end());
}

v1::AgentJobReport SyncJobRunner::Report() const {
  v1::AgentJobReport report = lifecycle_.Report();
  absl::MutexLock lock(&mu_);
  report.set_step(SlowestReplicaStep());
  report.set_steps_per_second(steps_per_second_);
  report.set_checkpoint_step(checkpoint_step_);
  *report.mutable_links() = {links_.begin(), links_.end()};
  report.set_resumed_from_step(resumed_from_step_);
  report.set_resumed_from(resumed_from_);
  report.set_stopped_at_step(stopped_at_step_);
  report.set_stop_reason(stop_reason_);
  if (!replicas_.empty() && replicas_[0] != nullptr) {
    for (const auto& [metric, value] : replicas_[0]->last_metrics()) {
      (*report.mutable_metrics())[metric] = value;
    }
    for (std::string& warning : replicas_[0]->warnings()) {
      report.add_warnings(std::move(warning));
    }
  }
  return report;
}

namespace {

// Whether a checkpoint directory that refuses a write refuses every retry
// too: the job's own checkpoint_dir, the chief's, read-only or not a
// directory. Another agent's local copy may be on a host that the next
// attempt replaces, and a full disk may be freed.
bool RefusedForGood(const absl::Status& refusal, int node) {
  return node == 0 && (absl::IsPermissionDenied(refusal) ||
                       absl::IsFailedPrecondition(refusal));
}

}  // namespace

absl::Status SyncJobRunner::CheckCheckpointDir() {
  if (job_.checkpoint_dir.empty()) return absl::OkStatus();
  absl::Status writable = MakeWritableDirectory(job_.checkpoint_dir);
  if (writable.ok()) return writable;
  // NOT_FOUND from a directory that was just created, parents and all: a
  // filesystem that takes none there (/proc), for good.
  return absl::Status(absl::IsNotFound(writable)
                          ? absl::StatusCode::kFailedPrecondition
                          : writable.code(),
                      absl::StrCat(options_.assignment.node() == 0
                                       ? "checkpoint_dir "
                                       : "the local checkpoint copy ",
                                   writable.message()));
}

absl::Status SyncJobRunner::Prepare() {
  const v1::AgentJobAssignment& a = options_.assignment;
  // Each replica's logical devices are indexed below and in RunReplica.
  const int logical = std::max(1, a.logical_devices_per_replica());
  if (a.local_replicas() < 1 ||
      a.device_indices_size() < a.local_replicas() * logical) {
    return absl::InternalError(absl::StrCat(
        "the assignment has ", a.device_indices_size(), " devices for ",
        a.local_replicas(), " replicas of ", logical, " logical devices"));
  }
  absl::StatusOr<LoadedJob> inputs =
      LoadJob(options_, job_,
              {.pipeline = a.node(),
               .num_pipelines = a.num_nodes(),
               .replicas_in_sync = a.num_replicas(),
               .local_batches = a.local_replicas(),
               .global_batch_size = a.spec().global_batch_size()});
  if (!inputs.ok()) return inputs.status();
  functions_ = inputs->functions;
  if (inputs->pipeline == nullptr && inputs->stream == nullptr) {
    return absl::OkStatus();
  }
  StepInput::Options input{
      .end_step = job_.steps,
      .prefetch_steps = inputs->input_options.prefetch_steps,
      .to_device = inputs->input_options.prefetch_to_device};
  for (int local = 0; local < a.local_replicas(); ++local) {
    input.devices.push_back(
        options_.devices[a.device_indices(local * logical)]);
  }
  absl::StatusOr<std::unique_ptr<StepInput>> made = StepInput::Create(
      std::move(inputs->pipeline), std::move(inputs->stream), input);
  if (!made.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset function \"", a.spec().dataset_fn(),
                     "\": ", made.status().message()));
  }
  absl::MutexLock lock(&mu_);
  input_ = *std::move(made);
  return absl::OkStatus();
}

bool SyncJobRunner::Run() {
  const v1::AgentJobAssignment& a = options_.assignment;
  spdlog::info("job {} attempt {}: node {} of {}, replicas {}..{} of {}, {}",
               a.job_id(), a.attempt(), a.node(), a.num_nodes(), a.first_rank(),
               a.first_rank() + a.local_replicas() - 1, a.num_replicas(),
               v1::Communication_Name(a.communication()));
  // Found before the first step, not at the first checkpoint, hours in.
  if (absl::Status writable = CheckCheckpointDir(); !writable.ok()) {
    Fail(writable, RefusedForGood(writable, a.node()));
    return false;
  }
  if (absl::Status prepared = Prepare(); !prepared.ok()) {
    Fail(prepared, /*permanent=*/!IsPeerFailure(prepared));
    return false;
  }
  if (aborted_) return false;
  {
    absl::MutexLock lock(&mu_);
    store_ = std::make_unique<collective::GrpcStore>(options_.coordinator,
                                                     options_.security);
  }
  if (aborted_) return false;
  if (a.communication() == v1::COMMUNICATION_HIERARCHICAL ||
      a.communication() == v1::COMMUNICATION_REDUCTION_TO_ONE_DEVICE) {
    hub_ = std::make_unique<collective::LocalHub>(a.local_replicas());
  }
  std::vector<std::thread> threads;
  for (int local = 0; local < a.local_replicas(); ++local) {
    threads.emplace_back([this, local] { RunReplica(local); });
  }
  for (std::thread& thread : threads) thread.join();
  if (input_ != nullptr) input_->Shutdown();
  {
    absl::MutexLock lock(&mu_);
    comms_.clear();
  }
  if (!lifecycle_.error().ok()) return false;
  absl::MutexLock lock(&mu_);
  spdlog::info("job {} attempt {}: all {} local replicas finished {} steps",
               a.job_id(), a.attempt(), a.local_replicas(),
               SlowestReplicaStep());
  return true;
}

namespace {

// Collectives that reduce in host memory take a CUDA replica's tensors
// through host staging buffers.
std::unique_ptr<collective::Communicator> Staged(
    const Device& device, std::unique_ptr<collective::Communicator> host) {
  if (!device.is_cuda()) return host;
  return std::make_unique<StagedCommunicator>(std::move(host), device);
}

}  // namespace

absl::StatusOr<std::unique_ptr<collective::Communicator>>
SyncJobRunner::Connect(int local, const Device& device) {
  const v1::AgentJobAssignment& a = options_.assignment;
  const int rank = a.first_rank() + local;
  collective::CommunicatorOptions comm_options{.timeout =
                                                   job_.collective_timeout};
  auto grpc_options = [&](std::string suffix, int r, int size) {
    collective::GrpcTransportOptions o;
    o.group = absl::StrCat(a.group(), "/", suffix);
    o.rank = r;
    o.size = size;
    o.listen = absl::StrCat(options_.peer_listen_host, ":0");
    o.advertise_host = options_.peer_advertise_host;
    o.ports = options_.peer_ports;
    o.label = options_.task.ToString();
    o.security = options_.security;
    o.connect_timeout = absl::Seconds(30);
    return o;
  };
  switch (a.communication()) {
    case v1::COMMUNICATION_RING: {
      COHORT_ASSIGN_OR_RETURN(
          std::unique_ptr<collective::GrpcTransport> transport,
          collective::GrpcTransport::Create(
              grpc_options("ring", rank, a.num_replicas()), *store_));
      AddLink("replicas", rank, a.num_replicas(), *transport);
      return Staged(device,
                    std::make_unique<collective::AlgorithmicCommunicator>(
                        std::move(transport), comm_options));
    }
    case v1::COMMUNICATION_HIERARCHICAL:
    case v1::COMMUNICATION_REDUCTION_TO_ONE_DEVICE: {
      const collective::LocalReduction local_reduction =
          a.communication() == v1::COMMUNICATION_HIERARCHICAL
              ? collective::LocalReduction::kAllReduce
              : collective::LocalReduction::kToLeader;
      // A local wait spans the leader's step across nodes, whose deadline
      // must come first: its error names the remote rank, and reaches the
      // local ranks through the abort. On one node there is no such step.
      collective::CommunicatorOptions local_options = comm_options;
      if (a.num_nodes() > 1) {
        local_options.timeout = 2 * comm_options.timeout + absl::Seconds(5);
      }
      auto local_comm = std::make_unique<collective::AlgorithmicCommunicator>(
          hub_->Connect(local), local_options);
      if (a.local_replicas() > 1) {
        AddLink("local", rank, a.first_rank() + a.local_replicas(),
                "in-process", a.first_rank());
      }
      std::unique_ptr<collective::Communicator> cross;
      if (local == 0 && a.num_nodes() > 1) {
        COHORT_ASSIGN_OR_RETURN(
            std::unique_ptr<collective::GrpcTransport> transport,
            collective::GrpcTransport::Create(
                grpc_options("cross", a.node(), a.num_nodes()), *store_));
        AddLink("agents", a.node(), a.num_nodes(), *transport);
        cross = std::make_unique<collective::AlgorithmicCommunicator>(
            std::move(transport), comm_options);
      }
      return Staged(device,
                    std::make_unique<collective::HierarchicalCommunicator>(
                        std::move(local_comm), std::move(cross), a.num_nodes(),
                        a.node(), local_reduction));
    }
    case v1::COMMUNICATION_NCCL: {
#ifdef COHORT_HAVE_NCCL
      collective::NcclOptions o{.group = absl::StrCat(a.group(), "/nccl"),
                                .rank = rank,
                                .size = a.num_replicas(),
                                .device = device.index,
                                .communicator = comm_options};
      COHORT_ASSIGN_OR_RETURN(std::unique_ptr<collective::NcclCommunicator> c,
                              collective::NcclCommunicator::Create(o, *store_));
      AddLink("replicas", rank, a.num_replicas(), "nccl");
      return std::unique_ptr<collective::Communicator>(std::move(c));
#else
      (void)device;
      return absl::FailedPreconditionError(
          "communication NCCL: this agent was built without NCCL");
#endif
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown communication ", a.communication()));
  }
}

void SyncJobRunner::AddLink(const std::string& ring, int from, int end,
                            const std::string& transport, int begin,
                            const std::string& to_address) {
  v1::RingLink link;
  link.set_ring(ring);
  link.set_from_rank(from);
  link.set_to_rank(from + 1 < end ? from + 1 : begin);
  link.set_transport(transport);
  link.set_to_address(to_address);
  absl::MutexLock lock(&mu_);
  links_.push_back(std::move(link));
}

void SyncJobRunner::AddLink(const std::string& ring, int from, int end,
                            const collective::GrpcTransport& transport) {
  const std::string kind = transport.next_link();
  AddLink(ring, from, end, kind, 0,
          kind == "grpc" && end > 1 ? transport.next_address() : "");
}

void SyncJobRunner::RunReplica(int local) {
  const v1::AgentJobAssignment& a = options_.assignment;
  const v1::JobSpec& spec = a.spec();
  const int replica = a.first_rank() + local;
  // The replica's logical devices, each with its own stream on CUDA; the
  // first is the replica's device. The streams are released when this
  // replica's thread ends, once its work is done.
  struct StreamGuard {
    std::vector<Device> devices;
    ~StreamGuard() {
      for (const Device& d : devices) {
        if (d.is_cuda()) DestroyStream(d.index, d.stream);
      }
    }
  } streams;
  const int logical = std::max(1, a.logical_devices_per_replica());
  for (int k = 0; k < logical; ++k) {
    const int slot = local * logical + k;  // checked by Prepare
    Device d = options_.devices[a.device_indices(slot)];
    if (d.is_cuda()) {
      absl::StatusOr<void*> stream = CreateStream(d.index);
      if (!stream.ok()) return Fail(stream.status(), false);
      d.stream = *stream;
    }
    streams.devices.push_back(d);
  }
  if (logical > 1) {
    // Back to the replica's device, where its work is queued.
    if (absl::Status s = MakeCurrent(streams.devices[0]); !s.ok()) {
      return Fail(s, false);
    }
  }
  const Device device = streams.devices[0];

  if (aborted_) return;
  absl::StatusOr<std::unique_ptr<collective::Communicator>> comm =
      Connect(local, device);
  if (!comm.ok()) {
    return Fail(absl::Status(comm.status().code(),
                             absl::StrCat("replica ", replica,
                                          " could not join the group: ",
                                          comm.status().message())),
                !IsPeerFailure(comm.status()));
  }
  // "COMMUNICATION_RING" -> "ring": the algorithm label of /metrics.
  const std::string algorithm = absl::AsciiStrToLower(absl::StripPrefix(
      v1::Communication_Name(a.communication()), "COMMUNICATION_"));
  {
    absl::MutexLock lock(&mu_);
    comm_owners_[local] = std::make_unique<collective::MeteredCommunicator>(
        *std::move(comm), algorithm);
    comms_.push_back(comm_owners_[local].get());
    replicas_[local] = std::make_unique<ReplicaContextImpl>(
        &job_, replica, local, device, comm_owners_[local].get(),
        spec.strategy() == v1::CENTRAL_STORAGE ? &central_ : nullptr,
        streams.devices);
  }
  if (aborted_) comm_owners_[local]->Abort(absl::AbortedError("aborted"));
  ReplicaContextImpl& ctx = *replicas_[local];

  // A failure inside a user function is the job's own, unless a collective
  // under it failed first (a lost peer): then the job may be retried.
  auto user_failure = [&](const absl::Status& status, const std::string& what) {
    const absl::Status& collective = ctx.collective_status();
    if (!collective.ok()) return Fail(collective, !IsPeerFailure(collective));
    Fail(absl::Status(status.code(),
                      absl::StrCat(what, " failed on replica ", replica, ": ",
                                   status.message())),
         true);
  };
  if (functions_.init != nullptr) {
    if (absl::Status init = CallUserCode([&] { return functions_.init(ctx); });
        !init.ok()) {
      return user_failure(
          init, absl::StrCat("init function \"", spec.init_fn(), "\""));
    }
  }
  absl::StatusOr<int64_t> start = ctx.RestoreOrSync();
  if (!start.ok()) return Fail(start.status(), !IsPeerFailure(start.status()));
  if (const int from = ctx.restored_from_rank(); from >= 0 && local == 0) {
    const bool ours =
        from >= a.first_rank() && from < a.first_rank() + a.local_replicas();
    if (ours) {
      spdlog::info("job {}: resumed from this agent's checkpoint at step {}",
                   a.job_id(), *start);
    }
    absl::MutexLock lock(&mu_);
    resumed_from_step_ = *start;
    if (ours) resumed_from_ = options_.origin;
  }
  // A checkpoint the model cannot make (a tensor named twice) fails every
  // retry the same way.
  auto checkpoint_failure = [&](int64_t step, const absl::Status& saved) {
    const bool permanent =
        absl::IsInvalidArgument(saved) || RefusedForGood(saved, a.node());
    Fail(absl::Status(saved.code(), absl::StrCat("checkpoint at step ", step,
                                                 ": ", saved.message())),
         permanent);
  };
  if (ctx.restored_from_rank() >= 0) {
    if (absl::Status saved = ctx.SaveWhereMissing(*start); !saved.ok()) {
      return checkpoint_failure(*start, saved);
    }
  }
  Progress(local, *start);
  if (input_ != nullptr) {
    if (absl::Status begun = input_->Begin(*start); !begun.ok()) {
      return Fail(begun, true);
    }
  }
  // The input's own failures are the job's; an abort is someone else's.
  auto input_failure = [&](const absl::Status& status) {
    if (aborted_) return Fail(status, false);
    Fail(absl::Status(status.code(), absl::StrCat("input of replica ", replica,
                                                  ": ", status.message())),
         status.code() != absl::StatusCode::kDeadlineExceeded);
  };
  if (input_ != nullptr && input_->can_end() && *start > 0 &&
      *start < job_.steps) {
    // A stream that ended where this attempt resumes has nothing left to
    // train: the checkpoint was the last attempt's final one (a coordinator
    // that restarted before it heard of the end, or a job resubmitted over
    // a finished one's checkpoint_dir). Every replica agrees, as at a step's
    // end, and the attempt ends as the last one did.
    absl::StatusOr<bool> more = input_->HasStep(*start);
    if (!more.ok()) return input_failure(more.status());
    double ended = *more ? 0 : 1;
    if (absl::Status agreed = ctx.reduce(ReduceOp::kMax, {&ended, 1});
        !agreed.ok()) {
      return Fail(agreed, !IsPeerFailure(agreed));
    }
    if (ended > 0) {
      const std::string node =
          *more ? "another node" : absl::StrCat("node ", a.node());
      Stopped(*start, {.stop = true,
                       .reason = absl::StrCat("the input stream of ", node,
                                              " ended after step ", *start - 1,
                                              ", where the attempt resumed")});
      return;
    }
  }
  const int64_t every = spec.checkpoint_every();
  const absl::Duration interval =
      absl::Milliseconds(spec.checkpoint_interval_ms());
  absl::Time last_checkpoint = absl::Now();
  // Tracing: this thread records the attempt's first trace_steps steps.
  std::shared_ptr<TraceRecorder> recorder;
  if (spec.trace_steps() > 0) {
    recorder = TraceStore::Default().NewRecorder(
        a.job_id(), a.job_uid(), a.attempt(), replica,
        TraceCapacity(spec.trace_steps()));
  }
  std::optional<TraceRecorder::Scope> tracing;
  if (recorder != nullptr) tracing.emplace(recorder.get());
  for (int64_t step = *start; step < job_.steps; ++step) {
    if (aborted_) return;
    if (tracing.has_value() && step - *start >= spec.trace_steps()) {
      tracing.reset();
    }
    ScopedSpan step_span("step");
    step_span.Arg("step", absl::StrCat(step));
    ctx.set_step(step);
    Batch batch;
    if (input_ != nullptr) {
      ScopedSpan input_span("input");
      absl::StatusOr<std::optional<Batch>> taken =
          input_->Take(local, step, device);
      if (!taken.ok()) return input_failure(taken.status());
      if (!taken->has_value()) {
        // Later steps end training at the step before; only the first one
        // can find nothing.
        return Fail(absl::FailedPreconditionError(absl::StrCat(
                        "the input stream of replica ", replica,
                        " ended before step ", step, ", the attempt's first")),
                    true);
      }
      batch = **std::move(taken);
    }
    {
      ScopedSpan compute_span("compute");
      if (absl::Status status =
              CallUserCode([&] { return functions_.step(ctx, batch); });
          !status.ok()) {
        return user_failure(status,
                            absl::StrCat("step function \"", spec.step_fn(),
                                         "\" at step ", step));
      }
    }
    if (input_ != nullptr && input_->can_end() && step + 1 < job_.steps) {
      // Every replica votes at this step's end, so a stream that runs out
      // on any agent stops them all after the same step.
      absl::StatusOr<bool> more = input_->HasStep(step + 1);
      if (!more.ok()) return input_failure(more.status());
      if (!*more) {
        ctx.stop_training(absl::StrCat("the input stream of node ", a.node(),
                                       " ended after step ", step));
      }
    }
    if (leaving_) ctx.leave();
    if (interval > absl::ZeroDuration() &&
        absl::Now() - last_checkpoint >= interval) {
      ctx.want_checkpoint();
    }
    absl::StatusOr<StepEnd> end = [&] {
      ScopedSpan end_span("end_step");
      return ctx.EndStep();
    }();
    if (!end.ok()) {
      return user_failure(end.status(), absl::StrCat("the end of step ", step));
    }
    const int64_t done = step + 1;
    if (end->stop) Stopped(done, *end);
    const bool last = end->stop || done == job_.steps;
    if (last || end->leaving >= 0 || end->checkpoint ||
        (every > 0 && done % every == 0)) {
      ScopedSpan checkpoint_span("checkpoint");
      if (absl::Status saved = ctx.SaveCheckpoint(done); !saved.ok()) {
        return checkpoint_failure(done, saved);
      }
      if (replica == 0) {
        absl::MutexLock lock(&mu_);
        checkpoint_step_ = done;
      }
      last_checkpoint = absl::Now();
    }
    Progress(local, done);
    if (last) return;
    if (end->leaving >= 0) {
      // Retryable, and not a failure: the next attempt resumes from this
      // step, without the agent that left or with its replacement.
      if (leaving_ && local == 0) {
        spdlog::info("job {}: checkpointed step {} before shutting down",
                     a.job_id(), done);
      }
      return Fail(absl::UnavailableError(absl::StrCat(
                      "the agent of replica ", end->leaving,
                      " is shutting down; every replica checkpointed step ",
                      done, " first")),
                  /*permanent=*/false, /*agent_left=*/true);
    }
  }
}

void SyncJobRunner::Stopped(int64_t done, const StepEnd& end) {
  absl::MutexLock lock(&mu_);
  if (stopped_at_step_ == 0) {
    stopped_at_step_ = done;
    spdlog::info("job {}: training stops after step {}: {}",
                 options_.assignment.job_id(), done,
                 end.reason.empty() ? absl::StrCat("replica ", end.stopped_by,
                                                   " called stop_training")
                                    : end.reason);
  }
  if (stop_reason_.empty()) stop_reason_ = end.reason;
}

}  // namespace cohort::agent
