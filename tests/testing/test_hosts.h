#pragma once

// Test hosts for e2e tests across machines, on one machine: a set of network
// namespaces, each with its own hostname, IPC namespace and /dev/shm, joined
// by a bridge with addresses in 198.18.0.0/15, made and faulted by
// tests/testing/testhosts.sh (which users can run by hand too). The test
// process itself stays in its own namespace and reaches the hosts through
// the bridge's address.
//
//   absl::StatusOr<std::unique_ptr<TestHosts>> hosts = TestHosts::Create(3);
//   if (!hosts.ok()) GTEST_SKIP() << hosts.status();   // not root, say
//   Subprocess::Spawn({.argv = (*hosts)->Command(1, {"cohort-agent", ...})});
//   (*hosts)->SetLink(2, false);                         // cut host 2

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::testing {

// Owns the set: the destructor removes every namespace, link and holder
// process it made, whatever state the test left them in. A set left behind
// by a test process that was killed is removed by the next Create.
// Not thread-safe.
class TestHosts {
 public:
  // Makes hosts 1..n. FAILED_PRECONDITION, saying why, where this process
  // cannot (not root, tools missing): tests skip with that message.
  static absl::StatusOr<std::unique_ptr<TestHosts>> Create(int n);
  ~TestHosts();

  int size() const { return n_; }
  // Host i's address, e.g. "198.18.3.2"; i = 0 is the bridge, where the
  // test process is reached.
  std::string address(int i) const;
  std::string hostname(int i) const;  // "<set>-<i>"

  // `argv` run on host i: its network, hostname, IPC and /dev/shm. The
  // wrapper execs, so the spawned pid is the command's own.
  std::vector<std::string> Command(int i, std::vector<std::string> argv) const;

  // Gives host i another address on its link, e.g. "198.19.0.2/24": a
  // network of its own for the data plane.
  absl::Status AddAddress(int i, const std::string& cidr);

  // Faults on host i's link, both directions.
  absl::Status SetLink(int i, bool up);
  absl::Status LimitRate(int i, const std::string& rate);  // "100mbit"
  absl::Status AddLoss(int i, double percent);
  // Drops new TCP connections to host i except to `ports`
  // ("2222,20000:20099"), as a host firewall would.
  absl::Status Firewall(int i, const std::string& ports);
  absl::Status ClearFaults(int i);  // the firewall too

  // The path of testhosts.sh in the source tree.
  static std::string Script();

 private:
  TestHosts(std::string name, int n, int subnet);
  absl::Status Run(std::vector<std::string> args) const;

  const std::string name_;
  const int n_;
  const int subnet_;
};

}  // namespace cohort::testing
