#include "ps_server/variable_store.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "ps_client/dtype.h"
#include "ps_server/ps_optimizers.h"
#include "ps_server/variable_spec.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {
namespace {

// What a variable holds beside its values and slots (its spec, lock and map
// entry), counted against max_shard_bytes so that a million tiny variables
// cannot pass for a few kilobytes.
constexpr int64_t kBytesPerVariable = 512;

// The bytes max_shard_bytes counts for one variable: values, slots and its
// own keeping (its name and shape included).
int64_t HeldBytes(const v1::PsVariableSpec& spec, int64_t elements) {
  return elements * DTypeSize(spec.dtype()) *
             (1 + NumSlots(spec.optimizer().kind())) +
         kBytesPerVariable + static_cast<int64_t>(spec.name().size()) +
         spec.shape_size() * static_cast<int64_t>(sizeof(int64_t));
}

// Longest worker name an aggregated variable keeps a value under.
constexpr size_t kMaxWorkerNameBytes = 256;

// The bytes max_shard_bytes counts for one worker's value of an aggregated
// variable of `bytes`: the value and the name it is kept under.
int64_t WorkerValueBytes(const std::string& worker, int64_t bytes) {
  return bytes + static_cast<int64_t>(worker.size());
}

}  // namespace

struct VariableStore::Variable {
  v1::PsVariableSpec spec;  // defaults filled in, `initial` cleared
  int64_t elements = 0;
  int64_t bytes = 0;
  // Atomic so that reports read it without waiting for an update to finish.
  std::atomic<int64_t> updates{0};

  absl::Mutex mu;
  std::string value ABSL_GUARDED_BY(mu);
  std::vector<std::string> slots ABSL_GUARDED_BY(mu);
  int64_t step ABSL_GUARDED_BY(mu) = 0;
  std::map<std::string, std::string> worker_values ABSL_GUARDED_BY(mu);

  bool aggregated() const {
    return spec.aggregation() != v1::PS_AGGREGATION_NONE;
  }
  int64_t held_bytes() const { return HeldBytes(spec, elements); }
};

namespace {

// Sums element-wise; integers wrap (through their unsigned type) rather than
// overflow.
template <typename T, bool = std::is_integral_v<T>>
struct Accumulator {
  using type = T;
};
template <typename T>
struct Accumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
std::string Combine(const std::map<std::string, std::string>& values,
                    int64_t elements, bool mean) {
  using Acc = typename Accumulator<T>::type;
  std::vector<Acc> sum(elements, Acc(0));
  for (const auto& [worker, bytes] : values) {
    for (int64_t i = 0; i < elements; ++i) {
      T x;
      std::memcpy(&x, bytes.data() + i * sizeof(T), sizeof(T));
      sum[i] += static_cast<Acc>(x);
    }
  }
  std::string out(elements * sizeof(T), '\0');
  const T n = static_cast<T>(values.size());
  for (int64_t i = 0; i < elements; ++i) {
    T x = static_cast<T>(sum[i]);
    if (mean) x /= n;
    std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
  }
  return out;
}

// Splits `data` into chunks of at most `max_chunk_bytes`, adding them to the
// last message while it has room and starting new messages otherwise.
void AppendChunks(const std::string& name, std::string_view data,
                  int64_t version, int64_t max_chunk_bytes,
                  std::vector<v1::PullResponse>* messages,
                  int64_t* last_message_bytes) {
  const int64_t total = static_cast<int64_t>(data.size());
  for (int64_t offset = 0; offset < total; offset += max_chunk_bytes) {
    const int64_t piece = std::min(max_chunk_bytes, total - offset);
    if (messages->empty() || (messages->back().chunks_size() > 0 &&
                              *last_message_bytes + piece > max_chunk_bytes)) {
      messages->emplace_back();
      *last_message_bytes = 0;
    }
    v1::TensorChunk* chunk = messages->back().add_chunks();
    chunk->set_name(name);
    chunk->set_offset(offset);
    chunk->set_total_bytes(total);
    chunk->set_version(version);
    chunk->mutable_data()->assign(data.data() + offset, piece);
    *last_message_bytes += piece;
  }
}

}  // namespace

std::string VariableLayout::ToString() const {
  return absl::StrCat("shape ", ShapeString(shape), " ", DTypeName(dtype));
}

VariableStore::VariableStore(VariableStoreOptions options)
    : options_(options) {}

VariableStore::~VariableStore() = default;

absl::StatusOr<int> VariableStore::Create(
    const std::string& job_id, int64_t job_sequence,
    const google::protobuf::RepeatedPtrField<v1::PsVariableSpec>& specs,
    const std::string& job_uid, const std::string& cluster_uid) {
  if (job_id.empty()) {
    return absl::InvalidArgumentError("CreateVariables needs a job_id");
  }
  // Everything is checked before anything changes, so a bad request leaves
  // the shard as it was.
  std::vector<v1::PsVariableSpec> normalized;
  std::vector<int64_t> elements(specs.size());
  std::set<std::string> names;
  for (int i = 0; i < specs.size(); ++i) {
    absl::StatusOr<v1::PsVariableSpec> spec =
        NormalizeSpec(specs[i], &elements[i]);
    if (!spec.ok()) return spec.status();
    if (!names.insert(spec->name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", spec->name(), "': declared twice in one request"));
    }
    normalized.push_back(*std::move(spec));
  }

  std::string replaced_job, replaced_uid;
  int64_t replaced_sequence = 0;
  size_t dropped = 0;
  int created = 0;
  {
    absl::WriterMutexLock lock(&mu_);
    // The same id and sequence, yet another job: ids restart with a new
    // cluster, and the shard outlived the old one's coordinator.
    const bool same_id_other_job =
        job_id == job_id_ && job_sequence == job_sequence_ &&
        !job_uid.empty() && !job_uid_.empty() && job_uid != job_uid_;
    // Another cluster's job: the shard outlived the old cluster, and serves
    // the one that addresses it now, whose ids started again at 1.
    const bool other_cluster = !cluster_uid.empty() && !cluster_uid_.empty() &&
                               cluster_uid != cluster_uid_;
    const bool replace = job_id_.empty() || job_sequence > job_sequence_ ||
                         same_id_other_job || other_cluster;
    if (!replace && job_sequence < job_sequence_) {
      return absl::PermissionDeniedError(absl::StrCat(
          "job '", job_id, "' (sequence ", job_sequence,
          ") is older than job '", job_id_, "' (sequence ", job_sequence_,
          "), which owns ps shard ", options_.shard_id));
    }
    if (!replace && job_id != job_id_) {
      return absl::PermissionDeniedError(absl::StrCat(
          "job '", job_id, "' and job '", job_id_, "', which owns ps shard ",
          options_.shard_id, ", have the same sequence ", job_sequence));
    }
    bool learnt_uid = false;
    int64_t new_bytes = 0;
    for (size_t i = 0; i < normalized.size(); ++i) {
      const v1::PsVariableSpec& spec = normalized[i];
      if (!replace) {
        auto it = variables_.find(spec.name());
        if (it != variables_.end()) {
          if (!SameSpec(it->second->spec, spec)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "variable '", spec.name(), "' exists on ps shard ",
                options_.shard_id, " with ", SpecString(it->second->spec),
                "; this create declares ", SpecString(spec)));
          }
          continue;
        }
      }
      new_bytes += HeldBytes(spec, elements[i]);
    }
    const int64_t kept_bytes =
        replace ? 0 : held_bytes_ + worker_value_bytes_.load();
    if (kept_bytes + new_bytes > options_.max_shard_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ps shard ", options_.shard_id, " would hold ",
          kept_bytes + new_bytes,
          " bytes of variables, their slots, their keeping and workers' ",
          "values, over its ", "limit of ", options_.max_shard_bytes,
          options_.max_shard_bytes_reason.empty()
              ? ""
              : absl::StrCat(" (", options_.max_shard_bytes_reason, ")"),
          ": spread the variables over more ps tasks (a partitioner)"));
    }

    if (replace) {
      if (!job_id_.empty()) {
        replaced_job = job_id_;
        replaced_uid = job_uid_;
        replaced_sequence = job_sequence_;
        dropped = variables_.size();
      }
      variables_.clear();
      held_bytes_ = 0;
      worker_value_bytes_.store(0);
      job_id_ = job_id;
      job_sequence_ = job_sequence;
      job_uid_ = job_uid;
      cluster_uid_ = cluster_uid;
    } else if ((job_uid_.empty() && !job_uid.empty()) ||
               (cluster_uid_.empty() && !cluster_uid.empty())) {
      // The owner's, learnt from itself where a snapshot did not say.
      if (job_uid_.empty()) job_uid_ = job_uid;
      if (cluster_uid_.empty()) cluster_uid_ = cluster_uid;
      learnt_uid = true;
    }
    for (int i = 0; i < specs.size(); ++i) {
      v1::PsVariableSpec& spec = normalized[i];
      if (variables_.count(spec.name()) > 0) continue;
      auto variable = std::make_unique<Variable>();
      variable->elements = elements[i];
      variable->bytes = elements[i] * DTypeSize(spec.dtype());
      {
        absl::MutexLock variable_lock(&variable->mu);
        variable->value = specs[i].initial().empty()
                              ? std::string(variable->bytes, '\0')
                              : specs[i].initial();
        variable->slots =
            InitialSlots(spec.optimizer(), spec.dtype(), elements[i]);
      }
      variable->spec = std::move(spec);
      held_bytes_ += variable->held_bytes();
      const std::string name = variable->spec.name();
      variables_.emplace(name, std::move(variable));
      ++created;
    }
    if (created > 0 || replace || learnt_uid) {
      declared_generation_.store(generation_.fetch_add(1) + 1);
    }
  }
  if (!replaced_job.empty()) {
    spdlog::info(
        "ps shard {}: job '{}' (sequence {}, uid {}) replaces job '{}' "
        "(sequence {}, uid {}); dropped its {} variables",
        options_.shard_id, job_id, job_sequence,
        job_uid.empty() ? "unknown" : job_uid, replaced_job, replaced_sequence,
        replaced_uid.empty() ? "unknown" : replaced_uid, dropped);
  }
  if (created > 0) {
    spdlog::info("ps shard {}: job '{}' created {} variables",
                 options_.shard_id, job_id, created);
  }
  return created;
}

absl::Status VariableStore::CheckOwner(const JobRef& job) const {
  if (job.id.empty()) {
    return absl::InvalidArgumentError("the request names no job_id");
  }
  if (!job_id_.empty() && job.id != job_id_) {
    return absl::PermissionDeniedError(absl::StrCat(
        "ps shard ", options_.shard_id, " holds the variables of job '",
        job_id_, "', not of job '", job.id, "'"));
  }
  if (!job.uid.empty() && !job_uid_.empty() && job.uid != job_uid_) {
    return absl::PermissionDeniedError(absl::StrCat(
        "ps shard ", options_.shard_id, " holds the variables of job '",
        job_id_, "' of uid ", job_uid_, ", not of this job '", job.id,
        "' of uid ", job.uid,
        ": a job of the same id from another cluster, or another "
        "coordinator's, owns them now"));
  }
  return absl::OkStatus();
}

absl::Status VariableStore::Admits(const JobRef& job) const {
  absl::ReaderMutexLock lock(&mu_);
  return CheckOwner(job);
}

absl::StatusOr<VariableStore::Variable*> VariableStore::Find(
    const JobRef& job, const std::string& name) const {
  if (absl::Status owner = CheckOwner(job); !owner.ok()) {
    return absl::Status(
        owner.code(), absl::StrCat("variable '", name, "': ", owner.message()));
  }
  auto it = variables_.find(name);
  if (it == variables_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "variable '", name, "' is not on ps shard ", options_.shard_id));
  }
  return it->second.get();
}

absl::StatusOr<std::vector<v1::PsVariableSpec>> VariableStore::List(
    const JobRef& job) const {
  absl::ReaderMutexLock lock(&mu_);
  if (absl::Status owner = CheckOwner(job); !owner.ok()) return owner;
  std::vector<v1::PsVariableSpec> specs;
  for (const auto& [name, variable] : variables_) {
    specs.push_back(variable->spec);
  }
  return specs;
}

absl::StatusOr<std::vector<v1::PullResponse>> VariableStore::Pull(
    const JobRef& job, const std::vector<std::string>& names,
    int64_t max_chunk_bytes, size_t* next, int64_t batch_bytes) const {
  max_chunk_bytes = std::max<int64_t>(1, max_chunk_bytes);
  size_t first = next != nullptr ? *next : 0;
  // Each name is copied into the reply: a repeated one would multiply it.
  // Checked with the first batch, not again with each of the stream's next.
  if (first == 0) {
    absl::flat_hash_set<absl::string_view> seen;
    for (const std::string& name : names) {
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("the pull names variable '", name, "' twice"));
      }
    }
  }
  std::vector<v1::PullResponse> messages;
  int64_t last_message_bytes = 0;
  int64_t batched = 0;
  absl::ReaderMutexLock lock(&mu_);
  if (first == 0) {
    // Refused before any value is sent.
    for (const std::string& name : names) {
      if (absl::StatusOr<Variable*> found = Find(job, name); !found.ok()) {
        return found.status();
      }
    }
  }
  size_t index = first;
  for (; index < names.size() && batched < batch_bytes; ++index) {
    const std::string& name = names[index];
    absl::StatusOr<Variable*> found = Find(job, name);
    if (!found.ok()) return found.status();
    Variable& variable = **found;
    absl::MutexLock variable_lock(&variable.mu);
    batched += static_cast<int64_t>(variable.value.size());
    const int64_t version = variable.updates.load();
    if (!variable.aggregated() || variable.worker_values.empty()) {
      AppendChunks(name, variable.value, version, max_chunk_bytes, &messages,
                   &last_message_bytes);
      continue;
    }
    std::string aggregate;
    const v1::PsAggregation how = variable.spec.aggregation();
    if (how == v1::PS_AGGREGATION_ONLY_FIRST_WORKER) {
      // std::map orders the workers: the first is the least name.
      aggregate = variable.worker_values.begin()->second;
    } else {
      const bool mean = how == v1::PS_AGGREGATION_MEAN;
      const auto& values = variable.worker_values;
      switch (variable.spec.dtype()) {
        case v1::PS_FLOAT32:
          aggregate = Combine<float>(values, variable.elements, mean);
          break;
        case v1::PS_FLOAT64:
          aggregate = Combine<double>(values, variable.elements, mean);
          break;
        case v1::PS_INT32:
          aggregate = Combine<int32_t>(values, variable.elements, mean);
          break;
        default:
          aggregate = Combine<int64_t>(values, variable.elements, mean);
          break;
      }
    }
    AppendChunks(name, aggregate, version, max_chunk_bytes, &messages,
                 &last_message_bytes);
  }
  if (messages.empty()) messages.emplace_back();
  if (next != nullptr) *next = index;
  return messages;
}

absl::StatusOr<VariableLayout> VariableStore::Layout(
    const JobRef& job, const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<Variable*> found = Find(job, name);
  if (!found.ok()) return found.status();
  const Variable& variable = **found;
  VariableLayout layout;
  layout.dtype = variable.spec.dtype();
  layout.shape.assign(variable.spec.shape().begin(),
                      variable.spec.shape().end());
  layout.bytes = variable.bytes;
  layout.aggregated = variable.aggregated();
  return layout;
}

absl::Status VariableStore::Apply(const JobRef& job, const std::string& worker,
                                  const std::string& name,
                                  std::string_view bytes) {
  // The shared lock is held through the update, so that Capture (which
  // takes it exclusively) never sees an update half-applied.
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<Variable*> found = Find(job, name);
  if (!found.ok()) return found.status();
  Variable& variable = **found;
  if (static_cast<int64_t>(bytes.size()) != variable.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push of '", name, "': ", bytes.size(), " bytes, the variable has ",
        variable.bytes, " (shape ", ShapeString(variable.spec.shape()), " ",
        DTypeName(variable.spec.dtype()), ")"));
  }
  {
    absl::MutexLock variable_lock(&variable.mu);
    if (variable.aggregated()) {
      if (worker.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "push of aggregated variable '", name, "' names no worker"));
      }
      if (worker.size() > kMaxWorkerNameBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "push of aggregated variable '", name, "' names a worker of ",
            worker.size(), " bytes; at most ", kMaxWorkerNameBytes));
      }
      auto it = variable.worker_values.find(worker);
      if (it == variable.worker_values.end()) {
        if (static_cast<int>(variable.worker_values.size()) >=
            options_.max_workers) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "aggregated variable '", name, "' already holds the values of ",
              options_.max_workers, " workers; refusing '", worker, "'"));
        }
        // Workers' values count against the shard's limit as well: they are
        // held, and snapshotted, beside the values and slots. Pushes to other
        // variables add theirs concurrently, hence check and add as one.
        const int64_t added = WorkerValueBytes(worker, variable.bytes);
        int64_t others = worker_value_bytes_.load();
        do {
          const int64_t held = held_bytes_ + others + added;
          if (held > options_.max_shard_bytes) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "ps shard ", options_.shard_id, " would hold ", held,
                " bytes with worker '", worker,
                "''s value of aggregated variable '", name,
                "', over its limit of ", options_.max_shard_bytes));
          }
        } while (
            !worker_value_bytes_.compare_exchange_weak(others, others + added));
        variable.worker_values.emplace(worker, std::string(bytes));
      } else {
        it->second.assign(bytes.data(), bytes.size());
      }
    } else {
      ApplyUpdate(variable.spec.optimizer(), variable.spec.dtype(), bytes,
                  {.value = &variable.value,
                   .slots = &variable.slots,
                   .step = &variable.step});
    }
    variable.updates.fetch_add(1);
  }
  generation_.fetch_add(1);
  return absl::OkStatus();
}

int64_t VariableStore::variable_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  int64_t bytes = 0;
  for (const auto& [name, variable] : variables_) bytes += variable->bytes;
  return bytes;
}

void VariableStore::FillInfo(v1::PsInfo* info) const {
  // A snapshot's capture holds the lock exclusively for as long as copying
  // the whole shard takes; a heartbeat must not wait that long. Then the
  // last full answer is given, with the live update count.
  if (!mu_.ReaderTryLock()) {
    absl::MutexLock lock(&info_mu_);
    info->MergeFrom(last_info_);
    info->set_updates(updates_.load());
    return;
  }
  v1::PsInfo fresh;
  fresh.set_job_id(job_id_);
  fresh.set_num_variables(static_cast<int64_t>(variables_.size()));
  fresh.set_updates(updates_.load());
  fresh.set_restored_updates(restored_updates_.load());
  int64_t bytes = 0;
  for (const auto& [name, variable] : variables_) {
    bytes += variable->bytes;
    if (fresh.variables_size() >= kMaxListedVariables) continue;
    v1::PsVariableInfo* entry = fresh.add_variables();
    entry->set_name(name);
    *entry->mutable_shape() = variable->spec.shape();
    entry->set_bytes(variable->bytes);
    entry->set_updates(variable->updates.load());
  }
  fresh.set_variable_bytes(bytes);
  mu_.ReaderUnlock();
  info->MergeFrom(fresh);
  absl::MutexLock lock(&info_mu_);
  last_info_ = std::move(fresh);
}

v1::PsSnapshot VariableStore::Capture(int64_t* generation) const {
  absl::WriterMutexLock lock(&mu_);
  // Nothing but CountPush changes state under this lock. It counts, then
  // moves the generation: read in the other order, a count the generation
  // says is saved is saved.
  if (generation != nullptr) *generation = generation_.load();
  v1::PsSnapshot snapshot;
  snapshot.set_shard_id(options_.shard_id);
  snapshot.set_job_id(job_id_);
  snapshot.set_job_sequence(job_sequence_);
  snapshot.set_job_uid(job_uid_);
  snapshot.set_cluster_uid(cluster_uid_);
  snapshot.set_updates(updates_.load());
  snapshot.set_unix_ms(absl::ToUnixMillis(absl::Now()));
  for (const auto& [name, variable] : variables_) {
    v1::PsSnapshotVariable* out = snapshot.add_variables();
    absl::MutexLock variable_lock(&variable->mu);
    *out->mutable_spec() = variable->spec;
    out->set_value(variable->value);
    for (const std::string& slot : variable->slots) out->add_slots(slot);
    out->set_step(variable->step);
    out->set_updates(variable->updates.load());
    out->mutable_worker_values()->insert(variable->worker_values.begin(),
                                         variable->worker_values.end());
  }
  return snapshot;
}

absl::Status VariableStore::Restore(const v1::PsSnapshot& snapshot) {
  if (snapshot.shard_id() != options_.shard_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("the snapshot holds ps shard ", snapshot.shard_id(),
                     ", this is shard ", options_.shard_id));
  }
  // Built aside and swapped in, so that a bad snapshot changes nothing.
  std::map<std::string, std::unique_ptr<Variable>> restored;
  int64_t held_bytes = 0;
  int64_t worker_value_bytes = 0;
  for (const v1::PsSnapshotVariable& saved : snapshot.variables()) {
    int64_t elements = 0;
    absl::StatusOr<v1::PsVariableSpec> spec =
        NormalizeSpec(saved.spec(), &elements);
    const std::string& name = saved.spec().name();
    auto lost = [&name](absl::string_view what) {
      return absl::DataLossError(
          absl::StrCat("snapshot variable '", name, "': ", what));
    };
    if (!spec.ok()) return lost(spec.status().message());
    if (restored.count(name) > 0) return lost("saved twice");
    auto variable = std::make_unique<Variable>();
    variable->elements = elements;
    variable->bytes = elements * DTypeSize(spec->dtype());
    const auto wrong_size = [&](absl::string_view bytes) {
      return static_cast<int64_t>(bytes.size()) != variable->bytes;
    };
    if (wrong_size(saved.value())) {
      return lost(absl::StrCat("value has ", saved.value().size(),
                               " bytes, expected ", variable->bytes));
    }
    if (saved.slots_size() != NumSlots(spec->optimizer().kind())) {
      return lost(absl::StrCat(saved.slots_size(),
                               " optimizer slots, expected ",
                               NumSlots(spec->optimizer().kind())));
    }
    for (const std::string& slot : saved.slots()) {
      if (wrong_size(slot)) return lost("an optimizer slot has the wrong size");
    }
    for (const auto& [worker, value] : saved.worker_values()) {
      if (wrong_size(value)) {
        return lost(absl::StrCat("the value of worker '", worker,
                                 "' has the wrong size"));
      }
    }
    {
      absl::MutexLock variable_lock(&variable->mu);
      variable->value = saved.value();
      variable->slots.assign(saved.slots().begin(), saved.slots().end());
      variable->step = saved.step();
      variable->worker_values.insert(saved.worker_values().begin(),
                                     saved.worker_values().end());
    }
    variable->updates.store(saved.updates());
    variable->spec = *std::move(spec);
    held_bytes += variable->held_bytes();
    for (const auto& [worker, value] : saved.worker_values()) {
      worker_value_bytes += WorkerValueBytes(worker, variable->bytes);
    }
    restored.emplace(name, std::move(variable));
  }

  absl::WriterMutexLock lock(&mu_);
  job_id_ = snapshot.job_id();
  job_sequence_ = snapshot.job_sequence();
  job_uid_ = snapshot.job_uid();
  cluster_uid_ = snapshot.cluster_uid();
  variables_ = std::move(restored);
  held_bytes_ = held_bytes;
  worker_value_bytes_.store(worker_value_bytes);
  updates_.store(snapshot.updates());
  restored_updates_.store(snapshot.updates());
  generation_.fetch_add(1);
  declared_generation_.store(generation_.load());
  return absl::OkStatus();
}

}  // namespace cohort::ps
