#pragma once

// The exit codes every Cohort daemon shares, so that a supervisor (the
// coordinator, systemd) can say why a task ended.

namespace cohort {

// Stopped by a signal, as asked.
inline constexpr int kExitStopped = 0;
// A runtime failure; the log says which.
inline constexpr int kExitFailure = 1;
// A configuration error or a refusal by the coordinator, on one line.
inline constexpr int kExitConfigError = 2;
// An agent: a job's own code did not return within --stop_timeout of the
// job's attempt being ended.
inline constexpr int kExitStuckJobCode = 3;

// What `code` means for a task, for the coordinator's "process exited with
// code N (...)"; empty when it has no meaning of its own.
inline const char* ExitCodeMeaning(int code) {
  switch (code) {
    case kExitConfigError:
      return "a configuration error or a refusal; see the task's log";
    case kExitStuckJobCode:
      return "a job's own code did not return within --stop_timeout of the "
             "job being ended; see the task's log";
    default:
      return "";
  }
}

}  // namespace cohort
