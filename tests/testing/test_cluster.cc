#include "tests/testing/test_cluster.h"

#include <grpcpp/create_channel.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace cohort::testing {

std::string BinDir() {
  const char* dir = std::getenv("COHORT_BIN_DIR");
  return dir != nullptr ? dir : "build/bin";
}

std::string Binary(const std::string& name) { return BinDir() + "/" + name; }

std::string TestBinary(const std::string& name) {
  return BinDir() + "/../tests/" + name;
}

ScratchDir::ScratchDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr ? base : "/tmp", "/cohort-test-XXXXXX");
  path_ = mkdtemp(pattern.data());
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string ScratchDir::Write(const std::string& name,
                              const std::string& contents) const {
  const std::string file = path_ + "/" + name;
  WriteFileAtomically(file, contents).IgnoreError();
  return file;
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout,
                         const std::map<std::string, std::string>& env) {
  ScratchDir dir;
  const std::string out = dir.path() + "/output";
  CommandResult result;
  absl::StatusOr<Subprocess> child =
      Subprocess::Spawn({.argv = argv, .env = env, .output_file = out});
  if (!child.ok()) {
    result.output = std::string(child.status().message());
    return result;
  }
  std::optional<ExitStatus> status = child->Wait(timeout);
  if (!status.has_value()) {
    child->Stop(absl::Seconds(1));
  } else if (status->exited()) {
    result.exit_code = status->exit_code();
  }
  result.output = ReadFile(out).value_or("");
  return result;
}

std::string LocalSpec(int workers, int ps, int evaluators) {
  std::set<int> ports;
  while (ports.size() < static_cast<size_t>(1 + workers + ps + evaluators)) {
    ports.insert(*PickUnusedPort("127.0.0.1"));
  }
  auto next = ports.begin();
  auto take = [&](int n) {
    nlohmann::json list = nlohmann::json::array();
    for (int i = 0; i < n; ++i)
      list.push_back(absl::StrCat("127.0.0.1:", *next++));
    return list;
  };
  // A cluster spec refuses empty lists: leave out the types with no task.
  nlohmann::json cluster = {{"chief", take(1)}};
  if (workers > 0) cluster["worker"] = take(workers);
  if (ps > 0) cluster["ps"] = take(ps);
  if (evaluators > 0) cluster["evaluator"] = take(evaluators);
  return nlohmann::json({{"cluster", cluster}}).dump();
}

absl::StatusOr<std::string> HealthCheck(const std::string& address) {
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat(address, ": ", status.error_message()));
  }
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(
    const ScratchDir& dir, std::vector<std::string> flags,
    const std::string& listen, const std::vector<std::string>& prefix) {
  const std::string port_file = dir.path() + "/coordinator.port";
  std::filesystem::remove(port_file);
  const std::string log = dir.path() + "/coordinator.log";
  std::vector<std::string> argv = prefix;
  std::vector<std::string> own = {Binary("cohort-coordinator"),
                                  absl::StrCat("--listen=", listen),
                                  absl::StrCat("--port_file=", port_file)};
  argv.insert(argv.end(), own.begin(), own.end());
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<Subprocess> child =
      Subprocess::Spawn({.argv = argv, .output_file = log});
  if (!child.ok()) return child.status();
  std::string port;
  const bool up = WaitUntil(
      [&] {
        port = ReadFile(port_file).value_or("");
        return !port.empty() || child->Poll().has_value();
      },
      absl::Seconds(15));
  if (!up || port.empty()) {
    child->Stop(absl::Seconds(2));
    return absl::UnavailableError(absl::StrCat(
        "cohort-coordinator did not start: ", ReadFile(log).value_or("")));
  }
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  return std::unique_ptr<CoordinatorProcess>(new CoordinatorProcess(
      *std::move(child), absl::StrCat(host, ":", std::atoi(port.c_str())),
      log));
}

CoordinatorProcess::CoordinatorProcess(Subprocess process, std::string address,
                                       std::string log_file)
    : process_(std::move(process)),
      address_(std::move(address)),
      log_file_(std::move(log_file)) {}

CoordinatorProcess::~CoordinatorProcess() {
  if (owns_process_) process_.Stop(absl::Seconds(6));
  // Give orphans of a killed coordinator a moment, then make sure.
  KillIfAlive(seen_);
}

void CoordinatorProcess::ForgetProcess() { owns_process_ = false; }

std::string CoordinatorProcess::Log() const {
  return ReadFile(log_file_).value_or("");
}

absl::StatusOr<v1::ClusterState> CoordinatorProcess::State(
    const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(address_, options);
  if (!client.ok()) return client.status();
  absl::StatusOr<v1::ClusterState> state = (*client)->GetClusterState();
  if (state.ok()) {
    for (const v1::TaskStatus& task : state->tasks()) {
      const bool known = std::any_of(
          seen_.begin(), seen_.end(),
          [&](const SeenProcess& p) { return p.pid == task.pid(); });
      if (task.pid() <= 0 || known) continue;
      if (std::optional<SeenProcess> p = SeeProcess(task.pid())) {
        seen_.push_back(*p);
      }
    }
  }
  return state;
}

absl::StatusOr<v1::ClusterState> CoordinatorProcess::WaitForState(
    const std::function<bool(const v1::ClusterState&)>& predicate,
    absl::Duration timeout, const ClientOptions& options) {
  absl::StatusOr<v1::ClusterState> last =
      absl::DeadlineExceededError("never polled");
  const bool met = WaitUntil(
      [&] {
        last = State(options);
        return last.ok() && predicate(*last);
      },
      timeout);
  if (met) return last;
  if (!last.ok()) return last.status();
  return absl::DeadlineExceededError(
      absl::StrCat("condition not met within ", absl::FormatDuration(timeout),
                   "; last state: ", last->ShortDebugString()));
}

absl::StatusOr<v1::ClusterState> CoordinatorProcess::WaitAllReady(
    absl::Duration timeout, const ClientOptions& options) {
  return WaitForState(AllReady, timeout, options);
}

absl::StatusOr<ReadyCluster> StartReadyCluster(const ScratchDir& dir,
                                               int workers, int ps,
                                               std::vector<std::string> flags,
                                               const ClientOptions& client,
                                               int evaluators) {
  const std::string spec =
      dir.Write("cluster.json", LocalSpec(workers, ps, evaluators));
  flags.push_back(absl::StrCat("--cluster_spec=", spec));
  ReadyCluster cluster;
  absl::StatusOr<std::unique_ptr<CoordinatorProcess>> coordinator =
      CoordinatorProcess::Start(dir, flags);
  if (!coordinator.ok()) return coordinator.status();
  cluster.coordinator = *std::move(coordinator);
  absl::StatusOr<v1::ClusterState> state =
      cluster.coordinator->WaitAllReady(absl::Seconds(30), client);
  if (!state.ok()) {
    return absl::Status(state.status().code(),
                        absl::StrCat(state.status().message(), "\n",
                                     cluster.coordinator->Log()));
  }
  cluster.state = *std::move(state);
  return cluster;
}

absl::StatusOr<std::unique_ptr<SuiteCluster>> SuiteCluster::Start(
    int workers, int ps, std::vector<std::string> flags) {
  auto suite = std::make_unique<SuiteCluster>();
  absl::StatusOr<ReadyCluster> ready =
      StartReadyCluster(suite->dir, workers, ps, std::move(flags));
  if (!ready.ok()) return ready.status();
  suite->coordinator = std::move(ready->coordinator);
  suite->state = std::move(ready->state);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(suite->coordinator->address());
  if (!client.ok()) return client.status();
  suite->client = *std::move(client);
  return suite;
}

bool WaitAllGone(const std::vector<int64_t>& pids, absl::Duration timeout) {
  return WaitUntil(
      [&] {
        return std::none_of(pids.begin(), pids.end(), [](int64_t pid) {
          return ProcessAlive(static_cast<pid_t>(pid));
        });
      },
      timeout);
}

std::vector<int64_t> TaskPids(const v1::ClusterState& state) {
  std::vector<int64_t> pids;
  for (const v1::TaskStatus& task : state.tasks()) pids.push_back(task.pid());
  return pids;
}

const v1::TaskStatus* FindTask(const v1::ClusterState& state,
                               const std::string& type, int index) {
  for (const v1::TaskStatus& task : state.tasks()) {
    if (task.task().type() == type && task.task().index() == index)
      return &task;
  }
  return nullptr;
}

bool AllReady(const v1::ClusterState& state) {
  for (const v1::TaskStatus& task : state.tasks()) {
    if (task.state() != v1::READY) return false;
  }
  return state.tasks_size() > 0;
}

std::optional<SeenProcess> SeeProcess(int64_t pid) {
  const std::string stat =
      ReadFile(absl::StrCat("/proc/", pid, "/stat")).value_or("");
  // Fields after the command name, which may hold spaces and parentheses:
  // state is field 3, starttime field 22.
  const size_t end = stat.rfind(')');
  if (end == std::string::npos) return std::nullopt;
  const std::vector<std::string> fields =
      absl::StrSplit(stat.substr(end + 1), ' ', absl::SkipEmpty());
  SeenProcess seen{.pid = pid};
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &seen.start_ticks)) {
    return std::nullopt;
  }
  return seen;
}

void KillIfAlive(const std::vector<SeenProcess>& processes) {
  for (const SeenProcess& process : processes) {
    const std::optional<SeenProcess> now = SeeProcess(process.pid);
    if (now.has_value() && now->start_ticks == process.start_ticks) {
      kill(static_cast<pid_t>(process.pid), SIGKILL);
    }
  }
}

void KillIfAlive(const std::vector<int64_t>& pids) {
  for (int64_t pid : pids) {
    const pid_t p = static_cast<pid_t>(pid);
    // Only our own daemons, never a process that reused the pid.
    if (ProcessAlive(p) &&
        absl::StrContains(ProcessCommandLine(p), "/cohort-")) {
      kill(p, SIGKILL);
    }
  }
}

}  // namespace cohort::testing
