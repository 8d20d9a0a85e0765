#pragma once

// Flags every daemon takes: --listen, --port_file, --metrics_listen,
// --metrics_token_file, --log_level, plus the security flags. Linked into the
// daemons only, not into cohortctl.

#include <string>

#include "absl/status/statusor.h"
#include "rpc/server.h"

namespace cohort::rpc {

struct DaemonFlags {
  ServerOptions server;  // listen, port_file and the loaded security
  SecurityFiles security_files;
  std::string log_level;
  std::string metrics_listen;  // empty: no metrics endpoint
};

// Reads the flags and loads the security files; errors name the flag.
// `default_listen` is used when --listen is not given.
absl::StatusOr<DaemonFlags> DaemonFlagsFromFlags(
    const std::string& default_listen);

// True when --listen was given on the command line.
bool ListenFlagGiven();

}  // namespace cohort::rpc
