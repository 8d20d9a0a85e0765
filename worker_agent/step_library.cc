#include "worker_agent/step_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::agent {
namespace {

template <typename Fn>
absl::StatusOr<Fn> Lookup(const std::map<std::string, Fn>& table,
                          const std::string& kind, const std::string& name,
                          const std::string& library) {
  auto it = table.find(name);
  if (it != table.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [known, fn] : table) names.push_back(known);
  return absl::FailedPreconditionError(absl::StrCat(
      "no ", kind, " function named \"", name, "\" in ", library,
      names.empty()
          ? absl::StrCat("; it registers no ", kind, " functions")
          : absl::StrCat("; it registers: ", absl::StrJoin(names, ", "))));
}

}  // namespace

absl::StatusOr<const internal::Registry*> OpenStepLibrary(
    const std::string& path, const std::string& display_name) {
  // RTLD_LOCAL: each library keeps its own registry and symbols.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load step library ", display_name,
                     ": it is not a loadable shared library for this machine (",
                     error != nullptr ? error : "unknown dlopen error", ")"));
  }
  using VersionFn = int (*)();
  using RegistryFn = const internal::Registry* (*)();
  auto version_fn =
      reinterpret_cast<VersionFn>(dlsym(handle, "cohort_step_api_version"));
  auto registry_fn =
      reinterpret_cast<RegistryFn>(dlsym(handle, "cohort_step_registry"));
  if (version_fn == nullptr || registry_fn == nullptr) {
    // Nothing will use it: unmapped, not kept for the agent's lifetime.
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(
        display_name,
        " is a shared library but not a Cohort step library: it has no "
        "cohort_step_api_version/cohort_step_registry symbols. Include "
        "<cohort/step.h> and register functions with COHORT_REGISTER_STEP"));
  }
  const int version = version_fn();
  if (version != COHORT_STEP_API_VERSION) {
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(
        display_name, " was built against step API version ", version,
        ", and this agent runs version ", COHORT_STEP_API_VERSION,
        ": rebuild it against this Cohort's <cohort/step.h>"));
  }
  return registry_fn();
}

absl::StatusOr<StepFunctions> FindStepFunctions(
    const internal::Registry& registry, const std::string& display_name,
    const std::string& init_name, const std::string& step_name,
    const std::string& dataset_name) {
  StepFunctions functions;
  functions.registry = &registry;
  if (!step_name.empty()) {
    absl::StatusOr<StepFn> step =
        Lookup(registry.steps, "step", step_name, display_name);
    if (!step.ok()) return step.status();
    functions.step = *step;
  }
  if (!init_name.empty()) {
    absl::StatusOr<InitFn> init =
        Lookup(registry.inits, "init", init_name, display_name);
    if (!init.ok()) return init.status();
    functions.init = *init;
  }
  if (!dataset_name.empty()) {
    // A dataset function's name may be a data set's or a stream's.
    if (auto it = registry.streams.find(dataset_name);
        it != registry.streams.end()) {
      functions.stream = it->second;
      return functions;
    }
    absl::StatusOr<DatasetFn> dataset =
        Lookup(registry.datasets, "dataset", dataset_name, display_name);
    if (!dataset.ok()) {
      if (registry.streams.empty()) return dataset.status();
      std::vector<std::string> streams;
      for (const auto& [name, fn] : registry.streams) streams.push_back(name);
      return absl::FailedPreconditionError(
          absl::StrCat(dataset.status().message(), "; and streams: ",
                       absl::StrJoin(streams, ", ")));
    }
    functions.dataset = *dataset;
  }
  return functions;
}

absl::StatusOr<StepFn> FindStepFunction(const internal::Registry& registry,
                                        const std::string& display_name,
                                        const std::string& name) {
  return Lookup(registry.steps, "step", name, display_name);
}

absl::StatusOr<StepFunctions> LoadStepLibrary(const std::string& path,
                                              const std::string& display_name,
                                              const std::string& init_name,
                                              const std::string& step_name,
                                              const std::string& dataset_name) {
  absl::StatusOr<const internal::Registry*> registry =
      OpenStepLibrary(path, display_name);
  if (!registry.ok()) return registry.status();
  return FindStepFunctions(**registry, display_name, init_name, step_name,
                           dataset_name);
}

}  // namespace cohort::agent
