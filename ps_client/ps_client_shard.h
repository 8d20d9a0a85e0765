#pragma once

// PsClient's per-shard state, shared by ps_client.cc (the data path) and
// ps_client_recovery.cc. Internal to the ps client library.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/ps.grpc.pb.h"
#include "ps_client/incarnation_tracker.h"
#include "ps_client/ps_client.h"
#include "rpc/channel.h"

namespace cohort::ps {

// One ps task: its connection, and what its answers told us.
struct PsClient::Shard {
  Shard(int id, const std::string& address, const rpc::Security& security)
      : id(id),
        connection(address, security),
        stub(v1::ParameterServer::NewStub(connection.channel())) {}

  const int id;
  const rpc::Connection connection;
  const std::unique_ptr<v1::ParameterServer::Stub> stub;

  // Numbers a call to this shard for Observe; taken before it is sent.
  uint64_t StartCall() {
    absl::MutexLock lock(&mu);
    return incarnations.StartCall();
  }

  absl::Mutex mu;
  IncarnationTracker incarnations ABSL_GUARDED_BY(mu);
  int64_t updates_seen ABSL_GUARDED_BY(mu) = 0;  // of the current incarnation
};

}  // namespace cohort::ps
