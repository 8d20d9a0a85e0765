#pragma once

// A server stream read on the caller's thread, one message at a time, each
// wait with a deadline: gRPC's synchronous reader would block for ever on a
// server that went silent.
//
//   StreamReader<v1::JobStatus> reader(connection.NewContext(...));
//   reader.Start([&](grpc::ClientContext* c, auto* r) {
//     stub->async()->WatchJob(c, &request, r);
//   });
//   while (reader.Next(absl::Now() + timeout, &status) == kMessage) ...

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

enum class StreamRead { kMessage, kEnded, kTimedOut };

// One call. Next and status from one thread; gRPC calls the reactions.
// Destroying it cancels the call and waits for gRPC to be done with it.
// At most kMaxQueued messages wait for Next: past that no read is in
// flight, so HTTP/2 flow control holds the server back while the caller is
// slow (`cohortctl logs --follow | less`) instead of memory growing.
template <typename Message>
class StreamReader final : public grpc::ClientReadReactor<Message> {
 public:
  static constexpr size_t kMaxQueued = 8;

  explicit StreamReader(std::unique_ptr<grpc::ClientContext> context)
      : context_(std::move(context)) {}
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;

  ~StreamReader() override {
    if (!started_) return;
    context_->TryCancel();
    bool paused = false;
    {
      absl::MutexLock lock(&mu_);
      std::swap(paused, paused_);
    }
    // The pause's hold; OnDone may follow now (outside mu_, which it takes).
    if (paused) this->RemoveHold();
    // gRPC calls OnDone promptly once a call is cancelled.
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  // `issue(context, this)` makes the async call (stub->async()->Method).
  template <typename Issue>
  void Start(Issue&& issue) {
    issue(context_.get(), this);
    started_ = true;
    this->StartRead(&incoming_);
    this->StartCall();
  }

  // The next message into *out; kEnded when the stream is over (see
  // status()); kTimedOut when neither happened by `deadline`.
  StreamRead Next(absl::Time deadline, Message* out) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || done_;
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
    if (queue_.empty()) {
      return done_ ? StreamRead::kEnded : StreamRead::kTimedOut;
    }
    *out = std::move(queue_.front());
    queue_.pop_front();
    if (paused_) {
      // No read is in flight, so none can race this one for incoming_; the
      // hold taken at the pause kept the call alive (no OnDone) until now.
      paused_ = false;
      mu_.Unlock();
      this->StartRead(&incoming_);
      this->RemoveHold();
      mu_.Lock();
    }
    return StreamRead::kMessage;
  }

  // Messages waiting for Next; for tests.
  size_t queued() {
    absl::MutexLock lock(&mu_);
    return queue_.size();
  }

  // The call's status, once Next returned kEnded.
  grpc::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(std::move(incoming_));
      incoming_ = Message();
      if (queue_.size() >= kMaxQueued) {
        // Next starts the next read. Until then the hold keeps the call
        // from finishing (OnDone), which would make that read a use of a
        // finished call.
        this->AddHold();
        paused_ = true;
        return;
      }
    }
    this->StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

 private:
  const std::unique_ptr<grpc::ClientContext> context_;
  bool started_ = false;
  Message incoming_;  // the read in flight, if any
  absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;  // full: no read in flight
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort
