#pragma once

// A Store in process memory, for groups whose ranks are threads of one
// process (the replicas of one agent, and tests).

#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collective/store.h"

namespace cohort::collective {

// Thread-safe.
class LocalStore final : public Store {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override;
  absl::Status Barrier(const std::string& name, int participants, int rank,
                       absl::Duration timeout) override;

  // Readers waiting in Get for a key not yet set.
  int waiting_readers() const;

 private:
  mutable absl::Mutex mu_;
  int waiting_readers_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  // Ranks that reached each barrier; a barrier opens once full and stays
  // open (names are unique per use).
  std::map<std::string, std::set<int>> barriers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::collective
