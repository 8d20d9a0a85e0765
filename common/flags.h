#pragma once

// Command-line parsing shared by every binary: absl flags, plus a `--help`
// that lists only Cohort's own flags and exits 0, and `--version`.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cohort {

// Parses argv (absl flags). `usage` is the text --help prints first. Exits the
// process for --help/--version (0) and for unknown flags (2). Returns the
// positional arguments, argv[0] excluded.
std::vector<std::string> ParseCommandLine(int argc, char** argv,
                                          absl::string_view usage);

}  // namespace cohort
