#pragma once

// Reads the live state of parameter-server tasks (ParameterServer.GetPsStatus)
// for the admin API. A heartbeat carries a shard's state once a second, so a
// status taken right after a short job would show the shard as it was before
// the job's last updates, or before the job at all; asking the ps is the only
// way to show what it holds now.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cohort/v1/ps.pb.h"
#include "rpc/channel.h"
#include "rpc/security.h"

namespace cohort::coordinator {

// Owns one connection per ps address, made on first use. Thread-safe.
class PsStatusReader {
 public:
  using Results = std::vector<absl::StatusOr<v1::PsStatus>>;

  PsStatusReader(rpc::Security security, absl::Duration timeout);

  // Asks every address at once, without blocking, and calls `done` exactly
  // once with one result per address, in order, when all have answered or
  // timed out. `done` runs on a gRPC thread, or on this one when
  // `addresses` is empty.
  void ReadAll(const std::vector<std::string>& addresses,
               std::function<void(Results)> done);

 private:
  std::shared_ptr<rpc::Connection> ConnectionTo(const std::string& address);

  const rpc::Security security_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<rpc::Connection>> connections_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::coordinator
