#include "ps_server/ps_service.h"

#include <atomic>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/host_info.h"
#include "ps_server/push_assembler.h"
#include "rpc/unary.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {
namespace {

uint64_t RandomIncarnation() {
  std::random_device device;
  uint64_t value = 0;
  while (value == 0) {
    value = (uint64_t{device()} << 32) | uint64_t{device()};
  }
  return value;
}

// Finishes a streaming call at once with `status` (authentication or a
// request refused before any data moved).
template <typename Base>
class Refusal final : public Base {
 public:
  explicit Refusal(const absl::Status& status) {
    this->Finish(rpc::ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

// Copies a Pull's values on the service's threads, a batch of about
// kPullBatchBytes at a time, and writes each batch's messages one at a
// time, each after the previous is sent: a pull of a large shard holds one
// batch in memory, not the shard. Deletes itself when done.
class PullWriter final : public grpc::ServerWriteReactor<v1::PullResponse> {
 public:
  PullWriter(const PsService* service, const v1::PullRequest* request,
             std::string peer)
      : service_(service),
        request_(request),
        peer_(std::move(peer)),
        names_(request->names().begin(), request->names().end()) {
    service_->work()->Post([this] { CopyBatch(); });
  }

  void OnWriteDone(bool ok) override {
    // A sent message's bytes are no longer needed.
    messages_[next_message_ - 1] = v1::PullResponse();
    if (!ok) {
      // The call was cancelled or the client went away.
      Finish(
          grpc::Status(grpc::StatusCode::CANCELLED, "the pull was cancelled"));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  // Copies on a work thread: a gRPC thread must not.
  void CopyBatch() {
    const bool first = next_name_ == 0;
    absl::StatusOr<std::vector<v1::PullResponse>> messages =
        service_->store()->Pull({request_->job_id(), request_->job_uid()},
                                names_, service_->options().max_chunk_bytes,
                                &next_name_, kPullBatchBytes);
    if (!messages.ok()) {
      spdlog::warn("pull from {} of job '{}' refused: {}",
                   request_->worker().empty() ? peer_ : request_->worker(),
                   request_->job_id(), messages.status().ToString());
      Finish(rpc::ToGrpcStatus(messages.status()));
      return;
    }
    if (first) *messages->front().mutable_shard() = service_->ShardState();
    messages_ = *std::move(messages);
    next_message_ = 0;
    WriteNext();
  }

  void WriteNext() {
    if (next_message_ < messages_.size()) {
      StartWrite(&messages_[next_message_++]);
    } else if (next_name_ < names_.size()) {
      service_->work()->Post([this] { CopyBatch(); });
    } else {
      Finish(grpc::Status::OK);
    }
  }

  static constexpr int64_t kPullBatchBytes = int64_t{16} << 20;

  const PsService* const service_;
  const v1::PullRequest* const request_;  // gRPC's, until OnDone
  const std::string peer_;
  const std::vector<std::string> names_;
  size_t next_name_ = 0;                    // where the next batch starts
  std::vector<v1::PullResponse> messages_;  // the batch being written
  size_t next_message_ = 0;
};

// Reads a Push's messages one at a time into a PushAssembler; finishes with
// the first error, or with the response at the end of the stream. Deletes
// itself when done.
class PushReader final : public grpc::ServerReadReactor<v1::PushRequest> {
 public:
  PushReader(const PsService* service, v1::PushResponse* response,
             std::string peer)
      : service_(service),
        response_(response),
        peer_(std::move(peer)),
        assembler_(service->store(), service->options().max_chunk_bytes) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    service_->work()->Post([this, ok] {
      // Consecutive messages may be handled on different work threads; each
      // read starts only after the previous message's Handle, an order gRPC
      // keeps internally. This acquire (and the release before StartRead)
      // states that order where race detectors can see it.
      handoff_.load(std::memory_order_acquire);
      Handle(ok);
    });
  }

  void OnDone() override { delete this; }

 private:
  void Handle(bool ok) {
    if (!ok) {
      // The client closed its side: the stream is complete.
      if (absl::Status ended = assembler_.End(); !ended.ok()) {
        Fail(ended);
        return;
      }
      CountPush();
      *response_->mutable_shard() = service_->ShardState();
      response_->set_applied(assembler_.applied());
      SnapshotLoop* snapshots = service_->snapshots();
      const int64_t bound = service_->options().ack_within_updates;
      if (snapshots == nullptr || bound <= 0) {
        Finish(grpc::Status::OK);
        return;
      }
      // Acknowledged only once a crash could not lose more than `bound` of
      // the updates acknowledged so far.
      snapshots->WhenDurable(response_->shard().updates() - bound,
                             [this] { Finish(grpc::Status::OK); });
      return;
    }
    if (absl::Status taken = Take(); !taken.ok()) {
      Fail(taken);
      return;
    }
    request_.Clear();
    handoff_.fetch_add(1, std::memory_order_release);
    StartRead(&request_);
  }

  absl::Status Take() {
    if (first_) {
      first_ = false;
      job_id_ = request_.job_id();
      worker_ = request_.worker();
      // Begun first: another job's push is refused as such, not as meant
      // for another incarnation (PushAssembler::Begin).
      if (absl::Status begun = assembler_.Begin(
              {job_id_, request_.job_uid()}, worker_, request_.num_variables());
          !begun.ok()) {
        return begun;
      }
      const uint64_t expected = request_.incarnation();
      if (expected != 0 && expected != service_->incarnation()) {
        return absl::AbortedError(
            absl::StrCat("ps shard ", service_->store()->shard_id(),
                         " restarted: the push was meant for incarnation ",
                         expected, ", this is incarnation ",
                         service_->incarnation(), "; none of it was applied"));
      }
    } else if (!request_.job_id().empty() && request_.job_id() != job_id_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a push of job '", job_id_, "' continued with a message of job '",
          request_.job_id(), "'"));
    }
    absl::Status status;
    for (v1::TensorChunk& chunk : *request_.mutable_chunks()) {
      status = assembler_.Add(&chunk);
      if (!status.ok()) break;
    }
    return status;
  }

  // Once per push that changed the shard, finished or failed: updates count
  // pushes, the unit of snapshots and of what a crash may lose.
  void CountPush() {
    if (counted_ || assembler_.applied() == 0) return;
    counted_ = true;
    service_->store()->CountPush();
    if (service_->snapshots() != nullptr) service_->snapshots()->NoteUpdates();
  }

  void Fail(const absl::Status& status) {
    CountPush();
    spdlog::warn("push from {} ({}) of job '{}' failed after {} variables: {}",
                 worker_.empty() ? "an unnamed worker" : worker_, peer_,
                 job_id_, assembler_.applied(), status.ToString());
    Finish(rpc::ToGrpcStatus(status));
  }

  const PsService* const service_;
  v1::PushResponse* const response_;
  const std::string peer_;
  PushAssembler assembler_;
  v1::PushRequest request_;
  bool first_ = true;
  bool counted_ = false;
  std::string job_id_;
  std::string worker_;
  std::atomic<int64_t> handoff_{0};  // messages handled
};

}  // namespace

PsService::PsService(const task::TaskRuntime* runtime, VariableStore* store,
                     SnapshotLoop* snapshots, PsServiceOptions options)
    : runtime_(runtime),
      store_(store),
      snapshots_(snapshots),
      options_(options),
      incarnation_(RandomIncarnation()) {}

v1::PsShardState PsService::ShardState() const {
  v1::PsShardState state;
  state.set_shard_id(store_->shard_id());
  state.set_incarnation(incarnation_);
  state.set_updates(store_->updates());
  state.set_restored_updates(store_->restored_updates());
  return state;
}

v1::TaskReport PsService::Report() const {
  v1::TaskReport report = runtime_->BaseReport();
  v1::PsInfo* ps = report.mutable_ps();
  ps->set_shard_id(store_->shard_id());
  store_->FillInfo(ps);
  ps->set_rss_bytes(ResidentBytes());
  if (snapshots_ != nullptr) {
    if (const std::optional<SnapshotRecord> last = snapshots_->last()) {
      ps->set_last_snapshot_unix_ms(last->unix_ms);
      ps->set_last_snapshot_updates(last->updates);
      ps->set_last_snapshot_path(last->path);
    }
  }
  return report;
}

grpc::ServerUnaryReactor* PsService::GetPsStatus(
    grpc::CallbackServerContext* context, const v1::GetPsStatusRequest* request,
    v1::PsStatus* response) {
  return rpc::HandleUnary(context, runtime_->auth(), [&] {
    *response->mutable_report() = Report();
    response->set_registered(runtime_->registered());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PsService::ListVariables(
    grpc::CallbackServerContext* context,
    const v1::ListVariablesRequest* request,
    v1::ListVariablesResponse* response) {
  // Listing reads under the shard's lock, which a snapshot holds while it
  // copies the shard: not on a gRPC thread.
  return rpc::OffloadUnary(
      context, runtime_->auth(), &work_, [=, this]() -> absl::Status {
        absl::StatusOr<std::vector<v1::PsVariableSpec>> specs =
            store_->List({request->job_id(), request->job_uid()});
        if (!specs.ok()) return specs.status();
        *response->mutable_shard() = ShardState();
        for (v1::PsVariableSpec& spec : *specs) {
          *response->add_variables() = std::move(spec);
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* PsService::CreateVariables(
    grpc::CallbackServerContext* context,
    const v1::CreateVariablesRequest* request,
    v1::CreateVariablesResponse* response) {
  // Creating fills or copies each variable's bytes (up to gigabytes) under
  // the shard's lock: not on a gRPC thread.
  return rpc::ParkUnary(context, runtime_->auth(), [=, this](auto finish) {
    work_.Post([=, this] {
      absl::StatusOr<int> created = store_->Create(
          request->job_id(), request->job_sequence(), request->variables(),
          request->job_uid(), request->cluster_uid());
      if (!created.ok()) {
        spdlog::warn("create of {} variables for job '{}' refused: {}",
                     request->variables_size(), request->job_id(),
                     created.status().ToString());
        finish(created.status());
        return;
      }
      *response->mutable_shard() = ShardState();
      response->set_created(*created);
      if (snapshots_ == nullptr ||
          snapshots_->Holds(store_->declared_generation())) {
        finish(absl::OkStatus());
        return;
      }
      // The variables (perhaps replacing another job's) are on disk before
      // anyone uses them: a restart must not bring back the old owner,
      // whose shard the job could then no longer use. A later create
      // (created 0) of variables no snapshot holds yet tries again.
      snapshots_->SnapshotNow([finish, shard = store_->shard_id()](
                                  const absl::StatusOr<SnapshotRecord>& saved) {
        if (saved.ok()) {
          finish(absl::OkStatus());
          return;
        }
        // Not UNAVAILABLE: the shard is there, and retrying a broken
        // disk would capture the whole shard once a second per worker.
        finish(absl::FailedPreconditionError(absl::StrCat(
            "ps shard ", shard,
            " holds the variables but could not save them (",
            saved.status().message(),
            "): mend its --state_dir; until a snapshot holds them, a "
            "restart would bring back the shard's previous state")));
      });
    });
  });
}

grpc::ServerWriteReactor<v1::PullResponse>* PsService::Pull(
    grpc::CallbackServerContext* context, const v1::PullRequest* request) {
  using Base = grpc::ServerWriteReactor<v1::PullResponse>;
  if (absl::Status auth = runtime_->auth()->Check(*context); !auth.ok()) {
    return new Refusal<Base>(auth);
  }
  return new PullWriter(this, request, context->peer());
}

grpc::ServerReadReactor<v1::PushRequest>* PsService::Push(
    grpc::CallbackServerContext* context, v1::PushResponse* response) {
  if (absl::Status auth = runtime_->auth()->Check(*context); !auth.ok()) {
    return new Refusal<grpc::ServerReadReactor<v1::PushRequest>>(auth);
  }
  return new PushReader(this, response, context->peer());
}

grpc::ServerUnaryReactor* PsService::Snapshot(
    grpc::CallbackServerContext* context, const v1::SnapshotRequest* request,
    v1::SnapshotResponse* response) {
  if (snapshots_ == nullptr) {
    return rpc::HandleUnary(context, runtime_->auth(), [&] {
      return absl::FailedPreconditionError(
          absl::StrCat("ps shard ", store_->shard_id(),
                       " keeps no snapshots: it was started without "
                       "--state_dir"));
    });
  }
  // The write (capture, serialize, fsync) runs on the snapshot thread; the
  // call is parked until it is done.
  return rpc::ParkUnary(context, runtime_->auth(), [&](auto finish) {
    snapshots_->SnapshotNow(
        [response, finish](absl::StatusOr<SnapshotRecord> record) {
          if (record.ok()) {
            response->set_path(record->path);
            response->set_updates(record->updates);
          }
          finish(record.status());
        });
  });
}

}  // namespace cohort::ps
