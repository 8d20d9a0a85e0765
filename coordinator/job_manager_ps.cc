// The ParameterServer side of the job manager: the coordinator acts as TF's
// ClusterCoordinator. Every chief and worker agent runs closure executors;
// a lost worker's closures are re-queued and the job goes on while one
// worker lives; a ps task that goes away is waited for (the supervisor
// restarts it, and it restores its snapshot) up to the recovery timeout.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/job_manager.h"

namespace cohort::coordinator {
namespace {

constexpr absl::Duration kDefaultPsRecovery = absl::Seconds(60);
constexpr int kMaxEvents = 50;
constexpr int kMaxFailuresInARow = 3;

absl::Duration PsRecoveryTimeout(const v1::JobSpec& spec) {
  return spec.ps().ps_recovery_timeout_ms() > 0
             ? absl::Milliseconds(spec.ps().ps_recovery_timeout_ms())
             : kDefaultPsRecovery;
}

const AgentView* FindView(const std::vector<AgentView>& views,
                          const TaskId& task) {
  auto it = std::find_if(views.begin(), views.end(),
                         [&](const AgentView& v) { return v.task == task; });
  return it == views.end() ? nullptr : &*it;
}

std::string Why(const TaskId& task, const AgentView* view) {
  std::string why =
      view == nullptr ? "unknown" : v1::TaskState_Name(view->state);
  if (view != nullptr && !view->last_error.empty()) {
    absl::StrAppend(&why, ": ", view->last_error);
  }
  return absl::StrCat(task.ToString(), " (", why, ")");
}

}  // namespace

absl::Status ValidatePsOptions(const v1::ParameterServerOptions& ps) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ps.", parts...));
  };
  if (!v1::ParameterServerOptions::Partitioner_IsValid(ps.partitioner())) {
    return bad("partitioner ", ps.partitioner(), " is unknown");
  }
  if (ps.partitioner() == v1::ParameterServerOptions::PARTITIONER_FIXED &&
      ps.num_shards() <= 0) {
    return bad("num_shards must be positive for the fixed partitioner, got ",
               ps.num_shards());
  }
  if (ps.partitioner() == v1::ParameterServerOptions::PARTITIONER_MAX_SIZE &&
      ps.max_shard_bytes() <= 0) {
    return bad(
        "max_shard_bytes must be positive for the max-size "
        "partitioner, got ",
        ps.max_shard_bytes());
  }
  if (ps.min_shard_bytes() < 0) return bad("min_shard_bytes must be >= 0");
  if (ps.max_inflight() < 0 || ps.max_inflight() > 64) {
    return bad("max_inflight must be in [0, 64], got ", ps.max_inflight());
  }
  if (ps.ps_recovery_timeout_ms() < 0) {
    return bad("ps_recovery_timeout_ms must be >= 0");
  }
  return absl::OkStatus();
}

std::vector<TaskId> JobManager::PsTasks() const {
  std::vector<TaskId> tasks;
  for (const TaskId& task : spec_.tasks()) {
    if (task.type == kPs) tasks.push_back(task);
  }
  return tasks;
}

void JobManager::AddEvent(Job& job, std::string text, absl::Time now) {
  v1::JobEvent* event = job.status.add_events();
  event->set_time_unix_ms(absl::ToUnixMillis(now));
  event->set_text(std::move(text));
  changed_ = true;
}

void JobManager::PlaceParameterServer(Job& job,
                                      const std::vector<AgentView>& agents,
                                      absl::Time now) {
  const v1::JobSpec& spec = job.status.spec();
  const std::vector<TaskId> workers = JobTasks(spec);
  const std::vector<TaskId> ps_tasks = PsTasks();
  std::vector<std::string> not_ready;
  std::vector<const AgentView*> ready;
  for (const TaskId& task : workers) {
    const AgentView* view = FindView(agents, task);
    if (view != nullptr && view->state == v1::READY) {
      ready.push_back(view);
    } else {
      not_ready.push_back(Why(task, view));
    }
  }
  for (const TaskId& task : ps_tasks) {
    const AgentView* view = FindView(agents, task);
    if (view == nullptr || view->state != v1::READY) {
      not_ready.push_back(Why(task, view));
    }
  }
  if (ps_tasks.empty()) {
    Finish(job, v1::JOB_FAILED,
           "strategy ParameterServer needs ps tasks, and the cluster has none",
           now);
    return;
  }
  if (!not_ready.empty()) {
    if (now - job.placing_since > options_.placement_timeout) {
      Finish(job, v1::JOB_FAILED,
             absl::StrCat("tasks not ready within ",
                          absl::FormatDuration(options_.placement_timeout),
                          ": ", absl::StrJoin(not_ready, ", ")),
             now);
    }
    return;
  }
  if (std::any_of(ready.begin(), ready.end(),
                  [](const AgentView* v) { return v->num_devices <= 0; })) {
    Finish(job, v1::JOB_FAILED, "a worker agent reports no devices", now);
    return;
  }

  const int executors = std::max(1, spec.ps().max_inflight());
  v1::JobStatus& status = job.status;
  job.placing_since = now;
  status.set_attempt(status.attempt() + 1);
  status.set_num_replicas(static_cast<int>(ready.size()) * executors);
  status.set_communication_note(absl::StrCat(
      "ParameterServer: ", ready.size(), " worker(s) x ", executors,
      " closure executor(s), variables on ", ps_tasks.size(), " ps task(s)"));
  status.clear_placement();
  job.reports.clear();
  job.failing_since.reset();
  job.lost.clear();
  job.failures_in_a_row.clear();
  job.ps_down_since.clear();
  job.closures = std::make_unique<ClosureScheduler>(spec.steps(), status);
  int64_t sequence = 0;
  (void)absl::SimpleAtoi(status.job_id(), &sequence);
  for (size_t node = 0; node < ready.size(); ++node) {
    const std::string task = ready[node]->task.ToString();
    v1::AgentJobAssignment a;
    a.set_job_id(status.job_id());
    a.set_attempt(status.attempt());
    *a.mutable_spec() = spec;
    a.set_node(static_cast<int>(node));
    a.set_num_nodes(static_cast<int>(ready.size()));
    a.set_local_replicas(executors);
    a.set_first_rank(static_cast<int>(node) * executors);
    a.set_num_replicas(status.num_replicas());
    a.set_group(absl::StrCat("job-", status.job_id(), "/attempt-",
                             status.attempt(), "/", task, "/epoch-",
                             job.epochs[task]));
    a.set_checkpoint_dir(status.checkpoint_dir());
    a.set_job_uid(status.uid());
    for (int e = 0; e < executors; ++e) {
      a.add_device_indices(e % ready[node]->num_devices);
    }
    for (const TaskId& ps : ps_tasks) {
      a.add_ps_addresses(spec_.address(ps).value_or(std::string()));
    }
    a.set_job_sequence(sequence);
    job.assignments[task] = a;
    status.add_placement(absl::StrCat(
        task, " (", executors, executors == 1 ? " executor)" : " executors)"));
  }
  for (const TaskId& ps : ps_tasks) {
    status.add_placement(absl::StrCat(ps.ToString(), " (variables)"));
  }
  changed_ = true;
}

void JobManager::LoseWorker(Job& job, const std::string& task,
                            const std::string& why, absl::Time now) {
  if (!job.lost.insert(task).second) return;
  const int requeued = job.closures->Requeue(task);
  auto assignment = job.assignments.find(task);
  if (assignment != job.assignments.end()) {
    // A new group makes the agent start a fresh runner when it is back.
    const int epoch = ++job.epochs[task];
    assignment->second.set_group(absl::StrCat("job-", job.status.job_id(),
                                              "/attempt-", job.status.attempt(),
                                              "/", task, "/epoch-", epoch));
  }
  job.reports.erase(task);
  job.closures->Fill(job.status);
  AddEvent(job,
           absl::StrCat(task, " lost (", why, "); ", requeued,
                        " in-flight closure(s) re-queued"),
           now);
}

void JobManager::RecordRecovery(Job& job, const v1::PsRecovery& recovery,
                                absl::Time now) {
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
  for (const auto& [k, v] : job.recoveries) {
    total += std::max<int64_t>(0, v.seen - v.restored);
  }
  job.status.set_ps_updates_lost(total);
  changed_ = true;
}

absl::StatusOr<v1::ClosureResponse> JobManager::RunClosures(
    const v1::ClosureRequest& request, absl::Time now) {
  const std::string task =
      TaskId{request.task().type(), request.task().index()}.ToString();
  absl::MutexLock lock(&mu_);
  Job* job = ActiveJob();
  if (job == nullptr || job->status.job_id() != request.job_id() ||
      job->status.attempt() != request.attempt() || job->closures == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", request.job_id(), " attempt ", request.attempt(),
                     " is not running"));
  }
  auto assignment = job->assignments.find(task);
  if (assignment == job->assignments.end() || job->lost.count(task) > 0 ||
      assignment->second.group() != request.group()) {
    // A runner from before its worker was lost: it stops, and the agent
    // starts the assignment's current one.
    return absl::FailedPreconditionError(
        absl::StrCat(task, " (", request.group(), ") has no part in job ",
                     request.job_id(), " now"));
  }
  for (const v1::PsRecovery& recovery : request.recoveries()) {
    RecordRecovery(*job, recovery, now);
  }
  std::vector<v1::ClosureResult> completed(request.completed().begin(),
                                           request.completed().end());
  for (v1::ClosureResult& result : completed) {
    if (result.time_unix_ms() == 0) {
      result.set_time_unix_ms(absl::ToUnixMillis(now));
    }
  }
  v1::ClosureResponse response =
      job->closures->Exchange(absl::StrCat(task, "/", request.slot()),
                              completed, std::clamp(request.want(), 0, 1));
  if (!completed.empty()) {
    job->closures->Fill(job->status);
    job->failures_in_a_row.erase(task);
    progressed_ = true;
  }
  if (job->status.state() != v1::JOB_RUNNING) {
    job->status.set_state(v1::JOB_RUNNING);
    changed_ = true;
  }
  return response;
}

void JobManager::CheckParameterServer(Job& job,
                                      const std::vector<AgentView>& agents,
                                      absl::Time now) {
  job.status.set_steps_per_second(job.closures->rate(now));
  if (job.closures->done()) {
    job.closures->Fill(job.status);
    Finish(job, v1::JOB_SUCCEEDED, "", now);
    return;
  }
  // A failure the job caused ends it; a lost worker only loses closures.
  for (const auto& [task, report] : job.reports) {
    if (report.state() == v1::AgentJobReport::FAILED && report.permanent()) {
      Finish(job, v1::JOB_FAILED, absl::StrCat(task, ": ", report.error()),
             now);
      return;
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
      failed.push_back(task);
    } else {
      job.lost.erase(task);  // back, with a fresh assignment
      ++alive;
    }
  }
  for (const std::string& task : failed) {
    const std::string error = job.reports[task].error();
    // A worker that keeps failing without finishing a closure would
    // otherwise be restarted forever.
    if (++job.failures_in_a_row[task] > kMaxFailuresInARow) {
      Finish(
          job, v1::JOB_FAILED,
          absl::StrCat(task, " failed ", kMaxFailuresInARow + 1,
                       " times in a row without finishing a closure: ", error),
          now);
      return;
    }
    LoseWorker(job, task, error, now);
    job.lost.erase(task);  // its agent lives and restarts the runner
  }
  if (alive + static_cast<int>(failed.size()) > 0) {
    job.placing_since = now;
  } else if (now - job.placing_since > options_.placement_timeout) {
    Finish(job, v1::JOB_FAILED,
           absl::StrCat("no worker alive for ",
                        absl::FormatDuration(options_.placement_timeout)),
           now);
    return;
  }

  const absl::Duration recovery = PsRecoveryTimeout(job.status.spec());
  for (const TaskId& ps : PsTasks()) {
    const std::string name = ps.ToString();
    const AgentView* view = FindView(agents, ps);
    if (view != nullptr && view->state == v1::READY) {
      job.ps_down_since.erase(name);
      continue;
    }
    auto [since, fresh] = job.ps_down_since.try_emplace(name, now);
    if (fresh) {
      AddEvent(job,
               absl::StrCat(Why(ps, view),
                            " went away; workers pause and retry while it is "
                            "restarted from its snapshot"),
               now);
    } else if (now - since->second > recovery) {
      Finish(job, v1::JOB_FAILED,
             absl::StrCat(Why(ps, view), " did not come back within ",
                          absl::FormatDuration(recovery)),
             now);
      return;
    }
  }
  while (job.status.events_size() > kMaxEvents) {
    job.status.mutable_events()->DeleteSubrange(0, 1);
    for (auto& [key, r] : job.recoveries) --r.event;
  }
}

}  // namespace cohort::coordinator
