// The evaluator task's side of the job manager: TF's sidecar evaluator.
// It is never part of a job's placement or verdicts, so training neither
// waits for it nor fails with it.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/job_manager.h"

namespace cohort::coordinator {
namespace {

// The evaluations a job keeps, newest last.
constexpr int kKeptEvaluations = 50;

bool WantsEvaluation(const v1::JobStatus& status) {
  return !status.spec().eval_fn().empty() &&
         status.spec().strategy() != v1::PARAMETER_SERVER;
}

int64_t LastEvaluatedStep(const v1::JobStatus& status) {
  int64_t step = 0;
  for (const v1::Evaluation& e : status.evaluations()) {
    step = std::max(step, e.step());
  }
  return step;
}

// Adds the evaluations of checkpoints not seen before, in step order.
bool Merge(v1::JobStatus& status,
           const google::protobuf::RepeatedPtrField<v1::Evaluation>& reported) {
  std::vector<v1::Evaluation> all(status.evaluations().begin(),
                                  status.evaluations().end());
  bool added = false;
  for (const v1::Evaluation& e : reported) {
    const bool known = std::any_of(
        all.begin(), all.end(),
        [&](const v1::Evaluation& have) { return have.step() == e.step(); });
    if (!known) {
      all.push_back(e);
      added = true;
    }
  }
  if (!added) return false;
  std::sort(all.begin(), all.end(),
            [](const v1::Evaluation& a, const v1::Evaluation& b) {
              return a.step() < b.step();
            });
  if (all.size() > kKeptEvaluations) {
    all.erase(all.begin(), all.end() - kKeptEvaluations);
  }
  *status.mutable_evaluations() = {all.begin(), all.end()};
  return true;
}

}  // namespace

Job* JobManager::JobToEvaluate() {
  Job* job = ActiveJob();
  if (job == nullptr && !jobs_.empty()) {
    Job& newest = jobs_.rbegin()->second;
    // An ended job's last checkpoint is still worth one evaluation.
    if (newest.status.checkpoint_step() > LastEvaluatedStep(newest.status)) {
      job = &newest;
    }
  }
  return job != nullptr && WantsEvaluation(job->status) ? job : nullptr;
}

void JobManager::SyncEvaluator(const v1::AgentJobReport& report, absl::Time,
                               v1::AgentSyncResponse& response) {
  if (!report.job_id().empty()) {
    if (Job* evaluated = Find(report.job_id());
        evaluated != nullptr &&
        (report.job_uid().empty() ||
         report.job_uid() == evaluated->status.uid()) &&
        Merge(evaluated->status, report.evaluations())) {
      evaluated->changed = true;
    }
  }
  Job* job = JobToEvaluate();
  if (job == nullptr) return;
  const v1::JobStatus& status = job->status;
  v1::AgentJobAssignment& a = *response.mutable_assignment();
  a.set_job_id(status.job_id());
  // One assignment for the job's whole life: its restarts do not restart
  // the evaluator, which reads the same checkpoints.
  a.set_attempt(1);
  a.set_group(absl::StrCat("job-", status.job_id(), "/evaluator"));
  *a.mutable_spec() = status.spec();
  a.set_checkpoint_dir(status.checkpoint_dir());
  a.set_job_uid(status.uid());
  a.set_evaluate(true);
  a.set_num_nodes(1);
  a.set_local_replicas(1);
  a.set_num_replicas(1);
  a.add_device_indices(0);
}

}  // namespace cohort::coordinator
