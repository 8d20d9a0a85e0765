#pragma once

// One ps shard's variables: the values, their optimizer slots, the
// per-worker values of aggregated variables, and the counters the shard
// reports. Pure logic; the gRPC service and the push reassembly sit on top.
//
// The shard belongs to one job at a time: the job with the highest
// job_sequence that created variables here. Every call names its job, and a
// call from any other job is refused.

#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/cluster.pb.h"
#include "cohort/v1/ps.pb.h"
#include "google/protobuf/repeated_field.h"

namespace cohort::ps {

struct VariableStoreOptions {
  int shard_id = 0;  // the ps task index; named in messages
  // Bytes of values plus optimizer slots the shard may hold, so that a
  // create cannot exhaust the process's memory.
  int64_t max_shard_bytes = int64_t{16} << 30;
  // What sets max_shard_bytes, for the error that names it; empty: memory.
  std::string max_shard_bytes_reason;
  // Distinct workers whose values an aggregated variable keeps.
  int max_workers = 4096;
};

// Whom a call is for: a job's id, and its uid (JobStatus.uid) where the
// caller knows it. A call whose uid differs from the owner's is another
// job of the same id (an earlier cluster's, whose tasks outlived it) and is
// refused; an empty uid, on either side, matches any.
struct JobRef {
  JobRef(std::string job_id, std::string job_uid = "")  // NOLINT: implicit
      : id(std::move(job_id)), uid(std::move(job_uid)) {}
  JobRef(const char* job_id) : id(job_id) {}  // NOLINT: implicit

  std::string id;
  std::string uid;
};

// What a push of one variable must look like.
struct VariableLayout {
  v1::PsDType dtype = v1::PS_DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  bool aggregated = false;

  // "shape [8,16] float32"
  std::string ToString() const;
};

// Owns every variable of the shard. Thread-safe: the variable table is
// guarded by one reader/writer lock, and each variable by its own mutex, so
// that updates of one variable apply one at a time while other variables
// are pulled and pushed in parallel.
class VariableStore {
 public:
  explicit VariableStore(VariableStoreOptions options = {});
  ~VariableStore();

  VariableStore(const VariableStore&) = delete;
  VariableStore& operator=(const VariableStore&) = delete;

  int shard_id() const { return options_.shard_id; }

  // Declares `specs` for `job_id`; returns how many did not exist before.
  // Idempotent: an existing variable of the same job keeps its value. A
  // higher `job_sequence` than the owner's drops the owner's variables
  // first; a lower one is PERMISSION_DENIED. So does another `job_uid` at
  // the same id and sequence: a job of a cluster whose coordinator started
  // over, which this shard outlived (an empty uid, on either side, matches
  // any). Sequences order one cluster's jobs only: a job of another
  // `cluster_uid` replaces the owner whatever its sequence, as a new
  // cluster's ids start again at 1 (empty matches any). A spec that is
  // malformed, or that differs from the existing variable of that name, is
  // INVALID_ARGUMENT naming it; nothing is created then.
  absl::StatusOr<int> Create(
      const std::string& job_id, int64_t job_sequence,
      const google::protobuf::RepeatedPtrField<v1::PsVariableSpec>& specs,
      const std::string& job_uid = "", const std::string& cluster_uid = "");

  // The values of `names`, as the messages of a Pull stream: small
  // variables batched into one message, larger ones split, with at most
  // `max_chunk_bytes` of data per message. Each variable is read whole under
  // its lock, so a pull never sees half an update. Aggregated variables
  // return the aggregate of the workers' latest values (the initial value
  // before any push). NOT_FOUND for a name the shard does not hold,
  // PERMISSION_DENIED when another job owns the shard.
  //
  // In batches, with `next`: `*next` is the index in `names` to start from,
  // and receives where the next batch starts (names.size() after the last).
  // A batch ends with the variable that takes it to `batch_bytes` or more,
  // so that a stream holds one batch at a time, not the whole pull. The
  // first batch checks every name.
  absl::StatusOr<std::vector<v1::PullResponse>> Pull(
      const JobRef& job, const std::vector<std::string>& names,
      int64_t max_chunk_bytes, size_t* next = nullptr,
      int64_t batch_bytes = std::numeric_limits<int64_t>::max()) const;

  // The specs of `job`'s variables on the shard, by name, without initial
  // values. PERMISSION_DENIED when another job owns the shard.
  absl::StatusOr<std::vector<v1::PsVariableSpec>> List(const JobRef& job) const;

  // OK when `job` may use the shard's variables (whether or not it holds
  // any); PERMISSION_DENIED naming the owner otherwise.
  absl::Status Admits(const JobRef& job) const;

  // What a push of `name` must carry; errors as Pull's.
  absl::StatusOr<VariableLayout> Layout(const JobRef& job,
                                        const std::string& name) const;

  // Applies one whole push of `name`: the gradient through the variable's
  // optimizer, or the new value (no optimizer), or `worker`'s value of an
  // aggregated variable. Atomic under the variable's lock. Errors as Pull's,
  // and INVALID_ARGUMENT when `bytes` is not the variable's size.
  absl::Status Apply(const JobRef& job, const std::string& worker,
                     const std::string& name, std::string_view bytes);
  // A push that applied at least one variable has ended: counted once in
  // updates(), however many variables it carried. A change of state: a
  // snapshot taken before it lacks the count.
  void CountPush() {
    updates_.fetch_add(1);
    generation_.fetch_add(1);
  }

  // Pushes applied over the shard's life (restored ones included).
  int64_t updates() const { return updates_.load(); }
  // `updates` as restored at start; 0 when the shard started fresh.
  int64_t restored_updates() const { return restored_updates_.load(); }
  // Bytes of the variables' values (slots and worker values excluded).
  int64_t variable_bytes() const;
  // Moves with every change of state (create, drop, update, restore): a
  // snapshot is due when it differs from the one the last snapshot saw.
  int64_t generation() const { return generation_.load(); }
  // The generation as of the last change of which variables the shard
  // holds, or for whom (a create, a replaced owner, a restore). A snapshot
  // older than it would, restored, bring back another set or owner.
  int64_t declared_generation() const { return declared_generation_.load(); }

  // Variables a PsInfo lists by name, at most: it travels in every
  // heartbeat. Its counts and bytes cover them all.
  static constexpr int kMaxListedVariables = 256;

  // The shard's part of PsInfo: job, variables (the first
  // kMaxListedVariables by name), bytes, updates. Never waits for a
  // capture: meanwhile it gives the last full answer, with the live update
  // count.
  void FillInfo(v1::PsInfo* info) const;

  // A consistent copy of the whole shard, with no update half-applied, and
  // the generation it reflects. Blocks updates while it copies.
  v1::PsSnapshot Capture(int64_t* generation) const;

  // Replaces the shard's state with `snapshot`'s. DATA_LOSS naming the
  // variable when the snapshot is inconsistent (a value of the wrong size),
  // FAILED_PRECONDITION when it is another shard's. The state is unchanged
  // on error.
  absl::Status Restore(const v1::PsSnapshot& snapshot);

 private:
  struct Variable;

  // OK when `job` may use the shard's variables; the error Pull documents
  // otherwise.
  absl::Status CheckOwner(const JobRef& job) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The variable `name` for `job`, or the error Pull documents.
  absl::StatusOr<Variable*> Find(const JobRef& job,
                                 const std::string& name) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const VariableStoreOptions options_;
  mutable absl::Mutex mu_;
  // FillInfo's last full answer, for when mu_ is held by a capture.
  mutable absl::Mutex info_mu_;
  mutable v1::PsInfo last_info_ ABSL_GUARDED_BY(info_mu_);
  std::string job_id_ ABSL_GUARDED_BY(mu_);  // empty: no owner yet
  int64_t job_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::string job_uid_ ABSL_GUARDED_BY(mu_);      // empty: not known
  std::string cluster_uid_ ABSL_GUARDED_BY(mu_);  // empty: not known
  std::map<std::string, std::unique_ptr<Variable>> variables_
      ABSL_GUARDED_BY(mu_);
  // Values, slots and each variable's keeping (HeldBytes).
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Aggregated variables' per-worker values: added under a variable's lock
  // (mu_ read-held), reset under mu_ write-held.
  std::atomic<int64_t> worker_value_bytes_{0};
  std::atomic<int64_t> updates_{0};
  std::atomic<int64_t> restored_updates_{0};
  std::atomic<int64_t> generation_{0};
  std::atomic<int64_t> declared_generation_{0};
};

}  // namespace cohort::ps
