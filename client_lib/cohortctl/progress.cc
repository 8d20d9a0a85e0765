#include "client_lib/cohortctl/progress.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client_lib/cohortctl/job_format.h"

namespace cohort::ctl {
namespace {

constexpr int kBarCells = 20;
// Moves to the line's start and erases it, so a shorter redraw leaves no
// tail of the longer one behind.
constexpr char kClearLine[] = "\r\x1b[K";
constexpr absl::Duration kPlainProgressEvery = absl::Seconds(1);

int Percent(const v1::JobStatus& job) {
  if (job.spec().steps() <= 0) return 0;
  return static_cast<int>(
      std::clamp<int64_t>(job.step() * 100 / job.spec().steps(), 0, 100));
}

// The metric worth a place on one line: loss when there is one, else the
// first by name.
std::optional<std::pair<std::string, double>> HeadlineMetric(
    const v1::JobStatus& job) {
  if (auto it = job.metrics().find("loss"); it != job.metrics().end()) {
    return std::make_pair(it->first, it->second);
  }
  std::optional<std::pair<std::string, double>> first;
  for (const auto& [name, value] : job.metrics()) {
    if (!first.has_value() || name < first->first) first.emplace(name, value);
  }
  return first;
}

std::string Eta(const v1::JobStatus& job) {
  const int64_t left = job.spec().steps() - job.step();
  if (job.steps_per_second() <= 0 || left <= 0) return "";
  const double seconds = std::ceil(left / job.steps_per_second());
  if (seconds < 60)
    return absl::StrFormat("ETA %ds", static_cast<int>(seconds));
  return absl::StrCat("ETA ", ShortDuration(absl::Seconds(seconds)));
}

std::string RestartLine(const v1::JobStatus& job,
                        const v1::RestartRecord& restart) {
  std::string line = absl::StrCat("job ", job.job_id(), " RESTARTING (attempt ",
                                  restart.attempt(), ")");
  if (!restart.cause().empty()) absl::StrAppend(&line, ": ", restart.cause());
  absl::StrAppend(&line, restart.resumed_from_step() > 0
                             ? absl::StrCat("; resuming from step ",
                                            restart.resumed_from_step())
                             : "; starting over");
  return line;
}

std::string StateLine(const v1::JobStatus& job) {
  std::string line =
      absl::StrCat("job ", job.job_id(), " ", JobStateName(job.state()));
  switch (job.state()) {
    case v1::JOB_RUNNING:
      absl::StrAppend(&line, " (attempt ", job.attempt());
      if (job.num_replicas() > 0) {
        absl::StrAppend(&line, ", ", job.num_replicas(), " replicas");
      }
      absl::StrAppend(&line, ")");
      if (!job.communication_note().empty()) {
        absl::StrAppend(&line, "; ", job.communication_note());
      }
      break;
    case v1::JOB_RESTARTING:
      if (!job.error().empty()) absl::StrAppend(&line, ": ", job.error());
      break;
    default:
      break;
  }
  if (!job.waiting_for().empty()) {
    absl::StrAppend(&line, "; waiting for ", job.waiting_for());
  }
  return line;
}

}  // namespace

std::string ProgressBar(const v1::JobStatus& job, int width) {
  const int percent = Percent(job);
  const int filled = percent * kBarCells / 100;
  // Fields in display order, each with its rank for dropping when the
  // terminal is narrow (higher goes first); the count never goes.
  struct Field {
    std::string text;
    int drop_rank;
  };
  std::vector<Field> fields = {
      {absl::StrCat("[", std::string(filled, '#'),
                    std::string(kBarCells - filled, '.'), "]"),
       2},
      {StepOfSteps(job), 0},
      {absl::StrCat(percent, "%"), 1},
  };
  if (job.steps_per_second() > 0) {
    fields.push_back(
        {absl::StrFormat("%.1f steps/s", job.steps_per_second()), 5});
  }
  if (const auto metric = HeadlineMetric(job)) {
    fields.push_back(
        {absl::StrFormat("%s %.4g", metric->first, metric->second), 4});
  }
  if (std::string eta = Eta(job); !eta.empty()) {
    fields.push_back({std::move(eta), 3});
  }
  const auto join = [&fields] {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i > 0) line += i == 1 && fields[0].drop_rank == 2 ? " " : "  ";
      line += fields[i].text;
    }
    return line;
  };
  // Writing into the last column wraps on some terminals, and a wrapped line
  // cannot be redrawn with \r.
  const size_t fits = static_cast<size_t>(std::max(width - 1, 1));
  std::string line = join();
  while (line.size() > fits && fields.size() > 1) {
    auto first_to_drop = std::max_element(fields.begin(), fields.end(),
                                          [](const Field& a, const Field& b) {
                                            return a.drop_rank < b.drop_rank;
                                          });
    fields.erase(first_to_drop);
    line = join();
  }
  if (line.size() > fits) line.resize(fits);
  return line;
}

std::string ProgressLine(const v1::JobStatus& job) {
  std::string line =
      absl::StrCat("step ", StepOfSteps(job), " (", Percent(job), "%)");
  if (job.steps_per_second() > 0) {
    absl::StrAppend(&line,
                    absl::StrFormat(" %.1f steps/s", job.steps_per_second()));
  }
  if (!job.metrics().empty()) absl::StrAppend(&line, " ", FormatMetrics(job));
  return line;
}

std::string SummaryLine(const v1::JobStatus& job, absl::Time now) {
  std::string line =
      absl::StrCat("job ", job.job_id(), " ", JobStateName(job.state()), ": ");
  if (job.state() == v1::JOB_SUCCEEDED) {
    absl::StrAppend(&line, job.step(), " steps");
  } else {
    absl::StrAppend(&line, StepOfSteps(job), " steps");
  }
  absl::StrAppend(&line, " in ", ShortDuration(JobDuration(job, now)));
  if (job.restarts_size() > 0) {
    absl::StrAppend(&line, " with ", job.restarts_size(),
                    job.restarts_size() == 1 ? " restart" : " restarts");
  }
  if (!job.metrics().empty()) {
    absl::StrAppend(&line, "; ", FormatMetrics(job, 6));
  }
  return line;
}

WatchView::WatchView(bool terminal, int width)
    : terminal_(terminal), width_(width) {}

std::string WatchView::ClearBar() {
  if (!bar_shown_) return "";
  bar_shown_ = false;
  return kClearLine;
}

std::string WatchView::Update(const v1::JobStatus& job, absl::Time now) {
  std::string lines;
  if (first_) {
    // History before the watch began is `cohortctl job`'s to show; only the
    // restart that explains a RESTARTING state is news here.
    restarts_seen_ = job.restarts_size();
    if (job.state() == v1::JOB_RESTARTING && restarts_seen_ > 0) {
      --restarts_seen_;
    }
  }
  // Events after the last one seen. When it is not there as it was (dropped
  // from the job's window, or its text rewritten, as a ps recovery's is),
  // those newer than it. The first update only notes where history ends.
  int next_event = first_ ? job.events_size() : 0;
  if (last_event_.has_value()) {
    next_event = job.events_size();
    for (int i = job.events_size() - 1; i >= 0; --i) {
      const v1::JobEvent& event = job.events(i);
      if (event.time_unix_ms() == last_event_->time_unix_ms() &&
          event.text() == last_event_->text()) {
        next_event = i + 1;
        break;
      }
      if (event.time_unix_ms() > last_event_->time_unix_ms()) next_event = i;
    }
  }
  for (int i = next_event; i < job.events_size(); ++i) {
    absl::StrAppend(&lines, job.events(i).text(), "\n");
  }
  if (job.events_size() > 0) last_event_ = job.events(job.events_size() - 1);
  const bool new_restarts = job.restarts_size() > restarts_seen_;
  for (; restarts_seen_ < job.restarts_size(); ++restarts_seen_) {
    absl::StrAppend(&lines, RestartLine(job, job.restarts(restarts_seen_)),
                    "\n");
  }
  // A new set of tasks to wait for is news too: it says what holds the job.
  const bool state_changed =
      first_ || job.state() != state_ ||
      (!job.waiting_for().empty() && job.waiting_for() != waiting_for_);
  const bool restart_said = job.state() == v1::JOB_RESTARTING && new_restarts;
  // The summary reports the end; Finish prints it.
  if (state_changed && !restart_said && !IsTerminal(job.state())) {
    absl::StrAppend(&lines, StateLine(job), "\n");
  }
  first_ = false;
  state_ = job.state();
  waiting_for_ = job.waiting_for();

  std::string out = lines.empty() ? "" : absl::StrCat(ClearBar(), lines);
  if (job.state() != v1::JOB_RUNNING) return out;
  if (terminal_) {
    absl::StrAppend(&out, kClearLine, ProgressBar(job, width_));
    bar_shown_ = true;
  } else if (job.step() != last_printed_step_ &&
             now - last_progress_ >= kPlainProgressEvery) {
    absl::StrAppend(&out, ProgressLine(job), "\n");
    last_printed_step_ = job.step();
    last_progress_ = now;
  }
  return out;
}

std::string WatchView::Finish(const v1::JobStatus& job, absl::Time now) {
  return absl::StrCat(ClearBar(), SummaryLine(job, now), "\n");
}

std::string WatchView::Interrupt() {
  if (!bar_shown_) return "";
  bar_shown_ = false;
  return "\n";
}

}  // namespace cohort::ctl
