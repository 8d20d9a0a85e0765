#pragma once

// The rendezvous store's logic: keys, values, waiting readers and barriers.
// Waits complete through callbacks, so that a gRPC reactor can park its call
// here and finish it later without blocking a thread.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort::coordinator {

struct StoreLimits {
  size_t max_keys = 100000;
  size_t max_value_bytes = 1 << 20;
  size_t max_key_bytes = 1024;
  // Keys and values together, over all jobs: runaway sets fail, named,
  // instead of taking the coordinator's memory (and every job) with them.
  size_t max_total_bytes = size_t{256} << 20;
};

// Owns one expiry thread between Start() and Shutdown(), which fails waits
// at their deadlines. Thread-safe. Callbacks run without the lock held, on
// the calling thread or the expiry thread, exactly once each.
class StoreManager {
 public:
  using GetCallback = std::function<void(absl::StatusOr<std::string>)>;
  using BarrierCallback = std::function<void(absl::Status)>;
  // Whether the caller of a wait gave up (its call was cancelled, or its
  // process died). Asked under the store's lock, so it must be quick and
  // must not call back into the store.
  using Abandoned = std::function<bool()>;

  // More ranks than any cluster has: a count past it is refused, not
  // waited for.
  static constexpr int kMaxBarrierParticipants = 1 << 16;

  explicit StoreManager(StoreLimits limits = {});
  ~StoreManager();

  void Start();
  // Fails every pending wait with UNAVAILABLE and joins. Idempotent.
  void Shutdown();

  // Sets (or replaces) a key and completes its waiting readers.
  absl::Status Set(const std::string& key, std::string value);
  // `done` gets the value once the key is set, or DEADLINE_EXCEEDED naming
  // the key at `deadline`. A wait whose caller is `abandoned` (checked
  // every few milliseconds) ends with CANCELLED.
  void Get(const std::string& key, absl::Time deadline, GetCallback done,
           Abandoned abandoned = nullptr);
  // `done` gets OK once `participants` distinct ranks have arrived, or an
  // error: DEADLINE_EXCEEDED naming the ranks still missing,
  // FAILED_PRECONDITION when the ranks disagree on the participant count,
  // INVALID_ARGUMENT for a rank or count out of range. An arrival whose
  // caller is `abandoned` is withdrawn (CANCELLED), so that a rank that
  // gave up or died does not count towards the others' release.
  void Barrier(const std::string& name, int participants, int rank,
               absl::Time deadline, BarrierCallback done,
               Abandoned abandoned = nullptr);

  // Drops every key that starts with `prefix` (a finished job's, so that a
  // long-lived coordinator does not fill up); returns how many. Waiting
  // readers and barriers are left to their deadlines.
  size_t ErasePrefix(const std::string& prefix);

  size_t num_keys() const;
  // Get calls parked until their key is set.
  size_t num_waiting_readers() const;
  // Barrier calls parked until their barrier is complete.
  size_t num_barrier_arrivals() const;

 private:
  struct Reader {
    absl::Time deadline;
    GetCallback done;
    Abandoned abandoned;  // may be null
  };
  struct Arrival {
    int rank;
    absl::Time deadline;
    BarrierCallback done;
    Abandoned abandoned;  // may be null
  };
  struct PendingBarrier {
    int participants = 0;
    std::vector<Arrival> arrivals;
    // Ranks refused for expecting another participant count, and that count:
    // a timeout names them as what went wrong, not as merely absent.
    std::map<int, int> disagreed;
  };

  void ExpireLoop();

  const StoreLimits limits_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of values_' keys and values
  std::multimap<std::string, Reader> readers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PendingBarrier> barriers_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread expiry_;
};

}  // namespace cohort::coordinator
