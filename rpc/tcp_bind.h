#pragma once

// Binding a TCP address, with the reasons a bind fails named in an
// operator's terms. Stateless and thread-safe.

#include "absl/status/statusor.h"
#include "common/host_port.h"

namespace cohort::rpc {

struct BoundSocket {
  int fd = -1;   // owned by the caller, who closes it
  int port = 0;  // the port bound (the kernel's pick when asked for 0)
};

// A TCP socket bound to the first of `address`'s resolved addresses that
// binds, with SO_REUSEADDR (connections of an earlier run still in TIME_WAIT
// do not count) and never SO_REUSEPORT (two daemons must not silently share a
// port). It listens with `backlog` when that is positive. `socket_flags` are
// or'ed into the socket type (SOCK_NONBLOCK, SOCK_CLOEXEC).
//
// Errors name `address` and the cause: UNAVAILABLE when the port is in use,
// as it may come free (an earlier instance still stopping); otherwise
// FAILED_PRECONDITION (the host does not resolve, is not an address of this
// host, or the port needs privilege), which no retry fixes.
absl::StatusOr<BoundSocket> BindTcp(const HostPort& address, int socket_flags,
                                    int backlog);

}  // namespace cohort::rpc
