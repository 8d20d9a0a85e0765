#pragma once

// What a worker uses to reach the ps tasks of a ParameterServer job: declare
// the job's variables on their shards, pull their values, push gradients.
// Every call fans out to the shards it involves, one stream per shard, in
// parallel, and reassembles variables split by the partitioner.
//
// A ps task that is restarted (by the coordinator, after a crash) comes back
// with a new incarnation, restored from its last snapshot. The client rides
// over that:
//
//   - A call that finds a shard UNAVAILABLE (or times out before it could
//     connect) waits for it to accept connections again, for at most
//     `recovery_timeout`, then probes it with CreateVariables, which also
//     recreates this client's variables there when the shard came back
//     without a snapshot. Then UNAVAILABLE "ps:1 at HOST:PORT did not come
//     back within 60s: <last error>".
//   - Any response showing a new incarnation of a shard records a
//     PsRecoveryEvent (how many of the updates seen before the restart the
//     snapshot lost) and re-issues CreateVariables there before the call
//     returns.
//   - A Pull or Push refused with NOT_FOUND (the shard does not know the
//     variables: restarted without a snapshot while no call of this client
//     was looking) re-issues CreateVariables there once; the call is retried
//     if that shows a new incarnation.
//   - A Push names the incarnation it is meant for; one refused with ABORTED
//     (the shard restarted since, and applied none of it) re-issues
//     CreateVariables there once, which shows the new incarnation, and is
//     sent again to it.
//   - Other errors return at once, naming the shard: "ps:1: ...".
//
// Pushes are at most once per incarnation. A Push that fails UNAVAILABLE is
// re-sent only if the shard then answers with a new incarnation, whose
// snapshot was taken before the push was acknowledged. If the shard answers
// with the same incarnation it may or may not have applied the push (the
// connection broke, the shard did not die); the push is not re-sent and the
// call fails UNAVAILABLE saying so. A re-sent push can still apply twice in
// part: snapshots are consistent per variable, not per push, so one taken
// while a push was being applied holds some of its variables' updates, and
// the shard may also have applied it, snapshotted and died before its
// answer left. At-least-once, as a re-run closure is.
//
// Thread-safe: the closure threads of a worker share one client. Each call
// blocks its caller; it runs one shard on the calling thread and the others
// on threads of its own, joined before it returns.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "cohort/v1/ps.grpc.pb.h"
#include "ps_client/partitioner.h"
#include "ps_client/tensor_chunks.h"
#include "rpc/channel.h"
#include "rpc/security.h"

namespace cohort::ps {

struct PsClientOptions {
  std::vector<std::string> ps_addresses;  // HOST:PORT; index = shard id
  std::string job_id;
  int64_t job_sequence = 0;
  std::string job_uid;  // JobStatus.uid; empty: not known
  std::string cluster_uid;  // the coordinator's; empty: not known
  std::string worker;  // "worker:1": keys aggregated pushes, names messages
  rpc::Security security;
  // Data per Push message; at most the shards' --max_chunk_bytes, which
  // bounds what they accept in one chunk.
  int64_t max_chunk_bytes = 4 << 20;
  // Initial values per CreateVariables message: a larger declaration goes
  // to a shard in several (each bounded by the 256 MiB message limit).
  int64_t max_create_bytes = 64 << 20;
  absl::Duration rpc_timeout = absl::Seconds(30);  // each RPC, whole stream
  // How long a shard may stay unavailable, from the first failure, before
  // the call gives up (the last probe may add up to rpc_timeout).
  absl::Duration recovery_timeout = absl::Seconds(60);
  // A shard found unavailable is waited for: the channel reconnects with
  // gRPC's backoff (100 ms doubling to 1 s, rpc/channel.cc) while the call
  // waits for it, max_backoff at a time (so Shutdown() is seen that fast),
  // then probes it with CreateVariables. A probe refused as unavailable is
  // retried after a backoff doubling from initial_backoff to max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(1);
};

// How the shards treat one variable, beside its placement.
struct PsVariableOptions {
  v1::PsDType dtype = v1::PS_FLOAT32;
  v1::PsOptimizer optimizer;
  v1::PsAggregation aggregation = v1::PS_AGGREGATION_NONE;
  // The whole variable's initial value, row-major; empty: zeros. Copied:
  // the client keeps it to recreate the variable on a restarted shard.
  absl::Span<const char> initial;
};

// The caller's buffer for one whole variable (row-major, the variable's
// size), not owned.
struct PullBuffer {
  std::string name;
  absl::Span<char> bytes;
};
struct PushBuffer {
  std::string name;
  absl::Span<const char> bytes;
};

// A shard that came back with a new incarnation.
struct PsRecoveryEvent {
  int shard = 0;
  uint64_t old_incarnation = 0;
  uint64_t new_incarnation = 0;
  int64_t updates_seen = 0;      // highest `updates` seen from the old one
  int64_t restored_updates = 0;  // what its snapshot held
  int64_t lost = 0;              // max(0, updates_seen - restored_updates)
};

class PsClient {
 public:
  // INVALID_ARGUMENT, naming the field, for no address, no job id or a bad
  // chunk size. Connects lazily.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(
      PsClientOptions options);
  ~PsClient();

  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // Declares the job's variables: each shard gets the parts placed on it
  // (with their slices of the initial values), all shards in parallel.
  // `options[i]` is for `placement.variables[i]`. The placement's ps count
  // must be the number of addresses. Replaces what an earlier call declared;
  // idempotent on the shards, so every worker calls it. Initial values over
  // max_create_bytes go to a shard in several messages; a part whose own
  // initial value no message can carry is INVALID_ARGUMENT naming it. Each
  // message is checked and applied, and snapshotted, on its own: one
  // refused leaves the earlier ones declared.
  absl::Status CreateVariables(const Placement& placement,
                               const std::vector<PsVariableOptions>& options);

  // Fills each buffer with its variable's value; no buffers is a no-op.
  // FAILED_PRECONDITION before CreateVariables; INVALID_ARGUMENT for an
  // unknown variable or a buffer of the wrong size.
  absl::Status Pull(absl::Span<const PullBuffer> variables);

  // Sends each buffer (a gradient, or this worker's value of an aggregated
  // variable) to its shards, which apply it. Errors as Pull's.
  absl::Status Push(absl::Span<const PushBuffer> variables);

  // The recovery events seen since the last call, oldest first.
  std::vector<PsRecoveryEvent> TakeRecoveryEvents();

  // The incarnation last seen from `shard`; 0 before it answered.
  uint64_t incarnation(int shard) const;
  int num_shards() const { return static_cast<int>(shards_.size()); }

  // Stops waiting for unavailable shards: calls waiting fail CANCELLED
  // within max_backoff, and later calls at once. RPCs in flight end within
  // rpc_timeout. Idempotent.
  void Shutdown();

 private:
  struct Shard;
  struct Declared;  // what CreateVariables declared, shared by the calls
  // What declares a shard's variables: one message, or several when their
  // initial values are large. Sent in order, each idempotent.
  using CreateBatches = std::vector<v1::CreateVariablesRequest>;

  explicit PsClient(PsClientOptions options);

  // One attempt of a shard's Pull, Push or CreateVariables. `restarted` is
  // set when the answer showed a new incarnation. A push is meant for
  // `incarnation` (0: any) and refused unapplied (ABORTED) by another.
  absl::Status PullOnce(Shard& shard, const std::vector<PullSlice>& slices,
                        bool* restarted);
  absl::Status PushOnce(Shard& shard, const std::vector<PushSlice>& slices,
                        uint64_t incarnation, bool* restarted);
  absl::Status CreateOnce(Shard& shard,
                          const v1::CreateVariablesRequest& request,
                          absl::Duration timeout, bool* restarted = nullptr);
  // CreateOnce with each batch in turn; the first error. A restart seen
  // after the first batch may have lost the earlier ones: all are sent
  // again (a few times at most).
  absl::Status CreateAll(Shard& shard, const CreateBatches& batches,
                         absl::Duration timeout);

  // Runs a Pull or Push on one shard with the recovery rules above;
  // `create` is what probes and recreates the shard. `attempt` is given the
  // incarnation the call is meant for, and whether the answer showed a
  // restart is written to its second argument.
  enum class Op { kPull, kPush };
  absl::Status RunWithRecovery(
      Shard& shard, Op op, const CreateBatches& create,
      const std::function<absl::Status(uint64_t incarnation, bool* restarted)>&
          attempt);
  // CreateVariables on one shard, retried while it is unavailable.
  absl::Status CreateWithRetry(Shard& shard, const CreateBatches& request);
  // Probes `shard` with `request`, backing off, until it answers (and so
  // holds the variables again) or `deadline` passes.
  absl::Status AwaitShard(Shard& shard, const CreateBatches& request,
                          absl::Time deadline, absl::Status last_error);
  // Sleeps `delay` unless Shutdown() comes first (then CANCELLED).
  absl::Status Backoff(absl::Duration delay);
  // UNAVAILABLE, or a deadline that passed before the channel connected.
  bool Retryable(Shard& shard, const absl::Status& status) const;
  // Prefixes "ps:<id>: " unless the message names the shard already.
  static absl::Status Named(const Shard& shard, const absl::Status& status);

  // Records what `state` says of `shard`. True when it shows a new
  // incarnation (an event was recorded). FAILED_PRECONDITION when the task
  // at that address says it is another shard.
  // `acknowledged`: the state answers a push, so its `updates` count as
  // acknowledged to this worker (what a restart may lose is measured
  // against those alone).
  // `call` is the number Shard::StartCall gave the call answered: a late
  // answer from an earlier incarnation is ignored (incarnation_tracker.h).
  absl::StatusOr<bool> Observe(Shard& shard, const v1::PsShardState& state,
                               uint64_t call, bool acknowledged);
  // After a successful call saw a new incarnation: CreateVariables there
  // again (logged, not returned, when it fails).
  void RecreateAfterRestart(Shard& shard, const CreateBatches& create);

  // Runs `fn(shard)` for each listed shard in parallel; the first error in
  // shard order.
  absl::Status ForEachShard(const std::vector<int>& shard_ids,
                            const std::function<absl::Status(Shard&)>& fn);

  std::shared_ptr<const Declared> declared() const;
  absl::Status Stopped() const;

  const PsClientOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const Declared> declared_ ABSL_GUARDED_BY(mu_);
  std::vector<PsRecoveryEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::ps
