#pragma once

// A task's session with the coordinator: register, then heartbeat every
// interval. Used by agents and parameter servers alike.
//
// - The coordinator unreachable: retry with backoff, logging each change of
//   state once (systemd starts tasks in any order); for ever, or until
//   `orphan_timeout` has passed without an answer (then `on_orphaned` runs
//   once and the session stops), so that the tasks of a coordinator gone
//   for good are not left behind.
// - The coordinator forgot us (NOT_FOUND on heartbeat, e.g. it restarted):
//   register again.
// - The registration refused (INVALID_ARGUMENT, PERMISSION_DENIED,
//   UNAUTHENTICATED): a configuration error that retrying cannot fix; the
//   `on_fatal` callback runs once and the session stops.

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/coordinator.grpc.pb.h"
#include "rpc/channel.h"

namespace cohort::task {

struct TaskSessionOptions {
  std::string coordinator_address;
  rpc::Security security;
  // The longest gap between beats; the coordinator may ask for less.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration rpc_timeout = absl::Seconds(3);
  // Builds the report sent with Register and each heartbeat. Called on the
  // session thread; must be thread-safe with respect to its owner.
  std::function<cohort::v1::TaskReport()> report;
  // Runs on the session thread after each successful registration.
  std::function<void()> on_registered;
  // Runs once, on the session thread, when the coordinator refuses us.
  std::function<void(const absl::Status&)> on_fatal;
  // How long the coordinator may stay silent (no answer at all) before the
  // task gives up on it; infinite: never.
  absl::Duration orphan_timeout = absl::InfiniteDuration();
  // Runs once, on the session thread, when that happens.
  std::function<void(const absl::Status&)> on_orphaned;
};

// Owns one background thread between Start() and Shutdown(). Thread-safe.
class TaskSession {
 public:
  explicit TaskSession(TaskSessionOptions options);
  ~TaskSession();

  void Start();
  // Deregisters (best effort, bounded by the RPC timeout) and joins.
  // Idempotent.
  void Shutdown(absl::string_view reason = "shutdown");

  bool registered() const;
  // How the last Register or Heartbeat ended (OK before the first): why a
  // task is not registered yet.
  absl::Status last_status() const;

 private:
  void Run();
  absl::Status Register();
  absl::Status Heartbeat();

  const TaskSessionOptions options_;
  rpc::Connection connection_;
  std::unique_ptr<cohort::v1::Coordinator::Stub> stub_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string session_id_ ABSL_GUARDED_BY(mu_);
  // What the coordinator asked for at registration; infinite before.
  absl::Duration asked_interval_ ABSL_GUARDED_BY(mu_) =
      absl::InfiniteDuration();
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace cohort::task
