#include "ps_server/snapshot_loop.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {

SnapshotLoop::SnapshotLoop(VariableStore* store, SnapshotDir* dir,
                           SnapshotLoopOptions options)
    : store_(store), dir_(dir), options_(options) {}

SnapshotLoop::~SnapshotLoop() { Shutdown(); }

void SnapshotLoop::Start(std::optional<SnapshotRecord> restored) {
  absl::MutexLock lock(&mu_);
  if (started_ || stopping_) return;
  started_ = true;
  last_ = std::move(restored);
  written_generation_ = store_->generation();
  attempted_updates_.store(store_->updates());
  thread_ = std::thread([this] { Run(); });
  expirer_ = std::thread([this] { ExpireWaiters(); });
}

void SnapshotLoop::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
    waiters_changed_.Signal();
  }
  if (expirer_.joinable()) expirer_.join();
  if (thread_.joinable()) thread_.join();
  // Requests that arrived before the loop ever started.
  std::vector<Done> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(requests_);
  }
  for (Done& done : left) {
    done(absl::UnavailableError("the ps shard is shutting down"));
  }
}

bool SnapshotLoop::UpdatesDue() const {
  if (options_.every_updates <= 0) return false;
  return store_->updates() - attempted_updates_.load() >=
         options_.every_updates;
}

void SnapshotLoop::NoteUpdates() {
  if (!UpdatesDue()) return;
  absl::MutexLock lock(&mu_);
  wake_.Signal();
}

void SnapshotLoop::SnapshotNow(Done done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      requests_.push_back(std::move(done));
      wake_.Signal();
      return;
    }
  }
  done(absl::UnavailableError("the ps shard is shutting down"));
}

void SnapshotLoop::WhenDurable(int64_t updates, std::function<void()> then) {
  {
    absl::MutexLock lock(&mu_);
    const int64_t durable = last_.has_value() ? last_->updates : 0;
    if (updates > durable && started_ && !stopping_ && failures_ == 0) {
      waiters_.push_back(
          {updates, absl::Now() + options_.max_wait, std::move(then)});
      wake_.Signal();
      waiters_changed_.Signal();
      return;
    }
  }
  then();
}

std::optional<SnapshotRecord> SnapshotLoop::last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

bool SnapshotLoop::Holds(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  return written_generation_ >= generation;
}

void SnapshotLoop::Run() {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::Now() + options_.interval;
  while (true) {
    while (!stopping_ && requests_.empty() && waiters_.empty() &&
           !UpdatesDue() && absl::Now() < next) {
      wake_.WaitWithDeadline(&mu_, next);
    }
    const bool stopping = stopping_;
    std::vector<Done> requests;
    requests.swap(requests_);
    mu_.Unlock();
    bool unchanged = false;
    const absl::StatusOr<SnapshotRecord> result =
        WriteIfChanged(/*force=*/!requests.empty(), &unchanged);
    // "Nothing changed" is not a failure; told apart by the flag, since a
    // write's own errors carry errno's codes.
    const bool failed = !result.ok() && !unchanged;
    mu_.Lock();
    // Before the requests hear of it: a wait they start next sees the
    // outcome.
    if (failed && failures_++ == 0) {
      spdlog::warn(
          "pushes are acknowledged without waiting for a snapshot until one "
          "is written again");
    } else if (result.ok() && failures_ > 0) {
      spdlog::info("snapshots written again, after {} failed", failures_);
      failures_ = 0;
    }
    mu_.Unlock();
    for (Done& done : requests) done(result);
    mu_.Lock();
    // Waiters whose updates are now on disk go; so do all of them when the
    // write failed or the loop stops. (Those past their deadline went
    // already: ExpireWaiters.)
    std::vector<std::function<void()>> ready;
    const int64_t durable = last_.has_value() ? last_->updates : 0;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->updates <= durable || failed || stopping) {
        ready.push_back(std::move(it->then));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    if (!ready.empty()) {
      mu_.Unlock();
      for (auto& then : ready) then();
      mu_.Lock();
    }
    if (failed && !stopping_) {
      // A failing disk is not retried in a tight loop, nor is the whole
      // shard captured every second while it fails.
      absl::Duration pause = options_.retry_after_failure;
      for (int k = 1; k < failures_ && pause < options_.max_retry_after_failure;
           ++k) {
        pause *= 2;
      }
      const absl::Time resume =
          absl::Now() + std::min(pause, options_.max_retry_after_failure);
      while (!stopping_ && requests_.empty() && absl::Now() < resume) {
        wake_.WaitWithDeadline(&mu_, resume);
      }
    }
    next = absl::Now() + options_.interval;
    if (stopping) return;
  }
}

void SnapshotLoop::ExpireWaiters() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time earliest = absl::InfiniteFuture();
    for (const Waiter& waiter : waiters_) {
      earliest = std::min(earliest, waiter.deadline);
    }
    if (absl::Now() < earliest) {
      waiters_changed_.WaitWithDeadline(&mu_, earliest);
      continue;
    }
    std::vector<std::function<void()>> late;
    const absl::Time now = absl::Now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (now >= it->deadline) {
        late.push_back(std::move(it->then));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    spdlog::warn(
        "{} push(es) acknowledged before a snapshot held them: snapshots "
        "take longer than {}",
        late.size(), absl::FormatDuration(options_.max_wait));
    mu_.Unlock();
    for (auto& then : late) then();
    mu_.Lock();
  }
}

absl::StatusOr<SnapshotRecord> SnapshotLoop::WriteIfChanged(bool force,
                                                            bool* unchanged) {
  {
    absl::MutexLock lock(&mu_);
    if (store_->generation() == written_generation_) {
      attempted_updates_.store(store_->updates());
      if (last_.has_value()) return *last_;
      if (!force) {
        *unchanged = true;
        return absl::FailedPreconditionError("nothing changed, none written");
      }
    }
  }
  if (options_.before_write) options_.before_write();
  int64_t generation = 0;
  const v1::PsSnapshot snapshot = store_->Capture(&generation);
  attempted_updates_.store(snapshot.updates());
  absl::StatusOr<std::string> path = dir_->Write(snapshot);
  if (!path.ok()) {
    spdlog::error("ps shard {}: snapshot failed: {}", snapshot.shard_id(),
                  path.status().ToString());
    return path.status();
  }
  SnapshotRecord record{.path = *path,
                        .updates = snapshot.updates(),
                        .unix_ms = snapshot.unix_ms()};
  spdlog::debug("ps shard {}: snapshot {} ({} updates, {} variables)",
                snapshot.shard_id(), record.path, record.updates,
                snapshot.variables_size());
  absl::MutexLock lock(&mu_);
  last_ = record;
  written_generation_ = generation;
  return record;
}

}  // namespace cohort::ps
