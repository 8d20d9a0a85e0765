#pragma once

// A loaded step library: dlopen, the API version check, and its registered
// init, step and dataset functions. The agent and the examples' test
// runtime both load libraries through it.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/step.h"

namespace cohort::agent {

// The functions one job uses. Libraries stay loaded for the life of the
// process (their code may still be on a stack being unwound), so the
// function pointers never dangle. Immutable, so thread-safe.
struct StepFunctions {
  InitFn init = nullptr;  // null when the job names none
  StepFn step = nullptr;  // null when the job names none (client-scheduled)
  // The job's dataset function: a data set's or a stream's; both null when
  // the job names none.
  DatasetFn dataset = nullptr;
  StreamFn stream = nullptr;
  // Every function of the library, for calls scheduled by name.
  const internal::Registry* registry = nullptr;
};

// Opens the library at `path` (named `display_name` in messages) and
// returns its registry, which lives as long as the process.
// FAILED_PRECONDITION, with what to do about it, for a file that is not a
// shared library, one that is not a Cohort step library, or one built
// against another API version.
absl::StatusOr<const internal::Registry*> OpenStepLibrary(
    const std::string& path, const std::string& display_name);

// Looks up a job's functions in `registry`; an empty name means none.
// FAILED_PRECONDITION naming the functions it does register for a missing name.
absl::StatusOr<StepFunctions> FindStepFunctions(
    const internal::Registry& registry, const std::string& display_name,
    const std::string& init_name, const std::string& step_name,
    const std::string& dataset_name);

// The step function `name` in `registry`. FAILED_PRECONDITION naming the
// step functions it does register when it has none of that name.
absl::StatusOr<StepFn> FindStepFunction(const internal::Registry& registry,
                                        const std::string& display_name,
                                        const std::string& name);

// OpenStepLibrary, then FindStepFunctions. FAILED_PRECONDITION, with what to do
// about it, for a file that is not a shared library, one that is not a Cohort
// step library, one built against another API version, or a missing name.
absl::StatusOr<StepFunctions> LoadStepLibrary(const std::string& path,
                                              const std::string& display_name,
                                              const std::string& init_name,
                                              const std::string& step_name,
                                              const std::string& dataset_name);

}  // namespace cohort::agent
