#pragma once

// The thread that runs the Peer streams' gRPC operations as they complete.
// One completion queue, polled by this thread alone, carries a transport's
// incoming and outgoing streams: a frame read off a socket is taken in on
// the thread that polled it, with no hand-off to another of gRPC's threads
// (docs/ARCHITECTURE.md, "The Peer data path").

#include <grpcpp/completion_queue.h>

#include <functional>
#include <thread>

namespace cohort::collective {

// What to run when one kind of operation completes; its address is the
// operation's tag. Owned by the stream that starts the operations, which
// outlives their completion. Run on the CompletionLoop's thread only.
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

// Runs every CompletionTag that completes on `cq`, on a thread of its own,
// until the queue is shut down and drained. `cq` is not owned; shut it down
// before destroying the loop, which joins the thread. Every tag on `cq` must
// be a CompletionTag.
class CompletionLoop {
 public:
  explicit CompletionLoop(grpc::CompletionQueue* cq);
  ~CompletionLoop();
  CompletionLoop(const CompletionLoop&) = delete;
  CompletionLoop& operator=(const CompletionLoop&) = delete;

 private:
  std::thread thread_;
};

}  // namespace cohort::collective
