#include "task/task_metrics.h"

#include "absl/strings/str_cat.h"

namespace cohort::task {

void WriteReportMetrics(const v1::TaskReport& report, absl::Time now,
                        MetricWriter& out) {
  const std::string task =
      absl::StrCat(report.task().type(), ":", report.task().index());
  out.Gauge("cohort_task_start_time_seconds",
            "When the task's process started, in Unix seconds.",
            {{"task", task}, {"version", report.version()}},
            report.start_time_unix_ms() / 1000.0);
  if (!report.has_ps()) return;
  const v1::PsInfo& ps = report.ps();
  const MetricLabels labels = {{"task", task}, {"job", ps.job_id()}};
  out.Counter("cohort_ps_updates_total",
              "Gradient pushes the shard applied over its life.", labels,
              static_cast<double>(ps.updates()));
  out.Gauge("cohort_ps_variable_bytes", "Bytes the shard holds in variables.",
            labels, static_cast<double>(ps.variable_bytes()));
  out.Gauge("cohort_ps_variables", "Variables (and parts) the shard holds.",
            labels, static_cast<double>(ps.num_variables()));
  if (ps.last_snapshot_unix_ms() > 0) {
    out.Gauge("cohort_ps_snapshot_age_seconds",
              "Time since the shard's last snapshot was written.", labels,
              absl::ToDoubleSeconds(
                  now - absl::FromUnixMillis(ps.last_snapshot_unix_ms())));
    out.Gauge("cohort_ps_snapshot_updates",
              "Updates the last snapshot holds; those beyond it would be "
              "lost with the shard.",
              labels, static_cast<double>(ps.last_snapshot_updates()));
  }
  if (ps.rss_bytes() > 0) {
    out.Gauge("process_resident_memory_bytes", "Resident memory size.",
              {{"task", task}}, static_cast<double>(ps.rss_bytes()));
  }
}

}  // namespace cohort::task
