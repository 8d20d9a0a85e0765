#pragma once

// Harness for integration and e2e tests: scratch directories, commands run
// as child processes with a deadline, and a real cohort-coordinator with the
// tasks it launches, cleaned up by pid.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cohort/client.h"
#include "cohort/v1/coordinator.pb.h"
#include "common/subprocess.h"
#include "tests/testing/wait.h"  // WaitUntil, for every user of the cluster

namespace cohort::testing {

// Where the built binaries are ($COHORT_BIN_DIR, set by CTest).
std::string BinDir();
std::string Binary(const std::string& name);  // BinDir()/name
// Test-only programs, built beside the test binaries (BinDir()/../tests).
std::string TestBinary(const std::string& name);

// A fresh directory, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  // Writes `contents` to path()/name and returns that path.
  std::string Write(const std::string& name, const std::string& contents) const;

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1: killed at the deadline
  std::string output;  // stdout and stderr
};

// Runs a command to completion (killed after `timeout`).
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout = absl::Seconds(30),
                         const std::map<std::string, std::string>& env = {});

// A TF_CONFIG with one chief, `workers` workers, `ps` ps tasks and
// `evaluators` evaluator tasks (0 or 1) on free loopback ports.
std::string LocalSpec(int workers, int ps, int evaluators = 0);

// The standard grpc.health.v1 check, through the generated stub: the
// serving status name ("SERVING"), or the error.
absl::StatusOr<std::string> HealthCheck(const std::string& address);

// A process as first seen: its pid, and its start time in clock ticks after
// boot (/proc/PID/stat), which a later process given the same pid does not
// share. pid_max may be as low as 32768, and a whole suite wraps it.
struct SeenProcess {
  int64_t pid = 0;
  uint64_t start_ticks = 0;
};
// The process `pid` as it is now; nullopt if there is none.
std::optional<SeenProcess> SeeProcess(int64_t pid);

// A cohort-coordinator child process and everything it launched. The
// destructor stops it with SIGTERM and then kills, by pid, any task process
// it saw that is still alive (after a SIGKILL of the coordinator, say).
class CoordinatorProcess {
 public:
  // Starts cohort-coordinator with `flags` (plus --listen and --port_file)
  // and waits until it serves. `prefix` wraps the command, e.g. to run it
  // on a test host (TestHosts::Command).
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(
      const ScratchDir& dir, std::vector<std::string> flags,
      const std::string& listen = "127.0.0.1:0",
      const std::vector<std::string>& prefix = {});
  ~CoordinatorProcess();

  const std::string& address() const { return address_; }
  Subprocess& process() { return process_; }
  const std::string& log_file() const { return log_file_; }
  std::string Log() const;

  // The cluster state through the client library; remembers task pids.
  absl::StatusOr<v1::ClusterState> State(const ClientOptions& options = {});
  // Polls State() until `predicate` holds for it.
  absl::StatusOr<v1::ClusterState> WaitForState(
      const std::function<bool(const v1::ClusterState&)>& predicate,
      absl::Duration timeout, const ClientOptions& options = {});
  absl::StatusOr<v1::ClusterState> WaitAllReady(
      absl::Duration timeout, const ClientOptions& options = {});

  // Task processes seen so far in any State().
  const std::vector<SeenProcess>& seen() const { return seen_; }
  void ForgetProcess();  // the test reaped or killed it itself
  // The tasks seen are not this object's to kill: the test started them
  // (--launch=none), and they outlive this coordinator.
  void ForgetTasks() { seen_.clear(); }

 private:
  CoordinatorProcess(Subprocess process, std::string address,
                     std::string log_file);

  Subprocess process_;
  bool owns_process_ = true;
  std::string address_;
  std::string log_file_;
  std::vector<SeenProcess> seen_;
};

// A coordinator started on a fresh LocalSpec(workers, ps, evaluators) with
// `flags`, once every task it launched is READY.
struct ReadyCluster {
  std::unique_ptr<CoordinatorProcess> coordinator;
  v1::ClusterState state;
};
absl::StatusOr<ReadyCluster> StartReadyCluster(
    const ScratchDir& dir, int workers, int ps,
    std::vector<std::string> flags = {}, const ClientOptions& client = {},
    int evaluators = 0);

// A ready cluster that every test of a suite shares, with its scratch dir
// and a client: made in SetUpTestSuite, destroyed (the coordinator and its
// tasks stopped) in TearDownTestSuite.
//
//   static void SetUpTestSuite() {
//     absl::StatusOr<std::unique_ptr<SuiteCluster>> c = SuiteCluster::Start(1, 0);
//     ASSERT_TRUE(c.ok()) << c.status();
//     cluster_ = c->release();
//   }
struct SuiteCluster {
  // StartReadyCluster(dir, workers, ps, flags) in a new scratch dir.
  static absl::StatusOr<std::unique_ptr<SuiteCluster>> Start(
      int workers, int ps, std::vector<std::string> flags = {});

  ScratchDir dir;
  std::unique_ptr<CoordinatorProcess> coordinator;
  v1::ClusterState state;  // as it was when every task was READY
  std::unique_ptr<Client> client;
};

// Waits until none of `pids` runs any more.
bool WaitAllGone(const std::vector<int64_t>& pids, absl::Duration timeout);
// The pids of every task in `state`.
std::vector<int64_t> TaskPids(const v1::ClusterState& state);

// Finds a task in a state; nullptr if absent.
const v1::TaskStatus* FindTask(const v1::ClusterState& state,
                               const std::string& type, int index);
bool AllReady(const v1::ClusterState& state);

// SIGKILLs the pids that still run (test cleanup of processes it caused,
// right after they should have ended).
void KillIfAlive(const std::vector<int64_t>& pids);
// SIGKILLs those of `processes` that still run as the processes seen, not
// as others that reused their pids since (test cleanup at the end).
void KillIfAlive(const std::vector<SeenProcess>& processes);

}  // namespace cohort::testing
