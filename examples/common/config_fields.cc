#include "examples/common/config_fields.h"

#include <utility>

namespace cohort::examples {

using json = nlohmann::json;

absl::StatusOr<json> ParseConfigObject(
    const std::string& text, std::initializer_list<const char*> fields) {
  json config = json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError("config: expected a JSON object, got " +
                                      text);
  }
  for (const auto& [key, value] : config.items()) {
    bool known = false;
    for (const char* field : fields) known = known || key == field;
    if (known) continue;
    std::string names;
    for (const char* field : fields) {
      names += (names.empty() ? "" : ", ") + std::string(field);
    }
    return absl::InvalidArgumentError("config field \"" + key +
                                      "\" is not one this example reads (" +
                                      names + ")");
  }
  return config;
}

absl::Status FieldError(const char* field, const std::string& expected,
                        const json& got) {
  return absl::InvalidArgumentError("config field \"" + std::string(field) +
                                    "\": expected " + expected + ", got " +
                                    got.dump());
}

absl::Status GetString(const json& config, const char* field,
                       const std::string& expected, std::string& out) {
  auto it = config.find(field);
  if (it == config.end()) return absl::OkStatus();
  if (!it->is_string() || it->get<std::string>().empty()) {
    return FieldError(field, expected, *it);
  }
  out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetInt64(const json& config, const char* field, int64_t min,
                      int64_t max, int64_t& out) {
  auto it = config.find(field);
  if (it == config.end()) return absl::OkStatus();
  const std::string expected = "an integer in [" + std::to_string(min) + ", " +
                               std::to_string(max) + "]";
  if (!it->is_number_integer()) return FieldError(field, expected, *it);
  // Non-negative literals parse as unsigned; compare before narrowing.
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(max)) {
    return FieldError(field, expected, *it);
  }
  const int64_t value = it->get<int64_t>();
  if (value < min || value > max) return FieldError(field, expected, *it);
  out = value;
  return absl::OkStatus();
}

absl::Status GetDouble(const json& config, const char* field, double& out) {
  auto it = config.find(field);
  if (it == config.end()) return absl::OkStatus();
  if (!it->is_number()) return FieldError(field, "a number", *it);
  out = it->get<double>();
  return absl::OkStatus();
}

absl::Status GetBool(const json& config, const char* field, bool& out) {
  auto it = config.find(field);
  if (it == config.end()) return absl::OkStatus();
  if (!it->is_boolean()) return FieldError(field, "true or false", *it);
  out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status GetShardPolicy(const json& config, ShardPolicy& out) {
  auto it = config.find("shard_policy");
  if (it == config.end()) return absl::OkStatus();
  static constexpr std::pair<const char*, ShardPolicy> kPolicies[] = {
      {"auto", ShardPolicy::kAuto},
      {"file", ShardPolicy::kFile},
      {"data", ShardPolicy::kData},
      {"off", ShardPolicy::kOff}};
  if (it->is_string()) {
    for (const auto& [name, policy] : kPolicies) {
      if (it->get<std::string>() == name) {
        out = policy;
        return absl::OkStatus();
      }
    }
  }
  return FieldError("shard_policy", "\"auto\", \"file\", \"data\" or \"off\"",
                    *it);
}

}  // namespace cohort::examples
