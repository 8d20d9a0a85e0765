#include "worker_agent/early_stopping.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::agent {

EarlyStoppingRule::EarlyStoppingRule(v1::EarlyStopping spec)
    : spec_(std::move(spec)) {}

bool EarlyStoppingRule::Better(double value, double than, double delta) const {
  return spec_.maximize() ? value > than + delta : value < than - delta;
}

std::optional<std::string> EarlyStoppingRule::Observe(
    int64_t steps_done, const std::map<std::string, double>& reduced) {
  if (!enabled()) return std::nullopt;
  const auto it = reduced.find(spec_.metric());
  if (it == reduced.end()) {
    if (seen_ || warned_) return std::nullopt;
    constexpr char kHow[] =
        "; the rule judges only the steps that report it with "
        "ReplicaContext::report(name, value, ReduceOp)";
    if (!reduced.empty()) {
      warned_ = true;
      warning_ = absl::StrCat(
          "early_stopping watches \"", spec_.metric(), "\", but step ",
          steps_done - 1, " reported only ",
          absl::StrJoin(reduced, ", ",
                        [](std::string* out, const auto& entry) {
                          absl::StrAppend(out, "\"", entry.first, "\"");
                        }),
          " reduced", kHow);
    } else if (++quiet_steps_ >= kQuietSteps) {
      warned_ = true;
      warning_ = absl::StrCat("early_stopping watches \"", spec_.metric(),
                              "\", but none of the ", quiet_steps_,
                              " steps since step ", steps_done - quiet_steps_,
                              " reported any metric", kHow);
    }
    return std::nullopt;
  }
  seen_ = true;
  const double value = it->second;
  if (spec_.has_target() && !Better(spec_.target(), value, 0)) {
    return absl::StrCat("early_stopping: ", spec_.metric(), " ", value,
                        " reached the target ", spec_.target(), " at step ",
                        steps_done);
  }
  if (!best_.has_value() || Better(value, *best_, spec_.min_delta())) {
    best_ = value;
    best_step_ = steps_done;
    since_best_ = 0;
    return std::nullopt;
  }
  ++since_best_;
  if (spec_.patience() > 0 && since_best_ >= spec_.patience()) {
    return absl::StrCat("early_stopping: ", spec_.metric(),
                        " did not improve by more than ", spec_.min_delta(),
                        " for ", since_best_, " steps (best ", *best_,
                        " at step ", best_step_, ")");
  }
  return std::nullopt;
}

std::optional<std::string> EarlyStoppingRule::TakeWarning() {
  std::optional<std::string> warning = std::move(warning_);
  warning_.reset();
  return warning;
}

}  // namespace cohort::agent
