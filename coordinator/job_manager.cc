#include "coordinator/job_manager.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/sync_monitor.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {
namespace {

int64_t UnixMillis(absl::Time t) { return absl::ToUnixMillis(t); }

// The replicas of a synchronous job agreed in this attempt to stop (their
// input ended, or the step function asked), and the chief wrote that step
// to the job's checkpoint_dir: the job has reached its end, even if the
// attempt failed afterwards (another agent's copy not written, an agent
// lost). Another attempt would resume past the end of its input, or train
// past the stop. Only the chief's report of this attempt counts: the job's
// checkpoint_step is the newest any agent ever reported.
bool StopCheckpointedByTheChief(const Job& job) {
  const int64_t stop = job.status.stopped_at_step();
  if (job.parameter_server() || stop <= 0) return false;
  for (const auto& [task, assignment] : job.assignments) {
    if (assignment.node() != 0) continue;
    const auto report = job.reports.find(task);
    return report != job.reports.end() &&
           report->second.checkpoint_step() == stop;
  }
  return false;
}

int SpentRestarts(const v1::JobStatus& status) {
  return static_cast<int>(
      std::count_if(status.restarts().begin(), status.restarts().end(),
                    [](const v1::RestartRecord& r) { return r.spent(); }));
}

// The agent of the current attempt that holds `rank` of `ring` (a
// RingLink's ring); "" if none.
std::string RankOwner(const Job& job, const std::string& ring, int rank) {
  for (const auto& [task, assignment] : job.assignments) {
    const bool owns =
        ring == "agents"
            ? assignment.node() == rank
            : rank >= assignment.first_rank() &&
                  rank < assignment.first_rank() + assignment.local_replicas();
    if (owns) return task;
  }
  return "";
}

}  // namespace

JobManager::JobManager(ClusterSpec spec, JobManagerOptions options)
    : spec_(std::move(spec)), options_(std::move(options)) {}

absl::Status JobManager::CheckSubmittable(const v1::JobSpec& spec) const {
  COHORT_RETURN_IF_ERROR(ValidateJobSpec(spec));
  if (JobTasks(spec_, spec).empty()) {
    return absl::FailedPreconditionError(
        "the cluster has no chief or worker task to run a job on");
  }
  if (!spec.eval_fn().empty() && spec_.num_tasks(kEvaluator) == 0) {
    return absl::FailedPreconditionError(
        "eval_fn needs the cluster's evaluator task, and the cluster spec "
        "has none; add an \"evaluator\" list to it");
  }
  if (spec.strategy() == v1::PARAMETER_SERVER && PsTasks(spec_).empty()) {
    return absl::FailedPreconditionError(
        "strategy ParameterServer needs ps tasks, and the cluster spec has "
        "none; add a \"ps\" list to it");
  }
  if (spec.strategy() != v1::PARAMETER_SERVER) {
    const int agents = static_cast<int>(JobTasks(spec_, spec).size());
    if (absl::Status shape = CheckSyncShape(spec, agents); !shape.ok()) {
      return shape;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JobManager::Submit(const v1::JobSpec& spec,
                                               absl::Time now, bool* repeated) {
  if (repeated != nullptr) *repeated = false;
  COHORT_RETURN_IF_ERROR(CheckSubmittable(spec));
  absl::MutexLock lock(&mu_);
  COHORT_ASSIGN_OR_RETURN(std::optional<std::string> earlier,
                          FindSubmissionLocked(spec));
  if (earlier.has_value()) {
    if (repeated != nullptr) *repeated = true;
    return *earlier;
  }
  if (absl::Status room = CheckRoomForAJobLocked(); !room.ok()) return room;
  const int64_t id = next_id_++;
  Job& job = jobs_[id];
  v1::JobStatus& status = job.status;
  status.set_job_id(absl::StrCat(id));
  status.set_uid(absl::StrCat(
      absl::Hex(absl::Uniform<uint64_t>(bit_gen_), absl::kZeroPad16)));
  *status.mutable_spec() = spec;
  if (status.spec().config_json().empty()) {
    status.mutable_spec()->set_config_json("{}");
  }
  status.set_state(v1::JOB_SUBMITTED);
  status.set_submit_time_unix_ms(UnixMillis(now));
  status.set_checkpoint_dir(
      !spec.checkpoint_dir().empty()
          ? spec.checkpoint_dir()
          // Keyed by the uid too: a new cluster's job 1 must not resume a
          // checkpoint of an earlier one's on the chief's disk.
          : absl::StrCat(options_.checkpoint_root, "/", id, "-", status.uid()));
  job.client_seen = now;
  job.changed = true;
  return status.job_id();
}

absl::StatusOr<std::optional<std::string>> JobManager::FindSubmission(
    const v1::JobSpec& spec) const {
  absl::MutexLock lock(&mu_);
  return FindSubmissionLocked(spec);
}

absl::StatusOr<std::optional<std::string>> JobManager::FindSubmissionLocked(
    const v1::JobSpec& spec) const {
  if (spec.submission_id().empty()) return std::nullopt;
  for (const auto& [id, job] : jobs_) {
    const v1::JobSpec& kept = job.status.spec();
    if (kept.submission_id() != spec.submission_id()) continue;
    // As Submit keeps it.
    v1::JobSpec submitted = spec;
    if (submitted.config_json().empty()) submitted.set_config_json("{}");
    if (!google::protobuf::util::MessageDifferencer::Equals(submitted, kept)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "submission_id ", Quoted(spec.submission_id()), " was given to job ",
          id, kept.name().empty() ? "" : absl::StrCat(" ", Quoted(kept.name())),
          ", whose spec differs: a retry must send the same spec, and another "
          "job needs another submission_id"));
    }
    return job.status.job_id();
  }
  return std::nullopt;
}

void JobManager::Withdraw(const std::string& job_id, absl::Time now,
                          const std::string& why) {
  absl::MutexLock lock(&mu_);
  Job* job = Find(job_id);
  if (job == nullptr) return;
  if (!IsTerminal(job->status.state())) {
    Finish(*job, v1::JOB_CANCELLED, why, now);
  }
  job->status.mutable_spec()->clear_submission_id();
  // Never run, it keeps no bulk: a table too large to save sheds it.
  job->status.mutable_spec()->clear_config_json();
}

absl::Status JobManager::CheckRoomForAJob() const {
  absl::MutexLock lock(&mu_);
  return CheckRoomForAJobLocked();
}

absl::Status JobManager::CheckRoomForAJobLocked() const {
  const int64_t unended =
      std::count_if(jobs_.begin(), jobs_.end(), [](const auto& entry) {
        return !IsTerminal(entry.second.status.state());
      });
  if (unended < options_.unended_jobs_max) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(unended,
                   " jobs are queued or running, the most this coordinator "
                   "takes; cancel some, or submit again once some have ended"));
}

Job* JobManager::Find(const std::string& job_id) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(job_id, &id)) return nullptr;
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

absl::Status JobManager::NotFound(const std::string& job_id) const {
  int64_t id = 0;
  if (absl::SimpleAtoi(job_id, &id) && id > 0 && id < next_id_) {
    return absl::NotFoundError(
        absl::StrCat("job ", id,
                     " ended and was dropped from the table, which keeps the "
                     "newest ",
                     options_.finished_jobs_kept,
                     " ended jobs (the coordinator's --finished_jobs_kept)"));
  }
  return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
}

void JobManager::DropOldFinished() {
  // Oldest by when they ended, not by id: a long job that just ended is
  // newer than a sweep of queued jobs cancelled while it ran.
  std::vector<std::pair<int64_t, int64_t>> ended;  // (end time, id)
  for (const auto& [id, job] : jobs_) {
    if (IsTerminal(job.status.state())) {
      ended.emplace_back(job.status.end_time_unix_ms(), id);
    }
  }
  const int64_t excess =
      static_cast<int64_t>(ended.size()) - options_.finished_jobs_kept;
  if (excess <= 0) return;
  std::sort(ended.begin(), ended.end());
  for (int64_t i = 0; i < excess; ++i) jobs_.erase(ended[i].second);
  changed_ = true;
  spdlog::info(
      "dropped {} ended job(s) from the table, which keeps the "
      "newest {} (--finished_jobs_kept)",
      excess, options_.finished_jobs_kept);
}

Job* JobManager::ActiveJob() {
  for (auto& [id, job] : jobs_) {
    if (job.active()) return &job;
  }
  return nullptr;
}

absl::StatusOr<v1::JobStatus> JobManager::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  Job* job = const_cast<JobManager*>(this)->Find(job_id);
  if (job == nullptr) return NotFound(job_id);
  return job->status;
}

std::vector<v1::JobStatus> JobManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobStatus> list;
  for (const auto& [id, job] : jobs_) list.push_back(job.status);
  return list;
}

absl::StatusOr<v1::JobStatus> JobManager::Cancel(const std::string& job_id,
                                                 absl::Time now,
                                                 const std::string& why) {
  absl::MutexLock lock(&mu_);
  Job* job = Find(job_id);
  if (job == nullptr) return NotFound(job_id);
  if (!IsTerminal(job->status.state())) {
    Finish(*job, v1::JOB_CANCELLED, why, now);
  }
  return job->status;
}

v1::AgentSyncResponse JobManager::Sync(const v1::AgentJobReport& report,
                                       absl::Time now) {
  v1::AgentSyncResponse response;
  response.set_sync_interval_ms(
      absl::ToInt64Milliseconds(options_.sync_interval));
  const std::string task =
      TaskId{report.task().type(), report.task().index()}.ToString();
  absl::MutexLock lock(&mu_);
  response.set_lists_unended_jobs(true);
  response.set_cluster_uid(options_.cluster_uid);
  for (const auto& [id, listed] : jobs_) {
    if (!IsTerminal(listed.status.state())) {
      response.add_unended_jobs(
          absl::StrCat(listed.status.job_id(), "-", listed.status.uid()));
    }
  }
  if (report.task().type() == kEvaluator) {
    SyncEvaluator(report, now, response);
    return response;
  }
  Job* job = ActiveJob();
  if (job == nullptr) return response;
  auto assignment = job->assignments.find(task);
  if (assignment == job->assignments.end()) return response;

  const bool ps = job->parameter_server();
  // An agent that outlived an earlier cluster may run its job of the same
  // id (an agent too old to say the uid is taken at its word).
  const bool current =
      report.job_id() == job->status.job_id() &&
      report.attempt() == job->status.attempt() &&
      (report.job_uid().empty() || report.job_uid() == job->status.uid()) &&
      (!ps || report.group() == assignment->second.group());
  if (current) {
    job->reports[task] = report;
    if (report.state() == v1::AgentJobReport::FAILED &&
        !job->failing_since.has_value()) {
      job->failing_since = now;
    }
    progressed_ = true;
    if (!ps) UpdateProgress(*job);
    if (!report.resumed_from().empty()) NoteResume(*job, report);
    for (const std::string& warning : report.warnings()) {
      // Once each, though every report of the attempt repeats it.
      if (job->warnings.insert(warning).second) {
        AddEvent(*job, absl::StrCat(task, ": ", warning), now);
      }
    }
    response.set_abort(job->abort);
  } else if (ps) {
    // A worker whose agent restarted between two ticks: its closures run
    // again, and the new group starts it afresh.
    if (job->reports.count(task) > 0) {
      LoseWorker(*job, task, "the agent restarted", now);
      job->lost.erase(task);
    }
  } else if (auto known = job->reports.find(task);
             known != job->reports.end()) {
    // It ran this attempt and now reports something else: it restarted and
    // lost its replicas. The attempt is over for it; the next one, not this
    // one again, is its next assignment. Replicas that had finished lost
    // nothing.
    if (known->second.state() != v1::AgentJobReport::FAILED &&
        known->second.state() != v1::AgentJobReport::FINISHED) {
      known->second.set_state(v1::AgentJobReport::FAILED);
      known->second.set_error("the agent restarted and lost its replicas");
      if (!job->failing_since.has_value()) job->failing_since = now;
    }
    return response;
  }
  *response.mutable_assignment() = assignment->second;
  return response;
}

void JobManager::Tick(const std::vector<AgentView>& agents, absl::Time now) {
  absl::MutexLock lock(&mu_);
  DropOldFinished();
  Job* job = ActiveJob();
  if (job == nullptr) {
    for (auto& [id, queued] : jobs_) {
      if (queued.status.state() == v1::JOB_SUBMITTED) {
        job = &queued;
        job->status.set_state(v1::JOB_PLACING);
        job->placing_since = now;
        job->changed = true;
        break;
      }
    }
  }
  if (job == nullptr) return;
  const bool ps = job->parameter_server();
  if (job->assignments.empty()) {
    ps ? PlaceParameterServer(*job, agents, now) : Place(*job, agents, now);
  } else {
    ps ? CheckParameterServer(*job, agents, now) : CheckSync(*job, agents, now);
  }
}

void JobManager::SettleFinished(const std::vector<AgentView>& agents,
                                absl::Time now) {
  absl::MutexLock lock(&mu_);
  Job* job = ActiveJob();
  if (job == nullptr || job->assignments.empty()) return;
  if (job->parameter_server()) {
    // Its closures are the coordinator's own record of the work.
    if (job->closures != nullptr && job->closures->done()) {
      CheckParameterServer(*job, agents, now);
    }
  } else if (JudgeSyncAttempt(*job, agents, now, options_).kind ==
             SyncVerdict::Kind::kSucceeded) {
    Finish(*job, v1::JOB_SUCCEEDED, "", now);
  }
}

void JobManager::Place(Job& job, const std::vector<AgentView>& agents,
                       absl::Time now) {
  const v1::JobSpec& spec = job.status.spec();
  const Readiness readiness = CheckReady(JobTasks(spec_, spec), agents);
  NoteWaiting(job, readiness.not_ready);
  if (!readiness.not_ready.empty()) {
    const absl::Duration timeout = PlacementTimeout(job, options_);
    if (now - job.placing_since > timeout) {
      Finish(job, v1::JOB_FAILED,
             absl::StrCat("agents not ready within ",
                          absl::FormatDuration(timeout), ": ",
                          absl::StrJoin(readiness.not_ready, ", ")),
             now);
    }
    return;
  }
  absl::StatusOr<SyncPlacement> placement = PlaceSync(spec, readiness.ready);
  if (!placement.ok()) {
    Finish(job, v1::JOB_FAILED, std::string(placement.status().message()), now);
    return;
  }
  const int local = placement->local_replicas;
  const int num_nodes = static_cast<int>(readiness.ready.size());
  v1::JobStatus& status = job.status;
  job.placing_since = now;  // the attempt must start within the timeout
  status.set_attempt(status.attempt() + 1);
  status.set_num_replicas(placement->num_replicas);
  status.set_communication_note(placement->note);
  status.clear_placement();
  status.clear_links();
  job.reports.clear();
  job.failing_since.reset();
  for (int node = 0; node < num_nodes; ++node) {
    const std::string task = readiness.ready[node]->task.ToString();
    v1::AgentJobAssignment a;
    a.set_job_id(status.job_id());
    a.set_attempt(status.attempt());
    *a.mutable_spec() = spec;
    a.set_node(node);
    a.set_num_nodes(num_nodes);
    a.set_local_replicas(local);
    a.set_first_rank(node * local);
    a.set_num_replicas(placement->num_replicas);
    a.set_communication(placement->communication);
    a.set_group(
        absl::StrCat("job-", status.job_id(), "/attempt-", status.attempt()));
    a.set_checkpoint_dir(status.checkpoint_dir());
    a.set_checkpoint_step(status.checkpoint_step());
    a.set_job_uid(status.uid());
    const int logical = placement->logical_devices;
    a.set_logical_devices_per_replica(logical);
    for (int d = 0; d < local * logical; ++d) a.add_device_indices(d);
    job.assignments[task] = a;
    status.add_placement(absl::StrCat(
        task, " (", local, local == 1 ? " replica" : " replicas",
        DescribeLogicalDevices(*readiness.ready[node], local, logical), ")"));
  }
  job.changed = true;
}

void JobManager::CheckSync(Job& job, const std::vector<AgentView>& agents,
                           absl::Time now) {
  const SyncVerdict verdict = JudgeSyncAttempt(job, agents, now, options_);
  switch (verdict.kind) {
    case SyncVerdict::Kind::kStarting:
      return;
    case SyncVerdict::Kind::kRunning:
      if (job.status.state() != v1::JOB_RUNNING) {
        job.status.set_state(v1::JOB_RUNNING);
        job.changed = true;
      }
      return;
    case SyncVerdict::Kind::kSucceeded:
      Finish(job, v1::JOB_SUCCEEDED, "", now);
      return;
    case SyncVerdict::Kind::kFailing:
      if (!job.failing_since.has_value()) job.failing_since = now;
      if (job.abort.empty()) job.abort = verdict.abort;
      return;
    case SyncVerdict::Kind::kEnd:
      EndAttempt(job, verdict.cause, verdict.permanent, now,
                 /*spent=*/!verdict.agent_left);
      return;
  }
}

void JobManager::EndAttempt(Job& job, const std::string& cause, bool permanent,
                            absl::Time now, bool spent) {
  retired_.push_back(absl::StrCat("job-", job.status.job_id(), "/attempt-",
                                  job.status.attempt(), "/"));
  const bool stop_checkpointed = StopCheckpointedByTheChief(job);
  job.assignments.clear();
  job.reports.clear();
  job.failing_since.reset();
  job.abort.clear();
  job.changed = true;
  if (stop_checkpointed) {
    spdlog::warn(
        "job {} succeeded: its replicas stopped at step {} and that step is "
        "checkpointed; the attempt then failed: {}",
        job.status.job_id(), job.status.stopped_at_step(), cause);
    Finish(job, v1::JOB_SUCCEEDED, "", now);
    return;
  }
  if (job.status.spec().strategy() != v1::PARAMETER_SERVER) {
    // A stop agreed in a failed attempt is for the next one to reach again.
    job.status.clear_stopped_at_step();
    job.status.clear_stop_reason();
  }
  if (permanent) {
    Finish(job, v1::JOB_FAILED, cause, now);
    return;
  }
  const int max_restarts = job.status.spec().max_restarts();
  if (spent && SpentRestarts(job.status) >= max_restarts) {
    Finish(job, v1::JOB_FAILED,
           absl::StrCat(cause,
                        "; no restarts left (max_restarts=", max_restarts, ")"),
           now);
    return;
  }
  v1::RestartRecord* record = job.status.add_restarts();
  record->set_attempt(job.status.attempt() + 1);
  record->set_time_unix_ms(UnixMillis(now));
  record->set_cause(cause);
  record->set_resumed_from_step(job.status.checkpoint_step());
  record->set_spent(spent);
  job.status.set_state(v1::JOB_RESTARTING);
  job.status.set_steps_per_second(0);
  job.status.set_step(job.status.checkpoint_step());
  job.placing_since = now;
}

void JobManager::NoteWaiting(Job& job,
                             const std::vector<std::string>& not_ready,
                             absl::string_view then) {
  const std::string waiting_for =
      not_ready.empty()
          ? ""
          : absl::StrCat(absl::StrJoin(not_ready, ", "), "; ", then,
                         " if they are not ready within ",
                         absl::FormatDuration(PlacementTimeout(job, options_)));
  if (job.status.waiting_for() == waiting_for) return;
  job.status.set_waiting_for(waiting_for);
  job.changed = true;
}

void JobManager::Finish(Job& job, v1::JobState state, const std::string& error,
                        absl::Time now) {
  retired_.push_back(absl::StrCat("job-", job.status.job_id(), "/"));
  job.status.clear_waiting_for();
  job.assignments.clear();
  job.reports.clear();
  job.failing_since.reset();
  job.status.set_state(state);
  job.status.set_error(error);
  job.status.set_end_time_unix_ms(UnixMillis(now));
  // Nothing will run them: the saved table need not carry their args.
  job.status.clear_pending_calls();
  // A finished job keeps its last rate; an ended one has none.
  if (state != v1::JOB_SUCCEEDED) job.status.set_steps_per_second(0);
  job.changed = true;
}

void JobManager::NoteStop(Job& job, const v1::AgentJobReport& report) {
  if (report.stopped_at_step() == 0) return;
  v1::JobStatus& status = job.status;
  if (status.stopped_at_step() != report.stopped_at_step()) {
    status.set_stopped_at_step(report.stopped_at_step());
    status.clear_stop_reason();
    job.changed = true;
  }
  // Only the agent of the replica that asked knows why.
  if (status.stop_reason().empty() && !report.stop_reason().empty()) {
    status.set_stop_reason(report.stop_reason());
    job.changed = true;
  }
}

void JobManager::UpdateProgress(Job& job) {
  std::vector<v1::RingLink> links;
  for (const auto& [task, report] : job.reports) {
    auto assignment = job.assignments.find(task);
    for (v1::RingLink link : report.links()) {
      link.set_from_task(task);
      link.set_to_task(RankOwner(job, link.ring(), link.to_rank()));
      links.push_back(std::move(link));
    }
    // A replica that resumed from step N restored a checkpoint of N, which
    // may be one this coordinator never heard of (taken while it was down,
    // as a stopped cluster's agents checkpoint on their way out).
    const int64_t newest =
        std::max(report.checkpoint_step(), report.resumed_from_step());
    if (newest > job.status.checkpoint_step()) {
      job.status.set_checkpoint_step(newest);
      job.changed = true;
    }
    NoteStop(job, report);
    if (assignment == job.assignments.end() || assignment->second.node() != 0) {
      continue;
    }
    // The chief's replica 0 speaks for the job.
    // Reports are of the current attempt only, which may have resumed from
    // a checkpoint behind the last step seen.
    job.status.set_step(report.step());
    job.status.set_steps_per_second(report.steps_per_second());
    for (const auto& [metric, value] : report.metrics()) {
      (*job.status.mutable_metrics())[metric] = value;
    }
  }
  std::sort(links.begin(), links.end(),
            [](const v1::RingLink& a, const v1::RingLink& b) {
              return std::make_tuple(a.ring(), a.from_rank()) <
                     std::make_tuple(b.ring(), b.from_rank());
            });
  if (links.size() != static_cast<size_t>(job.status.links_size())) {
    job.changed = true;  // new links are worth saving; the rest is progress
  }
  *job.status.mutable_links() = {links.begin(), links.end()};
}

void JobManager::NoteResume(Job& job, const v1::AgentJobReport& report) {
  if (job.status.restarts().empty()) return;
  v1::RestartRecord& last =
      job.status.mutable_restarts()->at(job.status.restarts_size() - 1);
  if (last.attempt() != job.status.attempt() ||
      last.resumed_from() == report.resumed_from()) {
    return;
  }
  last.set_resumed_from(report.resumed_from());
  last.set_resumed_from_step(report.resumed_from_step());
  // Newer checkpoints could not be read: the resumed one is the newest.
  if (report.resumed_from_step() < job.status.checkpoint_step()) {
    job.status.set_checkpoint_step(report.resumed_from_step());
  }
  job.changed = true;
}

absl::StatusOr<std::optional<std::string>> JobManager::TakeSnapshotIfChanged(
    absl::Time now, absl::Duration progress_period) {
  v1::JobTable table;
  {
    absl::MutexLock lock(&mu_);
    bool changed = changed_;
    for (const auto& [id, job] : jobs_) changed = changed || job.changed;
    if (!changed && !(progressed_ && now - last_snapshot_ >= progress_period)) {
      return std::nullopt;
    }
    // Measured before the copy: a table too large to save is not copied
    // at every tick that retries it.
    size_t bytes = 0;
    for (const auto& [id, job] : jobs_) bytes += job.status.ByteSizeLong();
    if (bytes > static_cast<size_t>(options_.max_table_bytes)) {
      changed_ = true;  // still unsaved
      return absl::ResourceExhaustedError(absl::StrCat(
          "the job table is ", bytes, " bytes, over the ",
          options_.max_table_bytes,
          " one save can hold; the last table saved stands until a "
          "coordinator keeps fewer ended jobs (--finished_jobs_kept)"));
    }
    table.set_next_id(next_id_);
    for (const auto& [id, job] : jobs_) *table.add_jobs() = job.status;
    changed_ = progressed_ = false;
    for (auto& [id, job] : jobs_) job.changed = false;
    last_snapshot_ = now;
  }
  // Printing a large table takes a while; agents' syncs wait on mu_.
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  print.add_whitespace = true;
  std::string json;
  if (const auto printed =
          google::protobuf::util::MessageToJsonString(table, &json, print);
      !printed.ok()) {
    MarkUnsaved();
    return absl::InternalError(
        absl::StrCat("the job table cannot be printed as JSON: ",
                     std::string(printed.message())));
  }
  return json;
}

absl::flat_hash_set<std::string> JobManager::LibraryDigests() const {
  absl::MutexLock lock(&mu_);
  absl::flat_hash_set<std::string> digests;
  for (const auto& [id, job] : jobs_) {
    digests.insert(job.status.spec().library_digest());
  }
  return digests;
}

std::vector<std::string> JobManager::TakeRetiredGroups() {
  absl::MutexLock lock(&mu_);
  return std::exchange(retired_, {});
}

void JobManager::MarkUnsaved() {
  absl::MutexLock lock(&mu_);
  changed_ = true;
}

absl::Status JobManager::Restore(const std::string& text, absl::Time now) {
  v1::JobTable table;
  // A table a newer build wrote (fields this one does not know) still
  // restores, so that a rollback keeps the jobs.
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto parsed =
          google::protobuf::util::JsonStringToMessage(text, &table, options);
      !parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat("the job table does not parse: ", parsed.ToString()));
  }
  absl::MutexLock lock(&mu_);
  next_id_ = std::max<int64_t>(1, table.next_id());
  for (v1::JobStatus& saved : *table.mutable_jobs()) {
    Job job;
    job.status = std::move(saved);
    job.client_seen = now;
    int64_t id = 0;
    if (!absl::SimpleAtoi(job.status.job_id(), &id) || id <= 0) {
      return absl::DataLossError(absl::StrCat("a saved job has a bad id \"",
                                              job.status.job_id(), "\""));
    }
    if (job.active() && job.parameter_server()) {
      // The closure table survives in the status: completed closures stay
      // completed; those in flight run again.
      job.status.set_state(v1::JOB_RESTARTING);
      job.placing_since = now;
      // Recoveries go on being counted from what was saved; their events
      // keep the text they had.
      for (const v1::PsRecovery& saved : job.status.ps_recoveries()) {
        job.recoveries[{saved.ps_index(), saved.incarnation()}] =
            Job::Recovery{.event = -1,
                          .restored = saved.restored_updates(),
                          .seen = saved.updates_seen()};
      }
    } else if (job.active()) {
      // As after any failed attempt, a stop agreed in the last one is for
      // the next to reach again.
      job.status.clear_stopped_at_step();
      job.status.clear_stop_reason();
      v1::RestartRecord* record = job.status.add_restarts();
      record->set_attempt(job.status.attempt() + 1);
      record->set_time_unix_ms(UnixMillis(now));
      record->set_cause("the coordinator restarted");
      record->set_resumed_from_step(job.status.checkpoint_step());
      job.status.set_state(v1::JOB_RESTARTING);
      job.status.set_step(job.status.checkpoint_step());
      job.placing_since = now;
    }
    next_id_ = std::max(next_id_, id + 1);
    jobs_[id] = std::move(job);
  }
  DropOldFinished();
  return absl::OkStatus();
}

}  // namespace cohort::coordinator
