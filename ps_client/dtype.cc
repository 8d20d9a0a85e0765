#include "ps_client/dtype.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::ps {

int DTypeSize(v1::PsDType dtype) {
  switch (dtype) {
    case v1::PS_FLOAT32:
    case v1::PS_INT32:
      return 4;
    case v1::PS_FLOAT64:
    case v1::PS_INT64:
      return 8;
    default:
      return 0;
  }
}

std::string DTypeName(v1::PsDType dtype) {
  switch (dtype) {
    case v1::PS_FLOAT32:
      return "float32";
    case v1::PS_FLOAT64:
      return "float64";
    case v1::PS_INT32:
      return "int32";
    case v1::PS_INT64:
      return "int64";
    default:
      return "unspecified";
  }
}

bool IsFloatDType(v1::PsDType dtype) {
  return dtype == v1::PS_FLOAT32 || dtype == v1::PS_FLOAT64;
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

int64_t NumElements(absl::Span<const int64_t> shape, int64_t max_elements) {
  int64_t elements = 1;
  for (const int64_t dim : shape) {
    // Checked before multiplying, so the product never overflows.
    if (dim <= 0 || dim > max_elements / elements) return -1;
    elements *= dim;
  }
  return elements;
}

}  // namespace cohort::ps
