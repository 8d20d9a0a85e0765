#pragma once

// The live view of a job that `cohortctl submit --wait` and `cohortctl watch`
// print: a progress bar redrawn in place on a terminal, plain lines
// elsewhere, a line per state change and a summary at the end. Everything
// here returns text; the caller writes it.

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"

namespace cohort::ctl {

// "[##########..........] 512/1000  51%  87.3 steps/s  loss 0.0213  ETA 6s",
// cut to fit in `width` columns. Shows "loss" when reported, else the
// first metric by name.
std::string ProgressBar(const v1::JobStatus& job, int width);

// "step 512/1000 (51%) 87.3 steps/s loss=0.0213", for logs and pipes.
std::string ProgressLine(const v1::JobStatus& job);

// "job 3 SUCCEEDED: 1000 steps in 11.5s; loss=0.0012 accuracy=0.981".
std::string SummaryLine(const v1::JobStatus& job, absl::Time now);

// Remembers what it printed so far, to print only what changed. Not
// thread-safe: one watcher feeds it.
class WatchView {
 public:
  // `terminal`: redraw one bar line with \r (a tty) instead of printing
  // progress lines at most once per second. `width`: the terminal's columns.
  WatchView(bool terminal, int width);

  // What to print for `job`, observed at `now`; may be empty.
  std::string Update(const v1::JobStatus& job, absl::Time now);

  // What to print when the job has ended: the summary line.
  std::string Finish(const v1::JobStatus& job, absl::Time now);

  // What to print before an error ends the watch early: ends the bar line.
  std::string Interrupt();

 private:
  std::string ClearBar();

  const bool terminal_;
  const int width_;
  bool first_ = true;
  bool bar_shown_ = false;
  v1::JobState state_ = v1::JOB_STATE_UNSPECIFIED;
  std::string waiting_for_;
  // The newest event shown or passed over: the job keeps its newest
  // events only, so the count seen says nothing once it is full.
  std::optional<v1::JobEvent> last_event_;
  int restarts_seen_ = 0;
  int64_t last_printed_step_ = -1;
  absl::Time last_progress_ = absl::InfinitePast();
};

}  // namespace cohort::ctl
