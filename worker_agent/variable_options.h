#pragma once

// The checks of a variable's options that every replica runtime (the
// synchronous one and the ParameterServer one) makes. Pure; thread-safe.

#include "absl/status/status.h"
#include "cohort/step.h"

namespace cohort::agent {

// INVALID_ARGUMENT naming the variable: a bad name, or a dtype that
// variables cannot hold (the 16-bit floats are for collectives only).
absl::Status CheckVariableOptions(const VariableOptions& options);
// colocate_with must name a variable created before: `found` says whether
// the replica has one by that name.
absl::Status CheckColocation(const VariableOptions& options, bool found);

}  // namespace cohort::agent
