#pragma once

// Reading an example's JSON config: each getter leaves `out` alone when the
// field is absent, and names the field in an INVALID_ARGUMENT otherwise.

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/dataset.h"
#include "nlohmann/json.hpp"

namespace cohort::examples {

// Parses an example's config: a JSON object whose fields are all among
// `fields`, so that a misspelt one is named rather than silently ignored.
absl::StatusOr<nlohmann::json> ParseConfigObject(
    const std::string& text, std::initializer_list<const char*> fields);

absl::Status FieldError(const char* field, const std::string& expected,
                        const nlohmann::json& got);

// An integer in [min, max].
absl::Status GetInt64(const nlohmann::json& config, const char* field,
                      int64_t min, int64_t max, int64_t& out);

template <typename Int>
absl::Status GetInt(const nlohmann::json& config, const char* field, Int min,
                    Int max, Int& out) {
  int64_t value = out;
  absl::Status s = GetInt64(config, field, min, max, value);
  if (s.ok()) out = static_cast<Int>(value);
  return s;
}

absl::Status GetDouble(const nlohmann::json& config, const char* field,
                       double& out);
absl::Status GetBool(const nlohmann::json& config, const char* field,
                     bool& out);
// A non-empty string; `expected` says what it names ("a directory path").
absl::Status GetString(const nlohmann::json& config, const char* field,
                       const std::string& expected, std::string& out);
// "shard_policy": "auto", "file", "data" or "off".
absl::Status GetShardPolicy(const nlohmann::json& config, ShardPolicy& out);

}  // namespace cohort::examples
