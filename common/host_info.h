#pragma once

// Facts about this host and process, read from the OS.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

std::string Hostname();

// Where POSIX shared memory is shared: the kernel instance (its boot id), the
// IPC namespace and the filesystem behind /dev/shm. Two processes whose
// domains are equal open the same shm_open names; equal hostnames or
// addresses prove nothing (containers, network namespaces, NAT).
std::string SharedMemoryDomain();

// True when `host` (a name or a literal address) names this machine:
// localhost, a loopback address, our hostname, or an address of one of our
// interfaces. Names are resolved once through getaddrinfo.
bool IsLocalHost(absl::string_view host);

// OK when `host` (a name or a literal address) resolves through
// getaddrinfo; otherwise NOT_FOUND with the resolver's reason.
absl::Status ResolveHost(absl::string_view host);

// The name of the interface that holds `address`, a literal address as
// inet_ntop writes it ("198.18.0.2", "fd00::2"); "" when none does.
std::string InterfaceWithAddress(absl::string_view address);

// The addresses of interface `name`, in the order the kernel lists them
// (getifaddrs), as inet_ntop writes them.
std::vector<std::string> AddressesOfInterface(absl::string_view name);

// A TCP port on `host` that was free a moment ago (bind to 0, read, close).
absl::StatusOr<int> PickUnusedPort(absl::string_view host = "127.0.0.1");

// Resident set size of this process, in bytes (0 when unknown).
int64_t ResidentBytes();

// The command line of a process, arguments joined by spaces ("" if gone).
std::string ProcessCommandLine(pid_t pid);

}  // namespace cohort
