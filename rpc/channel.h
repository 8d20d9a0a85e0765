#pragma once

// Client side: channels with our security, and per-call contexts that carry
// the deadline and the bearer token.

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rpc/limits.h"
#include "rpc/security.h"

namespace cohort::rpc {

// A connection to one server. Immutable after construction; thread-safe (the
// grpc::Channel is).
class Connection {
 public:
  // `dedicated`: the channel gets a connection of its own, not one shared
  // with other channels to the same address, so that the connection closes
  // when this channel goes. `connect_timeout`: how long one attempt to
  // connect (TCP, TLS, HTTP/2's settings) may take before it is retried.
  Connection(std::string address, Security security, bool dedicated = false,
             absl::Duration connect_timeout = kConnectTimeout);

  const std::string& address() const { return address_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // A context for one call: deadline now + timeout, and the token if any.
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Duration timeout) const;

  // Prefixes a failed call's status with what was called and where, so that
  // "connection refused" says which server refused:
  // "Admin.GetClusterState to 127.0.0.1:4000: UNAVAILABLE: ...".
  absl::Status Annotate(absl::string_view method,
                        const grpc::Status& status) const;

  // Why calls cannot reach the server, for errors after a wait for the
  // connection ran out: one call that does not wait for a connection, so
  // that it fails with gRPC's last connection error ("connection refused",
  // a TLS handshake's). OK when it reached the server, or when the
  // connection was still being made at `timeout`, which says nothing new.
  // Blocks up to `timeout`.
  absl::Status ProbeConnection(absl::Duration timeout) const;

 private:
  std::string address_;
  Security security_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace cohort::rpc
