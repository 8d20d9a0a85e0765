#include "worker_agent/user_code.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace cohort::agent {

absl::Status CurrentExceptionStatus(absl::string_view where) {
  constexpr absl::string_view kHint =
      " (a step library reports errors by returning an absl::Status)";
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(where, " threw an exception: ", e.what(), kHint));
  } catch (...) {
    return absl::InternalError(absl::StrCat(
        where, " threw an exception that is not a std::exception", kHint));
  }
}

}  // namespace cohort::agent
