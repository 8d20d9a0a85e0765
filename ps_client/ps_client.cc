#include "ps_client/ps_client.h"

#include <algorithm>
#include <set>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps_client/dtype.h"
#include "ps_client/ps_client_shard.h"
#include "rpc/limits.h"

namespace cohort::ps {

struct PsClient::Declared {
  Placement placement;
  // Into `placement`, which never changes once declared.
  absl::flat_hash_map<std::string, const VariablePlacement*> by_name;
  // Per shard, what CreateVariables sends it (possibly no variables: the
  // job still claims the shard).
  std::vector<CreateBatches> requests;
};

namespace {

// Data one message may carry: the message limit, less headroom for names
// and framing.
constexpr int64_t kMaxDataPerMessage = rpc::kMaxMessageBytes - (1 << 20);

// Cuts the caller's buffers into the slices of their parts, by shard.
// `Slice` is PullSlice or PushSlice, `Buffer` PullBuffer or PushBuffer.
template <typename Slice, typename Buffer, typename Index>
absl::StatusOr<std::vector<std::vector<Slice>>> SliceByShard(
    const Index& by_name, int num_shards, absl::Span<const Buffer> buffers,
    absl::string_view call) {
  std::vector<std::vector<Slice>> by_shard(num_shards);
  absl::flat_hash_set<absl::string_view> seen;
  for (const Buffer& buffer : buffers) {
    // Twice in one push would apply its gradient twice.
    if (!seen.insert(buffer.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(call, ": \"", buffer.name, "\" is given twice"));
    }
    auto it = by_name.find(buffer.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          call, ": no variable \"", buffer.name, "\" was created"));
    }
    const VariablePlacement& v = *it->second;
    if (static_cast<int64_t>(buffer.bytes.size()) != v.bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(call, ": buffer of ", buffer.bytes.size(),
                       " bytes for \"", buffer.name, "\" of ", v.bytes));
    }
    for (const VariablePart& part : v.parts) {
      by_shard[part.ps].push_back(
          {part.name, buffer.bytes.subspan(part.byte_offset, part.bytes)});
    }
  }
  return by_shard;
}

std::vector<int> NonEmpty(const auto& by_shard) {
  std::vector<int> ids;
  for (size_t i = 0; i < by_shard.size(); ++i) {
    if (!by_shard[i].empty()) ids.push_back(static_cast<int>(i));
  }
  return ids;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(
    PsClientOptions options) {
  if (options.ps_addresses.empty()) {
    return absl::InvalidArgumentError("ps client: ps_addresses is empty");
  }
  for (size_t i = 0; i < options.ps_addresses.size(); ++i) {
    if (options.ps_addresses[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ps client: the address of ps:", i, " is empty"));
    }
  }
  if (options.job_id.empty()) {
    return absl::InvalidArgumentError("ps client: job_id is empty");
  }
  // Headroom under the message limit for the chunk's name and framing.
  if (options.max_chunk_bytes <= 0 ||
      options.max_chunk_bytes > kMaxDataPerMessage) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps client: max_chunk_bytes must be in [1, ",
                     kMaxDataPerMessage, "], got ", options.max_chunk_bytes));
  }
  if (options.max_create_bytes <= 0 ||
      options.max_create_bytes > kMaxDataPerMessage) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps client: max_create_bytes must be in [1, ",
                     kMaxDataPerMessage, "], got ", options.max_create_bytes));
  }
  if (options.rpc_timeout <= absl::ZeroDuration() ||
      options.recovery_timeout < absl::ZeroDuration() ||
      options.initial_backoff <= absl::ZeroDuration() ||
      options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError(
        "ps client: rpc_timeout and initial_backoff must be > 0, "
        "recovery_timeout >= 0, max_backoff >= initial_backoff");
  }
  return std::unique_ptr<PsClient>(new PsClient(std::move(options)));
}

PsClient::PsClient(PsClientOptions options) : options_(std::move(options)) {
  for (size_t i = 0; i < options_.ps_addresses.size(); ++i) {
    shards_.push_back(std::make_unique<Shard>(
        static_cast<int>(i), options_.ps_addresses[i], options_.security));
  }
}

PsClient::~PsClient() { Shutdown(); }

void PsClient::Shutdown() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

absl::Status PsClient::Stopped() const {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::CancelledError("ps client shut down");
  return absl::OkStatus();
}

std::shared_ptr<const PsClient::Declared> PsClient::declared() const {
  absl::MutexLock lock(&mu_);
  return declared_;
}

uint64_t PsClient::incarnation(int shard) const {
  if (shard < 0 || shard >= num_shards()) return 0;
  Shard& s = *shards_[shard];
  absl::MutexLock lock(&s.mu);
  return s.incarnations.current();
}

std::vector<PsRecoveryEvent> PsClient::TakeRecoveryEvents() {
  absl::MutexLock lock(&mu_);
  std::vector<PsRecoveryEvent> events;
  events.swap(events_);
  return events;
}

// ---------------------------------------------------------------------------
// The public calls: split by shard, then fan out.

absl::Status PsClient::CreateVariables(
    const Placement& placement, const std::vector<PsVariableOptions>& options) {
  COHORT_RETURN_IF_ERROR(Stopped());
  if (placement.num_ps != num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the placement is for ", placement.num_ps,
                     " ps tasks; this client has ", num_shards()));
  }
  if (options.size() != placement.variables.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CreateVariables: ", options.size(), " variable options for ",
        placement.variables.size(), " variables"));
  }
  v1::CreateVariablesRequest header;
  header.set_job_id(options_.job_id);
  header.set_job_sequence(options_.job_sequence);
  header.set_job_uid(options_.job_uid);
  header.set_cluster_uid(options_.cluster_uid);
  // Per shard, batches of specs, and the initial bytes of each one's last.
  std::vector<CreateBatches> requests(num_shards(), CreateBatches{header});
  std::vector<int64_t> last_bytes(num_shards(), 0);
  for (size_t i = 0; i < options.size(); ++i) {
    const VariablePlacement& v = placement.variables[i];
    const PsVariableOptions& o = options[i];
    if (DTypeSize(o.dtype) != v.variable.element_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", v.variable.name, "\": dtype ", DTypeName(o.dtype),
          " has ", DTypeSize(o.dtype), "-byte elements, the placement ",
          v.variable.element_bytes));
    }
    if (!o.initial.empty() &&
        static_cast<int64_t>(o.initial.size()) != v.bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.variable.name, "\": initial value of ",
                       o.initial.size(), " bytes, the variable has ", v.bytes));
    }
    for (const VariablePart& part : v.parts) {
      const int64_t bytes = o.initial.empty() ? 0 : part.bytes;
      // A larger part needs a finer partitioner.
      if (bytes > kMaxDataPerMessage) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", part.name, "\": an initial value of ", bytes,
            " bytes is over the ", kMaxDataPerMessage,
            " one message to a ps task carries; partition the variable "
            "into smaller parts"));
      }
      CreateBatches& batches = requests[part.ps];
      if (batches.back().variables_size() > 0 &&
          last_bytes[part.ps] + bytes > options_.max_create_bytes) {
        batches.push_back(header);
        last_bytes[part.ps] = 0;
      }
      last_bytes[part.ps] += bytes;
      v1::PsVariableSpec* spec = batches.back().add_variables();
      spec->set_name(part.name);
      for (int64_t dim : part.shape) spec->add_shape(dim);
      spec->set_dtype(o.dtype);
      *spec->mutable_optimizer() = o.optimizer;
      spec->set_aggregation(o.aggregation);
      if (v.parts.size() > 1) {
        spec->set_num_parts(static_cast<int32_t>(v.parts.size()));
      }
      if (!o.initial.empty()) {
        spec->set_initial(o.initial.data() + part.byte_offset, part.bytes);
      }
    }
  }
  auto declared = std::make_shared<Declared>();
  declared->placement = placement;
  for (const VariablePlacement& v : declared->placement.variables) {
    declared->by_name[v.variable.name] = &v;
  }
  std::vector<int> ids;
  for (int i = 0; i < num_shards(); ++i) {
    declared->requests.push_back(std::move(requests[i]));
    ids.push_back(i);
  }
  {
    absl::MutexLock lock(&mu_);
    declared_ = declared;
  }
  return ForEachShard(ids, [&](Shard& shard) {
    return CreateWithRetry(shard, declared->requests[shard.id]);
  });
}

absl::Status PsClient::Pull(absl::Span<const PullBuffer> variables) {
  COHORT_RETURN_IF_ERROR(Stopped());
  // Nothing to move: a step may use no ps variables at all.
  if (variables.empty()) return absl::OkStatus();
  std::shared_ptr<const Declared> d = declared();
  if (d == nullptr) {
    return absl::FailedPreconditionError("Pull before CreateVariables");
  }
  COHORT_ASSIGN_OR_RETURN(
      const std::vector<std::vector<PullSlice>> by_shard,
      (SliceByShard<PullSlice>(d->by_name, num_shards(), variables, "Pull")));
  return ForEachShard(NonEmpty(by_shard), [&](Shard& shard) {
    return RunWithRecovery(shard, Op::kPull, d->requests[shard.id],
                           [&](uint64_t /*incarnation*/, bool* restarted) {
                             return PullOnce(shard, by_shard[shard.id],
                                             restarted);
                           });
  });
}

absl::Status PsClient::Push(absl::Span<const PushBuffer> variables) {
  COHORT_RETURN_IF_ERROR(Stopped());
  // Nothing to move: a step may use no ps variables at all.
  if (variables.empty()) return absl::OkStatus();
  std::shared_ptr<const Declared> d = declared();
  if (d == nullptr) {
    return absl::FailedPreconditionError("Push before CreateVariables");
  }
  COHORT_ASSIGN_OR_RETURN(
      const std::vector<std::vector<PushSlice>> by_shard,
      (SliceByShard<PushSlice>(d->by_name, num_shards(), variables, "Push")));
  return ForEachShard(NonEmpty(by_shard), [&](Shard& shard) {
    return RunWithRecovery(shard, Op::kPush, d->requests[shard.id],
                           [&](uint64_t incarnation, bool* restarted) {
                             return PushOnce(shard, by_shard[shard.id],
                                             incarnation, restarted);
                           });
  });
}

absl::Status PsClient::ForEachShard(
    const std::vector<int>& shard_ids,
    const std::function<absl::Status(Shard&)>& fn) {
  if (shard_ids.empty()) return absl::OkStatus();
  if (shard_ids.size() == 1) return fn(*shards_[shard_ids[0]]);
  std::vector<absl::Status> results(shard_ids.size());
  std::vector<std::thread> threads;
  threads.reserve(shard_ids.size() - 1);
  for (size_t i = 1; i < shard_ids.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = fn(*shards_[shard_ids[i]]); });
  }
  results[0] = fn(*shards_[shard_ids[0]]);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// One attempt of each RPC.

absl::Status PsClient::PullOnce(Shard& shard,
                                const std::vector<PullSlice>& slices,
                                bool* restarted) {
  v1::PullRequest request;
  request.set_job_id(options_.job_id);
  request.set_job_uid(options_.job_uid);
  request.set_worker(options_.worker);
  for (const PullSlice& s : slices) request.add_names(s.name);

  const uint64_t call = shard.StartCall();
  std::unique_ptr<grpc::ClientContext> context =
      shard.connection.NewContext(options_.rpc_timeout);
  std::unique_ptr<grpc::ClientReader<v1::PullResponse>> reader =
      shard.stub->Pull(context.get(), request);
  PullAssembler assembler(slices);
  v1::PullResponse response;
  absl::Status local;  // our own objection to what arrived
  while (reader->Read(&response)) {
    if (!local.ok()) continue;  // cancelled: drain what is left
    if (response.has_shard()) {
      absl::StatusOr<bool> observed =
          Observe(shard, response.shard(), call, /*acknowledged=*/false);
      if (!observed.ok()) {
        local = observed.status();
      } else {
        *restarted |= *observed;
      }
    }
    for (const v1::TensorChunk& chunk : response.chunks()) {
      if (!local.ok()) break;
      local = assembler.Add(chunk);
    }
    if (!local.ok()) context->TryCancel();
  }
  const grpc::Status status = reader->Finish();
  if (!local.ok()) return local;
  COHORT_RETURN_IF_ERROR(
      shard.connection.Annotate("ParameterServer.Pull", status));
  return assembler.Finish();
}

absl::Status PsClient::PushOnce(Shard& shard,
                                const std::vector<PushSlice>& slices,
                                uint64_t incarnation, bool* restarted) {
  const uint64_t call = shard.StartCall();
  std::unique_ptr<grpc::ClientContext> context =
      shard.connection.NewContext(options_.rpc_timeout);
  v1::PushResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PushRequest>> writer =
      shard.stub->Push(context.get(), &response);
  PushChunker chunker(&slices, options_.max_chunk_bytes, options_.job_id,
                      options_.job_uid, options_.worker, incarnation);
  v1::PushRequest request;
  bool half_closed = false;
  while (chunker.Next(&request)) {
    // The last message half-closes the stream with it, saving a frame.
    const bool last = chunker.Done();
    const bool written =
        writer->Write(request, last ? grpc::WriteOptions().set_last_message()
                                    : grpc::WriteOptions());
    // A last-message write half-closes even when it fails: WritesDone after
    // it would be a second half-close, which gRPC treats as misuse.
    half_closed = last;
    if (!written) break;  // the stream ended early; Finish says why
  }
  if (!half_closed) writer->WritesDone();
  const grpc::Status status = writer->Finish();
  COHORT_RETURN_IF_ERROR(
      shard.connection.Annotate("ParameterServer.Push", status));
  COHORT_ASSIGN_OR_RETURN(*restarted, Observe(shard, response.shard(), call,
                                              /*acknowledged=*/true));
  return absl::OkStatus();
}

absl::Status PsClient::CreateAll(Shard& shard, const CreateBatches& batches,
                                 absl::Duration timeout) {
  constexpr int kMaxPasses = 3;
  for (int pass = 1;; ++pass) {
    bool lost = false;
    for (size_t k = 0; k < batches.size() && !lost; ++k) {
      bool restarted = false;
      COHORT_RETURN_IF_ERROR(
          CreateOnce(shard, batches[k], timeout, &restarted));
      lost = restarted && k > 0;
    }
    if (!lost) return absl::OkStatus();
    if (pass == kMaxPasses) {
      return Named(shard, absl::UnavailableError(absl::StrCat(
                              "the shard restarted during each of ", kMaxPasses,
                              " declarations of its variables")));
    }
  }
}

absl::Status PsClient::CreateOnce(Shard& shard,
                                  const v1::CreateVariablesRequest& request,
                                  absl::Duration timeout, bool* restarted) {
  const uint64_t call = shard.StartCall();
  std::unique_ptr<grpc::ClientContext> context =
      shard.connection.NewContext(timeout);
  v1::CreateVariablesResponse response;
  COHORT_RETURN_IF_ERROR(shard.connection.Annotate(
      "ParameterServer.CreateVariables",
      shard.stub->CreateVariables(context.get(), request, &response)));
  // A new incarnation seen here needs no recreate of this message: it was
  // one (CreateAll sends the others again).
  COHORT_ASSIGN_OR_RETURN(
      const bool observed,
      Observe(shard, response.shard(), call, /*acknowledged=*/false));
  if (restarted != nullptr) *restarted = observed;
  return absl::OkStatus();
}

}  // namespace cohort::ps
