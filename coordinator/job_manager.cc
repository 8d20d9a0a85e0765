#include "coordinator/job_manager.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/digest.h"
#include "nlohmann/json.hpp"

namespace cohort::coordinator {
namespace {

int64_t UnixMillis(absl::Time t) { return absl::ToUnixMillis(t); }

const char* StrategyName(v1::Strategy strategy) {
  switch (strategy) {
    case v1::MULTI_WORKER_MIRRORED:
      return "MultiWorkerMirrored";
    case v1::MIRRORED:
      return "Mirrored";
    case v1::ONE_DEVICE:
      return "OneDevice";
    case v1::CENTRAL_STORAGE:
      return "CentralStorage";
    case v1::PARAMETER_SERVER:
      return "ParameterServer";
    default:
      return "unspecified";
  }
}

}  // namespace

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ", parts...));
  };
  switch (spec.strategy()) {
    case v1::MULTI_WORKER_MIRRORED:
    case v1::MIRRORED:
    case v1::ONE_DEVICE:
    case v1::CENTRAL_STORAGE:
      break;
    case v1::PARAMETER_SERVER:
      if (absl::Status ps = ValidatePsOptions(spec.ps()); !ps.ok()) return ps;
      break;
    default:
      return bad("strategy is missing or unknown (", spec.strategy(), ")");
  }
  if (!v1::Communication_IsValid(spec.communication())) {
    return bad("communication ", spec.communication(), " is unknown");
  }
  if (!IsSha256Hex(spec.library_digest())) {
    return bad("library_digest must be 64 lowercase hex digits (SHA-256)");
  }
  if (spec.step_fn().empty()) return bad("step_fn is required");
  if (spec.steps() <= 0)
    return bad("steps must be positive, got ", spec.steps());
  if (spec.global_batch_size() <= 0) {
    return bad("global_batch_size must be positive, got ",
               spec.global_batch_size());
  }
  if (spec.checkpoint_every() < 0) {
    return bad("checkpoint_every must be >= 0, got ", spec.checkpoint_every());
  }
  if (spec.max_restarts() < 0) {
    return bad("max_restarts must be >= 0, got ", spec.max_restarts());
  }
  if (spec.devices_per_agent() < 0) {
    return bad("devices_per_agent must be >= 0, got ",
               spec.devices_per_agent());
  }
  if (spec.collective_timeout_ms() < 0) {
    return bad("collective_timeout_ms must be >= 0");
  }
  if (!spec.checkpoint_dir().empty()) {
    const std::filesystem::path dir(spec.checkpoint_dir());
    // Each agent would resolve a relative path against its own working
    // directory, and ".." makes two spellings of one directory.
    if (!dir.is_absolute()) {
      return bad("checkpoint_dir must be an absolute path, got \"",
                 spec.checkpoint_dir(), "\"");
    }
    for (const std::filesystem::path& part : dir) {
      if (part == "..") {
        return bad("checkpoint_dir must not contain \"..\", got \"",
                   spec.checkpoint_dir(), "\"");
      }
    }
    if (spec.checkpoint_dir().find('\0') != std::string::npos) {
      return bad("checkpoint_dir holds a NUL byte");
    }
  }
  if (!spec.config_json().empty()) {
    const nlohmann::json config =
        nlohmann::json::parse(spec.config_json(), nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return bad("config_json must be a JSON object");
    }
  }
  return absl::OkStatus();
}

namespace {

// CentralStorage keeps the one copy of the variables in one agent's memory,
// so it runs on exactly one agent; in a cluster of several it would leave
// all but one idle, which is never what was meant.
int SpentRestarts(const v1::JobStatus& status) {
  return static_cast<int>(
      std::count_if(status.restarts().begin(), status.restarts().end(),
                    [](const v1::RestartRecord& r) { return r.spent(); }));
}

}  // namespace

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_SUCCEEDED || state == v1::JOB_FAILED ||
         state == v1::JOB_CANCELLED;
}

bool JobManager::Job::active() const {
  return !IsTerminal(status.state()) && status.state() != v1::JOB_SUBMITTED;
}

JobManager::JobManager(ClusterSpec spec, JobManagerOptions options)
    : spec_(std::move(spec)), options_(std::move(options)) {}

absl::StatusOr<std::string> JobManager::Submit(const v1::JobSpec& spec,
                                               absl::Time now) {
  if (absl::Status valid = ValidateJobSpec(spec); !valid.ok()) return valid;
  if (JobTasks(spec).empty()) {
    return absl::FailedPreconditionError(
        "the cluster has no chief or worker task to run a job on");
  }
  if (spec.strategy() == v1::PARAMETER_SERVER && PsTasks().empty()) {
    return absl::FailedPreconditionError(
        "strategy ParameterServer needs ps tasks, and the cluster spec has "
        "none; add a \"ps\" list to it");
  }
  absl::MutexLock lock(&mu_);
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
          : absl::StrCat(options_.checkpoint_root, "/", id));
  changed_ = true;
  return status.job_id();
}

JobManager::Job* JobManager::Find(const std::string& job_id) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(job_id, &id)) return nullptr;
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

JobManager::Job* JobManager::ActiveJob() {
  for (auto& [id, job] : jobs_) {
    if (job.active()) return &job;
  }
  return nullptr;
}

absl::StatusOr<v1::JobStatus> JobManager::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  Job* job = const_cast<JobManager*>(this)->Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  return job->status;
}

std::vector<v1::JobStatus> JobManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobStatus> list;
  for (const auto& [id, job] : jobs_) list.push_back(job.status);
  return list;
}

absl::StatusOr<v1::JobStatus> JobManager::Cancel(const std::string& job_id,
                                                 absl::Time now) {
  absl::MutexLock lock(&mu_);
  Job* job = Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  if (!IsTerminal(job->status.state())) {
    Finish(*job, v1::JOB_CANCELLED, "cancelled on request", now);
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
  Job* job = ActiveJob();
  if (job == nullptr) return response;
  auto assignment = job->assignments.find(task);
  if (assignment == job->assignments.end()) return response;

  const bool ps = job->status.spec().strategy() == v1::PARAMETER_SERVER;
  const bool current = report.job_id() == job->status.job_id() &&
                       report.attempt() == job->status.attempt() &&
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
    // one again, is its next assignment.
    if (known->second.state() != v1::AgentJobReport::FAILED) {
      known->second.set_state(v1::AgentJobReport::FAILED);
      known->second.set_error("the agent restarted and lost its replicas");
      if (!job->failing_since.has_value()) job->failing_since = now;
    }
    return response;
  }
  *response.mutable_assignment() = assignment->second;
  return response;
}

std::vector<TaskId> JobManager::JobTasks(const v1::JobSpec& spec) const {
  std::vector<TaskId> tasks;
  for (const TaskId& task : spec_.tasks()) {
    if (task.type == kChief || task.type == kWorker) tasks.push_back(task);
  }
  if (spec.strategy() != v1::MULTI_WORKER_MIRRORED &&
      spec.strategy() != v1::PARAMETER_SERVER && tasks.size() > 1) {
    tasks.resize(1);
  }
  return tasks;
}

void JobManager::Tick(const std::vector<AgentView>& agents, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Job* job = ActiveJob();
  if (job == nullptr) {
    for (auto& [id, queued] : jobs_) {
      if (queued.status.state() == v1::JOB_SUBMITTED) {
        job = &queued;
        job->status.set_state(v1::JOB_PLACING);
        job->placing_since = now;
        changed_ = true;
        break;
      }
    }
  }
  if (job == nullptr) return;
  const bool ps = job->status.spec().strategy() == v1::PARAMETER_SERVER;
  if (job->assignments.empty()) {
    ps ? PlaceParameterServer(*job, agents, now) : Place(*job, agents, now);
  } else {
    ps ? CheckParameterServer(*job, agents, now)
       : CheckAttempt(*job, agents, now);
  }
}

void JobManager::Place(Job& job, const std::vector<AgentView>& agents,
                       absl::Time now) {
  const v1::JobSpec& spec = job.status.spec();
  const std::vector<TaskId> tasks = JobTasks(spec);
  if (tasks.empty()) {
    Finish(job, v1::JOB_FAILED,
           "the cluster has no chief or worker task to run the job on", now);
    return;
  }
  std::vector<const AgentView*> views;
  std::vector<std::string> not_ready;
  for (const TaskId& task : tasks) {
    auto it = std::find_if(agents.begin(), agents.end(),
                           [&](const AgentView& a) { return a.task == task; });
    if (it == agents.end() || it->state != v1::READY) {
      std::string why =
          it == agents.end() ? "unknown" : v1::TaskState_Name(it->state);
      if (it != agents.end() && !it->last_error.empty()) {
        absl::StrAppend(&why, ": ", it->last_error);
      }
      not_ready.push_back(absl::StrCat(task.ToString(), " (", why, ")"));
    } else {
      views.push_back(&*it);
    }
  }
  if (!not_ready.empty()) {
    if (now - job.placing_since > options_.placement_timeout) {
      Finish(job, v1::JOB_FAILED,
             absl::StrCat("agents not ready within ",
                          absl::FormatDuration(options_.placement_timeout),
                          ": ", absl::StrJoin(not_ready, ", ")),
             now);
    }
    return;
  }

  // Replicas per agent.
  int local = spec.devices_per_agent();
  if (spec.strategy() == v1::ONE_DEVICE) {
    if (local > 1) {
      Finish(
          job, v1::JOB_FAILED,
          absl::StrCat("OneDevice runs one replica; devices_per_agent=", local),
          now);
      return;
    }
    local = 1;
  }
  for (const AgentView* view : views) {
    if (local == 0 && view->num_devices != views[0]->num_devices) {
      Finish(
          job, v1::JOB_FAILED,
          absl::StrCat("agents have different device counts (",
                       views[0]->task.ToString(), ": ", views[0]->num_devices,
                       ", ", view->task.ToString(), ": ", view->num_devices,
                       "); set devices_per_agent to use the same number "
                       "on each"),
          now);
      return;
    }
    if (local > view->num_devices) {
      Finish(job, v1::JOB_FAILED,
             absl::StrCat("devices_per_agent=", local, " but ",
                          view->task.ToString(), " has ", view->num_devices,
                          " device(s)"),
             now);
      return;
    }
  }
  if (local == 0) local = views[0]->num_devices;
  if (local <= 0) {
    Finish(job, v1::JOB_FAILED,
           absl::StrCat(views[0]->task.ToString(), " reports no devices"), now);
    return;
  }
  const int num_nodes = static_cast<int>(views.size());
  const int replicas = num_nodes * local;
  if (spec.global_batch_size() % replicas != 0) {
    Finish(job, v1::JOB_FAILED,
           absl::StrCat("global batch size ", spec.global_batch_size(),
                        " is not divisible by the ", replicas, " replicas (",
                        num_nodes, " agent(s) x ", local,
                        " device(s)); use a multiple of ", replicas),
           now);
    return;
  }

  const bool cuda = std::all_of(views.begin(), views.end(),
                                [](const AgentView* v) { return v->cuda; });
  const bool any_cuda = std::any_of(views.begin(), views.end(),
                                    [](const AgentView* v) { return v->cuda; });
  if (any_cuda && !cuda) {
    Finish(job, v1::JOB_FAILED,
           "some of the job's agents have CUDA devices and some CPU devices; "
           "a job's replicas must all be on one kind (set "
           "CUDA_VISIBLE_DEVICES= on the GPU agents to run on CPUs)",
           now);
    return;
  }
  if (spec.strategy() == v1::CENTRAL_STORAGE && cuda && local > 1) {
    // Several GPUs would all have to read one copy in host memory.
    Finish(job, v1::JOB_FAILED,
           absl::StrCat("CentralStorage over ", local,
                        " CUDA devices is not supported: set "
                        "devices_per_agent=1 to keep the variables on one GPU, "
                        "or use Mirrored"),
           now);
    return;
  }
  const bool nccl = std::all_of(views.begin(), views.end(),
                                [](const AgentView* v) { return v->nccl; });
  v1::Communication communication = spec.communication();
  std::string note;
  if (communication == v1::COMMUNICATION_AUTO) {
    if (cuda && !nccl) {
      Finish(job, v1::JOB_FAILED,
             "the replicas are on CUDA devices, whose collectives need NCCL, "
             "and the agents were built without it",
             now);
      return;
    }
    if (cuda) {
      communication = v1::COMMUNICATION_NCCL;
      note = "AUTO picked NCCL: every replica is on a CUDA device";
    } else {
      communication = v1::COMMUNICATION_HIERARCHICAL;
      note = num_nodes == 1
                 ? "AUTO picked hierarchical: one agent, so replicas reduce "
                   "between threads in shared memory"
                 : absl::StrCat(
                       "AUTO picked hierarchical: CPU replicas "
                       "reduce between threads inside each agent, "
                       "then over a ring of the ",
                       num_nodes, " agents");
    }
  } else if (communication == v1::COMMUNICATION_NCCL) {
    if (!cuda || !nccl) {
      Finish(job, v1::JOB_FAILED,
             cuda ? "communication NCCL: the agents were built without NCCL"
                  : "communication NCCL needs CUDA devices, and the agents "
                    "offer CPU devices; use AUTO, RING or HIERARCHICAL",
             now);
      return;
    }
    note = "NCCL, as requested";
  } else {
    if (cuda) {
      Finish(job, v1::JOB_FAILED,
             "on CUDA devices the collectives take device buffers: use "
             "communication NCCL or AUTO",
             now);
      return;
    }
    note = communication == v1::COMMUNICATION_RING
               ? "RING, as requested: one gRPC ring over every replica"
               : "HIERARCHICAL, as requested";
  }

  v1::JobStatus& status = job.status;
  job.placing_since = now;  // the attempt must start within the timeout
  status.set_attempt(status.attempt() + 1);
  status.set_num_replicas(replicas);
  status.set_communication_note(note);
  status.clear_placement();
  status.clear_links();
  job.reports.clear();
  job.failing_since.reset();
  for (int node = 0; node < num_nodes; ++node) {
    v1::AgentJobAssignment a;
    a.set_job_id(status.job_id());
    a.set_attempt(status.attempt());
    *a.mutable_spec() = spec;
    a.set_node(node);
    a.set_num_nodes(num_nodes);
    a.set_local_replicas(local);
    a.set_first_rank(node * local);
    a.set_num_replicas(replicas);
    a.set_communication(communication);
    a.set_group(
        absl::StrCat("job-", status.job_id(), "/attempt-", status.attempt()));
    a.set_checkpoint_dir(status.checkpoint_dir());
    a.set_job_uid(status.uid());
    for (int d = 0; d < local; ++d) a.add_device_indices(d);
    job.assignments[views[node]->task.ToString()] = a;
    status.add_placement(absl::StrCat(views[node]->task.ToString(), " (", local,
                                      local == 1 ? " replica)" : " replicas)"));
  }
  changed_ = true;
}

void JobManager::CheckAttempt(Job& job, const std::vector<AgentView>& agents,
                              absl::Time now) {
  int running = 0, finished = 0;
  const v1::AgentJobReport* permanent = nullptr;
  const v1::AgentJobReport* failed = nullptr;
  const AgentView* dead = nullptr;
  for (const auto& [task, assignment] : job.assignments) {
    auto view = std::find_if(agents.begin(), agents.end(),
                             [&name = task](const AgentView& a) {
                               return a.task.ToString() == name;
                             });
    if (view != agents.end() && view->state != v1::READY && dead == nullptr) {
      dead = &*view;
    }
    auto it = job.reports.find(task);
    if (it == job.reports.end()) continue;
    const v1::AgentJobReport& report = it->second;
    switch (report.state()) {
      case v1::AgentJobReport::RUNNING:
        ++running;
        break;
      case v1::AgentJobReport::FINISHED:
        ++finished;
        break;
      case v1::AgentJobReport::FAILED:
        if (report.permanent() && permanent == nullptr) permanent = &report;
        if (failed == nullptr) failed = &report;
        break;
      default:
        break;
    }
  }
  const int agents_in_job = static_cast<int>(job.assignments.size());
  if (finished == agents_in_job) {
    Finish(job, v1::JOB_SUCCEEDED, "", now);
    return;
  }
  if (failed == nullptr && dead == nullptr) {
    if (running + finished == agents_in_job) {
      if (job.status.state() != v1::JOB_RUNNING) {
        job.status.set_state(v1::JOB_RUNNING);
        changed_ = true;
      }
    } else if (job.status.state() != v1::JOB_RUNNING &&
               now - job.placing_since > options_.placement_timeout) {
      std::vector<std::string> slow;
      for (const auto& [task, assignment] : job.assignments) {
        auto it = job.reports.find(task);
        if (it == job.reports.end() ||
            it->second.state() == v1::AgentJobReport::LOADING) {
          slow.push_back(task);
        }
      }
      EndAttempt(
          job,
          absl::StrCat("the attempt did not start within ",
                       absl::FormatDuration(options_.placement_timeout),
                       ": no replicas running on ", absl::StrJoin(slow, ", ")),
          false, now);
    }
    return;
  }
  if (!job.failing_since.has_value()) job.failing_since = now;
  if (dead != nullptr && job.abort.empty()) {
    job.abort = absl::StrCat(
        dead->task.ToString(), " is gone (", v1::TaskState_Name(dead->state),
        dead->last_error.empty() ? "" : ": ", dead->last_error,
        "); its peers stop waiting for it");
  }
  const bool decided = permanent != nullptr ||
                       now - *job.failing_since >= options_.failure_grace;
  if (!decided) return;
  auto name = [](const v1::AgentJobReport& r) {
    return TaskId{r.task().type(), r.task().index()}.ToString();
  };
  const std::string at_step =
      absl::StrCat(" (at step ", job.status.step(), ")");
  if (permanent != nullptr) {
    EndAttempt(job, absl::StrCat(name(*permanent), ": ", permanent->error()),
               true, now);
  } else if (dead != nullptr) {
    EndAttempt(job,
               absl::StrCat(dead->task.ToString(), " died",
                            dead->last_error.empty() ? "" : ": ",
                            dead->last_error, at_step),
               false, now);
  } else {
    EndAttempt(job, absl::StrCat(name(*failed), ": ", failed->error(), at_step),
               false, now);
  }
}

void JobManager::EndAttempt(Job& job, const std::string& cause, bool permanent,
                            absl::Time now) {
  job.assignments.clear();
  job.reports.clear();
  job.failing_since.reset();
  job.abort.clear();
  changed_ = true;
  if (permanent) {
    Finish(job, v1::JOB_FAILED, cause, now);
    return;
  }
  const int max_restarts = job.status.spec().max_restarts();
  if (SpentRestarts(job.status) >= max_restarts) {
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
  record->set_spent(true);
  job.status.set_state(v1::JOB_RESTARTING);
  job.status.set_steps_per_second(0);
  job.status.set_step(job.status.checkpoint_step());
  job.placing_since = now;
}

void JobManager::Finish(Job& job, v1::JobState state, const std::string& error,
                        absl::Time now) {
  job.assignments.clear();
  job.reports.clear();
  job.failing_since.reset();
  job.status.set_state(state);
  job.status.set_error(error);
  job.status.set_end_time_unix_ms(UnixMillis(now));
  // A finished job keeps its last rate; an ended one has none.
  if (state != v1::JOB_SUCCEEDED) job.status.set_steps_per_second(0);
  changed_ = true;
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
    if (report.checkpoint_step() > job.status.checkpoint_step()) {
      job.status.set_checkpoint_step(report.checkpoint_step());
      changed_ = true;
    }
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
    changed_ = true;  // new links are worth saving; the rest is progress
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
  changed_ = true;
}

std::string JobManager::RankOwner(const Job& job, const std::string& ring,
                                  int rank) const {
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

std::optional<std::string> JobManager::TakeSnapshotIfChanged(
    absl::Time now, absl::Duration progress_period) {
  absl::MutexLock lock(&mu_);
  if (!changed_ && !(progressed_ && now - last_snapshot_ >= progress_period)) {
    return std::nullopt;
  }
  changed_ = progressed_ = false;
  last_snapshot_ = now;
  nlohmann::json table = {{"next_id", next_id_},
                          {"jobs", nlohmann::json::array()}};
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  for (const auto& [id, job] : jobs_) {
    std::string json;
    if (!google::protobuf::util::MessageToJsonString(job.status, &json, print)
             .ok()) {
      changed_ = true;  // try again next time rather than drop the job
      return std::nullopt;
    }
    table["jobs"].push_back(nlohmann::json::parse(json, nullptr, false));
  }
  return table.dump(1);
}

void JobManager::MarkUnsaved() {
  absl::MutexLock lock(&mu_);
  changed_ = true;
}

absl::Status JobManager::Restore(const std::string& text, absl::Time now) {
  const nlohmann::json table = nlohmann::json::parse(text, nullptr, false);
  if (table.is_discarded() || !table.is_object() ||
      !table.value("jobs", nlohmann::json()).is_array() ||
      !table.value("next_id", nlohmann::json()).is_number_integer()) {
    return absl::DataLossError(
        "the job table is not an object with \"next_id\" and \"jobs\"");
  }
  absl::MutexLock lock(&mu_);
  next_id_ = table["next_id"].get<int64_t>();
  for (const nlohmann::json& saved : table["jobs"]) {
    Job job;
    if (!google::protobuf::util::JsonStringToMessage(saved.dump(), &job.status)
             .ok()) {
      return absl::DataLossError(
          absl::StrCat("a saved job does not parse: ", saved.dump()));
    }
    int64_t id = 0;
    if (!absl::SimpleAtoi(job.status.job_id(), &id)) {
      return absl::DataLossError(absl::StrCat("a saved job has a bad id \"",
                                              job.status.job_id(), "\""));
    }
    if (!IsTerminal(job.status.state()) &&
        job.status.state() != v1::JOB_SUBMITTED &&
        job.status.spec().strategy() == v1::PARAMETER_SERVER) {
      // The closure table survives in the status: completed closures stay
      // completed; those in flight run again.
      job.status.set_state(v1::JOB_RESTARTING);
      job.placing_since = now;
    } else if (!IsTerminal(job.status.state()) &&
               job.status.state() != v1::JOB_SUBMITTED) {
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
  return absl::OkStatus();
}

}  // namespace cohort::coordinator
