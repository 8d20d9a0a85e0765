#pragma once

// When a ps shard snapshots itself: every `interval`, or once
// `every_updates` updates have been applied since the last attempt,
// whichever comes first; when asked (the Snapshot RPC); and a last time on
// shutdown. Nothing is written while the state has not changed.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps_server/snapshot.h"
#include "ps_server/variable_store.h"

namespace cohort::ps {

struct SnapshotLoopOptions {
  absl::Duration interval = absl::Seconds(10);
  int64_t every_updates = 100;                  // 0: by time only
  absl::Duration max_wait = absl::Seconds(10);  // of WhenDurable
  // After a failed write, before the next attempt; doubled after each
  // further failure, up to max_retry_after_failure. A request (SnapshotNow)
  // tries at once.
  absl::Duration retry_after_failure = absl::Seconds(1);
  absl::Duration max_retry_after_failure = absl::Seconds(30);
  // Tests: runs on the writing thread before each capture, to hold a write
  // up as a slow disk would.
  std::function<void()> before_write;
};

// A snapshot on disk.
struct SnapshotRecord {
  std::string path;
  int64_t updates = 0;  // the shard's `updates` it holds
  int64_t unix_ms = 0;  // when it was taken
};

// Owns two threads between Start() and Shutdown(): one captures the store
// and writes through `dir`, the other ends WhenDurable's waits at their
// deadline even while a write takes longer. `store` and `dir` are not owned
// and must outlive the loop. Thread-safe; callbacks run on the loop's
// threads without its lock held.
class SnapshotLoop {
 public:
  using Done = std::function<void(absl::StatusOr<SnapshotRecord>)>;

  SnapshotLoop(VariableStore* store, SnapshotDir* dir,
               SnapshotLoopOptions options);
  ~SnapshotLoop();

  SnapshotLoop(const SnapshotLoop&) = delete;
  SnapshotLoop& operator=(const SnapshotLoop&) = delete;

  // `restored` is the snapshot the store was restored from, if any: the
  // state it holds counts as saved.
  void Start(std::optional<SnapshotRecord> restored);

  // Writes a last snapshot when the state changed, and joins. Requests made
  // after it began get UNAVAILABLE. Idempotent.
  void Shutdown();

  // Called after updates are applied: wakes the loop once every_updates
  // have accumulated. Cheap when no snapshot is due.
  void NoteUpdates();

  // Asks for a snapshot now. `done` gets the snapshot written, or the last
  // one when the state has not changed since, or the error.
  void SnapshotNow(Done done);

  // Calls `then` once a snapshot holding at least `updates` is on disk:
  // at once when one is, else after the loop writes it (on its thread).
  // Acknowledging a push only then bounds what a crash loses to
  // every_updates. A failed write, shutdown, or `max_wait` passing calls
  // it too (logged), so that nothing waits forever on a slow or broken
  // disk; from a failed write until one succeeds, it calls `then` at once,
  // as holding pushes would make them slower, not durable.
  void WhenDurable(int64_t updates, std::function<void()> then);

  // The newest snapshot written or restored; unset when none.
  std::optional<SnapshotRecord> last() const;

  // Whether the newest snapshot written or restored reflects the store's
  // state as of `generation` (VariableStore::generation()) or later.
  bool Holds(int64_t generation) const;

 private:
  void Run();
  // Calls the `then` of waiters past their deadline, until stopping.
  void ExpireWaiters();
  bool UpdatesDue() const;
  // Captures and writes the store unless its generation is the one last
  // written (and, when `force`, some snapshot exists); `*unchanged` is set
  // when nothing was written for that reason.
  absl::StatusOr<SnapshotRecord> WriteIfChanged(bool force, bool* unchanged);

  VariableStore* const store_;
  SnapshotDir* const dir_;
  const SnapshotLoopOptions options_;
  // The store's updates at the last attempt; read without the lock by
  // NoteUpdates, written only by the loop's thread.
  std::atomic<int64_t> attempted_updates_{0};

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  absl::CondVar waiters_changed_;  // for ExpireWaiters
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Done> requests_ ABSL_GUARDED_BY(mu_);
  // WhenDurable's callers: the updates each waits for.
  struct Waiter {
    int64_t updates;
    absl::Time deadline;
    std::function<void()> then;
  };
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::optional<SnapshotRecord> last_ ABSL_GUARDED_BY(mu_);
  int64_t written_generation_ ABSL_GUARDED_BY(mu_) = -1;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;  // writes failed in a row
  std::thread thread_;
  std::thread expirer_;
};

}  // namespace cohort::ps
