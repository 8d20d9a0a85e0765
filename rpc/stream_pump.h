#pragma once

// Server-streaming calls whose messages come from state kept elsewhere (a
// job's status, a log buffer). One thread, the pump, asks every open stream
// each period whether it has something new and starts its write, so that
// gRPC's callback threads never wait and the source never calls into gRPC.
//
//   class Watch final : public rpc::PumpedWriter<v1::JobStatus> {
//     Step Next() override { ... }   // a message, an end, or nothing yet
//   };
//   auto* watch = new Watch(pump, ...);  // deletes itself when done
//   watch->Begin();
//   return watch;

#include <grpcpp/support/server_callback.h>

#include <optional>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace cohort::rpc {

// What the pump drives. Implemented by PumpedWriter.
class PumpedStream {
 public:
  virtual ~PumpedStream() = default;
  // On the pump thread: write what is new, if no write is in flight.
  virtual void Pump() = 0;
  // The pump is stopping: end the call with `status`.
  virtual void Stop(const grpc::Status& status) = 0;
};

// Owns its thread from construction to Shutdown(). Thread-safe. Must
// outlive every stream added to it: shut it down, then the gRPC server,
// then destroy it.
class StreamPump {
 public:
  // Each open stream costs the pump a Next() every period, and its client
  // a message buffer: beyond this many, a new one is refused.
  static constexpr int kDefaultMaxStreams = 1024;

  explicit StreamPump(absl::Duration period,
                      int max_streams = kDefaultMaxStreams);
  ~StreamPump();
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  // After Shutdown, or with max_streams open, Add stops the stream at once
  // (UNAVAILABLE, RESOURCE_EXHAUSTED).
  void Add(PumpedStream* stream);
  // Waits while `stream` is being pumped; after it returns, it is not again.
  void Remove(PumpedStream* stream);
  // Ends every open stream with UNAVAILABLE, waits (up to `grace`) for them
  // to be removed, and joins the thread. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  void Run();

  const absl::Duration period_;
  const int max_streams_;
  absl::Mutex mu_;
  std::set<PumpedStream*> streams_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification stop_;
  std::thread thread_;
};

// A server-streaming reactor fed by the pump. Subclasses implement Next();
// the reactor deletes itself when the call is done. Thread-safe.
template <typename Message>
class PumpedWriter : public grpc::ServerWriteReactor<Message>,
                     public PumpedStream {
 public:
  // What to do now: write `message` if set, then end the call with
  // `finish` if set (after the write). Neither: nothing new yet.
  struct Step {
    std::optional<Message> message;
    std::optional<grpc::Status> finish;
  };

  // Call once, after construction: from then on the pump drives the call.
  void Begin() { pump_->Add(this); }

  void Pump() final {
    absl::MutexLock lock(&mu_);
    if (writing_ || finishing_) return;
    Step step = Next();
    if (step.message.has_value()) {
      message_ = *std::move(step.message);
      finish_after_write_ = std::move(step.finish);
      writing_ = true;
      this->StartWrite(&message_);
    } else if (step.finish.has_value()) {
      FinishLocked(*step.finish);
    }
  }

  void Stop(const grpc::Status& status) final {
    absl::MutexLock lock(&mu_);
    if (writing_) {
      finish_after_write_ = status;
    } else {
      FinishLocked(status);
    }
  }

  void OnWriteDone(bool ok) final {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                                "the reader left the stream"));
    } else if (finish_after_write_.has_value()) {
      FinishLocked(*finish_after_write_);
    }
  }

  // The reader left (or its deadline passed): a write in flight fails and
  // OnWriteDone finishes; otherwise finish now.
  void OnCancel() final {
    absl::MutexLock lock(&mu_);
    if (!writing_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                                "the reader left the stream"));
    }
  }

  void OnDone() final {
    pump_->Remove(this);
    delete this;
  }

 protected:
  explicit PumpedWriter(StreamPump* pump) : pump_(pump) {}
  ~PumpedWriter() override = default;

  // On the pump thread, never while a write is in flight; must not block.
  virtual Step Next() = 0;

 private:
  void FinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    this->Finish(status);
  }

  StreamPump* const pump_;
  absl::Mutex mu_;
  Message message_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mu_);
};

// A streaming call refused before it started (authentication, a bad
// request): finishes with `status` and deletes itself.
template <typename Message>
class RefusedWriter final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedWriter(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace cohort::rpc
