#pragma once

// Logging setup. Every daemon has one spdlog logger, installed as the default,
// writing to stderr (the journal, or a per-task log file when launched by the
// coordinator), and to LogBuffer::Default(), from which Logs.ReadLog serves
// it. Every line carries the daemon and the task identity:
//
//   2026-11-22T21:00:00.123 I [agent worker:0] registered with 127.0.0.1:4000

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

namespace cohort {

// Installs the default logger. `level` is trace|debug|info|warn|error.
// Returns INVALID_ARGUMENT for an unknown level.
absl::Status InitLogging(absl::string_view daemon, absl::string_view identity,
                         absl::string_view level = "info");

// Changes the identity shown on each line (e.g. once a task knows it).
// Thread-safe.
void SetLogIdentity(absl::string_view identity);

}  // namespace cohort
