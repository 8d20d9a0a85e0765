#pragma once

// Exceptions that escape a step library's code. Its functions report
// errors as absl::Status; an exception thrown through them would reach the
// top of an agent thread and end the process (std::terminate), taking the
// job's attempt down with no word of why. The threads that run library
// code catch it and fail the job with this instead.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort::agent {

// Call only inside a catch block: INTERNAL naming `where` and the current
// exception's what().
absl::Status CurrentExceptionStatus(absl::string_view where);

}  // namespace cohort::agent
