#include "client_lib/cohortctl/job_format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client_lib/cohortctl/table.h"

namespace cohort::ctl {
namespace {

// Flag spelling first; the order is the order --help and errors list them.
constexpr std::pair<const char*, StrategyKind> kStrategies[] = {
    {"multi_worker_mirrored", StrategyKind::kMultiWorkerMirrored},
    {"mirrored", StrategyKind::kMirrored},
    {"one_device", StrategyKind::kOneDevice},
    {"central_storage", StrategyKind::kCentralStorage},
    {"parameter_server", StrategyKind::kParameterServer},
};

constexpr std::pair<const char*, Communication> kCommunications[] = {
    {"auto", Communication::kAuto},
    {"ring", Communication::kRing},
    {"nccl", Communication::kNccl},
    {"hierarchical", Communication::kHierarchical},
    {"reduction_to_one_device", Communication::kReductionToOneDevice},
};

constexpr size_t kShortErrorChars = 48;

std::string StripPrefix(std::string name, absl::string_view prefix) {
  if (absl::StartsWith(name, prefix)) name.erase(0, prefix.size());
  return name;
}

std::string StrategyDisplay(v1::Strategy strategy) {
  return absl::AsciiStrToLower(v1::Strategy_Name(strategy));
}

std::string CommunicationDisplay(v1::Communication communication) {
  return absl::AsciiStrToLower(
      StripPrefix(v1::Communication_Name(communication), "COMMUNICATION_"));
}

// The first line of `text`, cut to `max_chars` with "..." when longer.
std::string Shorten(const std::string& text, size_t max_chars) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > max_chars) line = line.substr(0, max_chars - 3) + "...";
  return line;
}

absl::Time FromUnixMs(int64_t ms) { return absl::FromUnixMillis(ms); }

std::string Timestamp(int64_t unix_ms, absl::TimeZone zone) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", FromUnixMs(unix_ms), zone);
}

void AddDetail(std::string* out, absl::string_view label,
               absl::string_view value) {
  absl::StrAppend(out, absl::StrFormat("  %-12s%s\n", label, value));
}

}  // namespace

std::string StepOfSteps(const v1::JobStatus& job) {
  if (job.spec().ps().schedule_from_client()) {
    return absl::StrCat(job.step(), "/", job.calls_scheduled(), " calls");
  }
  return absl::StrCat(job.step(), "/", job.spec().steps());
}

absl::StatusOr<StrategyKind> ParseStrategy(const std::string& name) {
  for (const auto& [spelling, kind] : kStrategies) {
    if (name == spelling) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown --strategy \"", name, "\"; valid: ", StrategyNames()));
}

absl::StatusOr<Communication> ParseCommunication(const std::string& name) {
  for (const auto& [spelling, kind] : kCommunications) {
    if (name == spelling) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown --communication \"", name, "\"; valid: ", CommunicationNames()));
}

std::string StrategyNames() {
  std::vector<std::string> names;
  for (const auto& entry : kStrategies) names.push_back(entry.first);
  return absl::StrJoin(names, ", ");
}

std::string CommunicationNames() {
  std::vector<std::string> names;
  for (const auto& entry : kCommunications) names.push_back(entry.first);
  return absl::StrJoin(names, ", ");
}

std::string JobStateName(v1::JobState state) {
  return StripPrefix(v1::JobState_Name(state), "JOB_");
}

std::string FormatMetrics(const v1::JobStatus& job, int digits) {
  // The proto map has no order; people want a stable one.
  const std::map<std::string, double> sorted(job.metrics().begin(),
                                             job.metrics().end());
  std::vector<std::string> parts;
  for (const auto& [name, value] : sorted) {
    parts.push_back(absl::StrFormat("%s=%.*g", name, digits, value));
  }
  return absl::StrJoin(parts, " ");
}

std::string ShortDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  if (d < absl::Seconds(1)) {
    return absl::StrCat(absl::ToInt64Milliseconds(d), "ms");
  }
  if (d < absl::Minutes(1)) {
    return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
  }
  const int64_t s = absl::ToInt64Seconds(d);
  if (d < absl::Hours(1)) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (d < absl::Hours(24)) {
    return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  }
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

absl::Duration JobDuration(const v1::JobStatus& job, absl::Time now) {
  if (job.submit_time_unix_ms() <= 0) return absl::ZeroDuration();
  const absl::Time end =
      job.end_time_unix_ms() > 0 ? FromUnixMs(job.end_time_unix_ms()) : now;
  return std::max(end - FromUnixMs(job.submit_time_unix_ms()),
                  absl::ZeroDuration());
}

std::string JobsTable(const std::vector<v1::JobStatus>& jobs, absl::Time now) {
  if (jobs.empty()) return "no jobs\n";
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "STATE", "STEP",
                                                 "STEPS/S", "ATTEMPT", "AGE",
                                                 "DURATION", "ERROR"}};
  for (const v1::JobStatus& job : jobs) {
    const bool running = job.state() == v1::JOB_RUNNING;
    const bool submitted = job.submit_time_unix_ms() > 0;
    rows.push_back({
        job.job_id(),
        job.spec().name().empty() ? "-" : Shorten(job.spec().name(), 24),
        JobStateName(job.state()),
        StepOfSteps(job),
        running && job.steps_per_second() > 0
            ? absl::StrFormat("%.1f", job.steps_per_second())
            : "-",
        absl::StrCat(job.attempt()),
        submitted ? ShortDuration(now - FromUnixMs(job.submit_time_unix_ms()))
                  : "-",
        submitted ? ShortDuration(JobDuration(job, now)) : "-",
        job.error().empty() ? "" : Shorten(job.error(), kShortErrorChars),
    });
  }
  return AlignColumns(rows);
}

std::string JobDetails(const v1::JobStatus& job, absl::Time now,
                       absl::TimeZone zone) {
  const v1::JobSpec& spec = job.spec();
  std::string out = absl::StrCat("job ", job.job_id());
  if (!spec.name().empty()) absl::StrAppend(&out, " \"", spec.name(), "\"");
  absl::StrAppend(&out, "  ", JobStateName(job.state()), "  attempt ",
                  job.attempt(), "\n");

  std::string step = StepOfSteps(job);
  if (spec.steps() > 0) {
    step += absl::StrFormat(" (%d%%)", job.step() * 100 / spec.steps());
  }
  if (job.state() == v1::JOB_RUNNING && job.steps_per_second() > 0) {
    step += absl::StrFormat(", %.1f steps/s", job.steps_per_second());
  }
  AddDetail(&out, "step", step);
  if (!job.waiting_for().empty()) {
    AddDetail(&out, "waiting for", job.waiting_for());
  }
  if (job.stopped_at_step() > 0) {
    AddDetail(
        &out, "stopped",
        absl::StrCat("at step ", job.stopped_at_step(), ": ",
                     job.stop_reason().empty() ? "stop_training was called"
                                               : job.stop_reason()));
  }
  const v1::EarlyStopping& rule = spec.early_stopping();
  if (!rule.metric().empty()) {
    std::string text =
        absl::StrCat(rule.metric(), rule.maximize() ? " (higher is better)"
                                                    : " (lower is better)");
    if (rule.has_target()) absl::StrAppend(&text, ", target ", rule.target());
    if (rule.patience() > 0) {
      absl::StrAppend(&text, ", patience ", rule.patience(), " steps");
      if (rule.min_delta() > 0)
        absl::StrAppend(&text, " (min_delta ", rule.min_delta(), ")");
    }
    AddDetail(&out, "early stop", text);
  }
  if (!spec.eval_fn().empty()) {
    std::string evaluated = absl::StrCat(
        spec.eval_fn(), " on ", spec.eval_dataset_fn(), ", ",
        spec.eval_steps() > 0 ? absl::StrCat(spec.eval_steps(), " batches")
                              : "one pass",
        " per checkpoint");
    // The newest few, newest last.
    const int shown = std::min(job.evaluations_size(), 5);
    for (int i = job.evaluations_size() - shown; i < job.evaluations_size();
         ++i) {
      const v1::Evaluation& e = job.evaluations(i);
      std::vector<std::string> values;
      for (const auto& [name, value] : e.metrics()) {
        values.push_back(absl::StrFormat("%s=%.4g", name, value));
      }
      std::sort(values.begin(), values.end());
      absl::StrAppend(
          &evaluated, "\n", std::string(14, ' '), "step ", e.step(), ": ",
          e.error().empty() ? absl::StrJoin(values, " ") : e.error());
    }
    AddDetail(&out, "evaluator", evaluated);
  }
  AddDetail(&out, "metrics",
            job.metrics().empty() ? "-" : FormatMetrics(job, 6));

  std::string library = spec.library_name();
  if (!spec.library_digest().empty()) {
    absl::StrAppend(&library, "  sha256 ", spec.library_digest().substr(0, 12));
  }
  AddDetail(&out, "library", library);
  std::vector<std::string> functions = {
      spec.ps().schedule_from_client() && spec.step_fn().empty()
          ? "step=(scheduled by the client)"
          : absl::StrCat("step=", spec.step_fn())};
  if (!spec.init_fn().empty()) {
    functions.push_back(absl::StrCat("init=", spec.init_fn()));
  }
  if (!spec.dataset_fn().empty()) {
    functions.push_back(absl::StrCat("dataset=", spec.dataset_fn()));
  }
  AddDetail(&out, "functions", absl::StrJoin(functions, " "));

  std::string strategy =
      absl::StrCat(StrategyDisplay(spec.strategy()), ", communication ",
                   CommunicationDisplay(spec.communication()));
  if (!job.communication_note().empty()) {
    absl::StrAppend(&strategy, " (", job.communication_note(), ")");
  }
  AddDetail(&out, "strategy", strategy);
  std::string batch =
      absl::StrCat(spec.global_batch_size(), " global, seed ", spec.seed());
  if (job.num_replicas() > 0) {
    absl::StrAppend(&batch, ", ", job.num_replicas(), " replicas");
  }
  if (spec.devices_per_agent() > 0) {
    absl::StrAppend(&batch, ", ", spec.devices_per_agent(),
                    " devices per agent");
  }
  AddDetail(&out, "batch", batch);
  if (!spec.config_json().empty() && spec.config_json() != "{}") {
    AddDetail(&out, "config", Shorten(spec.config_json(), 100));
  }
  AddDetail(
      &out, "placement",
      job.placement().empty() ? "-" : absl::StrJoin(job.placement(), ", "));
  // One line per ring link:
  // "agents 0->1 chief:0 -> worker:0 grpc to 10.1.0.3:20004".
  for (const v1::RingLink& link : job.links()) {
    AddDetail(&out, "link",
              absl::StrCat(link.ring(), " ", link.from_rank(), "->",
                           link.to_rank(), " ", link.from_task(), " -> ",
                           link.to_task(), " ", link.transport(),
                           link.to_address().empty()
                               ? ""
                               : absl::StrCat(" to ", link.to_address())));
  }

  std::string checkpoint =
      job.checkpoint_dir().empty() ? "-" : job.checkpoint_dir();
  if (job.checkpoint_step() > 0) {
    absl::StrAppend(&checkpoint, ", last at step ", job.checkpoint_step());
  }
  std::vector<std::string> every;
  if (spec.checkpoint_every() > 0) {
    every.push_back(absl::StrCat(spec.checkpoint_every(), " steps"));
  }
  if (spec.checkpoint_interval_ms() > 0) {
    every.push_back(absl::FormatDuration(
        absl::Milliseconds(spec.checkpoint_interval_ms())));
  }
  absl::StrAppend(&checkpoint,
                  every.empty()
                      ? ", at the end only"
                      : absl::StrCat(", every ", absl::StrJoin(every, " or ")));
  AddDetail(&out, "checkpoint", checkpoint);

  if (job.submit_time_unix_ms() > 0) {
    AddDetail(
        &out, "submitted",
        absl::StrCat(Timestamp(job.submit_time_unix_ms(), zone), " (",
                     ShortDuration(now - FromUnixMs(job.submit_time_unix_ms())),
                     " ago)"));
  }
  if (job.end_time_unix_ms() > 0) {
    AddDetail(&out, "ended",
              absl::StrCat(Timestamp(job.end_time_unix_ms(), zone), " (after ",
                           ShortDuration(JobDuration(job, now)), ")"));
  }

  int spent = 0;
  for (const v1::RestartRecord& restart : job.restarts())
    spent += restart.spent();
  AddDetail(&out, "restarts",
            absl::StrCat(spent, " of at most ", spec.max_restarts(),
                         job.restarts_size() > spent
                             ? absl::StrCat(" (+", job.restarts_size() - spent,
                                            " not counted)")
                             : ""));
  if (!job.restarts().empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"    ATTEMPT", "TIME", "RESUMED FROM", "CAUSE"}};
    for (const v1::RestartRecord& restart : job.restarts()) {
      rows.push_back(
          {absl::StrCat("    ", restart.attempt(), restart.spent() ? "" : "*"),
           Timestamp(restart.time_unix_ms(), zone),
           restart.resumed_from_step() > 0
               ? absl::StrCat(
                     "step ", restart.resumed_from_step(),
                     restart.resumed_from().empty()
                         ? ""
                         : absl::StrCat(" (", restart.resumed_from(), ")"))
               : "the start",
           restart.cause()});
    }
    absl::StrAppend(&out, AlignColumns(rows));
    if (job.restarts_size() > spent) {
      absl::StrAppend(&out, "    * not counted against max_restarts\n");
    }
  }
  if (spec.ps().schedule_from_client()) {
    AddDetail(&out, "calls",
              absl::StrCat(job.calls_scheduled(), " scheduled by the client, ",
                           job.pending_calls_size(), " not completed",
                           job.scheduling_finished()
                               ? "; scheduling finished"
                               : "; the client may schedule more"));
  }
  if (spec.strategy() == v1::PARAMETER_SERVER) {
    AddDetail(
        &out, "closures",
        absl::StrCat(job.closures_rerun(), " re-run after a lost worker; ",
                     job.ps_updates_lost(), " ps update(s) lost to restarts"));
    if (!job.recent_results().empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"    CLOSURE", "WORKER", "VALUES"}};
      // The newest few, newest last.
      const int first = std::max(0, job.recent_results_size() - 5);
      for (int i = first; i < job.recent_results_size(); ++i) {
        const v1::ClosureResult& r = job.recent_results(i);
        std::map<std::string, double> values(r.values().begin(),
                                             r.values().end());
        std::vector<std::string> shown;
        for (const auto& [name, value] : values) {
          shown.push_back(absl::StrFormat("%s=%.4g", name, value));
        }
        rows.push_back({absl::StrCat("    ", r.closure()), r.worker(),
                        absl::StrJoin(shown, " ")});
      }
      absl::StrAppend(&out, AlignColumns(rows));
    }
    for (const v1::JobEvent& event : job.events()) {
      AddDetail(&out, "event",
                absl::StrCat(Timestamp(event.time_unix_ms(), zone), " ",
                             event.text()));
    }
  }
  if (!job.error().empty()) AddDetail(&out, "error", job.error());
  return out;
}

std::vector<double> ValuesAsDoubles(const HostTensor& tensor) {
  std::vector<double> values;
  if (tensor.dtype == "float32") {
    for (float v : tensor.As<float>()) values.push_back(v);
  } else if (tensor.dtype == "float64") {
    for (double v : tensor.As<double>()) values.push_back(v);
  } else if (tensor.dtype == "int32") {
    for (int32_t v : tensor.As<int32_t>()) values.push_back(v);
  } else if (tensor.dtype == "int64") {
    for (int64_t v : tensor.As<int64_t>())
      values.push_back(static_cast<double>(v));
  }
  return values;
}

std::string VariablesTable(const std::map<std::string, HostTensor>& variables,
                           int shown) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "DTYPE", "SHAPE", "NORM", "VALUES"}};
  for (const auto& [name, tensor] : variables) {
    const std::vector<double> values = ValuesAsDoubles(tensor);
    double squares = 0;
    for (double v : values) squares += v * v;
    std::vector<std::string> head;
    for (size_t i = 0; i < values.size() && i < static_cast<size_t>(shown);
         ++i) {
      head.push_back(absl::StrFormat("%.4g", values[i]));
    }
    if (values.size() > static_cast<size_t>(shown)) head.push_back("...");
    rows.push_back({name, tensor.dtype,
                    absl::StrCat("[", absl::StrJoin(tensor.shape, ","), "]"),
                    absl::StrFormat("%.6g", std::sqrt(squares)),
                    absl::StrJoin(head, " ")});
  }
  return AlignColumns(rows);
}

absl::StatusOr<std::string> ProtoToJson(
    const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  std::string json;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print as JSON: ", status.ToString()));
  }
  return json;
}

}  // namespace cohort::ctl
