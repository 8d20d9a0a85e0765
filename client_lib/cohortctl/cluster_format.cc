#include "client_lib/cohortctl/cluster_format.h"

#include <algorithm>
#include <vector>

#include "client_lib/cohortctl/table.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

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
  return absl::StrFormat("%dKiB", bytes / 1024);
}

std::string TaskDetail(const v1::TaskStatus& task) {
  std::vector<std::string> parts;
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
        {"devices", devices},
        {"launched", task.launched()},
        {"last_error", task.last_error()},
        {"hostname", task.hostname()},
        {"version", task.version()},
        {"features", std::vector<std::string>(task.features().begin(),
                                              task.features().end())},
    };
    if (task.has_ps()) {
      entry["ps"] = {{"shard_id", task.ps().shard_id()},
                     {"variable_bytes", task.ps().variable_bytes()},
                     {"num_variables", task.ps().num_variables()},
                     {"rss_bytes", task.ps().rss_bytes()}};
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
      {"cluster_spec",
       nlohmann::json::parse(state.cluster_spec_json(), nullptr, false)},
      {"tasks", tasks},
  };
}

std::string ClusterStateToTable(const v1::ClusterState& state) {
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
                    TaskDetail(task)});
  }
  return out + AlignColumns(rows);
}

}  // namespace cohort::ctl
