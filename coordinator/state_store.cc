#include "coordinator/state_store.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace cohort::coordinator {
namespace {

constexpr int kFormatVersion = 1;

absl::Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(path, ": corrupt coordinator state (", what,
                   "); move the file away to start with a fresh state"));
}

// The member `key` of `object`, or null when absent (operator[] on a const
// json with a missing key is undefined behaviour).
const nlohmann::json& Field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

}  // namespace

StateStore::StateStore(std::string dir)
    : dir_(std::move(dir)), path_(dir_ + "/coordinator_state.json") {}

absl::StatusOr<std::optional<PersistedState>> StateStore::Load() const {
  if (!std::filesystem::exists(path_)) return std::nullopt;
  COHORT_ASSIGN_OR_RETURN(std::string text, ReadFile(path_));
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return Corrupt(path_, "not a JSON object");
  }
  if (Field(json, "format") != kFormatVersion) {
    return Corrupt(path_, absl::StrCat("format is not ", kFormatVersion));
  }
  PersistedState state;
  const auto& incarnation = Field(json, "incarnation");
  const auto& address = Field(json, "coordinator_address");
  const auto& spec = Field(json, "cluster_spec");
  const auto& tasks = Field(json, "tasks");
  if (!incarnation.is_number_integer() || !address.is_string() ||
      !spec.is_object() || !tasks.is_array()) {
    return Corrupt(path_, "missing or mistyped top-level fields");
  }
  state.incarnation = incarnation.get<int64_t>();
  if (json.contains("cluster_uid")) {
    const auto& uid = Field(json, "cluster_uid");
    if (!uid.is_string()) return Corrupt(path_, "cluster_uid is not a string");
    state.cluster_uid = uid.get<std::string>();
  }
  state.coordinator_address = address.get<std::string>();
  state.cluster_spec_json = spec.dump();
  for (const auto& entry : tasks) {
    if (!entry.is_object() || !Field(entry, "task").is_string() ||
        !Field(entry, "pid").is_number_integer() ||
        !Field(entry, "restart_count").is_number_integer() ||
        !Field(entry, "launched").is_boolean()) {
      return Corrupt(path_, "a task entry is malformed");
    }
    absl::StatusOr<TaskId> task =
        ParseTaskId(Field(entry, "task").get<std::string>());
    if (!task.ok()) return Corrupt(path_, task.status().message());
    state.tasks.push_back(PersistedTask{
        .task = *task,
        .launched = Field(entry, "launched").get<bool>(),
        .pid = Field(entry, "pid").get<int64_t>(),
        .restart_count = Field(entry, "restart_count").get<int>(),
    });
  }
  return state;
}

absl::Status StateStore::Save(const PersistedState& state) const {
  COHORT_RETURN_IF_ERROR(MakeDirectories(dir_));
  nlohmann::json tasks = nlohmann::json::array();
  for (const PersistedTask& task : state.tasks) {
    tasks.push_back({{"task", task.task.ToString()},
                     {"launched", task.launched},
                     {"pid", task.pid},
                     {"restart_count", task.restart_count}});
  }
  nlohmann::json spec =
      nlohmann::json::parse(state.cluster_spec_json, nullptr, false);
  const nlohmann::json json = {
      {"format", kFormatVersion},
      {"incarnation", state.incarnation},
      {"cluster_uid", state.cluster_uid},
      {"coordinator_address", state.coordinator_address},
      {"cluster_spec", spec},
      {"tasks", tasks},
  };
  return WriteFileAtomically(path_, json.dump(2) + "\n");
}

}  // namespace cohort::coordinator
