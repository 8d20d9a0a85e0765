#include "examples/fashion_mnist/fmnist_config.h"

#include "examples/common/config_fields.h"
#include "nlohmann/json.hpp"

namespace cohort::examples {

using json = nlohmann::json;

absl::StatusOr<FashionConfig> ParseFashionConfig(const std::string& text) {
  absl::StatusOr<json> parsed =
      ParseConfigObject(text, {"data_dir", "source_dir", "shard_policy",
                               "shuffle", "hidden1", "hidden2", "learning_rate",
                               "eval_every", "test_examples", "blas_threads"});
  if (!parsed.ok()) return parsed.status();
  const json& config = *parsed;
  FashionConfig c;
  absl::Status s =
      GetString(config, "data_dir", "a directory path", c.data_dir);
  if (s.ok())
    s = GetString(config, "source_dir", "a directory path", c.source_dir);
  if (s.ok()) s = GetShardPolicy(config, c.shard_policy);
  if (s.ok()) s = GetBool(config, "shuffle", c.shuffle);
  if (s.ok()) s = GetInt(config, "hidden1", 1, 1 << 14, c.hidden1);
  if (s.ok()) s = GetInt(config, "hidden2", 1, 1 << 14, c.hidden2);
  if (s.ok()) s = GetDouble(config, "learning_rate", c.learning_rate);
  if (s.ok() && !(c.learning_rate > 0)) {
    s = FieldError("learning_rate", "a positive number",
                   config["learning_rate"]);
  }
  if (s.ok()) {
    s = GetInt<int64_t>(config, "eval_every", 0, int64_t{1} << 40,
                        c.eval_every);
  }
  if (s.ok()) {
    s = GetInt<int64_t>(config, "test_examples", 1, 10000, c.test_examples);
  }
  if (s.ok()) s = GetInt(config, "blas_threads", 1, 256, c.blas_threads);
  if (!s.ok()) return s;
  return c;
}

}  // namespace cohort::examples
