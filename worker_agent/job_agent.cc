#include "worker_agent/job_agent.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/library_files.h"
#include "spdlog/spdlog.h"
#include "worker_agent/checkpoint_copies.h"
#include "worker_agent/evaluator_runner.h"
#include "worker_agent/ps_job_runner.h"
#include "worker_agent/sync_job_runner.h"

namespace cohort::agent {

namespace {

constexpr absl::Duration kSyncTimeout = absl::Seconds(2);
// How long sync failures go unreported before the first sync succeeds.
constexpr absl::Duration kFirstSyncGrace = absl::Seconds(30);
constexpr absl::Duration kFetchTimeout = absl::Seconds(60);
// How often a stopping runner is asked whether it has stopped.
constexpr absl::Duration kStopPoll = absl::Milliseconds(20);
// The report a leaving agent owes the coordinator: how long it is tried,
// and the pause between tries.
constexpr absl::Duration kLeaveReportTime = absl::Seconds(4);  // two syncs
constexpr absl::Duration kLeaveReportPause = absl::Milliseconds(100);
// A cached library unused for this long is removed (fetched again if a job
// needs it), looked for every kLibrarySweep.
constexpr absl::Duration kLibraryCacheGrace = absl::Hours(24);
constexpr absl::Duration kLibrarySweep = absl::Minutes(10);

// Nothing can interrupt a function of the job's library; the process is
// restarted instead. Destructors do not run: they would wait for it.
void ExitStuck(const std::string& why) {
  spdlog::critical("{}; the agent exits (code {}) so that it restarts clean",
                   why, kExitStuckJobCode);
  spdlog::default_logger()->flush();
  std::_Exit(kExitStuckJobCode);
}

JobAgentOptions WithDefaults(JobAgentOptions options) {
  if (options.job_control == nullptr) {
    options.job_control =
        NewGrpcJobControlClient(options.coordinator, options.security);
  }
  if (options.make_runner == nullptr) options.make_runner = MakeRunner;
  if (options.on_stuck == nullptr) options.on_stuck = ExitStuck;
  return options;
}

}  // namespace

std::unique_ptr<AttemptRunner> MakeRunner(RunnerOptions options) {
  if (options.assignment.evaluate()) {
    return std::make_unique<EvaluatorRunner>(std::move(options));
  }
  if (options.assignment.spec().strategy() == v1::PARAMETER_SERVER) {
    return std::make_unique<PsJobRunner>(std::move(options));
  }
  return std::make_unique<SyncJobRunner>(std::move(options));
}

JobAgent::JobAgent(JobAgentOptions options)
    : options_(WithDefaults(std::move(options))) {}

JobAgent::~JobAgent() { Shutdown(); }

void JobAgent::Start() {
  thread_ = std::thread([this] { Run(); });
}

void JobAgent::StopLoop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
}

void JobAgent::Leave() {
  StopLoop();
  // An attempt the coordinator ended, left stopping by the loop, has
  // nothing to checkpoint for; Shutdown finishes stopping it.
  if (runner_ == nullptr || runner_ended_) return;
  const v1::AgentJobAssignment& a = runner_->assignment();
  if (!runner_->done()) {
    if (options_.leave_timeout <= absl::ZeroDuration() || !runner_->Leave()) {
      return;
    }
    spdlog::info(
        "job {} attempt {}: checkpointing before shutting down (up to {})",
        a.job_id(), a.attempt(), absl::FormatDuration(options_.leave_timeout));
    const absl::Time deadline = absl::Now() + options_.leave_timeout;
    while (!runner_->done() && absl::Now() < deadline) {
      absl::SleepFor(kStopPoll);
    }
    if (!runner_->done()) {
      spdlog::warn(
          "job {} attempt {}: no checkpoint within {} of the shutdown; "
          "stopping it without one",
          a.job_id(), a.attempt(),
          absl::FormatDuration(options_.leave_timeout));
      return;
    }
  } else if (end_reported_) {
    return;
  }
  ReportEndBeforeLeaving();
}

void JobAgent::ReportEndBeforeLeaving() {
  // The loop is stopped, so the coordinator would not otherwise hear how
  // the attempt ended: that an agent left, which costs the job no restart,
  // even when this agent was the job's only one; or that it finished, or
  // failed for good, after the last sync, which a coordinator that took the
  // agent's silence for a death would retry. A coordinator that blinks must
  // not cost the job a restart either: the report is tried again while the
  // coordinator is out of reach, for a bounded while (a coordinator that
  // was stopped for good must not hold the agent's own stop up long).
  const std::string& job = runner_->assignment().job_id();
  const absl::Time report_by = absl::Now() + kLeaveReportTime;
  absl::Status sent = SyncOnce().status();
  for (int tries = 1;
       (absl::IsUnavailable(sent) || absl::IsDeadlineExceeded(sent)) &&
       absl::Now() < report_by;
       ++tries) {
    absl::SleepFor(std::min(kLeaveReportPause, report_by - absl::Now()));
    sent = SyncOnce().status();
    if (sent.ok()) {
      spdlog::info(
          "job {}: reported the attempt's end before leaving, at "
          "try {}",
          job, tries + 1);
    }
  }
  if (!sent.ok()) {
    spdlog::warn("job {}: cannot report the attempt's end before leaving: {}",
                 job, sent.ToString());
  }
}

void JobAgent::Shutdown() {
  StopLoop();
  if (runner_ != nullptr) {
    StopRunner(absl::CancelledError("the agent is shutting down"),
               /*from_loop=*/false);
  }
}

bool JobAgent::StopRunner(const absl::Status& why, bool from_loop) {
  runner_->Abort(why);
  const absl::Time deadline = absl::Now() + options_.stop_timeout;
  while (!runner_->done() && absl::Now() < deadline) {
    // A shutdown must not wait behind this: Leave joins the loop first.
    if (from_loop && stop_.HasBeenNotified()) {
      runner_ended_ = true;
      return false;
    }
    absl::SleepFor(kStopPoll);
  }
  if (!runner_->done()) {
    const v1::AgentJobAssignment& a = runner_->assignment();
    options_.on_stuck(absl::StrCat(
        "job ", a.job_id(), " attempt ", a.attempt(), " did not stop within ",
        absl::FormatDuration(options_.stop_timeout), " of being ended (",
        why.message(),
        "): a function of its step library (init, step, dataset or stream) "
        "has not returned"));
  }
  runner_.reset();  // joins
  runner_ended_ = false;
  return true;
}

absl::StatusOr<v1::AgentSyncResponse> JobAgent::SyncOnce() {
  v1::AgentJobReport report;
  // Done before the report is taken: the report then tells the end.
  const bool ended = runner_ != nullptr && runner_->done();
  if (runner_ != nullptr) report = runner_->Report();
  report.mutable_task()->set_type(options_.task.type);
  report.mutable_task()->set_index(options_.task.index);
  absl::StatusOr<v1::AgentSyncResponse> response =
      options_.job_control->Sync(report, kSyncTimeout);
  if (response.ok() && ended) end_reported_ = true;
  return response;
}

void JobAgent::Run() {
  absl::Duration interval = absl::Milliseconds(200);
  absl::Time last_warning = absl::InfinitePast();
  const absl::Time started = absl::Now();
  bool ever_synced = false;
  do {
    absl::StatusOr<v1::AgentSyncResponse> synced = SyncOnce();
    if (!synced.ok()) {
      // The coordinator may be restarting; the job keeps running meanwhile.
      // Until a first sync, the task's registration retries already say
      // why the coordinator is unreachable: only a longer failure is news.
      const bool news = ever_synced || absl::Now() - started > kFirstSyncGrace;
      if (news && absl::Now() - last_warning > absl::Seconds(10)) {
        spdlog::warn("job sync: {}", synced.status().ToString());
        last_warning = absl::Now();
      }
      continue;
    }
    ever_synced = true;
    const v1::AgentSyncResponse& response = *synced;
    if (response.sync_interval_ms() > 0) {
      interval = absl::Milliseconds(response.sync_interval_ms());
    }
    cluster_uid_ = response.cluster_uid();
    Apply(response.assignment());
    if (!response.abort().empty() && runner_ != nullptr && !runner_->done()) {
      runner_->Abort(absl::UnavailableError(response.abort()));
    }
    if (response.lists_unended_jobs()) PruneCopies(response);
    RemoveUnusedLibraries();
  } while (!stop_.WaitForNotificationWithTimeout(interval));
}

void JobAgent::Apply(const v1::AgentJobAssignment& assignment) {
  const bool same = runner_ != nullptr &&
                    runner_->assignment().job_id() == assignment.job_id() &&
                    runner_->assignment().attempt() == assignment.attempt() &&
                    runner_->assignment().job_uid() == assignment.job_uid() &&
                    runner_->assignment().group() == assignment.group();
  if (same) return;
  if (runner_ != nullptr) {
    const v1::AgentJobAssignment& old = runner_->assignment();
    if (!runner_->done()) {
      spdlog::info(
          "job {} attempt {}: stopping ({})", old.job_id(), old.attempt(),
          assignment.job_id().empty()
              ? "the coordinator ended it"
              : absl::StrCat("attempt ", assignment.attempt(), " replaces it"));
    }
    if (!StopRunner(absl::AbortedError(absl::StrCat(
                        "job ", old.job_id(), " attempt ", old.attempt(),
                        " was ended by the coordinator")),
                    /*from_loop=*/true)) {
      return;
    }
  }
  // An attempt started now would be abandoned at once.
  if (assignment.job_id().empty() || stop_.HasBeenNotified()) return;
  RunnerOptions runner{
      .assignment = assignment,
      .devices = options_.devices,
      .coordinator = options_.coordinator,
      .security = options_.security,
      .peer_listen_host = options_.peer_listen_host,
      .peer_advertise_host = options_.peer_advertise_host,
      .peer_ports = options_.peer_ports,
      .fetch_library =
          [this](const std::string& digest) { return FetchLibrary(digest); },
      .job_control = options_.job_control,
      .task = options_.task,
      .checkpoint_copies = options_.checkpoint_copies,
      .origin = options_.origin};
  if (const std::string dir =
          CheckpointCopyDirFor(options_.checkpoint_copies, assignment);
      !dir.empty()) {
    if (!cluster_uid_.empty()) {
      if (absl::Status claimed = ClaimCheckpointCopy(dir, cluster_uid_);
          !claimed.ok()) {
        // The job's own checkpoint writes will say more; only a removal
        // after a restart of this agent is lost.
        spdlog::warn("cannot mark {} as this agent's checkpoint copy: {}", dir,
                     claimed.ToString());
      }
    }
    copies_.emplace(JobKey(assignment.job_id(), assignment.job_uid()), dir);
  }
  runner_ = options_.make_runner(std::move(runner));
  end_reported_ = false;
  runner_->Start();
}

void JobAgent::PruneCopies(const v1::AgentSyncResponse& response) {
  if (!found_claimed_copies_ && !options_.checkpoint_copies.empty() &&
      !response.cluster_uid().empty()) {
    // Once per start: the copies of jobs that ended while this agent was
    // down, and those whose removal failed before it restarted.
    found_claimed_copies_ = true;
    copies_.merge(ClaimedCheckpointCopies(options_.checkpoint_copies,
                                          response.cluster_uid()));
  }
  const absl::flat_hash_set<std::string> unended(
      response.unended_jobs().begin(), response.unended_jobs().end());
  const std::string running = runner_ == nullptr
                                  ? ""
                                  : JobKey(runner_->assignment().job_id(),
                                           runner_->assignment().job_uid());
  for (auto it = copies_.begin(); it != copies_.end();) {
    if (it->first == running || unended.contains(it->first)) {
      ++it;
      continue;
    }
    if (std::optional<uint64_t> bytes = RemoveCheckpointCopy(it->second)) {
      spdlog::info(
          "job {} has ended: removed this agent's checkpoint copies "
          "({:.1f} MiB in {})",
          it->first, *bytes / double(1 << 20), it->second);
    }
    // Tried once per start of the agent: a copy that cannot be removed is
    // logged, and not retried at every sync.
    it = copies_.erase(it);
  }
}

void JobAgent::RemoveUnusedLibraries() {
  const absl::Time now = absl::Now();
  if (options_.cache_dir.empty() || now < next_library_sweep_) return;
  next_library_sweep_ = now + kLibrarySweep;
  absl::flat_hash_set<std::string> in_use;
  if (runner_ != nullptr) {
    in_use.insert(runner_->assignment().spec().library_digest());
  }
  for (const std::string& removed : cohort::RemoveUnusedLibraries(
           options_.cache_dir, in_use, now - kLibraryCacheGrace)) {
    spdlog::info("removed cached step library {}: unused for {}", removed,
                 absl::FormatDuration(kLibraryCacheGrace));
  }
}

absl::StatusOr<std::string> JobAgent::FetchLibrary(const std::string& digest) {
  if (!IsSha256Hex(digest)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad library digest \"", digest, "\""));
  }
  // The use is recorded before the library is loaded: another agent
  // sharing the cache then keeps it.
  const std::string path = LibraryPath(options_.cache_dir, digest);
  if (RecordLibraryUse(path)) {
    // What is loaded is checked, not what was once written: the cache may
    // have been damaged, or written by someone else, since.
    absl::StatusOr<std::string> cached = ReadFile(path);
    if (cached.ok() && Sha256Hex(*cached) == digest) return path;
    spdlog::warn(
        "cached step library {} {}; fetching it again", path,
        cached.ok() ? "does not match its digest" : cached.status().ToString());
  }
  absl::StatusOr<std::string> library =
      options_.job_control->FetchLibrary(digest, kFetchTimeout);
  if (!library.ok()) return library.status();
  if (const std::string got = Sha256Hex(*library); got != digest) {
    return absl::DataLossError(absl::StrCat(
        "step library ", digest, " fetched from the coordinator at ",
        options_.coordinator, " does not match its digest: its ",
        library->size(), " bytes hash to ", got));
  }
  if (absl::Status made = MakeDirectories(options_.cache_dir); !made.ok()) {
    return made;
  }
  if (absl::Status written = WriteFileAtomically(path, *library);
      !written.ok()) {
    return written;
  }
  return path;
}

}  // namespace cohort::agent
