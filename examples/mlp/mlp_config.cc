#include "examples/mlp/mlp_config.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace cohort::examples {
namespace {

using json = nlohmann::json;

absl::Status FieldError(const char* field, const std::string& expected,
                        const json& got) {
  return absl::InvalidArgumentError("config field \"" + std::string(field) +
                                    "\": expected " + expected + ", got " +
                                    got.dump());
}

template <typename Int>
absl::Status GetInt(const json& config, const char* field, Int min, Int max,
                    Int& out) {
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
  if (value < int64_t(min) || value > int64_t(max)) {
    return FieldError(field, expected, *it);
  }
  out = static_cast<Int>(value);
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

}  // namespace

absl::StatusOr<MlpConfig> ParseMlpConfig(const std::string& text) {
  const json config = json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError("config: expected a JSON object, got " +
                                      text);
  }
  MlpConfig c;
  if (auto it = config.find("data_dir"); it != config.end()) {
    if (!it->is_string() || it->get<std::string>().empty()) {
      return FieldError("data_dir", "a directory path", *it);
    }
    c.data_dir = it->get<std::string>();
  }
  if (auto it = config.find("shuffle"); it != config.end()) {
    if (!it->is_boolean()) return FieldError("shuffle", "true or false", *it);
    c.shuffle = it->get<bool>();
  }
  if (auto it = config.find("learning_rate"); it != config.end()) {
    if (!it->is_number() || !(it->get<double>() > 0)) {
      return FieldError("learning_rate", "a positive number", *it);
    }
    c.learning_rate = it->get<double>();
  }
  absl::Status s = GetShardPolicy(config, c.shard_policy);
  if (s.ok()) s = GetInt(config, "hidden", 1, 4096, c.hidden);
  if (s.ok()) {
    s = GetInt<int64_t>(config, "eval_examples", 1, int64_t{1} << 24,
                        c.eval_examples);
  }
  if (s.ok()) {
    s = GetInt<int64_t>(config, "eval_every", 1, int64_t{1} << 40,
                        c.eval_every);
  }
  if (!s.ok()) return s;
  return c;
}

}  // namespace cohort::examples
