#include "coordinator/previous_cluster.h"

#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cohort/v1/job.pb.h"
#include "common/cluster_spec.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/host_port.h"
#include "common/steady_time.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "proto/job_state.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {
namespace {

// What a coordinator keeps in its state dir, besides files put there by
// whoever started it (a spec, a port file).
// The state file last: it is what makes the dir a cluster's, so a move cut
// short leaves the old cluster there, whole enough to set aside again.
constexpr const char* kStateEntries[] = {"jobs.json",
                                         "jobs",
                                         "libraries",
                                         "logs",
                                         "ps",
                                         "agents",
                                         "coordinator_state.json"};

// Earlier clusters kept in the state dir, the newest first.
constexpr int kKeptClusters = 3;

// Whether something accepts TCP connections at `address` (HOST:PORT).
bool Serving(const std::string& address) {
  absl::StatusOr<HostPort> host_port = ParseHostPort(address);
  if (!host_port.ok()) return false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host_port->host.c_str(),
                  std::to_string(host_port->port).c_str(), &hints,
                  &found) != 0) {
    return false;
  }
  bool serving = false;
  for (addrinfo* it = found; it != nullptr && !serving; it = it->ai_next) {
    const int fd =
        socket(it->ai_family, it->ai_socktype | SOCK_CLOEXEC, it->ai_protocol);
    if (fd < 0) continue;
    // Only local addresses are probed, so a blocking connect ends at once.
    serving = connect(fd, it->ai_addr, it->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(found);
  return serving;
}

// The task still runs as the earlier coordinator launched it: its identity
// and that coordinator's address are on its command line.
bool RunsTaskOf(int64_t pid, const PersistedTask& task,
                const std::string& coordinator) {
  if (!ProcessAlive(static_cast<pid_t>(pid))) return false;
  const std::string cmdline = ProcessCommandLine(static_cast<pid_t>(pid));
  return absl::StrContains(cmdline, "--task=" + task.task.ToString()) &&
         absl::StrContains(cmdline, "--coordinator=" + coordinator);
}

}  // namespace

std::vector<std::string> UnfinishedJobs(const std::string& jobs_json) {
  v1::JobTable table;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(jobs_json, &table, options)
           .ok()) {
    return {};
  }
  std::vector<std::string> out;
  for (const v1::JobStatus& job : table.jobs()) {
    if (IsTerminal(job.state())) continue;
    out.push_back(absl::StrCat("job ", job.job_id(), " (",
                               v1::JobState_Name(job.state()), ", step ",
                               job.step(), " of ", job.spec().steps(), ")"));
  }
  return out;
}

absl::Status SetAsidePreviousCluster(const std::string& state_dir,
                                     const PersistedState& saved,
                                     absl::Duration grace) {
  // The coordinator saved the address it listened on; its tasks, and a
  // probe from here, dial it.
  const std::string coordinator = LocalDialAddress(saved.coordinator_address);
  if (!saved.coordinator_address.empty() &&
      IsLocalHost(ParseHostPort(coordinator).value_or(HostPort{}).host) &&
      Serving(coordinator)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the cluster in ", state_dir,
                     " is still running: its coordinator "
                     "serves on ",
                     saved.coordinator_address,
                     ". Stop it first, resume it, or use another state dir"));
  }
  std::vector<pid_t> stopped;
  for (const PersistedTask& task : saved.tasks) {
    if (!task.launched || task.pid <= 0) continue;
    if (!RunsTaskOf(task.pid, task, coordinator)) continue;
    spdlog::info("stopping {} (pid {}), left running by the previous cluster",
                 task.task.ToString(), task.pid);
    kill(static_cast<pid_t>(task.pid), SIGTERM);
    stopped.push_back(static_cast<pid_t>(task.pid));
  }
  const absl::Time deadline = SteadyNow() + grace;
  for (pid_t pid : stopped) {
    while (ProcessAlive(pid) && SteadyNow() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (ProcessAlive(pid)) kill(pid, SIGKILL);
  }

  // Not lost (it moves aside too), but no longer run: say so.
  const absl::StatusOr<std::string> jobs =
      ReadFile((std::filesystem::path(state_dir) / "jobs.json").string());
  for (const std::string& job : UnfinishedJobs(jobs.value_or(""))) {
    spdlog::warn(
        "{} of the previous cluster had not ended; it is set aside with "
        "that cluster (`cohortctl up --resume` would have continued it)",
        job);
  }

  // The last kKeptClusters clusters are kept: previous, previous.1, ...
  const std::filesystem::path previous =
      std::filesystem::path(state_dir) / "previous";
  auto kept = [&previous](int age) {
    return age == 0 ? previous
                    : std::filesystem::path(
                          absl::StrCat(previous.string(), ".", age));
  };
  std::error_code error;
  if (std::filesystem::exists(kept(kKeptClusters - 1))) {
    spdlog::warn("removing {}: only the last {} clusters are kept",
                 kept(kKeptClusters - 1).string(), kKeptClusters);
    std::filesystem::remove_all(kept(kKeptClusters - 1), error);
  }
  for (int age = kKeptClusters - 2; age >= 0 && !error; --age) {
    if (std::filesystem::exists(kept(age))) {
      std::filesystem::rename(kept(age), kept(age + 1), error);
    }
  }
  if (!error) std::filesystem::create_directories(previous, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot make ", previous.string(), ": ", error.message()));
  }
  for (const char* entry : kStateEntries) {
    const std::filesystem::path from = std::filesystem::path(state_dir) / entry;
    if (!std::filesystem::exists(from)) continue;
    std::filesystem::rename(from, previous / entry, error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot move ", from.string(),
                                              " aside: ", error.message()));
    }
  }
  spdlog::info(
      "new cluster in {}: the previous one (incarnation {}, {} task(s) "
      "stopped) is kept in {}",
      state_dir, saved.incarnation, stopped.size(), previous.string());
  return absl::OkStatus();
}

}  // namespace cohort::coordinator
