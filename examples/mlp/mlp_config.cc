#include "examples/mlp/mlp_config.h"

#include <utility>

#include "examples/common/config_fields.h"
#include "nlohmann/json.hpp"

namespace cohort::examples {
using json = nlohmann::json;

absl::StatusOr<MlpConfig> ParseMlpConfig(const std::string& text) {
  absl::StatusOr<json> parsed = ParseConfigObject(
      text, {"data_dir", "shuffle", "learning_rate", "shard_policy", "hidden",
             "eval_examples", "eval_every"});
  if (!parsed.ok()) return parsed.status();
  const json& config = *parsed;
  MlpConfig c;
  if (absl::Status s =
          GetString(config, "data_dir", "a directory path", c.data_dir);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = GetBool(config, "shuffle", c.shuffle); !s.ok()) {
    return s;
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
