#include "worker_agent/trace_store.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace cohort::agent {

size_t TraceCapacity(int64_t trace_steps) {
  // 64 spans a step covers step, input, compute, optimizer, end_step,
  // checkpoint and dozens of collectives. Capped at 256 Ki spans a replica
  // (about 50 MiB with their args): a trace is for looking at, not for
  // whole runs.
  constexpr int64_t kPerStep = 64;
  constexpr int64_t kMax = int64_t{256} << 10;
  // trace_steps comes from the job spec: clamped before it is multiplied.
  const int64_t steps = std::clamp<int64_t>(trace_steps, 0, kMax / kPerStep);
  return static_cast<size_t>(std::min(kMax, 256 + steps * kPerStep));
}

TraceStore& TraceStore::Default() {
  static TraceStore* const store = new TraceStore();
  return *store;
}

std::shared_ptr<TraceRecorder> TraceStore::NewRecorder(
    const std::string& job_id, const std::string& job_uid, int attempt,
    int replica, size_t capacity) {
  auto recorder = std::make_shared<TraceRecorder>(capacity);
  absl::MutexLock lock(&mu_);
  auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job& job) {
    return job.id == job_id && job.uid == job_uid;
  });
  if (it == jobs_.end()) {
    if (jobs_.size() >= kJobsKept) jobs_.pop_front();
    jobs_.push_back(Job{job_id, job_uid, {}});
    it = std::prev(jobs_.end());
  }
  std::vector<Replica>& replicas = it->replicas;
  replicas.push_back(Replica{attempt, replica, recorder});
  std::set<int> attempts;
  for (const Replica& r : replicas) attempts.insert(r.attempt);
  while (attempts.size() > kAttemptsKept) {
    const int oldest = *attempts.begin();
    attempts.erase(attempts.begin());
    std::erase_if(replicas,
                  [&](const Replica& r) { return r.attempt == oldest; });
  }
  return recorder;
}

absl::StatusOr<v1::TraceData> TraceStore::Get(const std::string& job_id,
                                              const std::string& job_uid,
                                              const std::string& task) const {
  std::vector<Replica> replicas;
  {
    absl::MutexLock lock(&mu_);
    // Newest last: without a uid, the newest job of the id wins.
    for (const Job& job : jobs_) {
      if (job.id == job_id && (job_uid.empty() || job.uid == job_uid)) {
        replicas = job.replicas;
      }
    }
  }
  if (replicas.empty()) {
    return absl::NotFoundError(absl::StrCat(
        task, " holds no trace of job ", job_id,
        " (submitted without trace_steps, pushed out by ", kJobsKept,
        " newer traced jobs, or its agent restarted since)"));
  }
  v1::TraceData data;
  data.set_job_id(job_id);
  for (const Replica& r : replicas) {
    v1::ReplicaTrace* out = data.add_replicas();
    out->set_replica(r.replica);
    out->set_task(task);
    out->set_attempt(r.attempt);
    int64_t dropped = 0;
    for (const TraceEvent& event : r.recorder->Events(&dropped)) {
      v1::TraceSpan* span = out->add_spans();
      span->set_name(event.name);
      span->set_start_unix_ns(event.start_unix_ns);
      span->set_duration_ns(event.duration_ns);
      for (const auto& [key, value] : event.args) {
        (*span->mutable_args())[key] = value;
      }
    }
    out->set_dropped(dropped);
  }
  // Last, so that the caller's round trip brackets it.
  data.set_agent_now_unix_ns(absl::GetCurrentTimeNanos());
  return data;
}

}  // namespace cohort::agent
