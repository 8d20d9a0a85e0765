#include "coordinator/cluster_manager.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "coordinator/placement.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {
namespace {

TaskId FromProto(const v1::TaskId& task) { return {task.type(), task.index()}; }

// A claimant of a held identity is refused for good after this long at
// least: a holder draining gracefully (a checkpoint before it stops) still
// heartbeats while its successor may already claim.
constexpr absl::Duration kMinDuplicateClaim = absl::Seconds(30);
// A claimant away this long (plus the heartbeat timeout) is a new claim: a
// task retries a refused registration at least every 5 s.
constexpr absl::Duration kClaimantGone = absl::Seconds(10);
// How long a refused claim stays on a task's status.
constexpr absl::Duration kRefusalShown = absl::Minutes(2);

}  // namespace

ClusterManager::ClusterManager(ClusterSpec spec, ClusterManagerOptions options,
                               absl::Time now)
    : spec_(std::move(spec)),
      options_(options),
      session_salt_(absl::Uniform<uint64_t>(absl::BitGen())) {
  absl::MutexLock lock(&mu_);
  for (const TaskId& task : spec_.tasks()) {
    Record record;
    record.id = task.ToString();
    record.address = *spec_.address(task);
    record.state_since = now;
    tasks_.emplace(task, std::move(record));
  }
}

absl::StatusOr<ClusterManager::Record*> ClusterManager::Find(
    const v1::TaskId& task) {
  const TaskId id = FromProto(task);
  const auto it = tasks_.find(id);
  if (it != tasks_.end()) return &it->second;
  if (spec_.num_tasks(task.type()) == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown task %s: the cluster spec has no \"%s\" tasks (it has %s)",
        id.ToString(), task.type(), absl::StrJoin(spec_.task_types(), ", ")));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown task %s: the cluster spec has %d %s task(s), indices 0..%d",
      id.ToString(), spec_.num_tasks(task.type()), task.type(),
      spec_.num_tasks(task.type()) - 1));
}

void ClusterManager::SetState(Record& record, v1::TaskState state,
                              absl::Time now) {
  if (record.state == state) return;
  record.state = state;
  record.state_since = now;
}

std::string ClusterManager::NewSessionId() {
  return absl::StrFormat("%016x-%d", session_salt_, ++next_session_);
}

absl::StatusOr<v1::RegisterResponse> ClusterManager::Register(
    const v1::TaskReport& report, absl::Time now) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Record*> found = Find(report.task());
  if (!found.ok()) {
    spdlog::warn("refused a registration from pid {} on {}: {}", report.pid(),
                 report.hostname(), std::string(found.status().message()));
    return found.status();
  }
  Record* record = *found;
  const std::string id = FromProto(report.task()).ToString();
  // "localhost:2222" names the same server as "127.0.0.1:2222", as the
  // spec's own duplicate check holds.
  const absl::StatusOr<HostPort> reported = ParseHostPort(report.address());
  const absl::StatusOr<HostPort> expected = ParseHostPort(record->address);
  if (!reported.ok() || !expected.ok() ||
      AddressKey(*reported) != AddressKey(*expected)) {
    const bool wildcard =
        ParseHostPort(report.address(), true).value_or(HostPort{}).IsWildcard();
    absl::Status refusal = absl::InvalidArgumentError(absl::StrFormat(
        "task %s registered with address %s, but the cluster spec puts %s "
        "at %s%s",
        id, report.address().empty() ? "(none)" : report.address(), id,
        record->address,
        wildcard ? absl::StrCat("; a task serving on every interface needs "
                                "--advertise_address=",
                                record->address)
                 : ""));
    NoteRefusal(*record, report, refusal, now);
    return refusal;
  }
  const bool holder_alive = HolderAlive(*record, now);
  // A pid and hostname recur: a container restarted keeps its hostname,
  // and its process is pid 1 again. The start time tells the two apart.
  const bool same_pid = record->report.pid() == report.pid() &&
                        record->report.hostname() == report.hostname();
  const bool same_process = same_pid && record->report.start_time_unix_ms() ==
                                            report.start_time_unix_ms();
  if (holder_alive && !same_process) {
    // A holder that died unannounced stays "alive" for up to one heartbeat
    // timeout, and its successor is refused meanwhile. A claimant refused
    // for much longer, while the holder beats, is a second process with the
    // same identity. Each claimant has its own clock, restarted when it has
    // been away longer than any retry of its takes.
    const absl::Duration gone = kClaimantGone + options_.heartbeat_timeout;
    std::erase_if(record->claimants, [&](const auto& entry) {
      return now - entry.second.last > gone;
    });
    Claim& claim =
        record->claimants[absl::StrCat(report.pid(), "@", report.hostname(),
                                       "@", report.start_time_unix_ms())];
    if (claim.first == absl::InfinitePast()) claim.first = now;
    claim.last = now;
    const absl::Duration claiming = now - claim.first;
    const bool duplicate = claiming >= std::max(2 * options_.heartbeat_timeout,
                                                kMinDuplicateClaim);
    auto started = [&](const v1::TaskReport& of) {
      return same_pid ? absl::StrCat(
                            ", started ",
                            absl::FormatTime(
                                absl::RFC3339_sec,
                                absl::FromUnixMillis(of.start_time_unix_ms()),
                                absl::UTCTimeZone()))
                      : "";
    };
    const std::string message = absl::StrFormat(
        "task %s is already held by pid %d on %s%s, which still heartbeats; "
        "a second process (pid %d on %s%s) claims it%s",
        id, record->report.pid(), record->report.hostname(),
        started(record->report), report.pid(), report.hostname(),
        started(report),
        duplicate
            ? absl::StrCat(" and has for ", absl::FormatDuration(claiming),
                           ": two processes were given the same "
                           "identity (check --task or TF_CONFIG's "
                           "\"task\" on each host)")
            : "");
    absl::Status refusal = duplicate ? absl::FailedPreconditionError(message)
                                     : absl::AlreadyExistsError(message);
    NoteRefusal(*record, report, refusal, now);
    return refusal;
  }
  record->claimants.clear();
  record->refusal.clear();
  record->overdue_logged = false;
  record->session_id = NewSessionId();
  record->report = report;
  record->pid = report.pid();
  record->last_heartbeat = now;
  SetState(*record, v1::READY, now);
  if (!report.version().empty() && report.version() != kVersion) {
    spdlog::warn("{} runs version {}, this coordinator {}", id,
                 report.version(), kVersion);
  }
  spdlog::info("{} registered: pid {} at {} ({} devices)", id, report.pid(),
               report.address(), report.devices_size());

  v1::RegisterResponse response;
  response.set_session_id(record->session_id);
  // At least five beats fit in the timeout, so that one late or lost beat
  // is no death (a 2 s timeout would otherwise allow one miss).
  response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(std::max(
      absl::Milliseconds(1),
      std::min(options_.heartbeat_interval, options_.heartbeat_timeout / 5))));
  response.set_cluster_spec_json(spec_.ToJson());
  return response;
}

absl::Status ClusterManager::Heartbeat(const v1::HeartbeatRequest& request,
                                       absl::Time now,
                                       std::optional<absl::Time> wall) {
  absl::MutexLock lock(&mu_);
  COHORT_ASSIGN_OR_RETURN(Record * record, Find(request.task()));
  if (record->session_id.empty() ||
      record->session_id != request.session_id()) {
    return absl::NotFoundError(
        absl::StrCat("no live session ", request.session_id(), " for task ",
                     FromProto(request.task()).ToString(), "; register again"));
  }
  record->last_heartbeat = now;
  if (request.sent_unix_ms() > 0) {
    record->clock_offset_ms =
        request.sent_unix_ms() - absl::ToUnixMillis(wall.value_or(now));
  }
  if (request.has_report()) record->report = request.report();
  return absl::OkStatus();
}

absl::Status ClusterManager::Deregister(const v1::DeregisterRequest& request,
                                        absl::Time now) {
  absl::MutexLock lock(&mu_);
  COHORT_ASSIGN_OR_RETURN(Record * record, Find(request.task()));
  // A stale session (the task registered again since, or was declared dead)
  // must not end the live one.
  if (record->session_id.empty() ||
      record->session_id != request.session_id()) {
    return absl::NotFoundError(absl::StrCat(
        "no live session ", request.session_id(), " for task ",
        FromProto(request.task()).ToString(), "; nothing deregistered"));
  }
  record->session_id.clear();
  record->last_error = absl::StrCat(kDeregisteredError, request.reason());
  SetState(*record, v1::DEAD, now);
  spdlog::info("{} deregistered ({})", FromProto(request.task()).ToString(),
               request.reason());
  return absl::OkStatus();
}

void ClusterManager::MarkLaunched(const TaskId& task, int64_t pid,
                                  bool is_restart, absl::Time now) {
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(task);
  if (it == tasks_.end()) return;
  Record& record = it->second;
  record.launched = true;
  if (HeldByOther(record, pid, now)) {
    spdlog::warn(
        "{}: pid {} launched while pid {} holds the task; the holder stays",
        task.ToString(), pid, record.pid);
    return;
  }
  record.pid = pid;
  record.session_id.clear();
  record.last_heartbeat.reset();
  if (is_restart) ++record.restart_count;
  SetState(record, is_restart ? v1::RESTARTING : v1::STARTING, now);
}

int64_t ClusterManager::MarkExited(const TaskId& task, int64_t pid,
                                   const std::string& reason, absl::Time now) {
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(task);
  if (it == tasks_.end()) return 0;
  Record& record = it->second;
  if (HeldByOther(record, pid, now)) {
    spdlog::warn("{}: pid {} {}; pid {} holds the task and stays",
                 task.ToString(), pid, reason, record.pid);
    return record.pid;
  }
  record.session_id.clear();
  // Already DEAD (silent, then killed for it): the first cause is the one
  // that explains the death.
  record.last_error = record.state == v1::DEAD && !record.last_error.empty()
                          ? absl::StrCat(record.last_error, "; then ", reason)
                          : reason;
  SetState(record, v1::DEAD, now);
  return 0;
}

bool ClusterManager::HolderAlive(const Record& record, absl::Time now) const {
  return record.state == v1::READY && !record.session_id.empty() &&
         record.last_heartbeat.has_value() &&
         now - *record.last_heartbeat < options_.heartbeat_timeout;
}

bool ClusterManager::HeldByOther(const Record& record, int64_t pid,
                                 absl::Time now) const {
  return record.pid != pid && HolderAlive(record, now);
}

std::vector<TaskId> ClusterManager::ExpireSilent(absl::Time now) {
  std::vector<TaskId> died;
  absl::MutexLock lock(&mu_);
  // Heartbeats that came during a stall wait unread in gRPC's queues; a
  // sweep right after it would blame every task for the coordinator's own
  // pause. Up to half the timeout is an ordinary late sweep (a busy
  // machine), so that under lasting load silence still adds up and a dead
  // task is still found.
  const absl::Duration allowance = options_.heartbeat_timeout / 2;
  if (last_sweep_.has_value() && now - *last_sweep_ > allowance) {
    const absl::Duration stall = now - *last_sweep_ - allowance;
    if (stall >= absl::Seconds(1)) {
      spdlog::warn(
          "the coordinator's checks ran {} late (a stall of this process or "
          "its host); that time is not counted as any task's silence",
          absl::FormatDuration(absl::Trunc(stall, absl::Milliseconds(1))));
    }
    for (auto& [task, record] : tasks_) {
      if (record.last_heartbeat.has_value()) {
        record.last_heartbeat = std::min(now, *record.last_heartbeat + stall);
      }
      // A launched task's Register may wait unread in the queues alike.
      if ((record.state == v1::STARTING || record.state == v1::RESTARTING) &&
          record.launched) {
        record.state_since = std::min(now, record.state_since + stall);
      }
    }
  }
  last_sweep_ = now;
  for (auto& [task, record] : tasks_) {
    std::string reason;
    if (record.state == v1::READY && record.last_heartbeat.has_value() &&
        now - *record.last_heartbeat >= options_.heartbeat_timeout) {
      reason = absl::StrCat("no heartbeat for ",
                            absl::FormatDuration(now - *record.last_heartbeat));
    } else if ((record.state == v1::STARTING ||
                record.state == v1::RESTARTING) &&
               record.launched &&
               now - record.state_since >= options_.startup_timeout) {
      reason = absl::StrCat("did not register within ",
                            absl::FormatDuration(options_.startup_timeout),
                            " of its launch");
    }
    if (reason.empty() && !record.overdue_logged &&
        !OverdueNote(record, now).empty()) {
      record.overdue_logged = true;
      spdlog::warn("{}: {}", task.ToString(), OverdueNote(record, now));
    }
    if (reason.empty()) continue;
    spdlog::warn("{} is DEAD: {}", task.ToString(), reason);
    record.session_id.clear();
    record.last_error = reason;
    SetState(record, v1::DEAD, now);
    died.push_back(task);
  }
  return died;
}

void ClusterManager::NoteAbsenceHint(const TaskId& task, std::string hint) {
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(task);
  if (it != tasks_.end()) it->second.absence_hint = std::move(hint);
}

void ClusterManager::NoteRefusal(Record& record, const v1::TaskReport& report,
                                 const absl::Status& refusal, absl::Time now) {
  record.refusal =
      absl::StrCat("refused a registration from pid ", report.pid(), " on ",
                   report.hostname(), ": ", refusal.message());
  record.refused_at = now;
  // A claimant retries every few seconds: one line a minute is enough,
  // unless the verdict changed (a claimant now refused for good).
  if (now - record.refusal_logged >= absl::Minutes(1) ||
      refusal.code() != record.refusal_logged_code) {
    record.refusal_logged = now;
    record.refusal_logged_code = refusal.code();
    spdlog::warn("{}: {}", record.id, record.refusal);
  }
}

std::string ClusterManager::OverdueNote(const Record& record,
                                        absl::Time now) const {
  // Nobody here launches it, so it is not declared dead: another host's
  // service manager may start it yet.
  if (record.state != v1::STARTING || record.launched ||
      now - record.state_since < options_.startup_timeout) {
    return "";
  }
  return absl::StrCat("nothing has registered as ", record.id, " (expected at ",
                      record.address, ") in ",
                      absl::FormatDuration(absl::Trunc(now - record.state_since,
                                                       absl::Seconds(1))),
                      record.absence_hint.empty() ? "" : "; ",
                      record.absence_hint);
}

std::string ClusterManager::WhyNotReady(const Record& record,
                                        absl::Time now) const {
  if (record.state != v1::STARTING && record.state != v1::RESTARTING) {
    return record.last_error;
  }
  // A recent refused claim says most; a cause of death comes next.
  if (!record.refusal.empty() && now - record.refused_at < kRefusalShown) {
    return record.refusal;
  }
  if (!record.last_error.empty()) return record.last_error;
  return OverdueNote(record, now);
}

void ClusterManager::RestoreRestartCount(const TaskId& task,
                                         int restart_count) {
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(task);
  if (it != tasks_.end()) it->second.restart_count = restart_count;
}

std::vector<v1::TaskStatus> ClusterManager::Snapshot(absl::Time now) const {
  std::vector<v1::TaskStatus> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [task, record] : tasks_) {
    v1::TaskStatus status;
    status.mutable_task()->set_type(task.type);
    status.mutable_task()->set_index(task.index);
    status.set_address(record.address);
    status.set_pid(record.pid);
    status.set_state(record.state);
    status.set_restart_count(record.restart_count);
    status.set_last_heartbeat_age_ms(
        record.last_heartbeat.has_value()
            ? absl::ToInt64Milliseconds(now - *record.last_heartbeat)
            : -1);
    *status.mutable_devices() = record.report.devices();
    status.set_launched(record.launched);
    status.set_last_error(WhyNotReady(record, now));
    status.set_clock_offset_ms(record.clock_offset_ms);
    if (record.report.has_ps()) *status.mutable_ps() = record.report.ps();
    status.set_hostname(record.report.hostname());
    status.set_version(record.report.version());
    *status.mutable_features() = record.report.features();
    status.set_metrics_address(record.report.metrics_address());
    out.push_back(std::move(status));
  }
  return out;
}

v1::TaskState ClusterManager::state(const TaskId& task) const {
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(task);
  return it == tasks_.end() ? v1::TASK_STATE_UNSPECIFIED : it->second.state;
}

int ClusterManager::restart_count(const TaskId& task) const {
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(task);
  return it == tasks_.end() ? 0 : it->second.restart_count;
}

int64_t ClusterManager::pid(const TaskId& task) const {
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(task);
  return it == tasks_.end() ? 0 : it->second.pid;
}

}  // namespace cohort::coordinator
