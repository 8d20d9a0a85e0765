#pragma once

// A ps task's daemon, put together: the shard's store, restored from the
// newest usable snapshot in the state dir; the snapshot loop that keeps
// writing it; and the gRPC service, served by the task runtime (register,
// heartbeat, signals). main.cc only turns flags into PsServerOptions.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ps_server/ps_service.h"
#include "ps_server/snapshot.h"
#include "ps_server/snapshot_loop.h"
#include "ps_server/variable_store.h"
#include "task/task_runtime.h"

namespace cohort::ps {

struct PsServerOptions {
  // Where snapshots are kept and restored from; empty: none, and a restart
  // loses the shard.
  std::string state_dir;
  SnapshotLoopOptions snapshots;
  // Its ack_within_updates follows snapshots.every_updates.
  PsServiceOptions service;
};

// INVALID_ARGUMENT naming the option (by its flag) that is out of range.
absl::Status ValidatePsServerOptions(const PsServerOptions& options);

// Owns the store, the snapshot loop and the runtime. Create and Run from
// one thread; store() is thread-safe as VariableStore is.
class PsServer {
 public:
  // Checks `options`, makes the state dir and restores the newest usable
  // snapshot. Errors name the state dir and what is wrong with it.
  static absl::StatusOr<std::unique_ptr<PsServer>> Create(
      task::TaskConfig config, PsServerOptions options);

  // Serves until SIGTERM/SIGINT or until the coordinator refuses the task;
  // returns the exit code (TaskRuntime::Run). The last snapshot is taken
  // after the server stopped, so it holds every acknowledged update.
  int Run();

  const VariableStore& store() const { return store_; }
  VariableStore& store() { return store_; }
  // The snapshot the shard started from, if any.
  const std::optional<SnapshotRecord>& restored() const { return restored_; }

 private:
  PsServer(task::TaskConfig config, PsServerOptions options);
  absl::Status Restore();

  const PsServerOptions options_;
  VariableStore store_;
  std::optional<SnapshotDir> snapshot_dir_;
  std::unique_ptr<SnapshotLoop> snapshots_;  // null without a state dir
  std::optional<SnapshotRecord> restored_;
  task::TaskRuntime runtime_;
};

}  // namespace cohort::ps
