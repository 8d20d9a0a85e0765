#include "common/trace.h"

#include "absl/time/clock.h"

namespace cohort {
namespace {

thread_local TraceRecorder* current_recorder = nullptr;

}  // namespace

TraceRecorder::TraceRecorder(size_t max_events) : max_events_(max_events) {}

void TraceRecorder::Add(TraceEvent event) {
  absl::MutexLock lock(&mu_);
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

std::vector<TraceEvent> TraceRecorder::Events(int64_t* dropped) const {
  absl::MutexLock lock(&mu_);
  *dropped = dropped_;
  return events_;
}

TraceRecorder::Scope::Scope(TraceRecorder* recorder)
    : previous_(current_recorder) {
  current_recorder = recorder;
}

TraceRecorder::Scope::~Scope() { current_recorder = previous_; }

TraceRecorder* TraceRecorder::Current() { return current_recorder; }

ScopedSpan::ScopedSpan(const char* name) : recorder_(current_recorder) {
  if (recorder_ == nullptr) return;
  event_.name = name;
  event_.start_unix_ns = absl::GetCurrentTimeNanos();
}

ScopedSpan::~ScopedSpan() {
  if (recorder_ == nullptr) return;
  event_.duration_ns = absl::GetCurrentTimeNanos() - event_.start_unix_ns;
  recorder_->Add(std::move(event_));
}

}  // namespace cohort
