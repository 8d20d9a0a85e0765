#pragma once

// Test helper: a group of GrpcTransports in one process, one thread per
// rank, since Create returns only once every rank has joined.

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "collective/local_store.h"
#include "collective/store.h"
#include "collective/transports/grpc_transport.h"
#include "common/status_macros.h"

namespace cohort::collective {

// A LocalStore that the test can give up on, as an agent gives up on its
// store when the attempt ends: aborted() turns to `why`, and the calls
// waiting then return it.
class AbortableStore final : public Store {
 public:
  void Abort(absl::Status why) {
    absl::MutexLock lock(&mu_);
    why_ = std::move(why);
  }
  absl::Status Set(const std::string& key, const std::string& value) override {
    return inner_.Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration timeout) override {
    absl::StatusOr<std::string> value;
    COHORT_RETURN_IF_ERROR(InSlices(timeout, [&](absl::Duration slice) {
      value = inner_.Get(key, slice);
      return value.status();
    }));
    return value;
  }
  absl::Status Barrier(const std::string& name, int participants, int rank,
                       absl::Duration timeout) override {
    // Arriving again is arriving once.
    return InSlices(timeout, [&](absl::Duration slice) {
      return inner_.Barrier(name, participants, rank, slice);
    });
  }
  absl::Status aborted() const override {
    absl::MutexLock lock(&mu_);
    return why_;
  }

 private:
  // Runs `wait` with short timeouts until it succeeds, `timeout` passes or
  // the store is aborted, since the inner store's waits cannot be woken.
  template <typename Wait>
  absl::Status InSlices(absl::Duration timeout, Wait wait) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      const absl::Duration slice =
          std::min(deadline - absl::Now(), absl::Milliseconds(50));
      absl::Status waited = wait(std::max(slice, absl::ZeroDuration()));
      if (waited.ok() || absl::Now() >= deadline) return waited;
      COHORT_RETURN_IF_ERROR(aborted());
    }
  }

  LocalStore inner_;
  mutable absl::Mutex mu_;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
};

// Each rank's Create result; `options(rank)` gives the rank's options.
inline std::vector<absl::StatusOr<std::unique_ptr<GrpcTransport>>>
CreateGroupInThreads(Store& store, int size,
                     const std::function<GrpcTransportOptions(int)>& options) {
  std::vector<absl::StatusOr<std::unique_ptr<GrpcTransport>>> created;
  for (int rank = 0; rank < size; ++rank) {
    created.emplace_back(absl::UnknownError("not created"));
  }
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      created[rank] = GrpcTransport::Create(options(rank), store);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  return created;
}

// Ranks 0 and 1 of `group` on loopback, connected within 30 s; `adjust`
// changes each rank's options. The first rank's failure, if any.
inline absl::StatusOr<std::array<std::unique_ptr<GrpcTransport>, 2>> CreatePair(
    Store& store, const std::string& group,
    const std::function<void(int rank, GrpcTransportOptions&)>& adjust = {}) {
  auto created = CreateGroupInThreads(store, 2, [&](int rank) {
    GrpcTransportOptions options{.group = group,
                                 .rank = rank,
                                 .size = 2,
                                 .connect_timeout = absl::Seconds(30)};
    if (adjust) adjust(rank, options);
    return options;
  });
  std::array<std::unique_ptr<GrpcTransport>, 2> pair;
  for (int rank = 0; rank < 2; ++rank) {
    if (!created[rank].ok()) return created[rank].status();
    pair[rank] = *std::move(created[rank]);
  }
  return pair;
}

}  // namespace cohort::collective
