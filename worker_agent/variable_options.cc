#include "worker_agent/variable_options.h"

#include "absl/strings/str_cat.h"
#include "common/names.h"

namespace cohort::agent {

absl::Status CheckVariableOptions(const VariableOptions& options) {
  if (absl::Status name = CheckName("create_variable: variable", options.name);
      !name.ok()) {
    return name;
  }
  switch (options.dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
      return absl::OkStatus();
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "create_variable \"", options.name, "\": a variable cannot hold ",
      DTypeName(options.dtype),
      "; use float32, float64, int32 or int64 (16-bit floats are for "
      "collectives)"));
}

absl::Status CheckColocation(const VariableOptions& options, bool found) {
  if (options.colocate_with.empty() || found) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "create_variable \"", options.name, "\": colocate_with names \"",
      options.colocate_with,
      "\", which is not a variable created before it on this replica"));
}

}  // namespace cohort::agent
