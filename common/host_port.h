#pragma once

// Network addresses as users write them: "host:port" or "[v6]:port".
// Pure functions; thread-compatible.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// A "host:port" or "[v6]:port" address, split and validated.
struct HostPort {
  std::string host;  // without brackets
  int port = 0;

  std::string ToString() const;  // brackets an IPv6 host
  // 0.0.0.0 or ::, which a server binds to serve on every interface.
  bool IsWildcard() const { return host == "0.0.0.0" || host == "::"; }
  // localhost, 127.0.0.0/8 or ::1: only this host can reach it.
  bool IsLoopback() const;
};

// How a process on this host dials a server listening on `address`: a
// wildcard host becomes loopback (0.0.0.0 -> 127.0.0.1, :: -> ::1). Other
// addresses, and text that does not parse, are returned as they are.
std::string LocalDialAddress(absl::string_view address);

// Parses "host:port". `allow_port_zero` is for listen addresses, where 0 means
// "pick a free port". Errors name the input and what is wrong.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       bool allow_port_zero = false);

// As ParseHostPort, but the message holds only the reason, so that each
// caller can say where the address came from.
absl::StatusOr<HostPort> SplitHostPort(absl::string_view text,
                                       bool allow_port_zero);

// Ports a server may bind, first..last inclusive, so that a firewall can
// let them through. Empty (first = 0): any free port.
struct PortRange {
  int first = 0;
  int last = 0;

  bool empty() const { return first == 0; }
  int size() const { return empty() ? 0 : last - first + 1; }
  std::string ToString() const;  // "20000-20099", or "20000" for one port
};

// Parses "FIRST-LAST" or a single "PORT"; "" is the empty range. Errors
// name the input and what is wrong.
absl::StatusOr<PortRange> ParsePortRange(absl::string_view text);

// A comparable form of an address: hostnames are case-insensitive, one
// IPv6 address has many spellings ("::1" and "0::1"), and "localhost" is
// 127.0.0.1.
std::string AddressKey(const HostPort& address);

}  // namespace cohort
