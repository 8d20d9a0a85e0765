// `cohortctl up`: runs cohort-coordinator in the foreground, with a default
// local cluster when no spec is given, and shows the cluster once it is up.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client_lib/cohortctl/cluster_format.h"
#include "client_lib/cohortctl/commands.h"
#include "common/exit_codes.h"
#include "common/file_lock.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/host_port.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "rpc/security_flags.h"

ABSL_FLAG(std::string, cluster_spec, "",
          "up: the TF_CONFIG-style spec to run. Default: the saved spec with "
          "--resume, else TF_CONFIG's cluster when that is set, else one "
          "chief, one worker and one ps on free loopback ports.");
ABSL_FLAG(std::string, state_dir, "",
          "The cluster's state dir: where `up` keeps it, and where the other "
          "commands find its coordinator (without --coordinator). Default: "
          "$XDG_STATE_HOME/cohort/local, else ~/.local/state/cohort/local.");
ABSL_FLAG(std::string, listen, "",
          "up: where the coordinator serves (port 0: a free port). Default: "
          "127.0.0.1:0, or with --resume the address the cluster had.");
ABSL_FLAG(bool, resume, false,
          "up: resume the cluster kept in the state dir (its spec, address, "
          "jobs, and the tasks still running) instead of starting a new one.");
ABSL_FLAG(int, cpu_devices, 2,
          "up: CPU devices per launched agent (each one a replica).");
ABSL_FLAG(absl::Duration, ready_timeout, absl::Seconds(30),
          "up: how long to wait for every task to be READY before warning.");

namespace cohort::ctl {
namespace {

// One chief, one worker, one ps on distinct free loopback ports.
absl::StatusOr<std::string> DefaultClusterSpec() {
  std::set<int> ports;
  for (int attempt = 0; attempt < 20 && ports.size() < 3; ++attempt) {
    COHORT_ASSIGN_OR_RETURN(int port, PickUnusedPort("127.0.0.1"));
    ports.insert(port);
  }
  if (ports.size() < 3) {
    return absl::UnavailableError("could not find 3 free loopback ports");
  }
  auto it = ports.begin();
  auto address = [](int port) { return absl::StrCat("127.0.0.1:", port); };
  const nlohmann::json spec = {{"cluster",
                                {{"chief", {address(*it++)}},
                                 {"worker", {address(*it++)}},
                                 {"ps", {address(*it++)}}}}};
  return spec.dump(2) + "\n";
}

// CANCELLED once a termination signal came: the caller stops the cluster.
absl::StatusOr<int> WaitForPortFile(const std::string& path,
                                    Subprocess& coordinator,
                                    TerminationWaiter& waiter,
                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    // Also the poll's pause.
    if (waiter.WaitFor(absl::Milliseconds(50)).has_value()) {
      return absl::CancelledError("interrupted");
    }
    if (auto exit = coordinator.Poll()) {
      // Its own line above says what it refused; `up` exits as it did.
      if (exit->exited() && exit->exit_code() == kExitConfigError) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the coordinator ", exit->ToString(), ": a configuration error"));
      }
      return absl::FailedPreconditionError(
          absl::StrCat("the coordinator ", exit->ToString()));
    }
    absl::StatusOr<std::string> text = ReadFile(path);
    if (text.ok() && !text->empty()) return std::atoi(text->c_str());
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the coordinator did not report its port in ", path,
                   " within ", absl::FormatDuration(timeout)));
}

// After a termination signal: stops the coordinator, which stops its tasks.
// 0 once it ended cleanly.
int StopCluster(Subprocess& coordinator) {
  std::cout << "cohortctl up: stopping the cluster; a running job is "
               "checkpointed first (up to "
            << absl::FormatDuration(StopGraceCheckpointShare(kDefaultStopGrace))
            << ")" << std::endl;
  // The coordinator gives its tasks kDefaultStopGrace to checkpoint and
  // exit, then needs a few seconds of its own.
  const ExitStatus exit =
      coordinator.Stop(kDefaultStopGrace + absl::Seconds(10));
  std::cout << "cohortctl up: coordinator " << exit.ToString() << std::endl;
  return exit.exited() && exit.exit_code() == 0 ? 0 : 1;
}

// The coordinator ended on its own: `up` ends as it did.
int CoordinatorEnded(const ExitStatus& exit) {
  std::cout << "cohortctl up: coordinator " << exit.ToString() << std::endl;
  return exit.exited() && exit.exit_code() == 0 ? 0 : 1;
}

// The flags another cohortctl needs to reach this cluster as this one
// does: the same token and TLS files.
std::string SecurityFlags() {
  std::string flags;
  for (const std::string& flag :
       rpc::Security::ToFlags(rpc::SecurityFilesFromFlags())) {
    absl::StrAppend(&flags, " ", flag);
  }
  return flags;
}

}  // namespace

std::string DefaultLocalStateDir() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
    return absl::StrCat(xdg, "/cohort/local");
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return absl::StrCat(home, "/.local/state/cohort/local");
  }
  return absl::StrCat("/tmp/cohort-", getuid(), "/local");
}

std::optional<std::string> SavedCoordinatorHost(const std::string& state_dir) {
  absl::StatusOr<std::string> state =
      ReadFile(state_dir + "/coordinator_state.json");
  if (!state.ok()) return std::nullopt;
  const nlohmann::json json = nlohmann::json::parse(*state, nullptr, false);
  if (!json.is_object()) return std::nullopt;
  const auto saved = json.find("coordinator_address");
  if (saved == json.end() || !saved->is_string()) return std::nullopt;
  absl::StatusOr<HostPort> address =
      ParseHostPort(LocalDialAddress(saved->get<std::string>()), true);
  if (!address.ok()) return std::nullopt;
  return address->host;
}

int UpCommand(const CommonOptions& options) {
  if (absl::GetFlag(FLAGS_cpu_devices) < 1) {
    PrintError(absl::InvalidArgumentError("--cpu_devices must be at least 1"));
    return kUsageError;
  }
  if (absl::GetFlag(FLAGS_ready_timeout) <= absl::ZeroDuration()) {
    PrintError(absl::InvalidArgumentError(absl::StrCat(
        "--ready_timeout must be positive, got ",
        absl::FormatDuration(absl::GetFlag(FLAGS_ready_timeout)))));
    return kUsageError;
  }
  BlockTerminationSignals();
  std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (state_dir.empty()) state_dir = DefaultLocalStateDir();
  const bool resume = absl::GetFlag(FLAGS_resume);
  std::error_code unreadable;  // counts as nothing kept
  const bool kept = std::filesystem::exists(
      state_dir + "/coordinator_state.json", unreadable);
  if (resume && !kept) {
    // Starting a new cluster instead would be a silent surprise.
    PrintError(absl::InvalidArgumentError(absl::StrCat(
        "--resume: no cluster was kept in ", state_dir,
        " (no coordinator_state.json); `cohortctl up` without --resume "
        "starts a new one, or pass the --state_dir of the one to resume")));
    return kUsageError;
  }
  if (absl::Status made = MakeDirectories(state_dir); !made.ok()) {
    PrintError(made);
    return 1;
  }
  // A cluster of this state dir that is up is not replaced (nor its spec
  // file touched): its coordinator holds the dir's lock, whatever address
  // or security it serves with.
  const std::string port_file = state_dir + "/coordinator.port";
  if (absl::StatusOr<FileLock> free =
          FileLock::Acquire(state_dir + "/coordinator.lock");
      absl::IsFailedPrecondition(free.status())) {
    PrintError(absl::FailedPreconditionError(absl::StrCat(
        "a cluster of ", state_dir, " is already up (", free.status().message(),
        "); `cohortctl status --state_dir=", state_dir,
        "` talks to it. Stop it first (^C where its `cohortctl up` runs, or "
        "SIGTERM to its coordinator), or pass --state_dir=DIR for another "
        "one")));
    return kUsageError;
  }
  std::string spec_file = absl::GetFlag(FLAGS_cluster_spec);
  const std::string default_spec = state_dir + "/default_cluster.json";
  if (spec_file.empty() && resume) {
    // The coordinator resumes the spec it kept.
    std::cout << "cohortctl up: resuming the cluster in " << state_dir
              << std::endl;
  } else if (const char* tf_config = std::getenv("TF_CONFIG");
             spec_file.empty() && tf_config != nullptr && *tf_config != '\0') {
    // As cohort-coordinator does, which inherits it: TF_CONFIG names the
    // cluster, and a mistake in it is named, not replaced by the default.
    std::cout << "cohortctl up: the cluster in TF_CONFIG" << std::endl;
  } else if (spec_file.empty()) {
    absl::StatusOr<std::string> spec = DefaultClusterSpec();
    spec_file = default_spec;
    absl::Status written =
        spec.ok() ? WriteFileAtomically(spec_file, *spec) : spec.status();
    if (!written.ok()) {
      PrintError(written);
      return 1;
    }
    std::cout << "cohortctl up: default local cluster (one chief, one worker, "
                 "one ps), spec in "
              << spec_file << std::endl;
  }
  std::filesystem::remove(port_file);

  SpawnOptions spawn;
  spawn.argv = {
      ExecutableDirectory() + "/cohort-coordinator",
      absl::StrCat("--state_dir=", state_dir),
      absl::StrCat("--port_file=", port_file),
      absl::StrCat("--cpu_devices=", absl::GetFlag(FLAGS_cpu_devices))};
  if (!spec_file.empty()) {
    spawn.argv.push_back(absl::StrCat("--cluster_spec=", spec_file));
  }
  // A resumed coordinator serves where its tasks look for it, so that it
  // adopts those still running.
  std::string listen = absl::GetFlag(FLAGS_listen);
  if (listen.empty() && !resume) listen = "127.0.0.1:0";
  if (!listen.empty()) spawn.argv.push_back(absl::StrCat("--listen=", listen));
  if (!resume) spawn.argv.push_back("--new_cluster");
  for (const std::string& flag :
       rpc::Security::ToFlags(rpc::SecurityFilesFromFlags())) {
    spawn.argv.push_back(flag);
  }
  absl::StatusOr<Subprocess> coordinator = Subprocess::Spawn(spawn);
  if (!coordinator.ok()) {
    PrintError(coordinator.status());
    return 1;
  }
  // Every wait from here ends early on a signal: Ctrl-C reaches the
  // coordinator too, and SIGTERM to `up` alone must stop it all the same.
  TerminationWaiter waiter;
  absl::StatusOr<int> port =
      WaitForPortFile(port_file, *coordinator, waiter, absl::Seconds(15));
  if (absl::IsCancelled(port.status())) return StopCluster(*coordinator);
  if (!port.ok()) {
    PrintError(port.status());
    coordinator->Stop(absl::Seconds(4));
    return absl::IsInvalidArgument(port.status()) ? kUsageError : 1;
  }
  // Where it listens (a resumed cluster serves on its saved host), made
  // dialable.
  const absl::StatusOr<HostPort> bound = ParseHostPort(listen, true);
  const std::string host =
      bound.ok() ? bound->host
                 : SavedCoordinatorHost(state_dir).value_or("127.0.0.1");
  const std::string address =
      LocalDialAddress(HostPort{host, *port}.ToString());
  std::cout << "cohortctl up: coordinator listening on " << address << " (pid "
            << coordinator->pid() << ")" << std::endl;

  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(address, options.client);
  if (client.ok()) {
    bool interrupted = false;
    absl::StatusOr<v1::ClusterState> state = (*client)->WaitForReady(
        absl::GetFlag(FLAGS_ready_timeout), [&]() -> absl::Status {
          interrupted = TerminationPending();
          if (interrupted) return absl::CancelledError("interrupted");
          if (coordinator->Poll().has_value()) {
            return absl::AbortedError("the coordinator ended");
          }
          return absl::OkStatus();
        });
    if (interrupted) return StopCluster(*coordinator);
    if (std::optional<ExitStatus> exit = coordinator->Poll()) {
      return CoordinatorEnded(*exit);
    }
    if (state.ok()) {
      std::cout << "\n"
                << ClusterStateToTable(*state) << "\nall tasks READY. "
                << "Try: cohortctl --coordinator=" << address << SecurityFlags()
                << " status   (Ctrl-C stops the cluster)" << std::endl;
    } else {
      PrintError(state.status());
    }
  }

  // Foreground until a signal, or until the coordinator ends on its own.
  while (true) {
    if (std::optional<ExitStatus> exit = coordinator->Poll()) {
      return CoordinatorEnded(*exit);
    }
    if (waiter.WaitFor(absl::Milliseconds(200)).has_value()) {
      return StopCluster(*coordinator);
    }
  }
}

}  // namespace cohort::ctl
