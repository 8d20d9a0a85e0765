#include "ps_client/dtype.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::ps {

std::optional<DType> FromWire(v1::PsDType dtype) {
  switch (dtype) {
    case v1::PS_FLOAT32:
      return DType::kFloat32;
    case v1::PS_FLOAT64:
      return DType::kFloat64;
    case v1::PS_INT32:
      return DType::kInt32;
    case v1::PS_INT64:
      return DType::kInt64;
    default:
      return std::nullopt;
  }
}

v1::PsDType ToWire(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return v1::PS_FLOAT32;
    case DType::kFloat64:
      return v1::PS_FLOAT64;
    case DType::kInt32:
      return v1::PS_INT32;
    case DType::kInt64:
      return v1::PS_INT64;
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  return v1::PS_DTYPE_UNSPECIFIED;
}

int DTypeSize(v1::PsDType dtype) {
  const std::optional<DType> type = FromWire(dtype);
  return type ? static_cast<int>(cohort::DTypeSize(*type)) : 0;
}

std::string DTypeName(v1::PsDType dtype) {
  const std::optional<DType> type = FromWire(dtype);
  return type ? cohort::DTypeName(*type) : "unspecified";
}

bool IsFloatDType(v1::PsDType dtype) {
  const std::optional<DType> type = FromWire(dtype);
  return type && cohort::IsFloatDType(*type);
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
