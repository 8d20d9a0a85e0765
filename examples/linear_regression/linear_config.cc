#include "examples/linear_regression/linear_config.h"

#include <cstring>
#include <random>

#include "examples/common/config_fields.h"
#include "nlohmann/json.hpp"

namespace cohort::examples {
namespace {

using json = nlohmann::json;

absl::Status GetOptimizer(const json& config, OptimizerOptions& out) {
  auto it = config.find("optimizer");
  if (it != config.end()) {
    const std::string name = it->is_string() ? it->get<std::string>() : "";
    if (name == "sgd") {
      out.kind = OptimizerKind::kSgd;
    } else if (name == "momentum") {
      out.kind = OptimizerKind::kMomentum;
    } else if (name == "adam") {
      out.kind = OptimizerKind::kAdam;
    } else {
      return FieldError("optimizer", "\"sgd\", \"momentum\" or \"adam\"", *it);
    }
  }
  it = config.find("learning_rate");
  if (it == config.end()) return absl::OkStatus();
  if (!it->is_number() || !(it->get<double>() > 0)) {
    return FieldError("learning_rate", "a positive number", *it);
  }
  out.learning_rate = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LinearConfig> ParseLinearConfig(const std::string& text) {
  absl::StatusOr<json> parsed = ParseConfigObject(
      text, {"num_examples", "dim", "true_w", "true_b", "shard_policy",
             "shuffle", "optimizer", "learning_rate", "step_sleep_ms",
             "step_sleep_until_file", "hang_at_step", "stream_examples",
             "prefetch_steps", "prefetch_to_device"});
  if (!parsed.ok()) return parsed.status();
  const json& config = *parsed;
  LinearConfig c;
  absl::Status s = GetInt<int64_t>(config, "num_examples", 1, int64_t{1} << 30,
                                   c.num_examples);
  if (s.ok()) s = GetInt(config, "dim", 1, 1 << 20, c.dim);
  if (s.ok()) s = GetInt(config, "step_sleep_ms", 0, 60'000, c.step_sleep_ms);
  if (s.ok()) {
    s = GetString(config, "step_sleep_until_file", "a file's path",
                  c.step_sleep_until_file);
  }
  if (s.ok()) {
    s = GetInt<int64_t>(config, "hang_at_step", -1, int64_t{1} << 40,
                        c.hang_at_step);
  }
  if (s.ok()) s = GetDouble(config, "true_b", c.true_b);
  if (s.ok()) s = GetShardPolicy(config, c.shard_policy);
  if (s.ok()) s = GetOptimizer(config, c.optimizer);
  if (s.ok()) s = GetBool(config, "shuffle", c.shuffle);
  if (s.ok()) {
    s = GetInt<int64_t>(config, "stream_examples", 0, int64_t{1} << 40,
                        c.stream_examples);
  }
  if (s.ok()) s = GetInt(config, "prefetch_steps", 0, 64, c.prefetch_steps);
  if (s.ok()) s = GetBool(config, "prefetch_to_device", c.prefetch_to_device);
  if (!s.ok()) return s;

  if (auto it = config.find("true_w"); it != config.end()) {
    const std::string expected =
        "an array of " + std::to_string(c.dim) + " numbers (\"dim\")";
    if (!it->is_array() || it->size() != static_cast<size_t>(c.dim)) {
      return FieldError("true_w", expected, *it);
    }
    for (const json& w : *it) {
      if (!w.is_number()) return FieldError("true_w", expected, *it);
      c.true_w.push_back(w.get<double>());
    }
  } else {
    // Mixed signs and sizes, so that a mix-up of two weights shows.
    for (int i = 0; i < c.dim; ++i) {
      c.true_w.push_back((i % 2 ? -1.0 : 1.0) * (0.5 + 0.25 * i));
    }
  }
  return c;
}

LinearExamples::LinearExamples(const LinearConfig& config, uint64_t seed)
    : config_(config),
      rng_(seed),
      values_(static_cast<size_t>(config.dim) + 1) {}

std::string LinearExamples::Next() {
  // mt19937_64's output is fixed by the standard; the distributions of
  // <random> are not, so the mapping to [-1, 1) is written out.
  const size_t width = values_.size();
  double y = config_.true_b;
  for (int i = 0; i < config_.dim; ++i) {
    values_[i] = 2.0 * static_cast<double>(rng_() >> 11) * 0x1.0p-53 - 1.0;
    y += config_.true_w[i] * values_[i];
  }
  values_[width - 1] = y;
  return std::string(reinterpret_cast<const char*>(values_.data()),
                     width * sizeof(double));
}

std::vector<std::string> GenerateLinearData(const LinearConfig& config,
                                            uint64_t seed) {
  LinearExamples examples(config, seed);
  std::vector<std::string> elements;
  elements.reserve(static_cast<size_t>(config.num_examples));
  for (int64_t n = 0; n < config.num_examples; ++n) {
    elements.push_back(examples.Next());
  }
  return elements;
}

}  // namespace cohort::examples
