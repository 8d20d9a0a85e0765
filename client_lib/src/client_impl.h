#pragma once

// The connection behind a cohort::Client, shared by the files that
// implement its calls (client.cc, client_calls.cc). Immutable after
// construction; thread-safe, as the gRPC stubs are.

#include <algorithm>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "cohort/client.h"
#include "cohort/v1/coordinator.grpc.pb.h"
#include "cohort/v1/job.grpc.pb.h"
#include "rpc/channel.h"

namespace cohort {

struct Client::Impl {
  Impl(std::string address, rpc::Security security, absl::Duration timeout)
      : connection(
            std::move(address), std::move(security),
            /*dedicated=*/false,
            // A slow link may take all of a call's time to connect,
            // up to a bound past which an attempt is better retried.
            std::clamp(timeout, rpc::kConnectTimeout, rpc::kMaxConnectTimeout)),
        admin(v1::Admin::NewStub(connection.channel())),
        jobs(v1::Jobs::NewStub(connection.channel())),
        rpc_timeout(timeout) {}

  rpc::Connection connection;
  std::unique_ptr<v1::Admin::Stub> admin;
  std::unique_ptr<v1::Jobs::Stub> jobs;
  absl::Duration rpc_timeout;
};

}  // namespace cohort
