#include "common/cluster_spec.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace cohort {
namespace {

using Json = nlohmann::json;
using ClusterMap = std::map<std::string, std::vector<std::string>>;

// Canonical order of task types: task_types(), tasks() and validation.
constexpr absl::string_view kTaskTypes[] = {kChief, kWorker, kPs, kEvaluator};
constexpr absl::string_view kKnownTypes = "known: chief, worker, ps, evaluator";

absl::Status PathError(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// Same code, message prefixed with where the input came from.
absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

// "array", "string \"0\"", "number 1.5": enough to see what was written.
std::string Describe(const Json& value) {
  if (value.is_string()) {
    return absl::StrCat("string ", Quoted(value.get_ref<const std::string&>()));
  }
  if (value.is_number()) return absl::StrCat("number ", value.dump());
  return value.type_name();
}

std::string CountOf(size_t n, absl::string_view type) {
  return absl::StrCat(n, " ", type, n == 1 ? " task" : " tasks");
}

// SAX handler that accepts every event and records the syntax error.
// json::parse(..., allow_exceptions=false) only says "discarded"; a second
// pass through this handler recovers where and why, without exceptions.
struct SyntaxErrorLocator {
  size_t position = 0;
  std::string reason;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(Json::number_integer_t) { return true; }
  bool number_unsigned(Json::number_unsigned_t) { return true; }
  bool number_float(Json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(Json::binary_t&) { return true; }
  bool start_object(size_t) { return true; }
  bool key(std::string&) { return true; }
  bool end_object() { return true; }
  bool start_array(size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(size_t pos, const std::string&, const Json::exception& e) {
    position = pos;
    reason = e.what();
    return false;
  }
};

absl::Status SyntaxError(absl::string_view text) {
  SyntaxErrorLocator locator;
  Json::sax_parse(text.begin(), text.end(), &locator);
  // nlohmann counts the offending byte as read, so its position is 1-based.
  const size_t offset = locator.position > 0 ? locator.position - 1 : 0;
  // what() reads "[json.exception.parse_error.101] parse error at line 1,
  // column 6: syntax error ..."; keep the line and column and the reason.
  std::string detail = locator.reason;
  const size_t at = detail.find(" at line ");
  const size_t colon = detail.find(": ", at == std::string::npos ? 0 : at);
  std::string where, why;
  if (at != std::string::npos && colon != std::string::npos) {
    where = detail.substr(at + 4, colon - at - 4);  // "line 1, column 6"
    why = detail.substr(colon + 2);
  } else {
    why = detail;
  }
  return PathError("$",
                   absl::StrCat("not valid JSON (parse error at byte ", offset,
                                where.empty() ? "" : ", ", where, "): ", why));
}

// Validates one task type's list. `seen` maps address keys to the JSON path
// that first used them, across the whole cluster.
absl::StatusOr<std::vector<std::string>> ParseTaskList(
    const std::string& path, const Json& list,
    std::map<std::string, std::string>& seen) {
  if (!list.is_array()) {
    return PathError(path, absl::StrCat("expected a list of \"host:port\" "
                                        "strings, got ",
                                        list.type_name()));
  }
  if (list.empty()) {
    return PathError(path,
                     "empty list (list at least one \"host:port\", or "
                     "leave the task type out)");
  }
  std::vector<std::string> addresses;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string element_path = absl::StrCat(path, "[", i, "]");
    if (!list[i].is_string()) {
      return PathError(element_path,
                       absl::StrCat("expected a \"host:port\" string, got ",
                                    Describe(list[i])));
    }
    const std::string& text = list[i].get_ref<const std::string&>();
    absl::StatusOr<HostPort> address = SplitHostPort(text, false);
    if (!address.ok()) {
      const std::string context =
          text.empty() ? "" : absl::StrCat(" (address ", Quoted(text), ")");
      return PathError(element_path,
                       absl::StrCat(address.status().message(), context));
    }
    if (address->IsWildcard()) {
      return PathError(
          element_path,
          absl::StrCat(Quoted(text),
                       " is a listen address (every interface), not one "
                       "other tasks can dial: give this host's name or IP, "
                       "and --listen=",
                       text, " to the task itself"));
    }
    auto [first, inserted] = seen.emplace(AddressKey(*address), element_path);
    if (!inserted) {
      return PathError(element_path,
                       absl::StrCat("address ", Quoted(text),
                                    " is already used by ", first->second));
    }
    addresses.push_back(text);
  }
  return addresses;
}

absl::StatusOr<ClusterMap> ParseCluster(const Json& root) {
  const auto it = root.find("cluster");
  if (it == root.end()) {
    return PathError("$.cluster",
                     "missing (a TF_CONFIG needs a \"cluster\" object)");
  }
  const Json& cluster = *it;
  if (!cluster.is_object()) {
    return PathError("$.cluster", absl::StrCat("expected an object, got ",
                                               cluster.type_name()));
  }
  if (cluster.empty()) {
    return PathError("$.cluster", "empty (a cluster needs at least one task)");
  }
  // Check the keys first, so that a typo ("workers") is reported as such.
  for (const auto& [type, unused] : cluster.items()) {
    if (type.empty())
      return PathError("$.cluster", "empty task type name \"\"");
    if (!IsKnownTaskType(type)) {
      return PathError("$.cluster",
                       absl::StrCat("unknown task type ", Quoted(type), " (",
                                    kKnownTypes, ")"));
    }
  }
  ClusterMap result;
  std::map<std::string, std::string> seen;
  for (absl::string_view type : kTaskTypes) {
    const auto list = cluster.find(std::string(type));
    if (list == cluster.end()) continue;
    const std::string path = absl::StrCat("$.cluster.", type);
    COHORT_ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                            ParseTaskList(path, *list, seen));
    // TensorFlow runs at most one chief and one evaluator.
    if ((type == kChief || type == kEvaluator) && addresses.size() > 1) {
      return PathError(path, absl::StrCat(CountOf(addresses.size(), type),
                                          " (at most one is allowed)"));
    }
    result.emplace(std::string(type), std::move(addresses));
  }
  return result;
}

absl::StatusOr<TaskId> ParseTask(const Json& task, const ClusterMap& cluster) {
  if (!task.is_object()) {
    return PathError(
        "$.task", absl::StrCat("expected an object, got ", task.type_name()));
  }
  const auto type = task.find("type");
  if (type == task.end()) {
    return PathError("$.task.type",
                     "missing (expected a task type such as "
                     "\"worker\")");
  }
  if (!type->is_string()) {
    return PathError("$.task.type",
                     absl::StrCat("expected a string, got ", Describe(*type)));
  }
  TaskId id;
  id.type = type->get<std::string>();
  if (!IsKnownTaskType(id.type)) {
    return PathError("$.task.type",
                     absl::StrCat("unknown task type ", Quoted(id.type), " (",
                                  kKnownTypes, ")"));
  }
  const auto tasks = cluster.find(id.type);
  if (tasks == cluster.end()) {
    std::vector<std::string> present;
    for (const auto& [name, unused] : cluster) present.push_back(name);
    return PathError(
        "$.task.type",
        absl::StrCat("the cluster has no ", Quoted(id.type),
                     " tasks (it has: ", absl::StrJoin(present, ", "), ")"));
  }
  const auto index = task.find("index");
  if (index == task.end()) {
    return PathError("$.task.index", "missing (expected an integer)");
  }
  // TF requires a JSON integer: "0" and 1.0 are mistakes, not indexes.
  if (!index->is_number_integer()) {
    return PathError("$.task.index", absl::StrCat("expected an integer, got ",
                                                  Describe(*index)));
  }
  const size_t count = tasks->second.size();
  if (!index->is_number_unsigned() && index->get<int64_t>() < 0) {
    return PathError("$.task.index",
                     absl::StrCat("index ", index->dump(), " is negative"));
  }
  const uint64_t value = index->get<uint64_t>();
  if (value >= count) {
    return PathError("$.task.index", absl::StrCat("index ", value,
                                                  " is out of range: cluster "
                                                  "has ",
                                                  CountOf(count, id.type)));
  }
  id.index = static_cast<int>(value);
  return id;
}

}  // namespace

bool IsKnownTaskType(absl::string_view type) {
  for (absl::string_view known : kTaskTypes) {
    if (type == known) return true;
  }
  return false;
}

std::string TaskId::ToString() const { return absl::StrCat(type, ":", index); }

absl::StatusOr<TaskId> ParseTaskId(absl::string_view text) {
  auto error = [text](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid task id ", Quoted(text), ": ", what));
  };
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) {
    return error("expected \"type:index\", as in \"worker:0\"");
  }
  TaskId id;
  id.type = std::string(text.substr(0, colon));
  if (!IsKnownTaskType(id.type)) {
    return error(absl::StrCat("unknown task type ", Quoted(id.type), " (",
                              kKnownTypes, ")"));
  }
  absl::string_view index = text.substr(colon + 1);
  // At most 9 digits, so the index always fits an int.
  bool digits = !index.empty() && index.size() <= 9;
  for (char c : index) digits = digits && absl::ascii_isdigit(c);
  if (!digits) {
    return error(absl::StrCat("index ", Quoted(index),
                              " is not a non-negative integer"));
  }
  for (char c : index) id.index = id.index * 10 + (c - '0');
  return id;
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromJson(absl::string_view json) {
  // JSON lets a key repeat and the last one win: a second "worker" list
  // would silently replace the first, so a repeated key is an error.
  struct Object {
    std::set<std::string> keys;
    std::string current;
  };
  std::vector<Object> objects;
  std::string duplicate;  // its path
  const Json::parser_callback_t find_duplicate =
      [&](int, Json::parse_event_t event, Json& parsed) {
        if (event == Json::parse_event_t::object_start) {
          objects.emplace_back();
        } else if (event == Json::parse_event_t::object_end &&
                   !objects.empty()) {
          objects.pop_back();
        } else if (event == Json::parse_event_t::key && !objects.empty()) {
          objects.back().current = parsed.get<std::string>();
          if (!objects.back().keys.insert(objects.back().current).second &&
              duplicate.empty()) {
            duplicate = "$";
            for (const Object& object : objects) {
              absl::StrAppend(&duplicate, ".", object.current);
            }
          }
        }
        return true;
      };
  const Json root = Json::parse(json.begin(), json.end(), find_duplicate,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) return SyntaxError(json);
  if (!duplicate.empty()) {
    return PathError(duplicate,
                     "appears twice in its object (only one may be given)");
  }
  if (!root.is_object()) {
    return PathError(
        "$", absl::StrCat("expected an object, got ", root.type_name()));
  }
  ClusterSpec spec;
  COHORT_ASSIGN_OR_RETURN(spec.cluster_, ParseCluster(root));
  // Unknown top-level keys ("environment", "rpc_layer") are ignored.
  const auto task = root.find("task");
  if (task != root.end()) {
    COHORT_ASSIGN_OR_RETURN(spec.task_, ParseTask(*task, spec.cluster_));
  }
  return spec;
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (file == nullptr) {
    const int error = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(error),
        absl::StrCat(path, ": cannot read: ", std::strerror(error)));
  }
  std::string contents;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
  }
  // A directory opens fine and fails here, with EISDIR.
  const int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    return absl::Status(
        absl::ErrnoToStatusCode(error),
        absl::StrCat(path, ": cannot read: ", std::strerror(error)));
  }
  absl::StatusOr<ClusterSpec> spec = FromJson(contents);
  if (!spec.ok()) return WithPrefix(spec.status(), path);
  return spec;
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromEnvironment() {
  const char* value = std::getenv("TF_CONFIG");
  if (value == nullptr) return absl::NotFoundError("TF_CONFIG is not set");
  // An empty variable is how shells and manifests often "unset" it.
  if (*value == '\0') return absl::NotFoundError("TF_CONFIG is set but empty");
  absl::StatusOr<ClusterSpec> spec = FromJson(value);
  if (!spec.ok()) return WithPrefix(spec.status(), "TF_CONFIG");
  return spec;
}

std::vector<std::string> ClusterSpec::task_types() const {
  std::vector<std::string> types;
  for (absl::string_view type : kTaskTypes) {
    if (cluster_.count(std::string(type)) > 0) types.emplace_back(type);
  }
  return types;
}

int ClusterSpec::num_tasks(absl::string_view type) const {
  const auto it = cluster_.find(std::string(type));
  return it == cluster_.end() ? 0 : static_cast<int>(it->second.size());
}

std::vector<TaskId> ClusterSpec::tasks() const {
  std::vector<TaskId> result;
  for (const std::string& type : task_types()) {
    for (int i = 0; i < num_tasks(type); ++i) result.push_back({type, i});
  }
  return result;
}

absl::StatusOr<std::string> ClusterSpec::address(const TaskId& task) const {
  const auto it = cluster_.find(task.type);
  if (it == cluster_.end() || task.index < 0 ||
      static_cast<size_t>(task.index) >= it->second.size()) {
    return absl::NotFoundError(absl::StrCat(
        "task ", task.ToString(), " is not in the cluster (it has ",
        CountOf(it == cluster_.end() ? 0 : it->second.size(), task.type), ")"));
  }
  return it->second[task.index];
}

std::optional<TaskId> ClusterSpec::FindByAddress(
    absl::string_view address) const {
  absl::StatusOr<HostPort> wanted = SplitHostPort(address, true);
  if (!wanted.ok()) return std::nullopt;
  const std::string key = AddressKey(*wanted);
  for (const std::string& type : task_types()) {
    const std::vector<std::string>& addresses = cluster_.find(type)->second;
    for (size_t i = 0; i < addresses.size(); ++i) {
      // Stored addresses were validated by FromJson, so this parse succeeds.
      absl::StatusOr<HostPort> candidate = SplitHostPort(addresses[i], false);
      if (candidate.ok() && AddressKey(*candidate) == key) {
        return TaskId{type, static_cast<int>(i)};
      }
    }
  }
  return std::nullopt;
}

std::string ClusterSpec::ToJson() const {
  Json root;
  root["cluster"] = Json::object();
  for (const auto& [type, addresses] : cluster_) {
    root["cluster"][type] = addresses;
  }
  if (task_.has_value()) {
    root["task"] = {{"type", task_->type}, {"index", task_->index}};
  }
  return root.dump();
}

}  // namespace cohort
