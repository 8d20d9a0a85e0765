#include "tests/testing/host_cluster.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "tests/testing/wait.h"

namespace cohort::testing {
namespace {

// Each host has an address of its own, so fixed ports cannot collide.
constexpr int kCoordinatorPort = 7070;
constexpr int kFirstTaskPort = 7100;
const absl::Duration kReadyTimeout = absl::Seconds(60);

// A task id as a file name: "worker:1" -> "worker-1".
std::string FileName(std::string task) {
  std::replace(task.begin(), task.end(), ':', '-');
  return task;
}

}  // namespace

HostCluster::HostCluster(TestHosts* hosts, const ScratchDir* dir,
                         HostClusterOptions options)
    : hosts_(hosts), dir_(dir), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<HostCluster>> HostCluster::Start(
    TestHosts* hosts, const ScratchDir* dir, HostClusterOptions options) {
  std::unique_ptr<HostCluster> cluster(
      new HostCluster(hosts, dir, std::move(options)));
  const HostClusterOptions& o = cluster->options_;

  nlohmann::json spec = {{"cluster", nlohmann::json::object()}};
  std::set<int> relays_to_coordinator;  // by relay host
  for (size_t i = 0; i < o.tasks.size(); ++i) {
    const HostTask& task = o.tasks[i];
    nlohmann::json& list = spec["cluster"][task.type];
    if (list.is_null()) list = nlohmann::json::array();
    if (static_cast<int>(list.size()) != task.index) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tasks of type ", task.type, " must come in index order"));
    }
    const int port = kFirstTaskPort + static_cast<int>(i);
    if (task.relay_host > 0) {
      if (task.type != "ps" && o.peer_ports.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            task.id(), " is relayed, so its agent needs peer_ports"));
      }
      if (task.relay_host == o.coordinator_host) {
        return absl::InvalidArgumentError(
            absl::StrCat(task.id(),
                         " is relayed on the coordinator's host, where the "
                         "relay cannot take the coordinator's port"));
      }
      std::string ports = absl::StrCat(port);
      if (task.type != "ps") absl::StrAppend(&ports, ",", o.peer_ports);
      COHORT_RETURN_IF_ERROR(cluster->StartRelay(
          FileName(task.id()), task.relay_host, task.host, ports));
      if (relays_to_coordinator.insert(task.relay_host).second) {
        COHORT_RETURN_IF_ERROR(cluster->StartRelay(
            absl::StrCat("coordinator-on-host", task.relay_host),
            task.relay_host, o.coordinator_host,
            absl::StrCat(kCoordinatorPort)));
      }
    }
    list.push_back(absl::StrCat(
        hosts->address(task.relay_host > 0 ? task.relay_host : task.host), ":",
        port));
  }
  cluster->spec_json_ = spec.dump();
  const std::string spec_file = dir->Write("cluster.json", cluster->spec_json_);

  // A state dir in the scratch dir (a test's own comes later and wins): a
  // coordinator without one keeps its jobs' checkpoints in a /tmp directory
  // of its own, left behind when RestartCoordinator kills it.
  cluster->coordinator_flags_ = {
      absl::StrCat("--state_dir=", dir->path(), "/coordinator"),
      absl::StrCat("--cluster_spec=", spec_file), "--launch=none"};
  cluster->coordinator_flags_.insert(cluster->coordinator_flags_.end(),
                                     o.coordinator_flags.begin(),
                                     o.coordinator_flags.end());
  COHORT_RETURN_IF_ERROR(cluster->StartCoordinator());

  for (const HostTask& task : o.tasks) {
    COHORT_RETURN_IF_ERROR(cluster->StartTask(task.id()));
  }
  absl::StatusOr<v1::ClusterState> ready =
      cluster->coordinator_->WaitAllReady(kReadyTimeout);
  if (!ready.ok()) return ready.status();
  return cluster;
}

absl::Status HostCluster::StartCoordinator() {
  absl::StatusOr<std::unique_ptr<CoordinatorProcess>> coordinator =
      CoordinatorProcess::Start(
          *dir_, coordinator_flags_,
          absl::StrCat(hosts_->address(options_.coordinator_host), ":",
                       kCoordinatorPort),
          hosts_->Command(options_.coordinator_host, {}));
  if (!coordinator.ok()) return coordinator.status();
  coordinator_ = *std::move(coordinator);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(coordinator_->address());
  if (!client.ok()) return client.status();
  client_ = *std::move(client);
  return absl::OkStatus();
}

absl::Status HostCluster::RestartCoordinator() {
  coordinator_->process().Signal(SIGKILL);
  if (!coordinator_->process().Wait(absl::Seconds(10)).has_value()) {
    return absl::DeadlineExceededError(
        "the coordinator did not exit within 10 s of SIGKILL");
  }
  coordinator_->ForgetProcess();
  coordinator_->ForgetTasks();
  client_.reset();
  coordinator_.reset();
  return StartCoordinator();
}

HostCluster::~HostCluster() {
  for (auto& [task, process] : processes_) process.Signal(SIGTERM);
  for (auto& [task, process] : processes_) process.Stop(absl::Seconds(5));
  coordinator_.reset();
  for (Subprocess& relay : relays_) relay.Stop(absl::Seconds(5));
}

absl::Status HostCluster::StartRelay(const std::string& name, int relay_host,
                                     int target_host,
                                     const std::string& ports) {
  const std::string ready = absl::StrCat(dir_->path(), "/relay-", name);
  absl::StatusOr<Subprocess> relay = Subprocess::Spawn(
      {.argv = hosts_->Command(
           relay_host,
           {TestBinary("delay_relay"),
            absl::StrCat("--listen_host=", hosts_->address(relay_host)),
            absl::StrCat("--target_host=", hosts_->address(target_host)),
            absl::StrCat("--ports=", ports),
            absl::StrCat("--delay=",
                         absl::FormatDuration(options_.relay_delay)),
            absl::StrCat("--ready_file=", ready)}),
       .output_file = ready + ".log"});
  if (!relay.ok()) return relay.status();
  relays_.push_back(*std::move(relay));
  if (!WaitUntil([&] { return std::filesystem::exists(ready); },
                 absl::Seconds(10))) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the relay ", name,
        " did not start: ", ReadFile(ready + ".log").value_or("")));
  }
  return absl::OkStatus();
}

int HostCluster::host_of(const std::string& task) const {
  for (const HostTask& t : options_.tasks) {
    if (t.id() == task) return t.host;
  }
  return -1;
}

v1::TaskState HostCluster::TaskState(const std::string& type, int index) {
  absl::StatusOr<v1::ClusterState> state = coordinator_->State();
  if (!state.ok()) return v1::TASK_STATE_UNSPECIFIED;
  const v1::TaskStatus* task = FindTask(*state, type, index);
  return task == nullptr ? v1::TASK_STATE_UNSPECIFIED : task->state();
}

std::string HostCluster::StateDir(const std::string& task) const {
  return absl::StrCat(dir_->path(), "/host", host_of(task), "/",
                      FileName(task));
}

Subprocess* HostCluster::process(const std::string& task) {
  auto it = processes_.find(task);
  return it == processes_.end() || !it->second.running() ? nullptr
                                                         : &it->second;
}

absl::Status HostCluster::StartTask(const std::string& task) {
  const HostTask* found = nullptr;
  for (const HostTask& t : options_.tasks) {
    if (t.id() == task) found = &t;
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("no task ", task, " in the spec"));
  }
  nlohmann::json tf_config = nlohmann::json::parse(spec_json_);
  tf_config["task"] = {{"type", found->type}, {"index", found->index}};
  const bool ps = found->type == "ps";
  std::filesystem::create_directories(StateDir(task));
  const std::string coordinator =
      found->relay_host > 0 ? absl::StrCat(hosts_->address(found->relay_host),
                                           ":", kCoordinatorPort)
                            : coordinator_->address();
  // Replacing a live process would lose its pid, and the process with it.
  if (Subprocess* old = process(task); old != nullptr) {
    old->Poll();
    if (old->running()) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", task, " is still running (pid ", old->pid(),
                       "): kill it before starting it again"));
    }
  }
  std::vector<std::string> argv = {
      Binary(ps ? "cohort-ps" : "cohort-agent"),
      absl::StrCat("--coordinator=", coordinator),
      absl::StrCat("--state_dir=", StateDir(task))};
  if (options_.listen_on_all_interfaces || found->relay_host > 0) {
    const std::string address =
        tf_config["cluster"][found->type][found->index].get<std::string>();
    absl::StatusOr<HostPort> spec_address = ParseHostPort(address);
    if (!spec_address.ok()) return spec_address.status();
    argv.push_back(absl::StrCat("--listen=0.0.0.0:", spec_address->port));
    argv.push_back(absl::StrCat("--advertise_address=", address));
  }
  const std::vector<std::string>& extra =
      ps ? options_.ps_flags : options_.agent_flags;
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (!ps && !options_.peer_ports.empty()) {
    argv.push_back(absl::StrCat("--peer_ports=", options_.peer_ports));
  }
  argv.insert(argv.end(), found->flags.begin(), found->flags.end());
  absl::StatusOr<Subprocess> child =
      Subprocess::Spawn({.argv = hosts_->Command(found->host, argv),
                         .env = {{"TF_CONFIG", tf_config.dump()}},
                         .output_file = TaskLog(task)});
  if (!child.ok()) return child.status();
  processes_.insert_or_assign(task, *std::move(child));
  return absl::OkStatus();
}

void HostCluster::KillTask(const std::string& task) {
  if (Subprocess* p = process(task)) {
    p->Signal(SIGKILL);
    p->Wait(absl::Seconds(10));
  }
}

std::string HostCluster::CoordinatorRelayLog(int relay_host) const {
  return absl::StrCat(dir_->path(), "/relay-coordinator-on-host", relay_host,
                      ".log");
}

std::string HostCluster::TaskLog(const std::string& task) const {
  return absl::StrCat(dir_->path(), "/", FileName(task), ".log");
}

}  // namespace cohort::testing
