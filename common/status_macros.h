#pragma once

// Status propagation macros. Debian's Abseil (20220623) ships none, so the
// project carries its own, prefixed to avoid clashing with any later one.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define COHORT_STATUS_CONCAT_INNER_(a, b) a##b
#define COHORT_STATUS_CONCAT_(a, b) COHORT_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define COHORT_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status cohort_status_ = (expr);          \
    if (!cohort_status_.ok()) return cohort_status_; \
  } while (false)

// `COHORT_ASSIGN_OR_RETURN(auto x, Foo());` declares or assigns `x` from an
// absl::StatusOr, returning its status from the enclosing function on error.
#define COHORT_ASSIGN_OR_RETURN(lhs, expr) \
  COHORT_ASSIGN_OR_RETURN_IMPL_(           \
      COHORT_STATUS_CONCAT_(cohort_statusor_, __LINE__), lhs, expr)

#define COHORT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
