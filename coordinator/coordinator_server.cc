#include "coordinator/coordinator_server.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "common/host_port.h"
#include "common/signals.h"
#include "common/status_macros.h"
#include "common/steady_time.h"
#include "coordinator/cluster_metrics.h"
#include "coordinator/previous_cluster.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {
namespace {

// The spec as TF_CONFIG with this task's identity, as TensorFlow would hand
// it to the task.
std::string TfConfigFor(const ClusterSpec& spec, const TaskId& task) {
  nlohmann::json json = nlohmann::json::parse(spec.ToJson(), nullptr, false);
  json["task"] = {{"type", task.type}, {"index", task.index}};
  return json.dump();
}

// Tasks that are processes of their own: an agent or a ps server.
bool IsProcessTask(const TaskId& task) {
  return task.type == kPs || task.type == kWorker || task.type == kChief ||
         task.type == kEvaluator;
}

// `task`'s address when it is on this host, where local launch starts it.
std::optional<HostPort> AddressOnThisHost(const ClusterSpec& spec,
                                          const TaskId& task) {
  absl::StatusOr<HostPort> at = ParseHostPort(*spec.address(task));
  if (!at.ok() || !IsLocalHost(at->host)) return std::nullopt;
  return *std::move(at);
}

// A coordinator serving on loopback that other hosts' tasks must reach
// would leave them retrying for ever: refused at startup instead.
absl::Status CheckReachableFromTheSpecsHosts(const ClusterSpec& spec,
                                             const std::string& listen) {
  absl::StatusOr<HostPort> at = ParseHostPort(listen, true);
  if (!at.ok() || !at->IsLoopback()) return absl::OkStatus();
  std::vector<std::string> remote;
  for (const TaskId& task : spec.tasks()) {
    if (IsProcessTask(task) && !AddressOnThisHost(spec, task)) {
      remote.push_back(
          absl::StrCat(task.ToString(), " at ", *spec.address(task)));
    }
  }
  if (remote.empty()) return absl::OkStatus();
  const size_t shown = std::min<size_t>(remote.size(), 3);
  return absl::InvalidArgumentError(absl::StrCat(
      "--listen=", listen, " is a loopback address, and the cluster spec puts ",
      absl::StrJoin(remote.begin(), remote.begin() + shown, ", "),
      remote.size() > shown
          ? absl::StrCat(" and ", remote.size() - shown, " more")
          : "",
      " on other hosts (or on hosts that do not resolve), which could never "
      "reach it; listen where they can, e.g. --listen=0.0.0.0:",
      at->port));
}

// A task this coordinator launches listens on its spec address (--listen=
// <spec host>:PORT). Where that host resolves only to loopback here (a spec
// saying "localhost", or Debian's /etc/hosts mapping the hostname to
// 127.0.1.1), tasks on other hosts could never reach it, and would retry
// for ever: refused at startup, naming it. Tasks launched by others choose
// their own --listen (0.0.0.0 with --advertise_address, say), and the
// evaluator only dials out; hosts that do not resolve are noted elsewhere.
absl::Status CheckLaunchedTasksReachable(const CoordinatorConfig& config) {
  if (config.launch != LaunchMode::kLocal) return absl::OkStatus();
  const ClusterSpec& spec = *config.spec;
  std::optional<TaskId> remote;
  for (const TaskId& task : spec.tasks()) {
    if (!IsProcessTask(task) || task.type == kEvaluator ||
        AddressOnThisHost(spec, task)) {
      continue;
    }
    absl::StatusOr<HostPort> at = ParseHostPort(*spec.address(task));
    if (at.ok() && ResolveHost(at->host).ok()) {
      remote = task;
      break;
    }
  }
  if (!remote.has_value()) return absl::OkStatus();
  for (const TaskId& task : spec.tasks()) {
    if (!IsProcessTask(task) || task.type == kEvaluator) continue;
    const std::optional<HostPort> at = AddressOnThisHost(spec, task);
    if (!at.has_value()) continue;
    const std::vector<std::string> loopback = LoopbackOnlyAddresses(at->host);
    if (loopback.empty()) continue;
    return absl::InvalidArgumentError(absl::StrFormat(
        "$.cluster.%s[%d]: %s at %s is on this host, where %s resolves only "
        "to loopback (%s), and the spec puts %s at %s on another host, which "
        "could never reach the task launched to listen there: name it by an "
        "address of this host that the other hosts reach (a hostname that "
        "/etc/hosts maps to 127.0.1.1 is not one)",
        task.type, task.index, task.ToString(), at->ToString(), at->host,
        absl::StrJoin(loopback, ", "), remote->ToString(),
        *spec.address(*remote)));
  }
  return absl::OkStatus();
}

// Every spec host looked up at once, before the checks and launches below
// ask about them one at a time: a resolver that does not answer costs one
// timeout, not one per task and per check.
void PrefetchSpecHosts(const ClusterSpec& spec) {
  constexpr absl::Duration kTimeout = absl::Seconds(10);
  std::vector<std::string> hosts;
  for (const TaskId& task : spec.tasks()) {
    if (!IsProcessTask(task)) continue;
    absl::StatusOr<HostPort> at = ParseHostPort(*spec.address(task));
    if (at.ok()) hosts.push_back(at->host);
  }
  const std::vector<std::string> unanswered =
      PrefetchHostLookups(hosts, kTimeout);
  if (!unanswered.empty()) {
    const size_t shown = std::min<size_t>(unanswered.size(), 5);
    spdlog::warn(
        "the resolver gave no answer within {} for {} of the cluster spec's "
        "hosts ({}{}); until it does, they count as not resolving",
        absl::FormatDuration(kTimeout), unanswered.size(),
        absl::StrJoin(unanswered.begin(), unanswered.begin() + shown, ", "),
        unanswered.size() > shown ? ", ..." : "");
  }
}

// A spec host that does not resolve here is likely a typo, and its task
// would never be reached: said at startup, and on the task's status once it
// is overdue. Not refused, since DNS names of pods and hosts may appear
// later.
void NoteUnresolvableHosts(const ClusterSpec& spec, ClusterManager& manager) {
  std::map<std::string, absl::Status> resolved;  // one lookup per host
  for (const TaskId& task : spec.tasks()) {
    if (!IsProcessTask(task)) continue;
    absl::StatusOr<HostPort> at = ParseHostPort(*spec.address(task));
    if (!at.ok()) continue;
    auto [it, inserted] = resolved.try_emplace(at->host);
    if (inserted) it->second = ResolveHost(at->host);
    if (it->second.ok()) continue;
    const std::string hint =
        absl::StrCat(it->second.message(),
                     " on the coordinator's host when it started (a typo "
                     "in the cluster spec?)");
    spdlog::warn("{} at {}: {}", task.ToString(), *spec.address(task), hint);
    manager.NoteAbsenceHint(task, hint);
  }
}

// The binaries that launch tasks on this host, found now rather than as
// launches that fail for ever after startup.
absl::Status CheckLaunchBinaries(const CoordinatorConfig& config) {
  if (config.launch != LaunchMode::kLocal) return absl::OkStatus();
  for (const TaskId& task : config.spec->tasks()) {
    if (!IsProcessTask(task) || !AddressOnThisHost(*config.spec, task)) {
      continue;
    }
    const bool is_ps = task.type == kPs;
    const std::string& binary = is_ps ? config.ps_binary : config.agent_binary;
    if (access(binary.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(is_ps ? "--ps_binary" : "--agent_binary", ": ", binary,
                       " is not an executable file (", strerror(errno), "); ",
                       task.ToString(), " is launched with it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(
    CoordinatorConfig config) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  if (config.agent_binary.empty()) {
    config.agent_binary = ExecutableDirectory() + "/cohort-agent";
  }
  if (config.ps_binary.empty()) {
    config.ps_binary = ExecutableDirectory() + "/cohort-ps";
  }
  if (config.new_cluster && !config.spec.has_value()) {
    return absl::InvalidArgumentError(
        "--new_cluster needs a cluster spec: pass --cluster_spec=FILE or set "
        "TF_CONFIG");
  }
  if (config.spec.has_value()) PrefetchSpecHosts(*config.spec);
  // Before a new cluster sets the previous one aside (stopping its tasks):
  // a start that is refused must leave it as it was.
  if (config.spec.has_value() && (config.listen_given || config.new_cluster)) {
    COHORT_RETURN_IF_ERROR(
        CheckReachableFromTheSpecsHosts(*config.spec, config.server.listen));
  }
  if (config.spec.has_value()) {
    COHORT_RETURN_IF_ERROR(CheckLaunchBinaries(config));
  }
  std::optional<PersistedState> saved;
  // A cluster --new_cluster replaces: set aside (its tasks stopped) only
  // once nothing below can refuse the start.
  std::optional<PersistedState> previous;
  if (!config.state_dir.empty()) {
    COHORT_RETURN_IF_ERROR(MakeDirectories(config.state_dir));
    absl::StatusOr<FileLock> lock =
        FileLock::Acquire(config.state_dir + "/coordinator.lock");
    if (absl::IsFailedPrecondition(lock.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another coordinator runs on --state_dir ", config.state_dir, ": ",
          lock.status().message(),
          ". Stop it first, or give this one a state dir of its own"));
    }
    if (!lock.ok()) return lock.status();
    server->state_lock_.emplace(*std::move(lock));
    server->store_.emplace(config.state_dir);
    COHORT_ASSIGN_OR_RETURN(saved, server->store_->Load());
    if (config.new_cluster && saved.has_value()) {
      previous = std::move(saved);
      saved.reset();
    }
  }
  if (!config.spec.has_value()) {
    if (!saved.has_value()) {
      return absl::InvalidArgumentError(
          "no cluster spec: pass --cluster_spec=FILE or set TF_CONFIG "
          "(or --state_dir of an earlier coordinator)");
    }
    absl::StatusOr<ClusterSpec> spec =
        ClusterSpec::FromJson(saved->cluster_spec_json);
    if (!spec.ok()) {
      return absl::DataLossError(absl::StrCat(server->store_->path(),
                                              ": the saved cluster spec is "
                                              "invalid: ",
                                              spec.status().message()));
    }
    config.spec = *std::move(spec);
    spdlog::info("using the cluster spec saved in {}", server->store_->path());
    PrefetchSpecHosts(*config.spec);
    COHORT_RETURN_IF_ERROR(CheckLaunchBinaries(config));
  }
  if (saved.has_value()) {
    server->state_ = *saved;
    if (!config.listen_given && !saved->coordinator_address.empty()) {
      // Tasks left running know the old address; serve there again.
      config.server.listen = saved->coordinator_address;
    }
  }
  COHORT_RETURN_IF_ERROR(
      CheckReachableFromTheSpecsHosts(*config.spec, config.server.listen));
  COHORT_RETURN_IF_ERROR(CheckLaunchedTasksReachable(config));
  if (previous.has_value()) {
    // The addresses are bound only in Start(): a port in use is found
    // here, while the previous cluster still runs.
    for (const std::string& address :
         {config.server.listen, config.metrics_listen}) {
      if (address.empty()) continue;
      COHORT_ASSIGN_OR_RETURN(const HostPort listen,
                              ParseHostPort(address, /*allow_port_zero=*/true));
      COHORT_RETURN_IF_ERROR(rpc::CheckCanListen(listen));
    }
    COHORT_RETURN_IF_ERROR(
        SetAsidePreviousCluster(config.state_dir, *previous, absl::Seconds(5)));
  }
  ++server->state_.incarnation;
  if (server->state_.cluster_uid.empty()) {
    absl::BitGen random;
    server->state_.cluster_uid = absl::StrCat(
        absl::Hex(absl::Uniform<uint64_t>(random), absl::kZeroPad16),
        absl::Hex(absl::Uniform<uint64_t>(random), absl::kZeroPad16));
  }
  server->state_.cluster_spec_json = config.spec->ToJson();

  const absl::Time now = SteadyNow();
  server->manager_ =
      std::make_unique<ClusterManager>(*config.spec, config.cluster, now);
  for (const PersistedTask& task : server->state_.tasks) {
    server->manager_->RestoreRestartCount(task.task, task.restart_count);
  }
  NoteUnresolvableHosts(*config.spec, *server->manager_);
  server->auth_ =
      std::make_unique<rpc::Authenticator>(config.server.security.token);
  server->coordinator_service_ = std::make_unique<CoordinatorService>(
      server->manager_.get(), server->auth_.get());
  // A ps that cannot answer within this shows its last heartbeat instead.
  server->ps_reader_ = std::make_unique<PsStatusReader>(config.server.security,
                                                        absl::Seconds(1));
  server->store_manager_ = std::make_unique<StoreManager>();
  server->pump_ = std::make_unique<rpc::StreamPump>(absl::Milliseconds(100));
  server->store_service_ = std::make_unique<StoreService>(
      server->store_manager_.get(), server->auth_.get());
  // Without a state dir, libraries and checkpoints go to a scratch dir of
  // this process.
  const std::string data_dir =
      !config.state_dir.empty()
          ? config.state_dir
          : absl::StrCat(TempDirectory(), "/cohort-coordinator-", getpid());
  // Nothing of a scratch dir outlives this process.
  if (config.state_dir.empty()) server->scratch_dir_ = data_dir;
  server->libraries_ = std::make_unique<LibraryStore>(data_dir + "/libraries");
  JobManagerOptions jobs = config.jobs;
  jobs.checkpoint_root = data_dir + "/jobs";
  jobs.cluster_uid = server->state_.cluster_uid;
  server->jobs_ = std::make_unique<JobManager>(*config.spec, jobs);
  server->job_loop_ = std::make_unique<JobLoop>(
      server->manager_.get(), server->jobs_.get(), server->store_manager_.get(),
      config.state_dir.empty() ? "" : config.state_dir + "/jobs.json",
      server->libraries_.get());
  COHORT_RETURN_IF_ERROR(server->job_loop_->Restore());
  server->admin_service_ = std::make_unique<AdminService>(
      server->manager_.get(), server->auth_.get(), server->ps_reader_.get(),
      server->store_manager_.get(),
      CoordinatorIdentity{
          .launch_mode = config.launch == LaunchMode::kLocal ? "local" : "none",
          .incarnation = server->state_.incarnation,
          .cluster_uid = server->state_.cluster_uid,
          .started = now},
      LogAccess{.own_log = &LogBuffer::Default(),
                .jobs = server->jobs_.get(),
                .pump = server->pump_.get(),
                .security = config.server.security});
  // Two threads: one large upload does not hold up an agent's fetch.
  server->slow_ = std::make_unique<Executor>(2, "coord-slow");
  server->fan_out_ = std::make_unique<Executor>(2, "coord-fan-out");
  server->jobs_service_ = std::make_unique<JobsService>(
      server->jobs_.get(), server->libraries_.get(), server->auth_.get(),
      server->slow_.get(), server->fan_out_.get(),
      [loop = server->job_loop_.get()] { return loop->SaveNow(); },
      config.server.security, server->pump_.get());
  server->job_control_service_ = std::make_unique<JobControlService>(
      server->jobs_.get(), server->libraries_.get(), server->auth_.get(),
      server->slow_.get());
  if (config.task_log_dir.empty() && !config.state_dir.empty()) {
    config.task_log_dir = config.state_dir + "/logs";
  }
  server->config_ = std::move(config);
  return server;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

std::vector<LaunchPlan> CoordinatorServer::PlanLaunches() const {
  std::vector<LaunchPlan> plans;
  const ClusterSpec& spec = *config_.spec;
  const std::vector<std::string> security =
      rpc::Security::ToFlags(config_.security_files);
  for (const TaskId& task : spec.tasks()) {
    if (!IsProcessTask(task)) continue;
    const bool is_ps = task.type == kPs;
    const std::string address = *spec.address(task);
    const std::optional<HostPort> local = AddressOnThisHost(spec, task);
    if (!local) {
      spdlog::info("{} at {} is not on this host; waiting for it to register",
                   task.ToString(), address);
      continue;
    }
    LaunchPlan plan;
    plan.task = task;
    std::vector<std::string>& argv = plan.spawn.argv;
    argv = {is_ps ? config_.ps_binary : config_.agent_binary,
            absl::StrCat("--task=", task.ToString()),
            absl::StrCat("--coordinator=", server_->DialAddress()),
            absl::StrCat("--listen=", address),
            absl::StrCat("--log_level=", config_.log_level)};
    if (!is_ps) {
      argv.push_back(absl::StrCat("--cpu_devices=", config_.cpu_devices));
      argv.push_back(absl::StrCat(
          "--stop_timeout=", absl::FormatDuration(config_.agent_stop_timeout)));
      // So that a stopped cluster's agents checkpoint within the grace the
      // supervisor gives them, not past it.
      argv.push_back(absl::StrCat("--shutdown_checkpoint_timeout=",
                                  absl::FormatDuration(StopGraceCheckpointShare(
                                      config_.supervisor.stop_grace))));
      // Its library cache and checkpoint copies, kept with the cluster.
      if (!config_.state_dir.empty()) {
        argv.push_back(absl::StrCat("--state_dir=", config_.state_dir,
                                    "/agents/", task.type, "-", task.index));
      }
    }
    if (config_.task_orphan_timeout > absl::ZeroDuration()) {
      argv.push_back(
          absl::StrCat("--orphan_timeout=",
                       absl::FormatDuration(config_.task_orphan_timeout)));
    }
    // Each ps task snapshots its shard under the coordinator's state, so
    // that a restarted task (or a restarted cluster) resumes from it.
    if (is_ps && !config_.state_dir.empty()) {
      argv.push_back(
          absl::StrCat("--state_dir=", config_.state_dir, "/ps/", task.index));
    }
    if (!config_.metrics_listen.empty()) {
      argv.push_back(absl::StrCat("--metrics_listen=",
                                  HostPort{local->host, 0}.ToString()));
    }
    argv.insert(argv.end(), security.begin(), security.end());
    plan.spawn.env["TF_CONFIG"] = TfConfigFor(spec, task);
    // Under systemd only the coordinator reports readiness and feeds the
    // watchdog (it supervises its children itself); children talking to
    // its notify socket would only earn warnings.
    plan.spawn.unset_env = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"};
    // The coordinator stops its children itself, in order; a terminal's ^C
    // must not reach them first.
    plan.spawn.new_process_group = true;
    if (!config_.task_log_dir.empty()) {
      plan.spawn.output_file = absl::StrCat(config_.task_log_dir, "/",
                                            task.type, "-", task.index, ".log");
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

absl::Status CoordinatorServer::Start() {
  store_manager_->Start();
  server_ = std::make_unique<rpc::RpcServer>(config_.server);
  AddServices(*server_);
  absl::Status started = server_->Start();
  if (!started.ok() && !config_.listen_given &&
      config_.server.listen == state_.coordinator_address) {
    spdlog::warn(
        "cannot serve on the saved address {} ({}); serving elsewhere, so "
        "tasks left running must be restarted",
        state_.coordinator_address, std::string(started.message()));
    // Another port on the same host, where other hosts' tasks can still
    // reach it; loopback when that host is gone too.
    absl::StatusOr<HostPort> saved =
        ParseHostPort(state_.coordinator_address, true);
    std::vector<std::string> fallbacks = {"127.0.0.1:0"};
    if (saved.ok() && saved->host != "127.0.0.1") {
      fallbacks.insert(fallbacks.begin(), HostPort{saved->host, 0}.ToString());
    }
    for (const std::string& listen : fallbacks) {
      rpc::ServerOptions fallback = config_.server;
      fallback.listen = listen;
      server_ = std::make_unique<rpc::RpcServer>(fallback);
      AddServices(*server_);
      started = server_->Start();
      if (started.ok()) break;
    }
  }
  COHORT_RETURN_IF_ERROR(started);
  admin_service_->set_address(server_->DialAddress());
  if (absl::Status metrics = StartMetrics(); !metrics.ok()) {
    server_->Shutdown();
    return metrics;
  }
  started_ = true;
  state_.coordinator_address = server_->address();
  spdlog::info(
      "coordinator serving on {} (incarnation {}, {} tasks, launch={})",
      server_->address(), state_.incarnation, config_.spec->tasks().size(),
      config_.launch == LaunchMode::kLocal ? "local" : "none");

  supervisor_ =
      std::make_unique<Supervisor>(manager_.get(), config_.supervisor);
  if (config_.launch == LaunchMode::kLocal) {
    if (!config_.task_log_dir.empty()) {
      COHORT_RETURN_IF_ERROR(MakeDirectories(config_.task_log_dir));
    }
    for (LaunchPlan& plan : PlanLaunches()) {
      int64_t adopt_pid = 0;
      for (const PersistedTask& saved : state_.tasks) {
        if (saved.task == plan.task && saved.launched) adopt_pid = saved.pid;
      }
      supervisor_->Add(std::move(plan), adopt_pid);
    }
  }
  supervisor_->set_on_change([this] { return PersistState(); });
  supervisor_->Start();
  job_loop_->Start();
  return absl::OkStatus();
}

absl::Status CoordinatorServer::StartMetrics() {
  if (config_.metrics_listen.empty()) return absl::OkStatus();
  COHORT_ASSIGN_OR_RETURN(
      metrics_, rpc::MetricsHttpServer::Start(
                    {.listen = config_.metrics_listen,
                     .token = config_.server.security.MetricsToken(),
                     // Not metrics_->address(): pages are served before
                     // metrics_ is set, and while it is reset.
                     .json_pages = {{"/sd",
                                     [this](const std::string& address) {
                                       return ServiceDiscoveryJson(
                                           address,
                                           manager_->Snapshot(SteadyNow()));
                                     }}}},
                    &MetricRegistry::Default()));
  admin_service_->set_metrics_address(metrics_->address());
  cluster_metrics_ =
      ScopedCollector(&MetricRegistry::Default(), [this](MetricWriter& out) {
        WriteClusterMetrics(manager_->Snapshot(SteadyNow()), jobs_->List(),
                            out);
      });
  return absl::OkStatus();
}

void CoordinatorServer::AddServices(rpc::RpcServer& server) {
  server.AddService(coordinator_service_.get());
  server.AddService(admin_service_.get());
  server.AddService(store_service_.get());
  server.AddService(jobs_service_.get());
  server.AddService(job_control_service_.get());
}

bool CoordinatorServer::PersistState() {
  if (!store_.has_value()) return true;
  PersistedState state = state_;
  state.tasks = supervisor_ != nullptr ? supervisor_->Tasks()
                                       : std::vector<PersistedTask>{};
  // Tasks an earlier coordinator of this state dir launched, and that this
  // one does not manage (--launch=none), stay on record: a later one that
  // launches adopts them then, instead of starting a second process
  // beside each, which could not bind the task's port.
  for (const PersistedTask& saved : state_.tasks) {
    const bool managed = std::any_of(
        state.tasks.begin(), state.tasks.end(),
        [&](const PersistedTask& t) { return t.task == saved.task; });
    if (saved.launched && !managed) state.tasks.push_back(saved);
  }
  absl::Status saved = store_->Save(state);
  if (!saved.ok()) {
    if (!persist_failing_.exchange(true)) {
      spdlog::error("cannot save state: {}; trying again until it can",
                    saved.ToString());
    }
    return false;
  }
  if (persist_failing_.exchange(false)) spdlog::info("state saved again");
  return true;
}

void CoordinatorServer::Shutdown() {
  if (!started_) return;
  started_ = false;
  cluster_metrics_ = ScopedCollector();
  metrics_.reset();
  job_loop_->Shutdown();
  spdlog::info("stopping: terminating launched tasks");
  supervisor_->Shutdown();
  job_loop_->SaveFinal();
  PersistState();
  // Parked store waits end first, so that the server's shutdown need not
  // cancel them.
  store_manager_->Shutdown();
  pump_->Shutdown();
  server_->Shutdown(absl::Milliseconds(500));
  slow_->Shutdown();
  fan_out_->Shutdown();
  if (!scratch_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir_, ignored);
  }
  spdlog::info("stopped");
}

}  // namespace cohort::coordinator
