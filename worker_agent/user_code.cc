#include "worker_agent/user_code.h"

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"

namespace cohort::agent {

absl::Status CurrentExceptionStatus(absl::string_view where) {
  constexpr absl::string_view kHint =
      " (a step library reports errors by returning an absl::Status)";
  const std::string subject = where.empty() ? "" : absl::StrCat(where, " ");
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(subject, "threw an exception: ", e.what(), kHint));
  } catch (...) {
    return absl::InternalError(absl::StrCat(
        subject, "threw an exception that is not a std::exception", kHint));
  }
}

}  // namespace cohort::agent
