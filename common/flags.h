#pragma once

// Command-line parsing shared by every binary: absl flags, plus a `--help`
// that lists only Cohort's own flags and exits 0, and `--version`.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Parses argv (absl flags). `usage` is the text --help prints first. Exits the
// process for --help/--version (0) and for unknown flags (2). Returns the
// positional arguments, argv[0] excluded.
//
// Also turns off absl::Mutex's lock-order checking for the process: an absl
// built without NDEBUG (Debian's) checks every acquisition, gRPC's included,
// against a global graph. Unit tests, which do not come through here, keep it.
// And selects gRPC's poll(2) poller, unless GRPC_POLL_STRATEGY is set
// (flags.cc says why); it must run before anything starts gRPC.
std::vector<std::string> ParseCommandLine(int argc, char** argv,
                                          absl::string_view usage);

// For daemons and tools that take flags only: ParseCommandLine, then a
// configuration error if anything positional is left.
void ParseFlagsOnlyCommandLine(int argc, char** argv, absl::string_view usage);

// Prints "<program>: <message>" as one line on stderr and exits with code 2,
// the exit code of every configuration error.
[[noreturn]] void ExitWithConfigError(const absl::Status& status);

}  // namespace cohort
