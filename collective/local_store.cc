#include "collective/local_store.h"

#include "absl/strings/str_cat.h"

namespace cohort::collective {

absl::Status LocalStore::Set(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  values_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> LocalStore::Get(const std::string& key,
                                            absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return values_.contains(key);
  };
  ++waiting_readers_;
  const bool set = mu_.AwaitWithTimeout(absl::Condition(&present), timeout);
  --waiting_readers_;
  if (!set) {
    return absl::DeadlineExceededError(
        absl::StrCat("store key \"", key, "\" was not set within ",
                     absl::FormatDuration(timeout)));
  }
  return values_[key];
}

int LocalStore::waiting_readers() const {
  absl::MutexLock lock(&mu_);
  return waiting_readers_;
}

absl::Status LocalStore::Barrier(const std::string& name, int participants,
                                 int rank, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  std::set<int>& arrived = barriers_[name];
  arrived.insert(rank);
  auto full = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(arrived.size()) >= participants;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&full), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "barrier \"", name, "\": ", arrived.size(), " of ", participants,
        " ranks arrived within ", absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

}  // namespace cohort::collective
