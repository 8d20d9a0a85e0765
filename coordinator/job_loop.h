#pragma once

// The coordinator's job clock: one thread that, every period, shows the
// JobManager the agents' states (from the ClusterManager), lets it advance
// the jobs, and saves the job table to the state dir when it changed.

#include <deque>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "coordinator/cluster_manager.h"
#include "coordinator/job_manager.h"
#include "coordinator/library_store.h"
#include "coordinator/store_manager.h"

namespace cohort::coordinator {

// The agents' view the JobManager needs, from the cluster's task table.
std::vector<AgentView> AgentViews(const ClusterManager& cluster,
                                  absl::Time now);

// Owns its thread between Start() and Shutdown(); `cluster` and `jobs` are
// not owned. Start and Shutdown from one thread; Shutdown is idempotent.
class JobLoop {
 public:
  // `table_path`: where the job table is saved; empty to keep none.
  // `store` (not owned; may be null) loses the keys of ended attempts.
  // `libraries` (not owned; may be null) loses the libraries no job in the
  // table uses, once they have gone unused for kLibraryGrace.
  JobLoop(const ClusterManager* cluster, JobManager* jobs, StoreManager* store,
          std::string table_path, LibraryStore* libraries = nullptr,
          absl::Duration period = absl::Milliseconds(100));

  // Long enough for any submission to name the library it has just
  // uploaded or found stored.
  static constexpr absl::Duration kLibraryGrace = absl::Hours(1);
  ~JobLoop();

  // Restores the table saved at table_path, if any; DATA_LOSS when it is
  // unreadable (the file is left for a person to look at).
  absl::Status Restore();
  void Start();
  // Stops the loop and saves the table.
  void Shutdown();
  // After Shutdown, once the launched tasks have stopped: records a job
  // whose replicas all finished meanwhile (JobManager::SettleFinished) and
  // saves the table again.
  void SaveFinal();
  // Writes the table now if it changed: a submission is saved before it
  // is acknowledged, so that a coordinator killed right after loses
  // nothing it accepted. Thread-safe.
  absl::Status SaveNow();

 private:
  void Run();
  absl::Status Save(absl::Time now, bool force) ABSL_LOCKS_EXCLUDED(save_mu_);
  // Drops the store keys of attempts the job manager retired, and again a
  // while later, for an agent that set a key as its attempt was ending.
  void ForgetRetired(absl::Time now);
  // Every kLibrarySweep: removes the libraries no job uses.
  void RemoveUnusedLibraries(absl::Time now);

  const ClusterManager* const cluster_;
  JobManager* const jobs_;
  StoreManager* const store_;
  LibraryStore* const libraries_;
  absl::Time next_library_sweep_;                                // loop only
  std::deque<std::pair<absl::Time, std::string>> second_sweep_;  // loop only
  const std::string table_path_;
  const absl::Duration period_;
  // Held across taking a snapshot and writing it, so that an older table
  // never replaces a newer one.
  absl::Mutex save_mu_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace cohort::coordinator
