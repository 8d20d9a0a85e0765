#pragma once

namespace cohort {

// The release of this build; compared by tasks and shown by the admin API.
inline constexpr const char* kVersion = COHORT_VERSION;

}  // namespace cohort
