#pragma once

// cohortctl's subcommands. Each returns the process exit code: 0 success,
// 1 failure reported by a server or a child (or a job that did not
// succeed), kUsageError (2) bad usage or a job the cluster cannot take,
// kOutcomeUnknown (3) a watched job whose end was not seen (the coordinator
// went silent) or a submission whose answer was lost.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/client.h"

namespace cohort::ctl {

inline constexpr int kUsageError = 2;
inline constexpr int kOutcomeUnknown = 3;

// Options common to every command, from the flags.
struct CommonOptions {
  std::string coordinator;  // resolved: flag, $COHORT_COORDINATOR, or `up`'s
  // "--coordinator", "$COHORT_COORDINATOR", or the port file `up` left.
  std::string coordinator_source;
  ClientOptions client;
  bool json = false;
};

int StatusCommand(const CommonOptions& options);
int UpCommand(const CommonOptions& options);
int SubmitCommand(const CommonOptions& options);
int WatchCommand(const CommonOptions& options, const std::string& job_id);
int JobsCommand(const CommonOptions& options);
int JobCommand(const CommonOptions& options, const std::string& job_id);
int CancelCommand(const CommonOptions& options, const std::string& job_id);
// A ParameterServer job's variables, read from its ps tasks.
int VariablesCommand(const CommonOptions& options, const std::string& job_id);
// Log lines of a task, the coordinator or a job (logs_command.cc).
int LogsCommand(const CommonOptions& options, const std::string& target);
// A traced job's timeline as a Chrome trace file (trace_command.cc).
int TraceCommand(const CommonOptions& options, const std::string& job_id);

// A client of options.coordinator, or null once the reason there is none
// (no coordinator resolved, a bad address) is printed; the command then
// exits with kUsageError.
std::unique_ptr<Client> ConnectOrReport(const CommonOptions& options);

// Shows the job live until it ends (the progress view on stdout, or on
// stderr with `json`, where stdout gets the final JobStatus as JSON).
// Returns 0 when it SUCCEEDED, 1 when it did not (or the coordinator says
// there is no such job), and kOutcomeUnknown when the coordinator went
// silent, or never answered, before its end. `exists` (just submitted)
// words the note for a job not seen yet.
int WatchUntilEnd(const Client& client, const std::string& job_id, bool json,
                  bool exists = false);

// Where `cohortctl up` keeps its state by default, and so where the other
// commands look for the address of a local cluster.
std::string DefaultLocalStateDir();

// The host of the coordinator address saved in `state_dir`'s state, made
// dialable (0.0.0.0 is 127.0.0.1); nullopt when none is saved. The port
// file there holds only the port, and a coordinator that must change port
// keeps its host.
std::optional<std::string> SavedCoordinatorHost(const std::string& state_dir);

// Prints "cohortctl: CODE: message" to stderr, and for a coordinator that
// could not be reached, a hint at why, in the terms of SetConnectionHints'
// options: where its address came from, whether TLS was asked for.
void PrintError(const absl::Status& status);
// Called once, before any command runs.
void SetConnectionHints(const CommonOptions& options);

}  // namespace cohort::ctl
