#include "rpc/stream_pump.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace cohort::rpc {

StreamPump::StreamPump(absl::Duration period, int max_streams)
    : period_(period), max_streams_(max_streams), thread_([this] { Run(); }) {}

StreamPump::~StreamPump() { Shutdown(); }

void StreamPump::Add(PumpedStream* stream) {
  absl::MutexLock lock(&mu_);
  if (stopped_) {
    stream->Stop(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "the server is shutting down"));
    // Its OnDone calls Remove, which finds nothing: harmless.
    return;
  }
  if (streams_.size() >= static_cast<size_t>(max_streams_)) {
    stream->Stop(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat(streams_.size(),
                     " streams (watches, followed logs) are open, the most "
                     "this server serves at once; end some and try again")));
    return;
  }
  streams_.insert(stream);
}

void StreamPump::Remove(PumpedStream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

void StreamPump::Run() {
  while (!stop_.WaitForNotificationWithTimeout(period_)) {
    // Held while pumping, so that Remove waits and no stream is deleted
    // under the pump. Pump never blocks: it only starts a write.
    absl::MutexLock lock(&mu_);
    for (PumpedStream* stream : streams_) stream->Pump();
  }
}

void StreamPump::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  for (PumpedStream* stream : streams_) {
    stream->Stop(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "the server is shutting down"));
  }
  // Each removes itself once gRPC is done with it.
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](std::set<PumpedStream*>* streams) { return streams->empty(); },
          &streams_),
      grace);
}

}  // namespace cohort::rpc
