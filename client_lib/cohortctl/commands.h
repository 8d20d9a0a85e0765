#pragma once

// cohortctl's subcommands. Each returns the process exit code: 0 success,
// 1 failure reported by a server or a child, 2 bad usage.

#include <string>
#include <vector>

#include "cohort/client.h"

namespace cohort::ctl {

// Options common to every command, from the flags.
struct CommonOptions {
  std::string coordinator;  // resolved: flag, $COHORT_COORDINATOR, or `up`'s
  ClientOptions client;
  bool json = false;
};

int StatusCommand(const CommonOptions& options);
int UpCommand(const CommonOptions& options);

// Where `cohortctl up` keeps its state by default, and so where the other
// commands look for the address of a local cluster.
std::string DefaultLocalStateDir();

// Prints "cohortctl: CODE: message" to stderr.
void PrintError(const absl::Status& status);

}  // namespace cohort::ctl
