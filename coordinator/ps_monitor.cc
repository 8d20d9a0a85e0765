#include "coordinator/ps_monitor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::coordinator {
namespace {

constexpr absl::Duration kDefaultPsRecovery = absl::Seconds(60);
constexpr int kMaxEvents = 50;
constexpr int kMaxFailuresInARow = 3;

constexpr absl::Duration kDefaultClientTimeout = absl::Seconds(300);

absl::Duration ClientTimeout(const v1::JobSpec& spec) {
  return spec.ps().client_timeout_ms() > 0
             ? absl::Milliseconds(spec.ps().client_timeout_ms())
             : kDefaultClientTimeout;
}

absl::Duration PsRecoveryTimeout(const v1::JobSpec& spec) {
  return spec.ps().ps_recovery_timeout_ms() > 0
             ? absl::Milliseconds(spec.ps().ps_recovery_timeout_ms())
             : kDefaultPsRecovery;
}

PsVerdict Failed(std::string error) {
  return {.kind = PsVerdict::Kind::kFailed, .error = std::move(error)};
}

}  // namespace

std::string PsGroup(const Job& job, const std::string& task) {
  auto epoch = job.epochs.find(task);
  return absl::StrCat("job-", job.status.job_id(), "/attempt-",
                      job.status.attempt(), "/", task, "/epoch-",
                      epoch == job.epochs.end() ? 0 : epoch->second);
}

void AddEvent(Job& job, std::string text, absl::Time now) {
  v1::JobEvent* event = job.status.add_events();
  event->set_time_unix_ms(absl::ToUnixMillis(now));
  event->set_text(std::move(text));
  while (job.status.events_size() > kMaxEvents) {
    job.status.mutable_events()->DeleteSubrange(0, 1);
    for (auto& [key, r] : job.recoveries) --r.event;
  }
  job.changed = true;
}

void LoseWorker(Job& job, const std::string& task, const std::string& why,
                absl::Time now) {
  if (!job.lost.insert(task).second) return;
  const int requeued = job.closures->Requeue(task);
  auto assignment = job.assignments.find(task);
  if (assignment != job.assignments.end()) {
    ++job.epochs[task];
    assignment->second.set_group(PsGroup(job, task));
  }
  job.reports.erase(task);
  job.closures->Fill(job.status);
  AddEvent(job,
           absl::StrCat(task, " lost (", why, "); ", requeued,
                        " in-flight closure(s) re-queued"),
           now);
}

void SetPsDevices(v1::AgentJobAssignment& assignment, int executors,
                  int devices) {
  assignment.clear_device_indices();
  for (int e = 0; e < executors; ++e) {
    assignment.add_device_indices(e % std::max(1, devices));
  }
}

namespace {

// A worker back from being lost may be another host (a replacement), or one
// placed before it was ever seen: where its devices differ, its executors
// go on the ones it has now, under a new group, so that a runner started
// on the old assignment ends and its agent starts one on the new.
void TakeDevicesOf(Job& job, const std::string& task, const AgentView& view) {
  auto found = job.assignments.find(task);
  if (found == job.assignments.end()) return;
  v1::AgentJobAssignment& assignment = found->second;
  const std::vector<int> before(assignment.device_indices().begin(),
                                assignment.device_indices().end());
  SetPsDevices(assignment, static_cast<int>(before.size()), view.num_devices);
  if (std::equal(before.begin(), before.end(),
                 assignment.device_indices().begin(),
                 assignment.device_indices().end())) {
    return;
  }
  ++job.epochs[task];
  assignment.set_group(PsGroup(job, task));
  job.changed = true;
}

}  // namespace

void RecordRecovery(Job& job, const v1::PsRecovery& recovery, absl::Time now) {
  auto key = std::make_pair(recovery.ps_index(), recovery.incarnation());
  auto [it, fresh] = job.recoveries.try_emplace(key);
  Job::Recovery& r = it->second;
  if (!fresh && recovery.updates_seen() <= r.seen) return;
  r.restored = recovery.restored_updates();
  r.seen = std::max(r.seen, recovery.updates_seen());
  const int64_t lost = std::max<int64_t>(0, r.seen - r.restored);
  std::string text =
      absl::StrCat("ps:", recovery.ps_index(),
                   " came back and restored its "
                   "snapshot at update ",
                   r.restored, "; ", lost, " acknowledged update(s) lost");
  if (fresh) {
    r.event = job.status.events_size();
    AddEvent(job, std::move(text), now);
  } else if (r.event >= 0 && r.event < job.status.events_size()) {
    job.status.mutable_events(r.event)->set_text(std::move(text));
  }
  int64_t total = 0;
  job.status.clear_ps_recoveries();
  for (const auto& [k, v] : job.recoveries) {
    total += std::max<int64_t>(0, v.seen - v.restored);
    v1::PsRecovery* saved = job.status.add_ps_recoveries();
    saved->set_ps_index(k.first);
    saved->set_incarnation(k.second);
    saved->set_restored_updates(v.restored);
    saved->set_updates_seen(v.seen);
  }
  job.status.set_ps_updates_lost(total);
  job.changed = true;
}

PsVerdict CheckPsAttempt(Job& job, const std::vector<TaskId>& ps_tasks,
                         const std::vector<AgentView>& agents, absl::Time now,
                         absl::Duration placement_timeout) {
  job.status.set_steps_per_second(job.closures->rate(now));
  if (job.closures->done()) {
    job.closures->Fill(job.status);
    return {.kind = PsVerdict::Kind::kSucceeded};
  }
  // A client program that went away would leave the job idle forever.
  if (job.closures->client_scheduled() && job.closures->idle() &&
      now - job.client_seen > ClientTimeout(job.status.spec())) {
    return Failed(absl::StrCat(
        "no call from the client for ",
        absl::FormatDuration(ClientTimeout(job.status.spec())),
        " and nothing left to run: the program that schedules this job's "
        "calls went away without FinishJob (ps.client_timeout_ms)"));
  }
  // A failure the job caused ends it; a lost worker only loses closures.
  for (const auto& [task, report] : job.reports) {
    if (report.state() == v1::AgentJobReport::FAILED && report.permanent()) {
      return Failed(absl::StrCat(task, ": ", report.error()));
    }
  }
  int alive = 0;
  std::vector<std::string> failed;
  for (const auto& [task, assignment] : job.assignments) {
    const AgentView* view =
        FindView(agents, ParseTaskId(task).value_or(TaskId{}));
    const bool up = view != nullptr && view->state == v1::READY;
    auto report = job.reports.find(task);
    if (!up) {
      LoseWorker(job, task,
                 view == nullptr || view->last_error.empty()
                     ? "not ready"
                     : absl::StrCat("died: ", view->last_error),
                 now);
    } else if (report != job.reports.end() &&
               report->second.state() == v1::AgentJobReport::FAILED) {
      // Back from being lost, and failed since: no longer lost, so that the
      // loss below takes its report and counts the failure once.
      if (job.lost.erase(task) > 0) TakeDevicesOf(job, task, *view);
      failed.push_back(task);
    } else {
      // Back, with a fresh assignment.
      if (job.lost.erase(task) > 0) TakeDevicesOf(job, task, *view);
      ++alive;
    }
  }
  for (const std::string& task : failed) {
    const std::string error = job.reports[task].error();
    // A worker that keeps failing without finishing a closure would
    // otherwise be restarted forever.
    if (++job.failures_in_a_row[task] > kMaxFailuresInARow) {
      return Failed(
          absl::StrCat(task, " failed ", kMaxFailuresInARow + 1,
                       " times in a row without finishing a closure: ", error));
    }
    LoseWorker(job, task, error, now);
    job.lost.erase(task);  // its agent lives and restarts the runner
  }
  if (job.status.state() != v1::JOB_RUNNING) {
    // Until a first runner asks for work, the attempt has the placement's
    // time to start: workers alive but stuck in a job's init function (a
    // hung mount) would otherwise keep it placed for ever.
    if (now - job.placing_since > placement_timeout) {
      std::vector<std::string> waiting;
      for (const auto& [task, assignment] : job.assignments) {
        auto report = job.reports.find(task);
        waiting.push_back(absl::StrCat(
            task, " (",
            report == job.reports.end()
                ? "no report"
                : v1::AgentJobReport::State_Name(report->second.state()),
            ")"));
      }
      return Failed(absl::StrCat(
          "the attempt did not start within ",
          absl::FormatDuration(placement_timeout),
          ": no worker asked for a closure: ", absl::StrJoin(waiting, ", ")));
    }
  } else if (alive + static_cast<int>(failed.size()) > 0) {
    job.placing_since = now;
  } else if (now - job.placing_since > placement_timeout) {
    return Failed(absl::StrCat("no worker alive for ",
                               absl::FormatDuration(placement_timeout)));
  }

  const absl::Duration recovery = PsRecoveryTimeout(job.status.spec());
  for (const TaskId& ps : ps_tasks) {
    const std::string name = ps.ToString();
    const AgentView* view = FindView(agents, ps);
    if (view != nullptr && view->state == v1::READY) {
      job.ps_down_since.erase(name);
      continue;
    }
    auto [since, fresh] = job.ps_down_since.try_emplace(name, now);
    if (fresh) {
      AddEvent(job,
               absl::StrCat(DescribeTask(ps, view),
                            " went away; workers pause and retry while it is "
                            "restarted from its snapshot"),
               now);
    } else if (now - since->second > recovery) {
      return Failed(absl::StrCat(DescribeTask(ps, view),
                                 " did not come back within ",
                                 absl::FormatDuration(recovery)));
    }
  }
  return {};
}

}  // namespace cohort::coordinator
