#include "worker_agent/central_storage.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort::agent {

CentralStorage::CentralStorage(int local_replicas) : parties_(local_replicas) {}

void CentralStorage::Publish(SharedBuffer buffer) {
  absl::MutexLock lock(&mu_);
  published_.push_back(std::move(buffer));
}

absl::StatusOr<SharedBuffer> CentralStorage::Await(size_t index,
                                                   absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [&] { return published_.size() > index || !aborted_.ok(); };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "central storage: local replica 0 did not create shared variable "
        "number ",
        index + 1, " in time (do all replicas create the same variables?)"));
  }
  if (!aborted_.ok()) return aborted_;
  return published_[index];
}

absl::Status CentralStorage::Barrier(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  const int64_t round = rounds_;
  if (++arrived_ == parties_) {
    arrived_ = 0;
    ++rounds_;
    return absl::OkStatus();
  }
  auto passed = [&] { return rounds_ != round || !aborted_.ok(); };
  if (!mu_.AwaitWithDeadline(absl::Condition(&passed), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("central storage: ", parties_ - arrived_, " of ", parties_,
                     " local replicas did not reach the barrier in time"));
  }
  // A round that completed counts even if an abort came after it.
  return rounds_ != round ? absl::OkStatus() : aborted_;
}

void CentralStorage::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
}

}  // namespace cohort::agent
