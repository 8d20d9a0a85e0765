#pragma once

// A Cohort cluster spread over test hosts the way an operator runs one over
// machines: the coordinator with --launch=none on its own host, and each
// task started on its host from that host's TF_CONFIG, as systemd or
// Kubernetes would. The test process talks to the coordinator through the
// hosts' bridge.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/client.h"
#include "common/subprocess.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/test_hosts.h"

namespace cohort::testing {

// Where one task of the spec runs.
struct HostTask {
  std::string type;  // "chief", "worker", "ps"
  int index = 0;
  int host = 0;  // TestHosts index
  // Another host, on which a delay_relay forwards every connection to this
  // task (HostClusterOptions::relay_delay each way): the cluster spec names
  // the relay's host, and the task serves on every interface and registers
  // that address, so that whatever dials it, peers included, goes through
  // the relay. The task dials the coordinator through a relay on that host
  // too, so heartbeats are delayed both ways; what the task dials itself
  // (its peers' servers, ps tasks) is not. Not the coordinator's host.
  // 0: none.
  int relay_host = 0;
  std::vector<std::string> flags;  // this task's own, after the common ones
  std::string id() const { return type + ":" + std::to_string(index); }
};

struct HostClusterOptions {
  int coordinator_host = 1;
  std::vector<HostTask> tasks;
  std::vector<std::string> coordinator_flags;
  std::vector<std::string> agent_flags;  // e.g. --cpu_devices=2
  std::vector<std::string> ps_flags;
  // Given to every agent as --peer_ports, and forwarded by the relays.
  std::string peer_ports;
  absl::Duration relay_delay = absl::Milliseconds(200);
  // Agents and ps tasks serve on every interface (--listen=0.0.0.0:PORT)
  // and register their spec address (--advertise_address), as
  // deploy/kubernetes runs them; otherwise they serve on their spec address.
  bool listen_on_all_interfaces = false;
};

// Owns the processes it started; the destructor stops them by pid (SIGTERM,
// then SIGKILL). `hosts` and `dir` are not owned and must outlive it.
// Not thread-safe.
class HostCluster {
 public:
  // Starts the coordinator and every task, and waits until all are READY.
  static absl::StatusOr<std::unique_ptr<HostCluster>> Start(
      TestHosts* hosts, const ScratchDir* dir, HostClusterOptions options);
  ~HostCluster();

  CoordinatorProcess& coordinator() { return *coordinator_; }
  Client& client() { return *client_; }
  const std::string& spec_json() const { return spec_json_; }
  int host_of(const std::string& task) const;
  // A task's state as the coordinator reports it; UNSPECIFIED if unknown.
  v1::TaskState TaskState(const std::string& type, int index);

  // The task's process; nullptr if it is not running from here.
  Subprocess* process(const std::string& task);
  // Starts `task` on its host (again, after a kill), with --state_dir at
  // StateDir(task); its output is appended to TaskLog(task).
  absl::Status StartTask(const std::string& task);
  // SIGKILLs `task` and reaps it.
  void KillTask(const std::string& task);
  // SIGKILLs the coordinator, as a crash, and starts it again with the same
  // flags; the tasks stay up. Returns once it serves. After a failure the
  // cluster may have no coordinator: only its destruction is safe then.
  absl::Status RestartCoordinator();
  // The path of the task's log: <dir>/<type>-<index>.log.
  std::string TaskLog(const std::string& task) const;
  // Where a task keeps its local state (--state_dir): <dir>/host<h>/<task>.
  std::string StateDir(const std::string& task) const;
  // The output of the relay on `relay_host` that forwards to the
  // coordinator: a line per connection it relayed.
  std::string CoordinatorRelayLog(int relay_host) const;

 private:
  HostCluster(TestHosts* hosts, const ScratchDir* dir,
              HostClusterOptions options);
  // Starts the coordinator on its host with coordinator_flags_, and a
  // client of it.
  absl::Status StartCoordinator();
  // Starts a relay on `relay_host` that forwards `ports` to `target_host`,
  // and waits until it listens. Its output goes to <dir>/relay-<name>.log.
  absl::Status StartRelay(const std::string& name, int relay_host,
                          int target_host, const std::string& ports);

  TestHosts* const hosts_;
  const ScratchDir* const dir_;
  const HostClusterOptions options_;
  std::string spec_json_;
  std::vector<std::string> coordinator_flags_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  std::unique_ptr<Client> client_;
  std::map<std::string, Subprocess> processes_;  // by task id
  // Stopped last, after the tasks and the coordinator that talk through them.
  std::vector<Subprocess> relays_;
};

// A fixture with `n` test hosts; skips, saying why, where they cannot be
// made (not root).
template <int n>
class TestHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TestHosts>> hosts = TestHosts::Create(n);
    if (!hosts.ok()) GTEST_SKIP() << hosts.status().message();
    hosts_ = *std::move(hosts);
  }

  ScratchDir dir_;
  std::unique_ptr<TestHosts> hosts_;
};

}  // namespace cohort::testing
