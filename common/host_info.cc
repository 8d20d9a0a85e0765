#include "common/host_info.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

std::string AddressString(const sockaddr* addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr,
              buf, sizeof(buf));
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr,
              buf, sizeof(buf));
  }
  return buf;
}

// Every address of every interface, as (interface name, address).
std::vector<std::pair<std::string, std::string>> InterfaceAddresses() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    std::string address = AddressString(it->ifa_addr);
    if (!address.empty()) out.emplace_back(it->ifa_name, std::move(address));
  }
  freeifaddrs(list);
  return out;
}

std::set<std::string> LocalAddresses() {
  std::set<std::string> out;
  for (auto& [name, address] : InterfaceAddresses()) out.insert(address);
  return out;
}

// The addresses `name` resolves to through getaddrinfo, as inet_ntop
// writes them; NOT_FOUND with the resolver's reason.
absl::StatusOr<std::vector<std::string>> GetAddrInfo(const std::string& name) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int error = getaddrinfo(name.c_str(), nullptr, &hints, &result);
  if (error != 0) {
    return absl::NotFoundError(absl::StrCat(
        name, " does not resolve: ",
        error == EAI_SYSTEM ? strerror(errno) : gai_strerror(error)));
  }
  std::vector<std::string> addresses;
  for (addrinfo* it = result; it != nullptr; it = it->ai_next) {
    addresses.push_back(AddressString(it->ai_addr));
  }
  freeaddrinfo(result);
  return addresses;
}

// Answers PrefetchHostLookups keeps, by host.
struct KeptLookup {
  absl::StatusOr<std::vector<std::string>> addresses;
  absl::Time expires = absl::InfiniteFuture();  // while pending: never
  bool pending = true;
};
constexpr absl::Duration kKeepLookups = absl::Minutes(1);
constexpr int kMaxConcurrentLookups = 64;

struct LookupCache {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, KeptLookup> kept ABSL_GUARDED_BY(mu);
  HostResolver resolver ABSL_GUARDED_BY(mu);
};

LookupCache& Cache() {
  static LookupCache* cache = new LookupCache();  // never destroyed: detached
  return *cache;                                  // lookups may outlive main
}

// A kept answer for `name`, or the lookup itself.
absl::StatusOr<std::vector<std::string>> Resolve(const std::string& name) {
  LookupCache& cache = Cache();
  HostResolver resolver;
  {
    absl::MutexLock lock(&cache.mu);
    auto it = cache.kept.find(absl::AsciiStrToLower(name));
    if (it != cache.kept.end()) {
      if (absl::Now() < it->second.expires) return it->second.addresses;
      cache.kept.erase(it);
    }
    resolver = cache.resolver;
  }
  return resolver ? resolver(name) : GetAddrInfo(name);
}

bool IsLoopbackLiteral(absl::string_view host) {
  return host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string SharedMemoryDomain() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  char ipc[128] = {};
  if (readlink("/proc/self/ns/ipc", ipc, sizeof(ipc) - 1) < 0) ipc[0] = 0;
  struct stat shm {};
  if (stat("/dev/shm", &shm) != 0) shm = {};
  // Without a boot id the kernel cannot be told apart: then only this very
  // process is known to share with itself.
  if (boot_id.empty()) return absl::StrCat("pid:", getpid(), "@", Hostname());
  return absl::StrCat(boot_id, "/", ipc, "/shm:", shm.st_dev, ":", shm.st_ino);
}

bool IsLocalHost(absl::string_view host) {
  const std::string lower = absl::AsciiStrToLower(host);
  if (lower == "localhost" || IsLoopbackLiteral(lower)) return true;
  if (lower == absl::AsciiStrToLower(Hostname())) return true;
  const std::set<std::string> local = LocalAddresses();
  if (local.contains(lower)) return true;
  const absl::StatusOr<std::vector<std::string>> addresses = Resolve(lower);
  if (!addresses.ok()) return false;
  return std::any_of(
      addresses->begin(), addresses->end(), [&](const std::string& address) {
        return IsLoopbackLiteral(address) || local.contains(address);
      });
}

std::vector<std::string> LoopbackOnlyAddresses(absl::string_view host) {
  const std::string lower = absl::AsciiStrToLower(host);
  if (IsLoopbackLiteral(lower)) return {lower};
  const absl::StatusOr<std::vector<std::string>> addresses = Resolve(lower);
  if (!addresses.ok() || addresses->empty() ||
      !std::all_of(addresses->begin(), addresses->end(),
                   [](const std::string& a) { return IsLoopbackLiteral(a); })) {
    return {};
  }
  return *addresses;
}

absl::Status ResolveHost(absl::string_view host) {
  return Resolve(std::string(host)).status();
}

std::vector<std::string> PrefetchHostLookups(
    const std::vector<std::string>& hosts, absl::Duration timeout) {
  LookupCache& cache = Cache();
  auto todo = std::make_shared<std::vector<std::string>>();
  auto next = std::make_shared<std::atomic<size_t>>(0);
  HostResolver resolver;
  {
    absl::MutexLock lock(&cache.mu);
    resolver = cache.resolver ? cache.resolver : GetAddrInfo;
    for (const std::string& host : hosts) {
      // Names are looked up and kept without case, as DNS compares them.
      auto [it, inserted] = cache.kept.try_emplace(absl::AsciiStrToLower(host));
      if (!inserted && absl::Now() < it->second.expires) continue;
      it->second = KeptLookup{.addresses = absl::NotFoundError(
                                  absl::StrCat(host, " did not resolve within ",
                                               absl::FormatDuration(timeout)))};
      todo->push_back(it->first);
    }
  }
  // Detached: a lookup cannot be cancelled, and the caller waits for none
  // past its timeout.
  const int threads =
      std::min<int>(kMaxConcurrentLookups, static_cast<int>(todo->size()));
  for (int t = 0; t < threads; ++t) {
    std::thread([todo, next, resolver, &cache] {
      for (size_t i = (*next)++; i < todo->size(); i = (*next)++) {
        absl::StatusOr<std::vector<std::string>> addresses =
            resolver((*todo)[i]);
        absl::MutexLock lock(&cache.mu);
        KeptLookup& kept = cache.kept[(*todo)[i]];
        kept = KeptLookup{.addresses = std::move(addresses),
                          .expires = absl::Now() + kKeepLookups,
                          .pending = false};
      }
    }).detach();
  }
  std::vector<std::string> unanswered;
  absl::MutexLock lock(&cache.mu);
  auto answered = [&] {
    cache.mu.AssertHeld();
    for (const std::string& host : *todo) {
      if (cache.kept[host].pending) return false;
    }
    return true;
  };
  cache.mu.AwaitWithTimeout(absl::Condition(&answered), timeout);
  for (const std::string& host : *todo) {
    if (cache.kept[host].pending) unanswered.push_back(host);
  }
  return unanswered;
}

void SetHostResolverForTesting(HostResolver resolver) {
  LookupCache& cache = Cache();
  absl::MutexLock lock(&cache.mu);
  cache.resolver = std::move(resolver);
  cache.kept.clear();
}

std::string InterfaceWithAddress(absl::string_view address) {
  for (auto& [name, local] : InterfaceAddresses()) {
    if (absl::EqualsIgnoreCase(local, address)) return name;
  }
  return "";
}

std::vector<std::string> AddressesOfInterface(absl::string_view name) {
  std::vector<std::string> out;
  for (auto& [interface, address] : InterfaceAddresses()) {
    if (interface == name) out.push_back(std::move(address));
  }
  return out;
}

namespace {

// The kernel's ephemeral port range (net.ipv4.ip_local_port_range), from
// which it picks the port of every socket bound to port 0 and of every
// outgoing connection.
std::pair<int, int> EphemeralPorts() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;  // Linux's defaults
  if (!(in >> low >> high) || low < 1 || high < low || high > 65535) {
    return {32768, 60999};
  }
  return {low, high};
}

// Whether `port` on `address` can be bound now.
absl::StatusOr<bool> CanBind(const sockaddr_in& address, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  sockaddr_in at = address;
  at.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound =
      bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof(at)) == 0;
  close(fd);
  return bound;
}

}  // namespace

absl::StatusOr<int> PickUnusedPort(absl::string_view host) {
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  if (inet_pton(AF_INET, std::string(host).c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PickUnusedPort: not an IPv4 address: ", host));
  }
  // Outside the ephemeral range, or the kernel could hand the port to a
  // socket bound to port 0, or to an outgoing connection, before its user
  // binds it; a connection would then hold it for as long as it lasts.
  const auto [low, high] = EphemeralPorts();
  std::vector<std::pair<int, int>> ranges;  // [first, last]
  if (low - 1 >= 10000) ranges.push_back({10000, low - 1});
  if (high + 1 <= 65535) ranges.push_back({high + 1, 65535});
  int span = 0;
  for (const auto& [first, last] : ranges) span += last - first + 1;
  absl::BitGen random;
  for (int attempt = 0; span > 0 && attempt < 100; ++attempt) {
    int pick = absl::Uniform(random, 0, span);
    for (const auto& [first, last] : ranges) {
      if (pick <= last - first) {
        pick += first;
        break;
      }
      pick -= last - first + 1;
    }
    COHORT_ASSIGN_OR_RETURN(const bool free, CanBind(address, pick));
    if (free) return pick;
  }
  return absl::UnavailableError(
      absl::StrCat("no free port on ", host, " outside the ephemeral range ",
                   low, "-", high, " (net.ipv4.ip_local_port_range)"));
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

std::string ProcessCommandLine(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  std::string line = contents.str();
  std::replace(line.begin(), line.end(), '\0', ' ');
  return std::string(absl::StripTrailingAsciiWhitespace(line));
}

}  // namespace cohort
