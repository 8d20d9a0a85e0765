#pragma once

// A job's early-stopping rule (v1::EarlyStopping), as Keras' EarlyStopping
// callback: after each step it judges one metric that the replicas reduced,
// and says when training should end. Pure logic: every replica holds its
// own copy and, seeing the same reduced values, reaches the same verdict at
// the same step. Not thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "cohort/v1/job.pb.h"

namespace cohort::agent {

class EarlyStoppingRule {
 public:
  // Steps observed in a row without any metric after which the rule warns
  // that it has had nothing to judge.
  static constexpr int64_t kQuietSteps = 100;

  explicit EarlyStoppingRule(v1::EarlyStopping spec);

  bool enabled() const { return !spec_.metric().empty(); }
  // Judges the metrics reduced in the step that made `steps_done` steps.
  // Returns why training should stop, or nullopt to go on. A step that did
  // not report the watched metric (one that evaluates every N steps, say)
  // is not judged.
  std::optional<std::string> Observe(
      int64_t steps_done, const std::map<std::string, double>& reduced);
  // Once, the first time a step reported reduced metrics but never yet the
  // watched one (a misspelt name, say): a warning naming what it reported;
  // or once kQuietSteps steps in a row reported no metric at all.
  std::optional<std::string> TakeWarning();

 private:
  // Whether `value` beats `than` by more than `delta`.
  bool Better(double value, double than, double delta) const;

  const v1::EarlyStopping spec_;
  std::optional<double> best_;
  int64_t best_step_ = 0;
  int64_t since_best_ = 0;  // judged steps in a row without an improvement
  bool seen_ = false;       // the metric was reported at least once
  bool warned_ = false;
  int64_t quiet_steps_ = 0;  // observed in a row with no metric at all
  std::optional<std::string> warning_;
};

}  // namespace cohort::agent
