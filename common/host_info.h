#pragma once

// Facts about this host and process, read from the OS.

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

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

// Looks `hosts` up through getaddrinfo all at once (up to 64 at a time),
// waiting at most `timeout`, and keeps each answer for a minute, during
// which IsLocalHost and ResolveHost answer for that host at once: a cluster
// spec of many hosts behind a resolver that does not answer costs one
// timeout, not one per host and per use. A lookup still going at the
// deadline goes on; until it ends its host counts as not resolving (NOT_FOUND
// "... did not resolve within <timeout>"). Returns those hosts. Thread-safe.
std::vector<std::string> PrefetchHostLookups(
    const std::vector<std::string>& hosts, absl::Duration timeout);

// The addresses `host` resolves to when every one is a loopback address
// ("localhost", or a hostname that /etc/hosts maps to 127.0.1.1 as Debian
// does); empty when any is not, or the host does not resolve.
std::vector<std::string> LoopbackOnlyAddresses(absl::string_view host);

// Tests only: replaces getaddrinfo for the lookups above (null restores
// it), and forgets every kept answer.
using HostResolver =
    std::function<absl::StatusOr<std::vector<std::string>>(const std::string&)>;
void SetHostResolverForTesting(HostResolver resolver);

// The name of the interface that holds `address`, a literal address as
// inet_ntop writes it ("198.18.0.2", "fd00::2"); "" when none does.
std::string InterfaceWithAddress(absl::string_view address);

// The addresses of interface `name`, in the order the kernel lists them
// (getifaddrs), as inet_ntop writes them.
std::vector<std::string> AddressesOfInterface(absl::string_view name);

// A TCP port on `host` that was free a moment ago, outside the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): no socket bound to port 0
// and no outgoing connection can take it before its user binds it, only
// another caller of this. UNAVAILABLE after 100 taken ports in a row.
absl::StatusOr<int> PickUnusedPort(absl::string_view host = "127.0.0.1");

// Resident set size of this process, in bytes (0 when unknown).
int64_t ResidentBytes();

// The command line of a process, arguments joined by spaces ("" if gone).
std::string ProcessCommandLine(pid_t pid);

}  // namespace cohort
