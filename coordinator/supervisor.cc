#include "coordinator/supervisor.h"

#include <signal.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/exit_codes.h"
#include "common/host_info.h"
#include "common/names.h"
#include "common/steady_time.h"
#include "rpc/reportable.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {
namespace {

// An adopted pid must still run the task as this plan would launch it (same
// identity and address), not be a recycled pid or a task of another spec.
bool RunsPlan(int64_t pid, const LaunchPlan& plan) {
  if (!ProcessAlive(static_cast<pid_t>(pid))) return false;
  const std::string cmdline = ProcessCommandLine(static_cast<pid_t>(pid));
  for (const std::string& arg : plan.spawn.argv) {
    const bool identifying =
        absl::StartsWith(arg, "--task=") || absl::StartsWith(arg, "--listen=");
    if (identifying && !absl::StrContains(cmdline, arg)) return false;
  }
  return true;
}

// The size of a file, 0 if there is none.
std::streamoff FileSize(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  return file ? static_cast<std::streamoff>(file.tellg()) : 0;
}

// What a child last logged as an error since `from` (where its run began
// in a log that earlier runs share), else its last line: usually why it
// exited (a port in use, a refused registration), which otherwise only its
// log file shows. Lines are common/logging.cc's:
// "<time> <level> [<task>] <message>".
std::string LastLogLine(const std::string& path, std::streamoff from) {
  constexpr std::streamoff kTail = 4096;
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return "";
  const std::streamoff size = file.tellg();
  const std::streamoff start = std::max(from, size - kTail);
  file.seekg(start);
  const std::string tail((std::istreambuf_iterator<char>(file)),
                         std::istreambuf_iterator<char>());
  std::vector<absl::string_view> lines =
      absl::StrSplit(tail, absl::ByAnyChar("\r\n"), absl::SkipWhitespace());
  if (start > from && !lines.empty()) lines.erase(lines.begin());  // cut
  absl::string_view last = lines.empty() ? "" : lines.back();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (absl::StrContains(*it, " E [") || absl::StrContains(*it, " C [")) {
      last = *it;
      break;
    }
  }
  // A task logs user code's errors as they are; in a reply, one byte that
  // is not UTF-8 would make every client refuse the whole cluster status.
  return ToReportableText(last, rpc::kMaxReportedTextBytes);
}

}  // namespace

Supervisor::Supervisor(ClusterManager* manager, SupervisorOptions options)
    : manager_(manager), options_(options) {}

Supervisor::~Supervisor() { Shutdown(); }

void Supervisor::Add(LaunchPlan plan, int64_t adopt_pid) {
  Child child;
  const TaskId task = plan.task;
  if (adopt_pid > 0 && RunsPlan(adopt_pid, plan)) child.adopted_pid = adopt_pid;
  child.plan = std::move(plan);
  children_.emplace(task, std::move(child));
}

void Supervisor::set_on_change(std::function<bool()> on_change) {
  on_change_ = std::move(on_change);
}

void Supervisor::Start() {
  const absl::Time now = SteadyNow();
  for (auto& [task, child] : children_) {
    if (child.adopted_pid > 0) {
      spdlog::info(
          "{}: adopting pid {} left running by the previous "
          "coordinator",
          task.ToString(), child.adopted_pid);
      child.launched_at = now;
      child.log_start = FileSize(child.plan.spawn.output_file);
      manager_->MarkLaunched(task, child.adopted_pid, false, now);
    } else {
      Launch(child, /*is_restart=*/false, now);
    }
  }
  Publish();
  if (on_change_) change_unrecorded_ = !on_change_();
  thread_ = std::thread([this] { Run(); });
}

void Supervisor::Launch(Child& child, bool is_restart, absl::Time now) {
  const TaskId& task = child.plan.task;
  child.restart_at.reset();
  child.adopted_pid = 0;
  child.log_start = FileSize(child.plan.spawn.output_file);
  absl::StatusOr<Subprocess> process = Subprocess::Spawn(child.plan.spawn);
  if (!process.ok()) {
    // Most likely a missing binary; retried with backoff like a crash.
    const std::string reason =
        absl::StrCat("launch failed: ", process.status().ToString());
    manager_->MarkExited(task, /*pid=*/0, reason, now);
    ScheduleRestart(child, reason, now);
    return;
  }
  child.process = std::move(*process);
  child.launched_at = now;
  manager_->MarkLaunched(task, child.process->pid(), is_restart, now);
  spdlog::info("{}: {} pid {}: {}", task.ToString(),
               is_restart ? "restarted as" : "launched as",
               child.process->pid(), absl::StrJoin(child.plan.spawn.argv, " "));
}

void Supervisor::ScheduleRestart(Child& child, const std::string& reason,
                                 absl::Time now) {
  const std::string task = child.plan.task.ToString();
  if (!options_.restart) {
    spdlog::warn("{}: {}; restarts are disabled", task, reason);
    return;
  }
  const absl::Duration backoff =
      std::min(options_.backoff_max,
               options_.backoff_initial *
                   (1 << std::min(child.consecutive_failures, 16)));
  ++child.consecutive_failures;
  child.restart_at = now + backoff;
  spdlog::warn("{}: {}; restarting in {}", task, reason,
               absl::FormatDuration(backoff));
}

int64_t Supervisor::Pid(const Child& child) {
  if (child.process.has_value() && child.process->running()) {
    return child.process->pid();
  }
  return child.adopted_pid;
}

bool Supervisor::Tick(absl::Time now) {
  bool changed = false;
  // Heartbeat sweep first: a launched task that went silent is killed here
  // and its exit handled below like any other.
  const std::vector<TaskId> silent = manager_->ExpireSilent(now);
  for (const TaskId& task : silent) {
    const auto it = children_.find(task);
    if (it == children_.end()) continue;
    const int64_t pid = Pid(it->second);
    if (pid > 0) {
      spdlog::warn("{}: killing unresponsive pid {}", task.ToString(), pid);
      kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
  for (auto& [task, child] : children_) {
    std::optional<std::string> exit_reason;
    int64_t exited_pid = 0;
    if (child.process.has_value() && child.process->running()) {
      exited_pid = child.process->pid();
      if (auto status = child.process->Poll()) {
        exit_reason = status->ToString();
        if (status->exited() && *ExitCodeMeaning(status->exit_code()) != 0) {
          absl::StrAppend(&*exit_reason, " (",
                          ExitCodeMeaning(status->exit_code()), ")");
        }
      }
    } else if (child.adopted_pid > 0 && !ProcessAlive(child.adopted_pid)) {
      exit_reason = "exited (adopted process)";
      exited_pid = child.adopted_pid;
      child.adopted_pid = 0;
    }
    if (exit_reason.has_value()) {
      changed = true;
      std::string reason = absl::StrCat("process ", *exit_reason);
      if (const std::string last =
              LastLogLine(child.plan.spawn.output_file, child.log_start);
          !last.empty()) {
        absl::StrAppend(&reason, "; its last log line: ", last);
      }
      const int64_t holder =
          manager_->MarkExited(task, exited_pid, reason, now);
      if (holder > 0 && RunsPlan(holder, child.plan)) {
        // A process of an earlier coordinator that was not adopted at start
        // holds the task, and the one launched beside it was refused: the
        // holder is this task's process from now on.
        spdlog::warn("{}: adopting pid {}, which holds the task",
                     task.ToString(), holder);
        child.process.reset();
        child.adopted_pid = holder;
        child.launched_at = now;
        child.log_start = FileSize(child.plan.spawn.output_file);
        continue;
      }
      if (now - child.launched_at >= options_.healthy_run) {
        child.consecutive_failures = 0;
      }
      ScheduleRestart(child, reason, now);
    }
    if (child.restart_at.has_value() && now >= *child.restart_at) {
      Launch(child, /*is_restart=*/true, now);
      changed = true;
    }
  }
  if (changed) Publish();
  return changed;
}

void Supervisor::Publish() {
  std::vector<PersistedTask> tasks;
  for (const auto& [task, child] : children_) {
    tasks.push_back(
        PersistedTask{.task = task,
                      .launched = true,
                      .pid = Pid(child),
                      .restart_count = manager_->restart_count(task)});
  }
  absl::MutexLock lock(&mu_);
  published_ = std::move(tasks);
}

void Supervisor::Run() {
  auto stopping = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    if ((Tick(SteadyNow()) || change_unrecorded_) && on_change_) {
      change_unrecorded_ = !on_change_();
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping),
                             options_.poll_interval)) {
      return;
    }
  }
}

void Supervisor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // The children are this thread's now; nothing here holds the lock.
  // Signal everyone first, then wait, so that children stop in parallel.
  for (auto& [task, child] : children_) {
    const int64_t pid = Pid(child);
    if (pid > 0) kill(static_cast<pid_t>(pid), SIGTERM);
  }
  const absl::Time deadline = SteadyNow() + options_.stop_grace;
  for (auto& [task, child] : children_) {
    bool killed = false;
    std::string how = "stopped";
    if (child.process.has_value() && child.process->running()) {
      const absl::Duration left =
          std::max(absl::ZeroDuration(), deadline - SteadyNow());
      const ExitStatus exit = child.process->Stop(left);
      killed = exit.signaled() && exit.term_signal() == SIGKILL;
      how = exit.ToString();
    } else if (child.adopted_pid > 0) {
      while (ProcessAlive(child.adopted_pid) && SteadyNow() < deadline) {
        absl::SleepFor(absl::Milliseconds(20));
      }
      if (ProcessAlive(child.adopted_pid)) {
        kill(static_cast<pid_t>(child.adopted_pid), SIGKILL);
        killed = true;
        how = ExitStatus{SIGKILL}.ToString();
      }
    }
    if (killed) {
      // A checkpoint it was writing is lost; the previous one stands.
      spdlog::warn("{}: did not stop within {} of SIGTERM; {}", task.ToString(),
                   absl::FormatDuration(options_.stop_grace), how);
    } else {
      spdlog::info("{}: {}", task.ToString(), how);
    }
  }
  Publish();
}

std::vector<PersistedTask> Supervisor::Tasks() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

}  // namespace cohort::coordinator
