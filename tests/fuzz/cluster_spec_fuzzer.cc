// The cluster-spec parser, as each daemon meets it: TF_CONFIG text from the
// environment, and a spec file. Whatever the bytes, the parser returns a
// spec or an error naming the problem; a spec it accepts must be usable.

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/cluster_resolver.h"
#include "common/cluster_spec.h"
#include "tests/fuzz/scratch_file.h"

namespace {

void Use(const cohort::ClusterResolver& resolver) {
  const cohort::ClusterSpec& spec = resolver.cluster_spec();
  for (const cohort::TaskId& task : spec.tasks()) {
    if (!spec.address(task).ok()) std::abort();  // a task without an address
  }
  (void)resolver.task_address();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto spec = cohort::ClusterSpec::FromJson(text); spec.ok()) {
    Use(cohort::ClusterResolver(*spec));
  }
  // setenv stops at a NUL; the file carries every byte.
  setenv("TF_CONFIG", text.c_str(), 1);
  if (auto resolver = cohort::ClusterResolver::FromTfConfig(); resolver.ok()) {
    Use(*resolver);
  }
  static const std::string path = cohort::fuzz::ScratchPath("cluster.json");
  cohort::fuzz::WriteScratch(path, data, size);
  if (auto resolver = cohort::ClusterResolver::FromFile(path); resolver.ok()) {
    Use(*resolver);
  }
  return 0;
}
