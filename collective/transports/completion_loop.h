#pragma once

// Runs the Peer streams' gRPC operations as they complete. One completion
// queue carries a transport's incoming and outgoing streams. A rank that
// waits for a message polls the queue itself (RunUntil), so that the
// message is read, filed and taken on one thread, with no wake-up between;
// the loop's own thread polls when no such wait has come for 2 ms, as
// between collectives (docs/ARCHITECTURE.md, "The Peer data path").

#include <grpcpp/completion_queue.h>

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort::collective {

// What to run when one kind of operation completes; its address is the
// operation's tag. Owned by the stream that starts the operations, which
// outlives their completion. Run by whichever thread polls the queue, one
// completion at a time.
class CompletionTag {
 public:
  explicit CompletionTag(std::function<void(bool ok)> on_done)
      : on_done_(std::move(on_done)) {}
  CompletionTag(const CompletionTag&) = delete;
  CompletionTag& operator=(const CompletionTag&) = delete;

  void* tag() { return this; }
  void Complete(bool ok) { on_done_(ok); }

 private:
  const std::function<void(bool ok)> on_done_;
};

// Runs every CompletionTag that completes on `cq`, one at a time, on the
// thread of a RunUntil or else on a thread of its own, until the queue is
// shut down and drained. `cq` is not owned; shut it down before destroying
// the loop, which joins its thread. Every tag on `cq` must be a
// CompletionTag. Thread-safe.
class CompletionLoop {
 public:
  explicit CompletionLoop(grpc::CompletionQueue* cq);
  ~CompletionLoop();
  CompletionLoop(const CompletionLoop&) = delete;
  CompletionLoop& operator=(const CompletionLoop&) = delete;

  // Runs completions on the calling thread until `done()` holds or
  // `deadline` passes. While another thread runs them, waits for it to hand
  // the queue over, checking `done()` after each completion it runs and at
  // least every 50 ms. Returns false once the queue has shut down: the
  // caller then waits as it would without the loop. `done` is called with
  // no lock of the loop's held.
  bool RunUntil(absl::FunctionRef<bool()> done, absl::Time deadline);
  // Ends the current poll of whichever thread runs completions, so that a
  // RunUntil sees a condition another thread has just met (an abort).
  void Wake();

 private:
  void Run();  // the loop's own thread
  void Complete(void* tag, bool ok);

  grpc::CompletionQueue* const cq_;
  absl::Mutex mu_;
  bool polling_ ABSL_GUARDED_BY(mu_) = false;  // a thread owns the queue
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;       // RunUntils waiting for it
  // Completions a RunUntil has run: each may have met a waiting one's
  // condition (another thread's message).
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_run_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread thread_;
};

}  // namespace cohort::collective
