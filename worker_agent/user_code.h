#pragma once

// Calls into a step library's code. Its functions report errors as
// absl::Status; an exception thrown through one would reach the top of an
// agent thread and end the process (std::terminate), taking the job's
// attempt down with no word of why. Each call into the library goes
// through CallUserCode, which turns an exception into an error status that
// the caller handles as the function's own.

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cohort::agent {

// Call only inside a catch block: INTERNAL with the current exception's
// what(): "<where> threw an exception: ...", or "threw an exception: ..."
// for the caller to prefix as it does the function's own errors.
absl::Status CurrentExceptionStatus(absl::string_view where = "");

// Calls `f` (returning absl::Status or absl::StatusOr<T>): its result, or
// CurrentExceptionStatus(where) when it throws.
template <typename F>
auto CallUserCode(F&& f, absl::string_view where = "")
    -> decltype(std::forward<F>(f)()) {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    return CurrentExceptionStatus(where);
  }
}

}  // namespace cohort::agent
