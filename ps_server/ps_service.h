#pragma once

// The parameter server's gRPC service (cohort.v1.ParameterServer): creates,
// pulls and pushes a shard's variables, writes snapshots on request, and
// builds the report the task registers with.
//
// Pull streams the values message by message from a write reactor; Push
// reads the chunks one at a time into a PushAssembler, which applies each
// variable as soon as its bytes are complete. A bad request fails only its
// own call. Copying a pull's values and applying a push's run on the
// service's own threads, never on gRPC's: they take the shard's lock, which
// a snapshot holds while it copies the shard, and gRPC's threads must stay
// free to answer health checks.

#include <cstdint>

#include "cohort/v1/ps.grpc.pb.h"
#include "common/executor.h"
#include "ps_server/snapshot_loop.h"
#include "ps_server/variable_store.h"
#include "task/task_runtime.h"

namespace cohort::ps {

struct PsServiceOptions {
  // Bound on the data of one Pull message and of one pushed chunk.
  int64_t max_chunk_bytes = int64_t{4} << 20;
  // With snapshots: a push is acknowledged only when at most this many
  // acknowledged pushes (the store's updates) are not yet on disk, so a
  // crash loses no more. 0: acknowledge at once.
  int64_t ack_within_updates = 0;
};

// `runtime` and `store` are not owned and must outlive the service;
// `snapshots` too, or null when the shard keeps no snapshots. Thread-safe.
class PsService final : public v1::ParameterServer::CallbackService {
 public:
  PsService(const task::TaskRuntime* runtime, VariableStore* store,
            SnapshotLoop* snapshots, PsServiceOptions options = {});

  // The task's report: the shard's variables, counters and last snapshot.
  v1::TaskReport Report() const;

  // Who answers: shard, incarnation (random and nonzero, chosen when the
  // service is made, so that a restarted ps task is told apart), updates.
  v1::PsShardState ShardState() const;
  uint64_t incarnation() const { return incarnation_; }

  VariableStore* store() const { return store_; }
  SnapshotLoop* snapshots() const { return snapshots_; }
  const PsServiceOptions& options() const { return options_; }
  // Where pulls and pushes touch the shard.
  Executor* work() const { return &work_; }

  grpc::ServerUnaryReactor* GetPsStatus(grpc::CallbackServerContext* context,
                                        const v1::GetPsStatusRequest* request,
                                        v1::PsStatus* response) override;
  grpc::ServerUnaryReactor* CreateVariables(
      grpc::CallbackServerContext* context,
      const v1::CreateVariablesRequest* request,
      v1::CreateVariablesResponse* response) override;
  grpc::ServerWriteReactor<v1::PullResponse>* Pull(
      grpc::CallbackServerContext* context,
      const v1::PullRequest* request) override;
  grpc::ServerReadReactor<v1::PushRequest>* Push(
      grpc::CallbackServerContext* context,
      v1::PushResponse* response) override;
  grpc::ServerUnaryReactor* Snapshot(grpc::CallbackServerContext* context,
                                     const v1::SnapshotRequest* request,
                                     v1::SnapshotResponse* response) override;
  grpc::ServerUnaryReactor* ListVariables(
      grpc::CallbackServerContext* context,
      const v1::ListVariablesRequest* request,
      v1::ListVariablesResponse* response) override;

 private:
  const task::TaskRuntime* const runtime_;
  VariableStore* const store_;
  SnapshotLoop* const snapshots_;  // null: no snapshots
  const PsServiceOptions options_;
  const uint64_t incarnation_;
  mutable Executor work_{2, "ps-work"};
};

}  // namespace cohort::ps
