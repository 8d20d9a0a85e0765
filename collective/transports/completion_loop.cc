#include "collective/transports/completion_loop.h"

#include <grpcpp/alarm.h>

#include <algorithm>

namespace cohort::collective {
namespace {

// The loop's thread leaves the queue to RunUntil callers while they come
// back within this long: between the receives of one collective nobody
// need poll, and the next receive polls again.
constexpr absl::Duration kHandBack = absl::Milliseconds(2);

// A RunUntil polls at most this long at a time before it checks `done`.
constexpr absl::Duration kPollSlice = absl::Milliseconds(50);

gpr_timespec GprDeadline(absl::Time time) {
  const timespec ts = absl::ToTimespec(time);
  return gpr_timespec{ts.tv_sec, static_cast<int32_t>(ts.tv_nsec),
                      GPR_CLOCK_REALTIME};
}

}  // namespace

void CompletionLoop::Wake() {
  // An alarm due now completes on the queue; it deletes itself then.
  struct Kick {
    grpc::Alarm alarm;
    CompletionTag tag{[this](bool) { delete this; }};
  };
  auto* kick = new Kick;
  kick->alarm.Set(cq_, gpr_now(GPR_CLOCK_REALTIME), kick->tag.tag());
}

CompletionLoop::CompletionLoop(grpc::CompletionQueue* cq)
    : cq_(cq), thread_([this] { Run(); }) {}

CompletionLoop::~CompletionLoop() { thread_.join(); }

void CompletionLoop::Complete(void* tag, bool ok) {
  static_cast<CompletionTag*>(tag)->Complete(ok);
}

void CompletionLoop::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (shut_down_) return;
        // A waiting RunUntil always takes the queue next.
        const bool wanted = polling_ || waiting_ > 0;
        const absl::Time hand_back = last_run_until_ + kHandBack;
        if (!wanted && absl::Now() >= hand_back) break;
        mu_.AwaitWithDeadline(
            absl::Condition(
                +[](bool* shut_down) { return *shut_down; }, &shut_down_),
            wanted ? absl::Now() + kHandBack : hand_back);
      }
      polling_ = true;
    }
    void* tag = nullptr;
    bool ok = false;
    const bool got = cq_->Next(&tag, &ok);
    if (got) Complete(tag, ok);
    absl::MutexLock lock(&mu_);
    polling_ = false;
    if (!got) {
      shut_down_ = true;
      return;
    }
  }
}

bool CompletionLoop::RunUntil(absl::FunctionRef<bool()> done,
                              absl::Time deadline) {
  if (done()) return true;
  {
    absl::MutexLock lock(&mu_);
    // The thread polling now hands the queue over after its completion;
    // `done` may hold before, or without, one (an abort).
    uint64_t seen = completed_;
    auto free = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !polling_ || shut_down_;
    };
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return free() || completed_ != seen;
    };
    ++waiting_;
    bool finished = false;
    while (!finished) {
      mu_.AwaitWithDeadline(absl::Condition(&changed),
                            std::min(deadline, absl::Now() + kPollSlice));
      if (free()) break;
      seen = completed_;
      mu_.Unlock();
      finished = done() || absl::Now() >= deadline;
      mu_.Lock();
    }
    --waiting_;
    last_run_until_ = absl::Now();
    if (finished) return true;
    if (shut_down_) return false;
    polling_ = true;
  }
  bool shut_down = false;
  while (!done()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    void* tag = nullptr;
    bool ok = false;
    const auto status = cq_->AsyncNext(
        &tag, &ok, GprDeadline(std::min(deadline, now + kPollSlice)));
    if (status == grpc::CompletionQueue::SHUTDOWN) {
      shut_down = true;
      break;
    }
    if (status == grpc::CompletionQueue::GOT_EVENT) {
      Complete(tag, ok);
      absl::MutexLock lock(&mu_);
      if (waiting_ > 0) ++completed_;
    }
  }
  absl::MutexLock lock(&mu_);
  polling_ = false;
  last_run_until_ = absl::Now();
  if (shut_down) shut_down_ = true;
  return true;
}

}  // namespace cohort::collective
