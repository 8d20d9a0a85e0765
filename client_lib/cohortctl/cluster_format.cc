#include "client_lib/cohortctl/cluster_format.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client_lib/cohortctl/table.h"

namespace cohort::ctl {
namespace {

std::string DeviceName(const v1::Device& device) {
  return device.kind() == v1::Device::CUDA
             ? absl::StrCat("cuda:", device.index())
             : absl::StrCat("cpu:", device.index());
}

std::string HeartbeatAge(int64_t age_ms) {
  if (age_ms < 0) return "-";
  return absl::StrFormat("%.1fs", age_ms / 1000.0);
}

std::string Uptime(int64_t ms) {
  // FormatDuration prints a zero duration as "0"; say "0s".
  return ms < 1000 ? "0s" : absl::FormatDuration(absl::Seconds(ms / 1000));
}

std::string Bytes(int64_t bytes) {
  if (bytes >= (1LL << 30))
    return absl::StrFormat("%.1fGiB", bytes / double(1LL << 30));
  if (bytes >= (1LL << 20))
    return absl::StrFormat("%.1fMiB", bytes / double(1LL << 20));
  // A small shard is not "0KiB".
  if (bytes >= 1024) return absl::StrFormat("%.1fKiB", bytes / 1024.0);
  return absl::StrFormat("%dB", bytes);
}

// "4.2s ago (1500 updates)", or "-" before the first snapshot.
std::string LastSnapshot(const v1::PsInfo& ps, absl::Time now) {
  if (ps.last_snapshot_unix_ms() <= 0) return "-";
  // The ps task's clock may run a little ahead of this one.
  const int64_t age_ms = std::max<int64_t>(
      0, absl::ToUnixMillis(now) - ps.last_snapshot_unix_ms());
  return absl::StrCat(HeartbeatAge(age_ms), " ago (",
                      ps.last_snapshot_updates(), " updates)");
}

// One row per ps task: what its shard holds.
std::string PsTable(const v1::ClusterState& state, absl::Time now) {
  std::vector<std::vector<std::string>> rows = {
      {"PS", "SHARD", "JOB", "VARIABLES", "BYTES", "UPDATES", "LAST SNAPSHOT"}};
  for (const v1::TaskStatus& task : state.tasks()) {
    if (task.task().type() != "ps") continue;
    const std::string name =
        absl::StrCat(task.task().type(), ":", task.task().index());
    if (!task.has_ps()) {
      rows.push_back({name, "-", "-", "-", "-", "-", "-"});
      continue;
    }
    const v1::PsInfo& ps = task.ps();
    rows.push_back({name, absl::StrCat(ps.shard_id()),
                    ps.job_id().empty() ? "-" : ps.job_id(),
                    absl::StrCat(ps.num_variables()),
                    Bytes(ps.variable_bytes()), absl::StrCat(ps.updates()),
                    LastSnapshot(ps, now)});
  }
  return rows.size() > 1 ? AlignColumns(rows) : "";
}

constexpr int64_t kClockWarningMs = 1000;

std::string TaskDetail(const v1::TaskStatus& task,
                       const std::string& coordinator_version) {
  std::vector<std::string> parts;
  // Hosts upgraded one by one run mixed versions for a while; what a job
  // meets there should not be a surprise.
  if (!task.version().empty() && !coordinator_version.empty() &&
      task.version() != coordinator_version) {
    parts.push_back(absl::StrCat("version ", task.version(),
                                 ", not the coordinator's ",
                                 coordinator_version));
  }
  if (task.devices_size() > 0) {
    std::vector<std::string> names;
    for (const auto& device : task.devices())
      names.push_back(DeviceName(device));
    parts.push_back(absl::StrJoin(names, ","));
  }
  if (task.has_ps()) {
    parts.push_back(absl::StrCat("shard ", task.ps().shard_id(), ", ",
                                 Bytes(task.ps().variable_bytes()), " vars, ",
                                 Bytes(task.ps().rss_bytes()), " rss"));
  }
  // A clock this far off misplaces the task's lines and spans; NTP keeps
  // hosts within milliseconds.
  if (std::abs(task.clock_offset_ms()) >= kClockWarningMs) {
    parts.push_back(
        absl::StrFormat("clock %+.1fs off", task.clock_offset_ms() / 1000.0));
  }
  if (task.state() != v1::READY && !task.last_error().empty()) {
    parts.push_back(task.last_error());
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

nlohmann::json ClusterStateToJson(const v1::ClusterState& state) {
  nlohmann::json tasks = nlohmann::json::array();
  for (const v1::TaskStatus& task : state.tasks()) {
    nlohmann::json devices = nlohmann::json::array();
    for (const v1::Device& device : task.devices()) {
      devices.push_back({{"kind", v1::Device::Kind_Name(device.kind())},
                         {"index", device.index()},
                         {"name", device.name()},
                         {"memory_bytes", device.memory_bytes()}});
    }
    nlohmann::json entry = {
        {"type", task.task().type()},
        {"index", task.task().index()},
        {"address", task.address()},
        {"pid", task.pid()},
        {"state", v1::TaskState_Name(task.state())},
        {"restart_count", task.restart_count()},
        {"last_heartbeat_age_ms", task.last_heartbeat_age_ms()},
        {"clock_offset_ms", task.clock_offset_ms()},
        {"devices", devices},
        {"launched", task.launched()},
        {"last_error", task.last_error()},
        {"hostname", task.hostname()},
        {"version", task.version()},
        {"features", std::vector<std::string>(task.features().begin(),
                                              task.features().end())},
    };
    if (task.has_ps()) {
      const v1::PsInfo& ps = task.ps();
      nlohmann::json variables = nlohmann::json::array();
      for (const v1::PsVariableInfo& variable : ps.variables()) {
        variables.push_back(
            {{"name", variable.name()},
             {"shape", std::vector<int64_t>(variable.shape().begin(),
                                            variable.shape().end())},
             {"bytes", variable.bytes()},
             {"updates", variable.updates()}});
      }
      entry["ps"] = {{"shard_id", ps.shard_id()},
                     {"variable_bytes", ps.variable_bytes()},
                     {"num_variables", ps.num_variables()},
                     {"rss_bytes", ps.rss_bytes()},
                     {"job_id", ps.job_id()},
                     {"updates", ps.updates()},
                     {"restored_updates", ps.restored_updates()},
                     {"last_snapshot_unix_ms", ps.last_snapshot_unix_ms()},
                     {"last_snapshot_updates", ps.last_snapshot_updates()},
                     {"last_snapshot_path", ps.last_snapshot_path()},
                     {"variables", variables}};
    }
    tasks.push_back(std::move(entry));
  }
  return {
      {"coordinator_address", state.coordinator_address()},
      {"coordinator_pid", state.coordinator_pid()},
      {"version", state.version()},
      {"uptime_ms", state.uptime_ms()},
      {"launch_mode", state.launch_mode()},
      {"incarnation", state.incarnation()},
      {"cluster_uid", state.cluster_uid()},
      {"store_keys", state.store_keys()},
      {"cluster_spec",
       nlohmann::json::parse(state.cluster_spec_json(), nullptr, false)},
      {"tasks", tasks},
  };
}

std::string ClusterStateToTable(const v1::ClusterState& state, absl::Time now) {
  int ready = 0;
  for (const auto& task : state.tasks()) ready += task.state() == v1::READY;
  std::string out = absl::StrFormat(
      "coordinator %s  version %s  up %s  launch=%s  %d/%d tasks ready\n\n",
      state.coordinator_address(), state.version(), Uptime(state.uptime_ms()),
      state.launch_mode(), ready, state.tasks_size());
  const std::vector<std::string> header = {
      "TASK", "STATE", "ADDRESS", "PID", "RESTARTS", "HEARTBEAT", "DETAIL"};
  std::vector<std::vector<std::string>> rows = {header};
  for (const v1::TaskStatus& task : state.tasks()) {
    rows.push_back({absl::StrCat(task.task().type(), ":", task.task().index()),
                    v1::TaskState_Name(task.state()), task.address(),
                    task.pid() > 0 ? absl::StrCat(task.pid()) : "-",
                    absl::StrCat(task.restart_count()),
                    HeartbeatAge(task.last_heartbeat_age_ms()),
                    TaskDetail(task, state.version())});
  }
  out += AlignColumns(rows);
  if (const std::string shards = PsTable(state, now); !shards.empty()) {
    out += "\n" + shards;
  }
  return out;
}

}  // namespace cohort::ctl
