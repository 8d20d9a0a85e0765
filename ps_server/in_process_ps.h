#pragma once

// One ps shard served inside this process, for integration tests and
// benchmarks: the VariableStore, snapshots and PsService that cohort-ps
// runs, on an RpcServer, without the task's session with a coordinator.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ps_server/ps_service.h"
#include "ps_server/snapshot.h"
#include "ps_server/snapshot_loop.h"
#include "ps_server/variable_store.h"
#include "rpc/server.h"
#include "task/task_runtime.h"

namespace cohort::ps {

struct InProcessPsOptions {
  int shard_id = 0;
  std::string listen = "127.0.0.1:0";  // a fixed port to restart in place
  // Empty: no snapshots. Otherwise restored from at start, as cohort-ps
  // does with --state_dir.
  std::string state_dir;
  SnapshotLoopOptions snapshots;
  PsServiceOptions service;
};

// Owns the shard and its server from Start() to Stop(). The accessors are
// thread-safe; Start, Stop (idempotent) and destruction belong to the owner's
// thread.
class InProcessPs {
 public:
  static absl::StatusOr<std::unique_ptr<InProcessPs>> Start(
      InProcessPsOptions options);
  ~InProcessPs();

  InProcessPs(const InProcessPs&) = delete;
  InProcessPs& operator=(const InProcessPs&) = delete;

  // "127.0.0.1:PORT", as bound.
  std::string address() const { return server_->DialAddress(); }
  PsService& service() { return *service_; }
  // Updates the restored snapshot held; 0 when the shard started fresh.
  int64_t restored_updates() const { return store_->restored_updates(); }

  // Stops serving (calls in flight are cancelled after a short grace), then
  // writes the last snapshot, as cohort-ps does on SIGTERM.
  void Stop();

 private:
  explicit InProcessPs(InProcessPsOptions options);
  absl::Status Init();

  const InProcessPsOptions options_;
  std::unique_ptr<task::TaskRuntime> runtime_;  // identity and auth only
  std::unique_ptr<VariableStore> store_;
  std::optional<SnapshotDir> snapshot_dir_;
  std::unique_ptr<SnapshotLoop> snapshots_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<rpc::RpcServer> server_;
  bool stopped_ = false;
};

}  // namespace cohort::ps
